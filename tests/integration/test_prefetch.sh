#!/usr/bin/env bash
# The worker's lookahead: with --prefetch 1 it claims the next evaluation and
# compiles it on a thread while the current one runs (the default on GPU
# workers, where compiling overlaps GPU timing). Checked here on the CPU:
# the job finishes, every evaluation completes exactly once, the worker
# reports precompiles, and a stopping worker gives a prefetched claim back.
source "$(dirname "$0")/lib.sh"

check "avod starts" start_avod
start_worker --prefetch 1
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 --islands 3 | jq -r .id)
check "job submitted with 3 evaluations in flight at a time" test -n "$JOB"
timeout 600 avoctl watch "$JOB" >"$T/watch.out" 2>&1
check "the job succeeds" test $? -eq 0
check "every evaluation ran exactly once" \
    test "$(psql_avo "SELECT count(*) || ':' || count(*) FILTER (WHERE state = 'done' AND attempts = 1) FROM evaluations WHERE job_id = $JOB AND purpose = 'search'")" = "6:6"
check "the worker compiled evaluations ahead while others ran" grep -q "precompiled in" "$T/worker.log"

# A worker stopped while it holds a prefetched claim gives it back, and the
# evaluation in hand is still stored (SIGTERM drains).
stop_pid "$WORKER_PID"
JOB2=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 --islands 3 | jq -r .id)
before=$(wc -l <"$T/worker.log")
start_worker --prefetch 1
for _ in $(seq 1 600); do
    tail -n +"$((before + 1))" "$T/worker.log" | grep -q "precompiled in" && break
    sleep 0.1
done
stop_pid "$WORKER_PID"
tail -n +"$((before + 1))" "$T/worker.log" >"$T/second.log"
check "a stopping worker gives its prefetched claim back" grep -q "given back to the queue" "$T/second.log"
check "the evaluation in hand when it stopped was stored" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB2 AND state = 'done'")" -ge 1
check "nothing of the second job is left running without a worker" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB2 AND state = 'running'")" = 0
start_worker --prefetch 1
timeout 600 avoctl watch "$JOB2" >/dev/null 2>&1
check "the second job finishes after the restart" test $? -eq 0
check "every evaluation of the second job ran exactly once into a result" \
    test "$(psql_avo "SELECT count(*) FILTER (WHERE state = 'done') FROM evaluations WHERE job_id = $JOB2 AND purpose = 'search'")" = 6
exit 0
