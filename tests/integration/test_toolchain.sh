#!/usr/bin/env bash
# The toolchain record and re-validation (issue 21, points 2 and 3;
# sql/018_toolchain.sql): jobs pinned to a toolchain are claimed only by
# workers whose recorded toolchain meets it; bad constraints are refused
# naming the field; submission warns when no live worker matches; the
# report groups results by toolchain; `avoctl revalidate` queues the
# committed versions again (any toolchain, or --on one worker) and reports
# new/recorded ratios with both toolchains. Two registered fake workers
# with different toolchains claim and complete through avo_claim and
# avo_complete as workers do, so every figure is known; a real avo-worker
# with --toolchain-file shows the record on its row and in its results.
source "$(dirname "$0")/lib.sh"

api() {  # METHOD PATH [BODY]: the daemon's JSON answer
    curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
code() {  # METHOD PATH [BODY]: the HTTP status
    curl -s -o /dev/null -w '%{http_code}' --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
q() { psql_avo "$1"; }
queued() { q "SELECT count(*) FROM evaluations WHERE job_id = $1 AND state = 'queued'"; }
job_state() { q "SELECT state FROM jobs WHERE id = $1"; }
# complete EVAL WORKER AGGREGATE VERSIONS: an ok result with that toolchain
complete() {
    q "SELECT avo_complete($1, $2, 'ok', $3, '{\"outcome\": \"ok\", \"aggregate\": $3, \"unit\": \"GFLOP/s\",
         \"configs\": [{\"name\": \"256\", \"score\": $3}], \"toolchain\": {\"versions\": $4}}'::jsonb)" >/dev/null
}
# claim WORKER: the evaluation id it gets (empty: none)
claim() { q "SELECT id FROM avo_claim($1, 'cpu', 60)"; }

K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
check "avod starts" start_avod --kernels "$K"

V13='{"cc": "12.2.0", "nvcc": "13.0.88", "driver": "580.95.05", "cuda_runtime": "13.0", "gpu": "NVIDIA H200", "avo": "0.1.0"}'
V12='{"cc": "12.2.0", "nvcc": "12.4.131", "driver": "550.54.15", "cuda_runtime": "12.4", "gpu": "NVIDIA H100 80GB HBM3", "avo": "0.1.0"}'
W13=$(q "INSERT INTO workers (host, pid, target, devices, toolchain) VALUES ('new', 1, 'cpu', '[]', '{\"versions\": $V13}') RETURNING id")
W12=$(q "INSERT INTO workers (host, pid, target, devices, toolchain) VALUES ('old', 2, 'cpu', '[]', '{\"versions\": $V12}') RETURNING id")

# --- bad input: refused naming the field, nothing created
bad() {  # BODY MESSAGE-PART
    local out st
    out=$(api POST /v1/jobs "$1")
    st=$(code POST /v1/jobs "$1")
    check "POST /v1/jobs $1 -> 400 naming the field ($(jq -r .error.message <<<"$out"))" \
        bash -c '[ "$0" = 400 ] && jq -e --arg m "$1" ".error.message | contains(\$m)" <<<"$2" >/dev/null' "$st" "$2" "$out"
}
bad '{"problem": "cpu/sgemm", "toolchain": {"nvcc": "13.x"}}' "toolchain.nvcc: malformed version constraint '13.x'"
bad '{"problem": "cpu/sgemm", "toolchain": {"driver": "=>580"}}' "toolchain.driver: malformed version constraint"
bad '{"problem": "cpu/sgemm", "toolchain": {"compiler": "13.0"}}' "toolchain.compiler: unknown key"
bad '{"problem": "cpu/sgemm", "toolchain": {"driver": 580}}' "toolchain.driver: must be a string"
bad '{"problem": "cpu/sgemm", "toolchain": "13.0"}' "toolchain: must be an object"
check "no job was created by the refused specs" test "$(q "SELECT count(*) FROM jobs")" = 0

# --- pinning picks the right worker
A=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 1}, "toolchain": {"nvcc": "13.0", "driver": ">=580"}}')
JA=$(jq -r .id <<<"$A")
check "a job pinned to nvcc 13.0, driver >=580 is accepted without a warning (worker $W13 matches)" \
    bash -c 'jq -e ".spec.toolchain == {\"nvcc\": \"13.0\", \"driver\": \">=580\"} and (has(\"warnings\") | not)" <<<"$0" >/dev/null' "$A"
