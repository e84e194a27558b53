#!/usr/bin/env bash
# Crashes in the middle of a job, as real processes and signals:
#  - kill -9 a worker mid-evaluation: its lease expires, the rescuer requeues
#    the evaluation, another worker completes it; exactly one result;
#  - kill -9 avod mid-job, start it again: the job resumes from the
#    database, no candidate twice in the lineage, and an `avoctl watch`
#    that was running reconnects and shows every event exactly once;
#  - PostgreSQL restarted twice under one long evaluation: the worker's
#    heartbeat reconnects and keeps the lease, the result is stored on the
#    first attempt;
#  - kill -9 of the embedded postmaster under a running job: avod restarts
#    it (crash recovery), says degraded meanwhile, the job finishes;
#  - an idle worker whose database is gone stops at the first SIGTERM.
source "$(dirname "$0")/lib.sh"
# The shipped CPU problems, and queue/slow (tests/fixtures/kernels) timed
# for 25 s instead of minutes: an evaluation that outlasts database restarts.
K="$T/kernels"
mkdir -p "$K/queue"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
cp -r "$ROOT/tests/fixtures/kernels/queue/slow" "$K/queue/long"
jq '.timing.max_seconds = 25 | .timing.min_runs = 100' "$ROOT/tests/fixtures/kernels/queue/slow/problem.json" >"$K/queue/long/problem.json"
n_done() { psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $1 AND state = 'done'"; }
restart_pg() { pg_ctl_avo -m fast -w stop >/dev/null && pg_ctl_avo -w -l "$AVO_HOME/pg/postgresql.log" start >/dev/null; }
new_postmaster() {  # OLD_PID: the lock file names another postmaster, alive
    local p
    p=$(head -1 "$AVO_HOME/pg/data/postmaster.pid" 2>/dev/null)
    [ -n "$p" ] && [ "$p" != "$1" ] && kill -0 "$p"
}
health() { curl -s --unix-socket "$AVO_HOME/avod.sock" http://avod/v1/health; }

check "avod starts (fast rescuer)" start_avod --kernels "$K" --rescue-interval-ms 300 --retry-backoff 0.2
start_worker --lease 3
A=$WORKER_PID
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 5 | jq -r .id)
# Wait until worker A is inside an evaluation, then kill it without warning.
for _ in $(seq 1 300); do grep -q "evaluation 1: job" "$T/worker.log" && break; sleep 0.1; done
sleep 0.5
kill -9 "$A"
check "the killed worker's evaluation is still marked running (nobody knows yet)" \
    test "$(psql_avo "SELECT state FROM evaluations WHERE id = 1")" = running
start_worker --lease 3
timeout 300 avoctl watch "$JOB" >/dev/null 2>&1
check "the job finishes on the other worker" test $? -eq 0
check "the lost evaluation was rescued and completed (2 attempts, one result)" \
    test "$(psql_avo "SELECT state || ':' || attempts FROM evaluations WHERE id = 1")" = "done:2"
check "every evaluation has exactly one stored result" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done' AND purpose = 'search'")" = 5
check "the rescue is in the daemon's log" grep -q "expired lease requeued" "$T/avod.log"

# kill -9 avod while a job runs; watch keeps going across the restart.
JOB2=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 | jq -r .id)
avoctl --json watch "$JOB2" >"$T/watch2.json" 2>"$T/watch2.err" &
WATCH=$!
for _ in $(seq 1 300); do
    [ "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB2 AND state = 'done'")" -ge 2 ] && break
    sleep 0.1
done
kill -9 "$AVOD_PID"
wait "$AVOD_PID" 2>/dev/null
sleep 1
check "avod starts again on the same state (adopting the running PostgreSQL)" \
    start_avod --kernels "$K" --rescue-interval-ms 300 --retry-backoff 0.2
wait "$WATCH"
check "the watch that spanned the restart exits 0 when the job succeeds" test $? -eq 0
check "the job resumed and finished" \
    test "$(psql_avo "SELECT state FROM jobs WHERE id = $JOB2")" = succeeded
check "no candidate twice in the lineage" \
    test "$(psql_avo "SELECT count(*) - count(DISTINCT sha256) FROM candidates WHERE job_id = $JOB2")" = 0
check "the watch saw every event once, in order, through to job_finished" \
    python3 - "$T/watch2.json" "$(psql_avo "SELECT count(*) FROM events WHERE job_id = $JOB2")" <<'PY'
