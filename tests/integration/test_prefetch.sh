#!/usr/bin/env bash
# The worker's lookahead: with --prefetch 1 it claims the next evaluation and
# compiles it on a thread while the current one runs (the default on GPU
# workers, where compiling overlaps GPU timing). Checked here on the CPU:
# the job finishes, every evaluation completes exactly once, the worker
# reports precompiles, and a stopping worker gives a prefetched claim back.
# With --prefetch N (issue 20, point 9) it keeps up to N claims ahead: N
# waiting while one runs, each evaluated once, all given back when it stops;
# a --prefetch over the maximum is refused naming the flag. Work queued
# after an evaluation began (another job's next candidate) is claimed ahead
# during it, at the heartbeat's wake-up, not when it ends.
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
# (up to 3 minutes: on a loaded 2-core machine the first compile and the
# claim ahead took over the minute this waited before, and the stop then
# found nothing claimed ahead to give back)
for _ in $(seq 1 1800); do
    tail -n +"$((before + 1))" "$T/worker.log" | grep -q "precompiled in" && break
    sleep 0.1
done
stop_pid "$WORKER_PID" 300   # a drain: the evaluation in hand ends first (minutes on a loaded VM)
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
stop_workers

# --prefetch 3: four jobs' seeds queued before the worker starts, so it
# claims one and three ahead at once.
SEEDNO=0
seeds() {  # N: submit N one-evaluation jobs, each seed a source of its own (no compile is another's cache hit); their ids
    for _ in $(seq 1 "$1"); do
        SEEDNO=$((SEEDNO + 1))
        { cat kernels/cpu/sgemm/seed.c; echo "/* seed $SEEDNO of $$ */"; } >"$T/seed-$SEEDNO.c"
        avoctl --json submit --problem cpu/sgemm --seed "$T/seed-$SEEDNO.c" --evaluations 1 | jq -r .id
    done
}
wait_queued() {  # N: until N evaluations are queued
    wait_for 60 "[ \$(psql_avo \"SELECT count(*) FROM evaluations WHERE state = 'queued'\") -ge $1 ]"
}
JOBS=$(seeds 4 | paste -sd, -)
wait_queued 4
before=$(wc -l <"$T/worker.log")
start_worker --prefetch 3
for j in ${JOBS//,/ }; do timeout 600 avoctl watch "$j" >/dev/null 2>&1; done
tail -n +"$((before + 1))" "$T/worker.log" >"$T/third.log"
check "--prefetch 3: three evaluations claimed ahead while the first ran" grep -q "claimed 3 evaluation(s) ahead: 3 waiting" "$T/third.log"
check "--prefetch 3: the four jobs succeeded, each evaluation once" \
    test "$(psql_avo "SELECT count(*) FILTER (WHERE e.state = 'done' AND e.attempts = 1 AND j.state = 'succeeded')
                        FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE e.job_id IN ($JOBS)")" = 4
check "--prefetch 3: the three claimed ahead were compiled while the first ran" \
    test "$(grep -c "precompiled in" "$T/third.log")" -ge 3
# Side by side, a thread each: their compile times add up to more than the
# span from the claim to the last one's end (one after another, never).
span=$(python3 - "$T/third.log" <<'PY'
import datetime, re, sys
claim, ends, durs = None, [], []
for line in open(sys.argv[1]):
    ts = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
    if claim is None and "claimed 3 evaluation(s) ahead" in line:
        claim = ts
    m = re.search(r"precompiled in ([0-9.]+) s", line)
    if m and claim is not None:
        ends.append(ts)
        durs.append(float(m.group(1)))
print("%.2f %.2f" % (sum(durs), (max(ends) - claim).total_seconds() if ends else 0))
PY
)
check "--prefetch 3: the three compiles ran side by side (their times summed, then their span: $span s)" \
    awk -v s="$span" 'BEGIN { split(s, a, " "); exit !(a[2] > 0 && a[1] > 1.2 * a[2]) }'
stop_workers
JOBS=$(seeds 4 | paste -sd, -)
wait_queued 4
before=$(wc -l <"$T/worker.log")
start_worker --prefetch 3
wait_for 120 "tail -n +$((before + 1)) \"$T/worker.log\" | grep -q 'claimed 3 evaluation(s) ahead'"
stop_pid "$WORKER_PID" 300   # a drain: the evaluation in hand ends first (minutes on a loaded VM)
tail -n +"$((before + 1))" "$T/worker.log" >"$T/fourth.log"
check "a stopping worker gives every claim it holds ahead back (3)" test "$(grep -c "given back to the queue" "$T/fourth.log")" = 3
check "nothing is left running without a worker; the given-back are queued with no attempt spent" \
    test "$(psql_avo "SELECT count(*) FILTER (WHERE state = 'running') || ' ' || count(*) FILTER (WHERE state = 'queued' AND attempts = 0)
                      FROM evaluations WHERE job_id IN ($JOBS)")" = "0 3"
# Another worker of the target idle (a registered row that claims
# nothing): --prefetch 3 takes one claim ahead, not three, so the idle one
# (on a host of several GPUs, an idle GPU) could start the rest.
TARGET=$(psql_avo "SELECT target FROM workers ORDER BY id DESC LIMIT 1")
IDLE=$(psql_avo "INSERT INTO workers (host, pid, target, state) VALUES ('idle-neighbour', 1, '$TARGET', 'idle') RETURNING id")
before=$(wc -l <"$T/worker.log")
start_worker --prefetch 3
for j in ${JOBS//,/ }; do timeout 600 avoctl watch "$j" >/dev/null 2>&1; done
stop_workers
psql_avo "UPDATE workers SET state = 'gone' WHERE id = $IDLE" >/dev/null
tail -n +"$((before + 1))" "$T/worker.log" >"$T/fifth.log"
check "--prefetch 3 beside an idle worker: one claim ahead at a time ($(grep -o 'claimed [0-9]* evaluation(s) ahead: [0-9]* waiting' "$T/fifth.log" | sort | uniq -c | tr -s ' \n' ' '))" \
    bash -c 'grep -q "claimed 1 evaluation(s) ahead: 1 waiting" "$0" && ! grep -q "ahead: [2-9] waiting" "$0"' "$T/fifth.log"
check "--prefetch 3 beside an idle worker: the given-back jobs finished" \
    test "$(psql_avo "SELECT count(*) FROM jobs WHERE id IN ($JOBS) AND state = 'succeeded'")" = 4
# Work queued while an evaluation runs: claimed ahead (and compiled) before
# that evaluation ends.
FIRST=$(seeds 1)
wait_queued 1
before=$(wc -l <"$T/worker.log")
start_worker --prefetch 1
wait_for 60 "tail -n +$((before + 1)) \"$T/worker.log\" | grep -q 'evaluation [0-9]*: job $FIRST,'"
SECOND=$(seeds 1)
for j in $FIRST $SECOND; do timeout 600 avoctl watch "$j" >/dev/null 2>&1; done
tail -n +"$((before + 1))" "$T/worker.log" >"$T/fifth.log"
psql_avo "SELECT e.job_id, e.claimed_at, e.finished_at FROM evaluations e WHERE e.job_id IN ($FIRST, $SECOND) ORDER BY e.job_id" |
    sed 's/^/# /'
check "work queued during an evaluation is claimed ahead before that evaluation ends" \
    test "$(psql_avo "SELECT count(*) FROM evaluations a, evaluations b WHERE a.job_id = $FIRST AND b.job_id = $SECOND
                      AND b.claimed_at < a.finished_at AND b.state = 'done' AND b.attempts = 1")" = 1
SECOND_EVAL=$(psql_avo "SELECT id FROM evaluations WHERE job_id = $SECOND")
check "... and compiled while it ran" grep -q "evaluation $SECOND_EVAL precompiled in" "$T/fifth.log"
stop_workers
# A claimed-ahead evaluation that ends before its harness (its candidate
# does not compile) is stored at once, while the current one runs: its
# job's next proposal need not wait for the current evaluation's end.
FIRST=$(seeds 1)
wait_queued 1
before=$(wc -l <"$T/worker.log")
start_worker --prefetch 1
wait_for 60 "tail -n +$((before + 1)) \"$T/worker.log\" | grep -q 'evaluation [0-9]*: job $FIRST,'"
# (avod refuses such a seed at submit, and a job's later candidates come
# from its operator: the evaluation is queued by hand, under a job of its
# own made from FIRST's, as test_queue.sh queues its thousand)
BAD=$(psql_avo "
  WITH j AS (INSERT INTO jobs (problem, operator, spec, target, eval_budget, state, started_at)
             SELECT problem, operator, spec, target, 1, 'running', now() FROM jobs WHERE id = $FIRST RETURNING id),
       s AS (INSERT INTO sources (sha256, body)
             SELECT encode(sha256(convert_to(b, 'UTF8')), 'hex'), b FROM (SELECT 'this is not C at all' AS b) x
             ON CONFLICT (sha256) DO UPDATE SET body = EXCLUDED.body RETURNING sha256),
       c AS (INSERT INTO candidates (job_id, sha256, operator, knobs)
             SELECT j.id, s.sha256, 'seed', '{}' FROM j, s RETURNING id, job_id)
  INSERT INTO evaluations (job_id, candidate_id, problem, target)
  SELECT c.job_id, c.id, 'cpu/sgemm', 'cpu' FROM c RETURNING job_id")
BAD=${BAD%%[!0-9]*}
timeout 600 avoctl watch "$FIRST" >/dev/null 2>&1
wait_for 120 "[ \"\$(psql_avo 'SELECT state FROM evaluations WHERE job_id = $BAD')\" = done ]"
tail -n +"$((before + 1))" "$T/worker.log" >"$T/sixth.log"
psql_avo "SELECT e.job_id, e.outcome, e.claimed_at, e.finished_at FROM evaluations e WHERE e.job_id IN ($FIRST, $BAD) ORDER BY e.job_id" |
    sed 's/^/# /'
check "a claimed-ahead evaluation whose candidate does not compile is stored before the running one ends" \
    test "$(psql_avo "SELECT count(*) FROM evaluations a, evaluations b WHERE a.job_id = $FIRST AND b.job_id = $BAD
                      AND b.finished_at < a.finished_at AND b.outcome = 'compile_error' AND b.attempts = 1
                      AND a.outcome = 'ok'")" = 1
check "... the worker said so" grep -q "ends before its harness: stored while evaluation" "$T/sixth.log"
check "... and its result is the evaluation's own (the compiler's log in it)" \
    test "$(psql_avo "SELECT result ? 'compile' AND length(result->>'detail') > 0 FROM evaluations WHERE job_id = $BAD")" = t
stop_workers
out=$(avo-worker --prefetch 9 2>&1); rc=$?
check "--prefetch 9 is refused naming the flag and its bounds (exit $rc)" \
    bash -c '[ "$0" != 0 ] && grep -q "prefetch: 9 is outside \[-1, 8\]" <<<"$1"' "$rc" "$out"
[ "$FAILS" -eq 0 ]
