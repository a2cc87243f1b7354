#!/bin/sh
# Start a long CPU job (a learning check, the multi-task plan, a reference run) in the
# background at the lowest priority, appending its output to LOG; prints its pid.
#
#   scripts/background.sh LOG command [args...]
#
# `nohup nice -n 19 cmd &` alone is not enough where the kernel groups processes by session
# (sysctl kernel.sched_autogroup_enabled = 1): the scheduler first splits the CPU evenly
# between sessions' groups and only then applies nice inside each, so a niced job in its own
# session still takes half of the cores from a foreground `make test` or benchmark. This
# starts the job in a session of its own (setsid) and gives that session's group nice 19 too.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 LOG command [args...]" >&2; exit 2; }
log=$1
shift
setsid nohup nice -n 19 "$@" >>"$log" 2>&1 </dev/null &
pid=$!
ours=$(cat /proc/$$/autogroup 2>/dev/null || true)
# setsid() runs in the child after the fork: wait until it has left our group, so that the
# nice below never lands on the caller's own session
i=0
while [ -r "/proc/$pid/autogroup" ] && [ "$(cat /proc/$pid/autogroup)" = "$ours" ] && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
done
if [ -w "/proc/$pid/autogroup" ] && [ "$(cat /proc/$pid/autogroup)" != "$ours" ]; then
    echo 19 >"/proc/$pid/autogroup"
fi
echo "$pid"
