#!/usr/bin/env bash
# `make run`: start avod (embedded PostgreSQL) and one CPU worker, submit the
# sample job (kernels/cpu/sgemm/sample-job.json), stream its progress, print
# the best candidate against the seed, then stop everything.
#   KEEP=1 make run     leaves avod and the worker running afterwards
#   AVO_HOME=DIR        state directory (default: /var/lib/avo as root,
#                       else ~/.local/state/avo)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/${BUILD:-build}/bin"
export PATH="$BIN:$PATH"
if [ -z "${AVO_HOME:-}" ]; then
    if [ "$(id -u)" -eq 0 ]; then AVO_HOME=/var/lib/avo; else AVO_HOME="${XDG_STATE_HOME:-$HOME/.local/state}/avo"; fi
fi
export AVO_HOME
mkdir -p "$AVO_HOME"
JOBFILE="${JOB:-$ROOT/kernels/cpu/sgemm/sample-job.json}"

avod_pid=""
worker_pid=""
shutdown() {
    [ "${KEEP:-0}" = 1 ] && return
    [ -n "$worker_pid" ] && kill -TERM "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null
    [ -n "$avod_pid" ] && kill -TERM "$avod_pid" 2>/dev/null && wait "$avod_pid" 2>/dev/null
    echo "avo: stopped avod and the worker (logs in $AVO_HOME/*.log)"
}
trap 'shutdown; exit 130' INT TERM

if avoctl health >/dev/null 2>&1; then
    echo "avo: using the avod already running on $AVO_HOME"
else
    echo "avo: starting avod (state in $AVO_HOME, log $AVO_HOME/avod.log)"
    avod >>"$AVO_HOME/avod.log" 2>&1 &
    avod_pid=$!
    for _ in $(seq 1 600); do
        avoctl health >/dev/null 2>&1 && break
        if ! kill -0 "$avod_pid" 2>/dev/null; then
            echo "avo: avod failed to start:" >&2
            tail -5 "$AVO_HOME/avod.log" >&2
            exit 1
        fi
        sleep 0.1
    done
fi
echo "avo: starting one CPU worker (log $AVO_HOME/worker.log)"
avo-worker >>"$AVO_HOME/worker.log" 2>&1 &
worker_pid=$!

job=$(avoctl --json submit "$JOBFILE" | sed -n 's/^ *"id": *\([0-9][0-9]*\).*/\1/p' | head -1)
if [ -z "$job" ]; then
    avoctl submit "$JOBFILE"
    shutdown
    exit 1
fi
echo "avo: job $job submitted from $JOBFILE; watching (Ctrl-C stops everything)"
avoctl watch "$job"
rc=$?
echo
avoctl best "$job" -o "$AVO_HOME/best-job$job.c" | sed -n '1,/^$/p;/^CONFIG/,/^$/p'
echo "avo: best source written to $AVO_HOME/best-job$job.c"
if [ "${KEEP:-0}" = 1 ]; then
    echo "avo: KEEP=1: avod (pid ${avod_pid:-already running}) and the worker (pid $worker_pid) keep running;"
    echo "     stop them with: kill $worker_pid ${avod_pid}"
fi
shutdown
exit $rc