wait_for 30 "[ \$(queued $JA) -ge 1 ]"
check "the pinned job's evaluation carries its constraints" \
    test "$(q "SELECT toolchain FROM evaluations WHERE job_id = $JA")" = '{"nvcc": "13.0", "driver": ">=580"}'
check "the worker with nvcc 12.4 / driver 550 does not claim it" test -z "$(claim "$W12")"
EA=$(claim "$W13")
check "the worker with nvcc 13.0.88 / driver 580.95.05 claims it ($EA)" \
    test "$EA" = "$(q "SELECT id FROM evaluations WHERE job_id = $JA")"
complete "$EA" "$W13" 10 "$V13"
wait_for 30 "[ \"\$(job_state $JA)\" = succeeded ]"
# A profile task of the pinned job's candidate is the job's work too (sql/020)
CA=$(q "SELECT best_candidate FROM jobs WHERE id = $JA")
PA=$(api POST "/v1/candidates/$CA/profile" | jq -r .id)
check "a profile of the pinned job's candidate ($PA) is not claimed by the worker with nvcc 12.4 / driver 550" \
    test -z "$(q "SELECT id FROM avo_claim_profile($W12, 'cpu', 60)")"
check "... the worker whose toolchain meets the pin claims it" \
    test "$(q "SELECT id FROM avo_claim_profile($W13, 'cpu', 60)")" = "$PA"
q "SELECT avo_complete_profile($PA, $W13, '{\"outcome\": \"ok\"}'::jsonb)" >/dev/null
B=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 1}, "toolchain": {"nvcc": "<13", "gpu": "h100"}}')
JB=$(jq -r .id <<<"$B")
wait_for 30 "[ \$(queued $JB) -ge 1 ]"
check "a job pinned to nvcc <13 on an H100: the new worker does not claim it" test -z "$(claim "$W13")"
EB=$(claim "$W12")
check "the old worker does ($EB)" test -n "$EB"
complete "$EB" "$W12" 5 "$V12"
wait_for 30 "[ \"\$(job_state $JB)\" = succeeded ]"
echo '{"problem": "cpu/sgemm", "budget": {"evaluations": 1}, "toolchain": {"nvcc": ">=14"}}' >"$T/pin14.json"
avoctl submit "$T/pin14.json" >"$T/sub.out" 2>"$T/sub.err"; rc=$?
check "a toolchain no live worker has: accepted (exit $rc), with a warning on stderr" \
    bash -c '[ "$0" = 0 ] && grep -q "submitted" "$1" &&
             grep -q "warning: toolchain: no live worker of target cpu matches {\"nvcc\": \">=14\"}" "$2"' "$rc" "$T/sub.out" "$T/sub.err"
J14=$(q "SELECT max(id) FROM jobs")
wait_for 30 "[ \$(queued $J14) -ge 1 ]"
check "... and its work waits: neither worker claims it" \
    bash -c '[ -z "$(psql_avo "SELECT id FROM avo_claim('"$W13"', '"'cpu'"', 60) WHERE job_id = '"$J14"'")" ]' 2>/dev/null
q "SELECT avo_job_cancel(id) FROM jobs WHERE state IN ('queued','running')" >/dev/null
q "UPDATE evaluations SET state = 'cancelled' WHERE state IN ('queued','running')" >/dev/null

