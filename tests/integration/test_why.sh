#!/usr/bin/env bash
# Say why (issue 22, point 4), black-box through the real avod, worker and
# avoctl: a job's state detail in status, list and watch ("queued: no live
# worker for cpu", "N evaluations queued, waiting for a free worker",
# "running: evaluation N on worker W (host) for S s"), the submit warning
# when no live worker serves the target, avoctl workers with each worker's
# current job, candidate and elapsed time, avoctl events (every job one may
# read; -f follows), and agent steps and provider retries as events that
# watch prints. A fake worker row claims an evaluation through avo_claim,
# so "running" is caught without racing a real worker.
source "$(dirname "$0")/lib.sh"

K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
ln -s "$ROOT/kernels/gemm_bf16" "$K/gemm_bf16"
export XDG_CONFIG_HOME="$T/config"
SEEDSRC="$ROOT/kernels/cpu/sgemm/seed.c"
export AVO_TEST_KEY="sk-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# three 500s for the first step's request (a retry after each of the first two)
start_fake_llm fl openai failing "$SEEDSRC" 0
cat >"$T/providers.json" <<JSON
[{"name": "flaky", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_fl/v1", "model": "fake",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 2, "timeout_s": 30}]
JSON
check "avod starts" start_avod --kernels "$K" --providers "$T/providers.json"
q() { psql_avo "$1"; }
export -f q psql_avo

# ---- no worker at all ------------------------------------------------------
J1=$(avoctl --json submit --problem cpu/sgemm --evaluations 3 --islands 1 2>"$T/submit1.err" | jq -r .id)
check "submit with no live worker: accepted, with a warning on stderr naming the target" \
    bash -c '[ "$1" -gt 0 ] && grep -q "^avoctl: warning: no live worker for cpu; the job waits until one starts$" "$0"' \
    "$T/submit1.err" "$J1"
J2=$(avoctl --json submit --problem cpu/sgemm --evaluations 3 --islands 1 2>/dev/null | jq -r .id)
check "status: detail 'queued: no live worker for cpu'" \
    bash -c 'avoctl status "$0" | grep -Eq "^detail +queued: no live worker for cpu$"' "$J1"
check "status --json: the same detail" jqt '.detail == "queued: no live worker for cpu"' <(avoctl --json status "$J1")
check "list: a line under the table per unfinished job with its detail" \
    bash -c 'out=$(avoctl list); grep -q "^job $0: queued: no live worker for cpu$" <<<"$out" &&
             grep -q "^job $1: queued: no live worker for cpu$" <<<"$out"' "$J1" "$J2"
avoctl watch "$J1" >"$T/watch1.out" 2>&1 &
WP=$!
check "watch: says at once what the job waits for" \
    wait_for 30 "grep -q 'now queued: no live worker for cpu' '$T/watch1.out'"
kill "$WP" 2>/dev/null; wait "$WP" 2>/dev/null
# A job that waits with nothing happening: the detail once at the start,
# then again after about 30 s of silence (docs/api.md), so a watcher is
# never left without a word.
curl -s -N --max-time 50 --unix-socket "$AVO_HOME/avod.sock" "http://avod/v1/jobs/$J1/events?detail=true" \
    >"$T/detail-stream.txt" 2>/dev/null &
DP=$!
check "events?detail=true on a waiting job: the detail at the start and again after about 30 s without events" \
    wait_for 48 "[ \"\$(grep -c '^event: detail' '$T/detail-stream.txt')\" -ge 2 ]"
kill "$DP" 2>/dev/null; wait "$DP" 2>/dev/null

# A GPU job pinned to a model: the pin is part of what no worker serves.
echo '{"problem": "gemm_bf16", "islands": 1, "budget": {"evaluations": 1}, "gpu": "H200"}' >"$T/gpu.json"
JG=$(avoctl --json submit "$T/gpu.json" 2>"$T/submit-gpu.err" | jq -r .id)
check "a GPU job pinned to H200 with no worker: the warning and the detail name the target and the model" \
    bash -c 'grep -q "^avoctl: warning: no live worker for sm_90 / H200; the job waits until one starts$" "$0" &&
             avoctl status "$1" | grep -Eq "^detail +queued: no live worker for sm_90 / H200$"' "$T/submit-gpu.err" "$JG"
avoctl cancel "$JG" >/dev/null 2>&1
# A campaign of such a job: avoctl campaign run says so at the submit and
# once while it waits, not "0 of 1 jobs finished" alone until its timeout.
echo '{"name": "nogpu", "jobs": [{"problem": "gemm_bf16", "islands": 1, "budget": {"evaluations": 1}, "gpu": "H200"}]}' \
    >"$T/nogpu-campaign.json"
timeout 120 avoctl campaign run "$T/nogpu-campaign.json" --out "$T/campout" --timeout 8 >"$T/nogpu.out" 2>"$T/nogpu.err"
sed 's/^/# /' "$T/nogpu.err" | head -6
check "a campaign whose job no live worker serves: the submit's warning, then the wait's reason once, on stderr" \
    bash -c 'grep -Eq "^avoctl: warning: campaign nogpu, job [0-9]+ \(gemm_bf16\): no live worker for sm_90 / H200; the job waits until one starts$" "$0" &&
             [ "$(grep -Ec "^avoctl: warning: campaign nogpu, job [0-9]+ \(gemm_bf16\): queued: no live worker for sm_90 / H200$" "$0")" = 1 ]' \
    "$T/nogpu.err"

# ---- a worker (a row of our own, claiming through avo_claim) ------------------
wait_for 60 "[ \"\$(q \"SELECT count(*) FROM evaluations WHERE job_id = $J1 AND state = 'queued'\")\" -gt 0 ]"
FW=$(q "INSERT INTO workers (host, pid, target, devices) VALUES ('gpu-3', 1, 'cpu', '[]') RETURNING id")
NQ=$(q "SELECT count(*) FROM evaluations WHERE job_id = $J1 AND state = 'queued'")
check "a live worker, all busy elsewhere: 'running: N evaluations queued, waiting for a free worker'" \
    jqt --arg d "running: $NQ evaluation$([ "$NQ" = 1 ] || echo s) queued, waiting for a free worker" \
    '.detail == $d' <(avoctl --json status "$J1")
# A toolchain pin no live worker meets (the row above has no toolchain):
# the toolchain's own warning (sql/018), once, and the pin in the detail.
echo '{"problem": "cpu/sgemm", "islands": 1, "budget": {"evaluations": 1}, "toolchain": {"cc": ">=999"}}' >"$T/tc.json"
JT=$(avoctl --json submit "$T/tc.json" 2>"$T/submit-tc.err" | jq -r .id)
check "submit with a toolchain pin no live worker meets: the toolchain warning, and only it" \
    bash -c '[ "$(grep -c warning "$0")" = 1 ] && grep -q "warning: toolchain: no live worker of target cpu matches" "$0"' \
    "$T/submit-tc.err"
check "status: the detail names the toolchain pin" \
    jqt '.detail == "queued: no live worker for cpu / toolchain {\"cc\": \">=999\"}"' <(avoctl --json status "$JT")
avoctl cancel "$JT" >/dev/null
E=$(q "SELECT id FROM avo_claim($FW, 'cpu', 600) WHERE job_id = $J1")
if [ -z "$E" ]; then  # J2's came first in the queue: claim until one of J1's
    for _ in 1 2 3 4 5 6; do
        E=$(q "SELECT id FROM avo_claim($FW, 'cpu', 600) WHERE job_id = $J1")
        [ -n "$E" ] && break
    done
fi
check "status while a worker evaluates: 'running: evaluation N on worker W (host) for S s'" \
    bash -c 'avoctl status "$0" | grep -Eq "^detail +running: evaluation $1 on worker $2 \(gpu-3\) for [0-9]+ s"' \
    "$J1" "$E" "$FW"
C=$(q "SELECT candidate_id FROM evaluations WHERE id = $E")
check "workers: the worker's current job, candidate, work and elapsed time" \
    bash -c 'avoctl workers | head -1 | grep -q "JOB *CANDIDATE *WORK *ELAPSED" &&
             avoctl workers | grep -E "^ *$0 +gpu-3 " | grep -Eq " $1 +$2 +evaluation $3 +[0-9]+ s"' \
    "$FW" "$J1" "$C" "$E"
check "workers --json: current {kind, id, job, candidate, elapsed_s}" \
    jqt --argjson w "$FW" --argjson j "$J1" --argjson e "$E" \
    '.workers[] | select(.id == $w) | .current | .kind == "evaluation" and .id == $e and .job == $j and (.elapsed_s >= 0)' \
    <(avoctl --json workers)

# ---- events of every job ------------------------------------------------------
avoctl events >"$T/events.out" 2>&1
check "events: recent events of both jobs, each line naming its job" \
    bash -c 'grep -q "^job $1 .*job $1 submitted" "$0" && grep -q "^job $2 .*job $2 submitted" "$0"' \
    "$T/events.out" "$J1" "$J2"
check "events --json: one JSON object per line with job and kind" \
    bash -c 'avoctl --json events --last 3 | jq -se "length == 3 and all(.[]; has(\"job\") and has(\"kind\"))" >/dev/null'
check "events: --after and --last together are refused (exit 2)" \
    bash -c 'out=$(avoctl events --after 1 --last 2 2>&1); [ $? = 2 ] && grep -q "give one of them" <<<"$out"'
avoctl events -f >"$T/events-f.out" 2>&1 &
EP=$!

# The fake worker goes; the jobs are cancelled, their evaluation let go.
q "UPDATE evaluations SET state = 'cancelled', lease_expires = NULL WHERE worker_id = $FW AND state = 'running';
   UPDATE workers SET state = 'gone' WHERE id = $FW" >/dev/null
avoctl cancel "$J1" >/dev/null
avoctl cancel "$J2" >/dev/null
check "a finished job has no detail" jqt '.detail == null' <(avoctl --json status "$J2")

# ---- agent steps and provider retries as events --------------------------------
start_worker --kernels "$K"
echo '{"problem": "cpu/sgemm", "operator": "agent", "islands": 1, "agent": {"provider": "flaky"},
       "budget": {"evaluations": 3}}' >"$T/agent.json"
JA=$(avoctl --json submit "$T/agent.json" | jq -r .id)
avoctl watch "$JA" >"$T/watcha.out" 2>&1 &
WA=$!
check "a provider retry becomes an llm_retry event of the job" \
    wait_for 180 "[ \"\$(q \"SELECT count(*) FROM events WHERE job_id = $JA AND kind = 'llm_retry'\")\" -gt 0 ]"
check "watch prints the retry: provider, attempt, status, message and the wait" \
    wait_for 30 "grep -Eq 'provider flaky: attempt 1 failed \(HTTP 500\): upstream overloaded; retrying in [0-9.]+ s \(1 of 2 retries\), agent step [0-9]+' '$T/watcha.out'"
check "watch prints the agent step's start" grep -Eq "agent step [0-9]+ started island 0" "$T/watcha.out"
check "events -f streams the new job's events as they come, the retry among them" \
    wait_for 30 "grep -q '^job $JA .*provider flaky: attempt 1 failed' '$T/events-f.out'"
check "events -f showed the cancels of the earlier jobs too" \
    grep -q "^job $J1 .*job $J1 finished: cancelled" "$T/events-f.out"
avoctl cancel "$JA" >/dev/null
wait_for 60 "! kill -0 $WA 2>/dev/null"
check "the agent step's end is an event of the job (after job_finished: events -f shows it, with its reason)" \
    wait_for 30 "grep -Eq '^job $JA .*agent step [0-9]+ ended island 0 after [0-9]+ turns?, 0 evaluations: the job' '$T/events-f.out'"
kill "$EP" 2>/dev/null; wait "$EP" 2>/dev/null

[ -n "${WHY_KEEP:-}" ] && cp "$T"/*.out "$WHY_KEEP"/ 2>/dev/null
[ "$FAILS" -eq 0 ]
