#!/usr/bin/env bash
# Hardware counters as their own queued task (issue 20, point 5;
# sql/011_profiles.sql), with real avod and a CPU worker:
#  - a candidate that becomes an island's best is profiled once ('new_best');
#  - `avoctl profile CAND --wait` returns its counters per configuration, or
#    why the hardware ones are unavailable (this VM may refuse
#    perf_event_open): the task completes either way, in one exact shape;
#  - `avoctl show` shows a candidate's latest profile;
#  - a wrong candidate's profile fails with the checks' outcome;
#  - unknown candidate (404), unknown configuration (400 listing the valid
#    ones), unknown field, unknown profile;
#  - a worker killed mid-task: the profile is claimed again after its lease
#    ran out and completes on attempt 2.
source "$(dirname "$0")/lib.sh"
K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
ln -s "$ROOT/tests/fixtures/kernels/profile" "$K/profile"
sock="$AVO_HOME/avod.sock"
api() {  # METHOD PATH [BODY] -> body, then the status on the last line
    curl -s --unix-socket "$sock" -X "$1" ${3:+-d "$3"} -w '\n%{http_code}' "http://avod$2"
}
profile_state() { psql_avo "SELECT state FROM profiles WHERE id = $1"; }

check "avod starts" start_avod --kernels "$K"
start_worker --kernels "$K" --lease 10 --poll-ms 200

# --- a new island best is profiled, once --------------------------------------
# Three islands: evaluations stay queued while the first bests' profiles are.
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 --islands 3 | jq -r .id)
wait_for 240 '[ "$(psql_avo "SELECT state FROM jobs WHERE id = $JOB")" = succeeded ]'
SEED=$(psql_avo "SELECT seed_candidate FROM jobs WHERE id = $JOB")
check "the job's seed, an island's first best, has a new_best profile task" \
    test "$(psql_avo "SELECT count(*) FROM profiles WHERE candidate_id = $SEED AND why = 'new_best'")" = 1
# An island's best changes when a commit beats it (the seed first): each
# such candidate gets one task. The history of island bests is not
# stored, so: no candidate twice, none but the seed and committed ones,
# and the seed and the job's best each once.
NBT=$(psql_avo "SELECT count(*) FILTER (WHERE n <> 1) || ':' || count(*) FILTER (WHERE NOT (committed OR id = $SEED)) || ':' || count(*) FILTER (WHERE id IN ($SEED, (SELECT best_candidate FROM jobs WHERE id = $JOB))) FROM (SELECT c.id, c.committed, count(*) n FROM profiles p JOIN candidates c ON c.id = p.candidate_id WHERE p.job_id = $JOB AND p.why = 'new_best' GROUP BY c.id, c.committed) x")
BEST=$(psql_avo "SELECT best_candidate FROM jobs WHERE id = $JOB")
check "one new_best task per island best: none twice, none of an uncommitted candidate, the seed's and the best's ($NBT)" \
    test "$NBT" = "0:0:$([ "$BEST" = "$SEED" ] && echo 1 || echo 2)"
NB=$(psql_avo "SELECT id FROM profiles WHERE candidate_id = $BEST AND why = 'new_best'")
wait_for 60 '[ "$(profile_state $NB)" = done ]'
check "the best's new_best task completes on the worker: done, a profile-mode result, no score" \
    test "$(psql_avo "SELECT state || ':' || attempts || ':' || (result->>'mode') || ':' || (result->'aggregate' = 'null'::jsonb) || ':' || jsonb_array_length(result->'configs') FROM profiles WHERE id = $NB")" = "done:1:profile:true:4"
wait_for 60 '[ "$(psql_avo "SELECT count(*) FROM profiles WHERE job_id = $JOB AND state IN ('"'queued'"', '"'running'"')")" = 0 ]'
psql_avo "SELECT id, candidate_id, state, attempts, result->>'outcome', claimed_at IS NOT NULL FROM profiles WHERE job_id = $JOB ORDER BY id" | sed 's/^/# /'
# sql/027_profile_order.sql: a new best's profile waits for a worker with
# no evaluation to run; one whose candidate a later best replaced by then
# is closed, not run.
check "no new_best task was claimed while one of the job's evaluations had been queued for a second" \
    test "$(psql_avo "SELECT count(*) FROM profiles p JOIN evaluations e ON e.job_id = p.job_id WHERE p.job_id = $JOB AND p.why = 'new_best' AND p.claimed_at IS NOT NULL AND e.created_at < p.claimed_at - interval '1 second' AND (e.claimed_at IS NULL OR e.claimed_at > p.claimed_at)")" = 0
