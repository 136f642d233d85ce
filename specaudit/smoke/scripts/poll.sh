#!/usr/bin/env bash
# poll.sh RUN: touch the heartbeat; print "alive", or "exited STATUS".
touch "$1/heartbeat"
pg=$(cat "$1/pid")
if alive "$pg"; then echo alive; else echo "exited $(cat "$1/rc" 2>/dev/null)"; fi
