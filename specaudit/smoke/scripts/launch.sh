#!/usr/bin/env bash
# launch.sh RUN LEASE GRACE WATCHDOG COMMAND ARGV...: start ARGV detached in its own process group, its output
# in RUN/log, and the watchdog (watchdog.sh) beside it; print the group's id.
run=$1 lease=$2 grace=$3 watchdog=$4 command=$5; shift 5
mkdir -p "$run"
printf '%s\n' "$command" > "$run/command"
touch "$run/heartbeat"
# shellcheck disable=SC2016  # expanded by the inner bash, with RUN as its $0
setsid bash -c 'echo $$ > "$0/pid"; "$@"; echo $? > "$0/rc"' "$run" env "$@" > "$run/log" 2>&1 < /dev/null &
for _ in $(seq 200); do [ -s "$run/pid" ] && break; sleep 0.05; done
setsid bash -c "$watchdog" specaudit-watchdog "$run" "$lease" "$grace" > /dev/null 2>&1 < /dev/null &
cat "$run/pid"