# --- re-validation
SA=$(q "SELECT seed_candidate FROM jobs WHERE id = $JA")
check "bad revalidate requests are refused naming the field" bash -c '
    [ "$(curl -s --unix-socket "$AVO_HOME/avod.sock" -d "{\"job\": 999999}" http://avod/v1/revalidate | jq -r .error.message)" = "job: no job 999999" ] &&
    curl -s --unix-socket "$AVO_HOME/avod.sock" -d "{\"job\": '"$JA"', \"candidate\": '"$SA"'}" http://avod/v1/revalidate | jq -e ".error.message | contains(\"give exactly one\")" >/dev/null &&
    curl -s --unix-socket "$AVO_HOME/avod.sock" -d "{\"job\": '"$JA"', \"on_worker\": 99999}" http://avod/v1/revalidate | jq -e ".error.message == \"on: worker 99999 is not registered\"" >/dev/null &&
    curl -s --unix-socket "$AVO_HOME/avod.sock" -d "{\"job\": '"$JA"', \"speed\": 1}" http://avod/v1/revalidate | jq -e ".error.message | startswith(\"speed: unknown field\")" >/dev/null'
out=$(avoctl revalidate bogus 2>&1); rc=$?
check "avoctl revalidate bogus: a usage error ($rc)" bash -c '[ "$0" = 2 ] && grep -q "JOB: a job id" <<<"$1"' "$rc" "$out"
avoctl revalidate "$JA" >"$T/rv.out" 2>&1
RV=$(q "SELECT max(id) FROM revalidations")
ROWS=$(q "SELECT count(*) || ' ' || min(candidate_id) || ' ' || min(toolchain::text) FROM evaluations WHERE revalidation_id = $RV")
[ "$ROWS" = "1 $SA {}" ] || { echo "# rows: $ROWS"; cat "$T/rv.out"; }
check "avoctl revalidate JOB queues its committed version (the seed $SA), without the job's pin" \
    bash -c 'grep -q "revalidation $0 of job $1 (1 candidate, GFLOP/s): queued" "$2" && [ "$3" = "1 $4 {}" ]' \
    "$RV" "$JA" "$T/rv.out" "$ROWS" "$SA"
ER=$(claim "$W12")
check "a re-validation ignores the job's pin: the other toolchain's worker claims it" \
    test "$ER" = "$(q "SELECT id FROM evaluations WHERE revalidation_id = $RV")"
complete "$ER" "$W12" 9 "$V12"
api GET /v1/revalidations/$RV >"$T/rv.json"
check "GET /v1/revalidations/$RV: done, ratio new/recorded 0.9 per candidate and per config, both toolchains, changed" \
    jqt '.state == "done" and (.entries | length) == 1 and .entries[0].ratio == 0.9 and .entries[0].recorded.aggregate == 10
         and .entries[0].aggregate == 9 and .entries[0].changed == true and .entries[0].toolchain.nvcc == "12.4.131"
         and .entries[0].recorded.toolchain.nvcc == "13.0.88" and .entries[0].configs[0].ratio == 0.9
         and .summary.geomean_ratio == 0.9' "$T/rv.json"
avoctl revalidate cand:"$SA" --on "$W13" >/dev/null 2>&1
RV2=$(q "SELECT max(id) FROM revalidations")
check "revalidate cand:ID --on WORKER: the other worker cannot claim it" \
    bash -c '[ -z "$(psql_avo "SELECT id FROM avo_claim('"$W12"', '"'cpu'"', 60) WHERE candidate_id = '"$SA"'")" ]'
E2=$(q "SELECT id FROM evaluations WHERE revalidation_id = $RV2")
check "... the named one does" test "$(claim "$W13")" = "$E2"
complete "$E2" "$W13" 11 "$V13"
PRINTED=$(api GET /v1/revalidations/$RV2 | jq -r '.entries[0] | "\(.ratio) \(.changed)"')
check "the same toolchain again: ratio 1.1, unchanged ($PRINTED)" test "$PRINTED" = "1.1 false"
avoctl revalidate cand:"$SA" --wait >"$T/rvw.out" 2>&1 &
WAITER=$!
wait_for 10 "[ \$(psql_avo \"SELECT count(*) FROM evaluations WHERE purpose = 'revalidate' AND state = 'queued'\") -ge 1 ]"
EW=$(claim "$W12")
complete "$EW" "$W12" 8 "$V12"
wait "$WAITER"; rc=$?
check "avoctl revalidate --wait prints the ratio and both toolchains ($rc)" \
    bash -c '[ "$0" = 0 ] && grep -Eq "^$1 +10 +8 +x0\.8000 +cc 12.2.0, nvcc 12.4.131, driver 550.54.15, cuda -/12.4, NVIDIA H100 80GB HBM3, avo 0.1.0 \(was cc 12.2.0, nvcc 13.0.88" "$2" &&
             grep -q "ratio new/recorded: x0.8000 geometric mean over 1 of 1" "$2"' "$rc" "$SA" "$T/rvw.out"
# --on GPU: by UUID or by model, through the GPU each worker recorded
q "UPDATE workers SET toolchain = jsonb_set(toolchain, '{versions,gpu_uuid}', '\"GPU-13aa\"') WHERE id = $W13" >/dev/null
q "UPDATE workers SET toolchain = jsonb_set(toolchain, '{versions,gpu_uuid}', '\"GPU-12bb\"') WHERE id = $W12" >/dev/null
avoctl revalidate cand:"$SA" --on GPU-13aa >/dev/null 2>&1
E3=$(q "SELECT id FROM evaluations WHERE revalidation_id = (SELECT max(id) FROM revalidations)")
check "revalidate --on GPU-UUID: the worker of another GPU cannot claim it" \
    test -z "$(q "SELECT id FROM avo_claim($W12, 'cpu', 60) WHERE candidate_id = $SA")"
check "... the worker of that GPU does ($E3)" test "$(claim "$W13")" = "$E3"
complete "$E3" "$W13" 10 "$V13"
avoctl revalidate cand:"$SA" --on H100 >/dev/null 2>&1
E4=$(q "SELECT id FROM evaluations WHERE revalidation_id = (SELECT max(id) FROM revalidations)")
check "revalidate --on MODEL (H100): the H200's worker cannot claim it, the H100's does ($E4)" \
    bash -c '[ -z "$0" ] && [ -n "$2" ] && [ "$1" = "$2" ]' \
    "$(q "SELECT id FROM avo_claim($W13, 'cpu', 60) WHERE candidate_id = $SA")" "$(claim "$W12")" "$E4"
complete "$E4" "$W12" 8 "$V12"
check "re-validations are never consumed and change no job" \
    test "$(q "SELECT bool_or(consumed)::text || ' ' || (SELECT best_candidate FROM jobs WHERE id = $JA) FROM evaluations WHERE purpose = 'revalidate'")" = "false $SA"

# --- the report groups results by toolchain
avoctl --json report "$JA" >"$T/report.json"
check "report JOB --json: two toolchain groups (the search on 13.0, the re-validations on both)" \
    jqt '(.toolchains | length) == 2 and ([.toolchains[] | .toolchain.nvcc] | sort) == ["12.4.131", "13.0.88"]
         and ([.toolchains[] | select(.toolchain.nvcc == "13.0.88") | .by_purpose.search] == [1])' "$T/report.json"
avoctl report "$JA" >"$T/report.txt"
check "avoctl report prints a TOOLCHAIN table" \
    bash -c 'grep -q "^TOOLCHAIN" "$0" && grep -q "nvcc 13.0.88, driver 580.95.05" "$0" && grep -q "nvcc 12.4.131" "$0"' "$T/report.txt"
avoctl report "$JA" --markdown - >"$T/report.md"
check "... and its markdown a Toolchains section" grep -q "^## Toolchains" "$T/report.md"

# --- a real worker: its record on its row and in every result
q "UPDATE workers SET state = 'gone' WHERE id IN ($W13, $W12)" >/dev/null
echo '{"versions": {"nvcc": "13.0.88"}, "note": "test label"}' >"$T/tc.json"
start_worker --kernels "$K" --target cpu --toolchain-file "$T/tc.json"
RW=$WORKER_PID
wait_for 30 "[ -n \"\$(psql_avo \"SELECT id FROM workers WHERE pid = $RW\")\" ]"
RWID=$(q "SELECT id FROM workers WHERE pid = $RW")
REC=$(q "SELECT (toolchain->'versions'->>'cc') IS NOT NULL AND toolchain->'versions'->>'nvcc' = '13.0.88'
               AND (toolchain->>'overridden')::boolean AND toolchain->>'driver' = 'none'
               AND toolchain->'cc'->>'path' LIKE '/%' AND toolchain->>'note' = 'test label' FROM workers WHERE id = $RWID")
[ "$REC" = t ] || q "SELECT toolchain FROM workers WHERE id = $RWID"
check "the real worker registered its probed toolchain (cc path, no driver here) with the file's overrides" test "$REC" = t
JR=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 1}, "toolchain": {"nvcc": "13"}}' | jq -r .id)
wait_for 120 "[ \"\$(job_state $JR)\" = succeeded ] || [ \"\$(job_state $JR)\" = failed ]"
check "the real worker claimed the job pinned to nvcc 13 and recorded its toolchain in the result" \
    test "$(q "SELECT string_agg(DISTINCT (worker_id = $RWID AND result->'toolchain'->'versions'->>'nvcc' = '13.0.88'
                                   AND result->'toolchain'->>'avo' IS NOT NULL AND result->'toolchain'->>'cpu' IS NOT NULL)::text, ',')
               FROM evaluations WHERE job_id = $JR AND state = 'done'")" = true
echo '[1]' >"$T/badtc.json"
avo-worker --kernels "$K" --target cpu --toolchain-file "$T/badtc.json" >"$T/badworker.log" 2>&1; rc=$?
check "a worker with an unusable --toolchain-file refuses to start ($rc)" \
    bash -c '[ "$0" != 0 ] && grep -q "toolchain-file.*must be a JSON object" "$1"' "$rc" "$T/badworker.log"
[ "$FAILS" -eq 0 ]
