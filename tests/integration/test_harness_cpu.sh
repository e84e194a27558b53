#!/usr/bin/env bash
# One timing CPU per worker of a host (daemon/worker/cpulease.h): every
# harness pins itself to one CPU, and two workers of one host must not time
# on the same one. Each worker leases the highest CPU no other worker of
# the host holds (in the lock directory they share) for its lifetime:
#  - two workers sharing a lock directory lease distinct CPUs and say which;
#    every evaluation's result records the CPU it was told (load.harness_cpu)
#    and the harness really timed there (runner.cpu), the two workers' apart;
#  - a worker that finds every CPU of its affinity leased says so and still
#    runs (on the highest, as before);
#  - --harness-cpu N puts the harness on N without a lease;
#  - a lease goes with its worker: the next worker gets that CPU again.
source "$(dirname "$0")/lib.sh"

LOCKS="$T/locks"
mkdir -p "$LOCKS"
TOP=$(($(nproc) - 1))
check "avod starts" start_avod
worker_on() {  # LOG ARGS...: a worker with its own log, pid in WPID
    local log=$1
    shift
    avo-worker --gpu-lock-dir "$LOCKS" "$@" >>"$T/$log" 2>&1 &
    WPID=$!
    PIDS+=("$WPID")
}
leased_cpu() {  # LOG: the CPU its worker says it leased
    sed -n 's/.*harnesses time on CPU \([0-9]*\) (leased in .*/\1/p' "$T/$1" | tail -1
}
worker_on w1.log
W1=$WPID
wait_for 20 '[ -n "$(leased_cpu w1.log)" ]'
worker_on w2.log
W2=$WPID
wait_for 20 '[ -n "$(leased_cpu w2.log)" ]'
C1=$(leased_cpu w1.log)
C2=$(leased_cpu w2.log)
if [ "$TOP" -ge 1 ]; then
    check "two workers lease two CPUs, the highest first ($C1, $C2 of 0-$TOP)" \
        bash -c '[ "$0" = "$2" ] && [ "$1" = $(($2 - 1)) ]' "$C1" "$C2" "$TOP"
fi
check "the leases are files in the shared lock directory" test -f "$LOCKS/avo-harness-cpu-$C1.lock"

JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 --islands 2 | jq -r .id)
timeout 600 avoctl watch "$JOB" >"$T/watch.out" 2>&1
check "the job succeeds" test $? -eq 0
psql_avo "SELECT w.pid, e.result->'load'->'harness_cpu'->>'cpu', e.result->'load'->'harness_cpu'->>'how',
                 e.result->'runner'->>'cpu'
          FROM evaluations e JOIN workers w ON w.id = e.worker_id
          WHERE e.job_id = $JOB AND e.state = 'done' AND e.result ? 'runner'" >"$T/cpus.txt"
check "every evaluation's result names its leased CPU, and the harness timed there" \
    bash -c '[ -s "$0" ] && awk -F"|" -v w1="$1" -v c1="$2" -v w2="$3" -v c2="$4" '\''
        { want = $1 == w1 ? c1 : $1 == w2 ? c2 : "?"
          if ($2 != want || $3 != "leased" || $4 != want) bad++ }
        END { exit bad > 0 }'\'' "$0"' "$T/cpus.txt" "$W1" "$C1" "$W2" "$C2"
cp "$T/cpus.txt" "$T/cpus.first"
if [ "$TOP" -ge 1 ]; then
    check "both workers evaluated, on different CPUs" \
        bash -c '[ $(cut -d"|" -f1 "$0" | sort -u | wc -l) = 2 ] && [ $(cut -d"|" -f4 "$0" | sort -u | wc -l) = 2 ]' \
        "$T/cpus.txt"
fi

# Every CPU of its affinity leased (a worker allowed only the first's
# CPU): it says so and keeps working.
taskset -c "$C1" avo-worker --gpu-lock-dir "$LOCKS" --max-evals 1 >>"$T/w4.log" 2>&1 &
W4=$!
PIDS+=("$W4")
wait_for 20 'grep -q "no harness CPU of its own\|harnesses time on CPU" "$T/w4.log"'
check "a worker whose only CPU is leased says so, naming the lock directory" \
    grep -q "no harness CPU of its own, sharing the highest: every CPU this worker may use (1) is leased by another worker's harness in $LOCKS" "$T/w4.log"
check "and keeps running" kill -0 "$W4"
stop_pid "$W4"

# --harness-cpu: the operator's CPU, no lease taken.
worker_on w5.log --harness-cpu 0
W5=$WPID
wait_for 20 'grep -q "harnesses time on CPU" "$T/w5.log"'
check "--harness-cpu 0: the harnesses time on CPU 0, no lease" grep -q "harnesses time on CPU 0 (--harness-cpu)" "$T/w5.log"
check "--harness-cpu out of range is refused naming the flag" \
    bash -c '! timeout 5 avo-worker --harness-cpu 100000 >"$0" 2>&1 && grep -q "harness-cpu" "$0"' "$T/bad.out"

# The first worker gone, its CPU is free for the next.
stop_pid "$W1"
stop_pid "$W5"
worker_on w6.log
wait_for 20 '[ -n "$(leased_cpu w6.log)" ]'
check "a stopped worker's CPU is leased again by the next ($(leased_cpu w6.log) = $C1)" \
    test "$(leased_cpu w6.log)" = "$C1"
stop_workers
[ "$FAILS" -eq 0 ]