check "every other new_best task ran, or was closed superseded (no counters) when its candidate was no island's best" \
    test "$(psql_avo "SELECT count(*) FROM profiles p WHERE p.job_id = $JOB AND p.why = 'new_best' AND NOT (
              (p.state = 'done' AND p.attempts = 1 AND p.result->>'mode' = 'profile' AND jsonb_array_length(p.result->'configs') = 4)
           OR (p.state = 'done' AND p.attempts = 0 AND p.result->>'outcome' = 'superseded' AND jsonb_array_length(p.result->'configs') = 0
               AND NOT EXISTS (SELECT 1 FROM islands i WHERE i.job_id = p.job_id AND i.best_candidate = p.candidate_id)))")" = 0
check "the evaluations still carry the CPU's perf counters (the CPU timing path is unchanged)" \
    test "$(psql_avo "SELECT bool_and(jsonb_typeof(c->'counters') = 'object' AND c->'counters' ? 'task_clock_s') FROM evaluations e, jsonb_array_elements(e.result->'configs') c WHERE e.job_id = $JOB AND e.outcome = 'ok'")" = t

# --- avoctl profile CAND --wait ------------------------------------------------
avoctl --json profile "$SEED" --config 256 --wait >"$T/p256.json" 2>"$T/p256.err"
rc=$?
check "avoctl profile --config 256 --wait exits 0 with the finished task" \
    jqt '.state == "done" and .why == "user" and .config == "256" and .candidate == '"$SEED"' and .result.outcome == "ok"' "$T/p256.json"
[ $rc = 0 ] || notok "avoctl profile --wait exit code $rc: $(cat "$T/p256.err")"
check "its result: one configuration, two checked calls, within tolerance" \
    jqt '.result.configs | length == 1 and .[0].name == "256" and .[0].calls == 2 and .[0].check.rel_l2 < 1e-5' "$T/p256.json"
check "its counters have the exact shape: per-call means, whether the hardware events were readable and why not" \
    jqt '.result.configs[0].counters | (keys == ["available","cache_misses","calls","cycles","instructions","ipc","reason","source","task_clock_s"])
         and (.available | type == "boolean") and .calls == 2 and (.task_clock_s | type == "number") and .task_clock_s > 0
         and (if .available then (.cycles | type == "number") and .reason == null
              else (.reason | type == "string" and length > 0) and .cycles == null end)' "$T/p256.json"
check "the result's top-level counters say which events the worker could read" \
    jqt '.result.counters | (.available | type == "boolean") and (.events | type == "array")' "$T/p256.json"
avoctl profile "$SEED" --config 256 --wait >"$T/p256.txt" 2>&1
check "the human form: the task, its outcome, the counters line and table" \
    bash -c 'grep -q "^profile .*(user, done, attempt 1), configuration 256" "$0" && grep -q "^outcome *ok: 1 configs profiled" "$0" &&
             grep -q "^counters " "$0" && grep -Eq "^256 +.*(ms|us|s)" "$0"' "$T/p256.txt"
avoctl show "$SEED" >"$T/show.txt" 2>&1
check "avoctl show: the candidate's latest profile" grep -q "^profile .*(user, done, attempt 1), configuration 256" "$T/show.txt"
export -f api; export sock
check "GET /v1/candidates/{id} carries it as profile" \
    bash -c 'api GET /v1/candidates/$1 | head -n -1 | jq -e ".profile.config == \"256\" and .profile.state == \"done\"" >/dev/null' _ "$SEED"

