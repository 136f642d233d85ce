#!/usr/bin/env bash
# The random-kill test at full length: 50 runs of SIGKILL and SIGTERM at random times of a patch apply or revert
# (tests/test_hostile.py runs 6). Writes validation/random_kills.txt.
#   bash validation/random_kills.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SPECAUDIT_KILL_RUNS=50 python -m pytest -q -p no:cacheprovider \
  "tests/test_hostile.py::test_a_kill_at_a_random_time_leaves_a_tree_the_next_command_makes_whole" \
  | tail -1 | sed 's/ in [0-9.]*s.*//' > validation/random_kills.txt
echo "50 runs (SPECAUDIT_KILL_SEED=20261201): $(cat validation/random_kills.txt)" | tee validation/random_kills.txt
