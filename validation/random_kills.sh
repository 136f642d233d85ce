#!/usr/bin/env bash
# The random-kill test at full length: 50 runs of SIGKILL and SIGTERM at random times of a patch apply or revert
# (tests/test_hostile.py runs 6). Writes its summary, and any failure, to validation/random_kills.txt.
#   bash validation/random_kills.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit
out=$(SPECAUDIT_KILL_RUNS=50 python -m pytest -q -s -p no:cacheprovider \
  "tests/test_hostile.py::test_a_kill_at_a_random_time_leaves_a_tree_the_next_command_makes_whole" 2>&1)
{ echo "50 runs (SPECAUDIT_KILL_SEED=${SPECAUDIT_KILL_SEED:-20261201}):"; echo "$out" | grep -E "^E |passed|failed|tally: " | sed 's/ in [0-9.]*s.*//; s/^.*tally: /  /'; } \
  | tee validation/random_kills.txt