import json, sys
ids, kinds = [], []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    e = json.loads(line)
    ids.append(e.get("id")); kinds.append(e.get("kind"))
ok = ids == sorted(set(ids)) and len(ids) == int(sys.argv[2]) and kinds[-1] == "job_finished"
if not ok:
    print("ids", ids, "expected", sys.argv[2], "events; last", kinds[-1:])
sys.exit(0 if ok else 1)
PY

# --- PostgreSQL restarted under a long evaluation -------------------------------
# Twice, each shorter than the lease (10 s), spaced less than a lease apart:
# a worker whose heartbeat did not reconnect while the harness runs would
# lose the lease, the rescuer would requeue the evaluation (attempts 2) and
# refuse the worker's result.
stop_workers
: >"$T/worker.log"
start_worker --kernels "$K" --lease 10
W=$WORKER_PID
JOB=$(avoctl --json submit --problem queue/long --evaluations 1 | jq -r .id)
wait_for 60 'grep -q "evaluation [0-9]*: job $JOB," "$T/worker.log"'
EV=$(psql_avo "SELECT id FROM evaluations WHERE job_id = $JOB")
sleep 2
for i in 1 2; do
    check "PostgreSQL restarted ($i of 2) under the running evaluation" restart_pg
    sleep 4
done
check "the evaluation is still running on its first attempt after the restarts" \
    test "$(psql_avo "SELECT state || ':' || attempts FROM evaluations WHERE id = $EV")" = running:1
timeout 120 avoctl watch "$JOB" >/dev/null 2>&1
check "the job finishes" test "$(psql_avo "SELECT state FROM jobs WHERE id = $JOB")" = succeeded
check "the result was stored, attempts = 1 (the lease never lapsed)" \
    test "$(psql_avo "SELECT state || ':' || attempts || ':' || outcome FROM evaluations WHERE id = $EV")" = done:1:ok
check "the worker reconnected while the harness ran" \
    test "$(grep -c "reconnected to the database" "$T/worker.log")" -ge 2
check "no result was refused" bash -c "! grep -q 'result not stored' '$T/worker.log'"

# --- the embedded postmaster killed under a running job -------------------------
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 | jq -r .id)
wait_for 120 '[ "$(n_done $JOB)" -ge 2 ]'
( while :; do health; echo; sleep 0.1; done ) >"$T/health.jsonl" 2>/dev/null &
PIDS+=($!)
HEALTH_LOOP=$!
PM=$(head -1 "$AVO_HOME/pg/data/postmaster.pid")
kill -9 "$PM"
check "the job finishes without a hand restart of PostgreSQL" \
    wait_for 300 '[ "$(psql_avo "SELECT state FROM jobs WHERE id = $JOB" 2>/dev/null)" = succeeded ]'
check "every evaluation of it has one stored result" \
    test "$(psql_avo "SELECT count(*) || ':' || count(*) FILTER (WHERE state = 'done' AND consumed) FROM evaluations WHERE job_id = $JOB AND purpose = 'search'")" = "6:6"
check "a new postmaster runs" new_postmaster "$PM"
check "avod logged why and that it restarted the server" \
    bash -c "grep -q 'the embedded PostgreSQL died: postmaster pid $PM is gone' '$T/avod.log' &&
             grep -q 'the embedded PostgreSQL was restarted by avod' '$T/avod.log'"
wait_for 30 '[ "$(health | jq -r .status)" = ok ]'
kill "$HEALTH_LOOP" 2>/dev/null
check "health said degraded, with the reason, while the server was down" \
    jqt -s 'map(select(.status == "degraded" and (.reason | test("PostgreSQL died")))) | length > 0' "$T/health.jsonl"
check "and ok once it was back" test "$(health | jq -r '.status + ":" + .db')" = ok:up

# --- an idle worker whose database is gone stops at the first SIGTERM -----------
# avod stops and takes its PostgreSQL with it: nothing will restart the
# database. The worker must not wait for it to come back.
check "avod stops (and its embedded PostgreSQL with it)" stop_pid "$AVOD_PID"
check "the idle worker finds the database gone" \
    wait_for 30 'grep -q "cannot reach the database" "$T/worker.log"'
t0=$(date +%s.%N)
kill -TERM "$W"
check "it exits within 5 s of one SIGTERM (it does not wait for the database)" \
    wait_for 5 '! kill -0 $W 2>/dev/null'
echo "# idle worker gone $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s after SIGTERM"
check "and says it stopped" grep -q "worker: stopped" "$T/worker.log"
[ "$FAILS" -eq 0 ]