# --- bad input -----------------------------------------------------------------
out=$(avoctl profile 999999 2>&1); rc=$?
check "unknown candidate: exit 1 and a clear message" bash -c '[ "$0" = 1 ] && grep -q "no candidate 999999" <<<"$1"' "$rc" "$out"
check "unknown candidate over the API: 404" test "$(api POST /v1/candidates/999999/profile | tail -1)" = 404
out=$(avoctl profile "$SEED" --config nope 2>&1); rc=$?
check "unknown configuration: exit 1, 400 naming it and listing the valid ones" \
    bash -c '[ "$0" = 1 ] && grep -q "config: problem cpu/sgemm has no configuration '"'"'nope'"'"' (it has: 128, 256, 384x320x288, 512)" <<<"$1"' "$rc" "$out"
check "unknown configuration over the API: 400" test "$(api POST /v1/candidates/$SEED/profile '{"config": "nope"}' | tail -1)" = 400
check "an unknown field: 400 naming it" \
    bash -c 'r=$(api POST /v1/candidates/$1/profile "{\"configs\": \"256\"}"); [ "$(tail -1 <<<"$r")" = 400 ] && grep -q "configs: unknown field" <<<"$r"' _ "$SEED"
check "unknown profile: 404" \
    bash -c 'r=$(api GET /v1/profiles/999999); [ "$(tail -1 <<<"$r")" = 404 ] && grep -q "no profile 999999" <<<"$r"' _
check "no task was queued by the refused requests" \
    test "$(psql_avo "SELECT count(*) FROM profiles WHERE config = 'nope' OR candidate_id = 999999")" = 0

# --- a wrong candidate ---------------------------------------------------------
sed 's/C\[i\] = 0.0f;/C[i] = 1.0f;/' "$ROOT/kernels/cpu/sgemm/seed.c" >"$T/wrong.c"
grep -q 'C\[i\] = 1.0f;' "$T/wrong.c" || notok "the wrong fixture was not made (seed.c changed?)"
WJOB=$(avoctl --json submit --problem cpu/sgemm --seed "$T/wrong.c" --evaluations 1 | jq -r .id)
wait_for 120 '[ -n "$(psql_avo "SELECT outcome FROM evaluations WHERE job_id = $WJOB AND state = '"'done'"'")" ]'
WRONG=$(psql_avo "SELECT seed_candidate FROM jobs WHERE id = $WJOB")
check "a seed that failed its evaluation became no island's best: no new_best task for it" \
    test "$(psql_avo "SELECT count(*) FROM profiles WHERE candidate_id = $WRONG")" = 0
avoctl --json profile "$WRONG" --config 128 --wait >"$T/wrong.json" 2>/dev/null
rc=$?
check "a wrong candidate's profile fails with the checks' outcome, no counters (exit 1)" \
    bash -c '[ "$0" = 1 ] && jq -e ".state == \"failed\" and .result.outcome == \"wrong_result\" and (.result.detail | test(\"config 128, call 0 \\\\(checked, profile run\\\\)\"))" "$1" >/dev/null' "$rc" "$T/wrong.json"

# --- a worker killed mid-task --------------------------------------------------
stop_workers
SJOB=$(avoctl --json submit --problem profile/sleepy --evaluations 1 | jq -r .id)
wait_for 30 '[ -n "$(psql_avo "SELECT seed_candidate FROM jobs WHERE id = $SJOB")" ]'
SLEEPY=$(psql_avo "SELECT seed_candidate FROM jobs WHERE id = $SJOB")
avoctl cancel "$SJOB" >/dev/null
PID=$(avoctl --json profile "$SLEEPY" | jq -r .id)
start_worker --kernels "$K" --lease 3 --poll-ms 200
W1=$WORKER_PID
wait_for 30 '[ "$(profile_state $PID)" = running ]'
sleep 1
kill -KILL "$W1"
check "the task was running on attempt 1 when its worker was killed" \
    test "$(psql_avo "SELECT state || ':' || attempts FROM profiles WHERE id = $PID")" = running:1
start_worker --kernels "$K" --lease 3 --poll-ms 200
W2=$WORKER_PID
wait_for 60 '[ "$(profile_state $PID)" = done ]'
check "after the lease ran out another worker claimed it and completed it: done on attempt 2" \
    test "$(psql_avo "SELECT p.state || ':' || p.attempts || ':' || (w.pid = $W2) FROM profiles p JOIN workers w ON w.id = p.worker_id WHERE p.id = $PID")" = done:2:true

[ "$FAILS" -eq 0 ] && echo "# all passed" || echo "# $FAILS failed"
exit $((FAILS > 0))
