#!/usr/bin/env bash
# watchdog.sh RUN LEASE GRACE: stop the launch's process group when specaudit has not touched RUN/heartbeat
# for LEASE seconds (SIGTERM, then SIGKILL after GRACE seconds); end with the group.
run=$1 lease=$2 grace=$3
echo $$ > "$run/watchdog.pid"
pg=$(cat "$run/pid")
while alive "$pg"; do
  age=$(( $(date +%s) - $(stat -c %Y "$run/heartbeat" 2>/dev/null || echo 0) ))
  if [ "$age" -gt "$lease" ]; then
    echo "specaudit watchdog: no word from specaudit for $age s (lease $lease s): stopping process group $pg" >> "$run/log"
    kill -TERM -- "-$pg" 2>/dev/null
    for _ in $(seq "$grace"); do alive "$pg" || break; sleep 1; done
    kill -KILL -- "-$pg" 2>/dev/null
    break
  fi
  sleep 1
done
