#!/usr/bin/env bash
# stop.sh RUN GRACE: stop the watchdog, then the launch's process group (SIGTERM, SIGKILL after GRACE
# seconds); say what was done, one line each.
run=$1 grace=$2
wd=$(cat "$run/watchdog.pid" 2>/dev/null) && kill -- "-$wd" 2>/dev/null
pg=$(cat "$run/pid" 2>/dev/null) || { echo "nothing was started"; exit 0; }
if alive "$pg"; then
  kill -TERM -- "-$pg" 2>/dev/null
  for _ in $(seq $((grace * 10))); do alive "$pg" || break; sleep 0.1; done
  if alive "$pg"; then
    kill -KILL -- "-$pg" 2>/dev/null; sleep 0.5
    echo "killed process group $pg (still running $grace s after SIGTERM)"
  else
    echo "stopped process group $pg (SIGTERM)"
  fi
else
  echo "process group $pg had exited"
fi
if alive "$pg"; then echo "LEFT RUNNING: processes of group $pg"; fi
