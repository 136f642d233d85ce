# shellcheck shell=bash
# Functions the other scripts use: specaudit puts this file before them (bash -c runs one string; the remote
# has no copy of it to source).

# A process group lives while it has a process that is not a zombie: a zombie holds no memory and no GPU,
# and where the node's PID 1 does not reap orphans (some containers) it never goes away.
alive() { ps -eo pgid=,stat= | awk -v pg="$1" '$1 == pg && $2 !~ /^Z/ {found = 1} END {exit !found}'; }
