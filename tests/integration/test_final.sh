#!/usr/bin/env bash
# The commit rule that knows the noise and the job's final measurement
# (issue 20, point 7; sql/012_paired.sql, daemon/avod/commit.c, evolve.c),
# through real avod:
# 1. Hand-crafted results (a registered fake worker claims and completes
#    through avo_claim/avo_complete, as a worker would): what each proposal
#    is measured against, an A/A-like paired result not committed with its
#    not_significant event, a seed that stays the best (ratio 1, no final
#    measurement), a paired gain committed and then measured against the
#    seed at the job's end (finishing, then its paired ratio with the
#    interval as the job's speedup in the API, status, report and watch), and
#    a job cancelled while finishing that does not wait.
# 2. A real CPU worker runs a tune job to its budget: one 'final'
#    evaluation (the best against the seed, outside the budget, never
#    consumed as a search result) and the job's speedup from it. Until the
#    worker measures paired (the `pair` branch) its result has no "paired":
#    the assertions take the unpaired fallback then, and the paired path
#    once it is there (marked "paired when measured").
source "$(dirname "$0")/lib.sh"

api() {  # METHOD PATH [BODY]: the daemon's JSON answer
    curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
q() { psql_avo "$1"; }
job_state() { q "SELECT state FROM jobs WHERE id = $1"; }
wait_job() {  # JOB SECONDS
    wait_for "$2" "case \$(job_state $1) in succeeded|failed|cancelled) true;; *) false;; esac"
}
queued() { q "SELECT count(*) FROM evaluations WHERE job_id = $1 AND state = 'queued'"; }
# complete JOB OUTCOME AGGREGATE [PAIRED]: the fake worker claims the job's
# queued evaluation and completes it; echoes the claim row
# (id|against_id|against source given|confidence).
complete() {
    wait_for 30 "[ \$(queued $1) -ge 1 ]" || { echo "no queued evaluation for job $1" >&2; return 1; }
    local row e
    row=$(q "SELECT id || '|' || COALESCE(against_id::text, '') || '|' || (against_source IS NOT NULL) || '|' ||
                    confidence FROM avo_claim($FW, 'cpu', 60)")
    e=${row%%|*}
    q "SELECT avo_complete($e, $FW, '$2', $3, '{\"outcome\": \"$2\", \"aggregate\": $3, \"unit\": \"GFLOP/s\",
       \"configs\": []${4:+, \"paired\": $4}}'::jsonb)" >/dev/null
    echo "$row"
}
consumed() { q "SELECT count(*) FROM evaluations WHERE job_id = $1 AND consumed"; }

K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
check "avod starts" start_avod --kernels "$K"
FW=$(q "INSERT INTO workers (host, pid, target, devices) VALUES ('fake', 1, 'cpu', '[]') RETURNING id")

# --- 1a. the seed stays the best: an A/A-like paired result is not committed
J=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 2}, "commit": {"min_gain": 0.01}}' | jq -r .id)
check "the stored spec says which commit rule applies (confidence defaulted)" \
    test "$(q "SELECT spec->'commit'->>'min_gain' || ' ' || (spec->'commit'->>'confidence') FROM jobs WHERE id = $J")" = "0.01 0.95"
SEED_ROW=$(complete "$J" ok 10)
check "the seed is measured against nothing" bash -c '[ "$(cut -d"|" -f2,3 <<<"$0")" = "|false" ]' "$SEED_ROW"
S=$(q "SELECT seed_candidate FROM jobs WHERE id = $J")
wait_for 30 "[ \$(consumed $J) -ge 1 ]"
ROW=$(complete "$J" ok 10.3 "{\"against\": $S, \"method\": \"bootstrap-percentile\", \"ratio\": 1.001, \"low\": 0.998, \"ci\": [0.996, 1.006]}")
check "a proposal is measured against its island's best (the seed): claimed with its source and the job's confidence" \
    test "$(cut -d'|' -f2- <<<"$ROW")" = "$S|true|0.95"
check "the proposal's evaluation records its against" \
    test "$(q "SELECT against_id FROM evaluations WHERE id = ${ROW%%|*}")" = "$S"
wait_job "$J" 30
C=$(q "SELECT candidate_id FROM evaluations WHERE id = ${ROW%%|*}")
check "an A/A-like paired result (low 0.998) is not committed, though its aggregate is 3% higher" \
    test "$(q "SELECT committed FROM candidates WHERE id = $C")" = f
check "the not_significant event says by how much, against what and why" \
    test "$(q "SELECT data->>'candidate' || ' ' || (data->>'against') || ' ' || (data->>'ratio')::float8 || ' ' ||
                      (data->>'low')::float8 || ' ' || (data->'ci'->>1)::float8 || ' ' || (data->>'min_gain')::float8 || ' ' ||
                      (data->>'confidence')::float8 || ' ' || (data->>'reason')
                 FROM events WHERE job_id = $J AND kind = 'not_significant'")" = "$C $S 1.001 0.998 1.006 0.01 0.95 not a significant gain"
check "candidate_evaluated records that the rule was paired" \
    test "$(q "SELECT data->'rule'->>'paired' FROM events WHERE job_id = $J AND kind = 'candidate_evaluated' AND (data->>'candidate')::bigint = $C")" = true
check "the seed stayed the best: speedup 1 with a note, no final measurement" \
    test "$(api GET /v1/jobs/$J | jq -r '[.state, .speedup, .speedup_detail.note, .evaluations.final] | join("|")')" = \
         "succeeded|1|no version beat the seed|0"

# --- 1b. a paired gain is committed, then measured against the seed at the end
J=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 2}}' | jq -r .id)
check "CPU problems default to min_gain 0.02" test "$(q "SELECT spec->'commit'->>'min_gain' FROM jobs WHERE id = $J")" = 0.02
check "avoctl status says which commit rule applies" \
    bash -c 'avoctl status '"$J"' | grep -q "commit.*paired lower bound above +2.00% at 95% confidence"'
complete "$J" ok 10 >/dev/null
S=$(q "SELECT seed_candidate FROM jobs WHERE id = $J")
wait_for 30 "[ \$(consumed $J) -ge 1 ]"
ROW=$(complete "$J" ok 9.9 "{\"against\": $S, \"ratio\": 1.2, \"low\": 1.1, \"ci\": [1.08, 1.3]}")
C=$(q "SELECT candidate_id FROM evaluations WHERE id = ${ROW%%|*}")
wait_for 30 "[ \$(q \"SELECT count(*) FROM evaluations WHERE job_id = $J AND purpose = 'final'\") -ge 1 ]"
check "a paired gain (low 1.1 > 1.02) is committed and is the best, though its aggregate drifted lower" \
    test "$(q "SELECT c.committed || ' ' || (j.best_candidate = c.id) FROM candidates c, jobs j WHERE c.id = $C AND j.id = $J")" = "true true"
check "at the end of the search the best is queued for a final measurement against the seed" \
    test "$(q "SELECT candidate_id || ' ' || against_id || ' ' || state FROM evaluations WHERE job_id = $J AND purpose = 'final'")" = "$C $S queued"
check "meanwhile the job is running and says it is finishing (API, avoctl status)" \
    test "$(job_state $J) $(api GET /v1/jobs/$J | jq -r .finishing) $(avoctl status $J | grep -c '^ *finishing')" = "running true 1"
check "the final_measurement started event names the best and the seed" \
    test "$(q "SELECT data->>'status' || ' ' || (data->>'candidate') || ' ' || (data->>'against') FROM events WHERE job_id = $J AND kind = 'final_measurement'")" = "started $C $S"
check "the final measurement is outside the budget and the search's counts" \
    test "$(api GET /v1/jobs/$J | jq -r '[.evaluations.done, .evaluations.budget, .evaluations.final] | join(" ")')" = "2 2 1"
FROW=$(complete "$J" ok 9.8 "{\"against\": $S, \"method\": \"bootstrap-percentile\", \"resamples\": 2000, \"confidence\": 0.95, \"ratio\": 1.19, \"low\": 1.12, \"ci\": [1.1, 1.3]}")
check "the final evaluation is claimed with the seed's source" test "$(cut -d'|' -f2,3 <<<"$FROW")" = "$S|true"
wait_job "$J" 30
check "the job ends succeeded with the paired ratio and its interval as its speedup" \
    test "$(api GET /v1/jobs/$J | jq -c '[.state, .reason, .speedup, .speedup_detail.low, .speedup_detail.ci, .speedup_detail.paired, .speedup_detail.method, .speedup_detail.evaluation, .finishing]')" = \
         "[\"succeeded\",\"evaluation budget reached\",1.19,1.12,[1.1,1.3],true,\"bootstrap-percentile\",${FROW%%|*},false]"
check "the final measurement is never consumed as a search result: the candidate keeps its search aggregate" \
    test "$(q "SELECT e.consumed || ' ' || c.aggregate || ' ' || (SELECT count(*) FROM events WHERE job_id = $J AND kind = 'committed') FROM evaluations e, candidates c WHERE e.job_id = $J AND e.purpose = 'final' AND c.id = e.candidate_id")" = "false 9.9 2"
check "the candidate's API view is its search evaluation, not the final one" \
    test "$(api GET /v1/candidates/$C | jq -r .evaluation)" = "${ROW%%|*}"
check "final_measurement finished comes before job_finished, which carries the interval" \
    test "$(q "SELECT string_agg(kind || ':' || COALESCE(data->>'status', (data->'speedup_detail'->>'low')::float8::text, ''), ',' ORDER BY id) FROM events WHERE job_id = $J AND kind IN ('final_measurement', 'job_finished')")" = \
         "final_measurement:started,final_measurement:finished,job_finished:1.12"
check "avoctl status prints the speedup with its interval" \
    bash -c 'avoctl status '"$J"' | grep -q "speedup.*x1.19 \[1.100, 1.300\] (95% interval, paired)"'
check "avoctl report prints it too" \
    bash -c 'cd '"$T"' && avoctl report '"$J"' | grep -q "x1.19 \[1.100, 1.300\] (95% interval, paired)"'
timeout 60 avoctl watch "$J" >"$T/watch1.out" 2>&1
check "avoctl watch shows the finishing phase and ends with the paired speedup" \
    bash -c 'grep -q "finishing: measuring the best" "$0" && grep -q "final measurement: speedup x1.19" "$0" &&
             tail -1 "$0" | grep -q "speedup x1.19 \[1.100, 1.300\]"' "$T/watch1.out"

# --- 1c. a job cancelled while finishing does not wait
J=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 2}, "commit": {"min_gain": 0}}' | jq -r .id)
complete "$J" ok 10 >/dev/null
S=$(q "SELECT seed_candidate FROM jobs WHERE id = $J")
wait_for 30 "[ \$(consumed $J) -ge 1 ]"
complete "$J" ok 12 >/dev/null
wait_for 30 "[ \$(q \"SELECT count(*) FROM evaluations WHERE job_id = $J AND purpose = 'final'\") -ge 1 ]"
check "unpaired results fall back to the absolute rule, saying why" \
    test "$(q "SELECT string_agg(data->'rule'->>'why', ',') FROM events WHERE job_id = $J AND kind = 'candidate_evaluated' AND data ? 'rule'")" = \
         "the result has no paired measurement"
api POST /v1/jobs/$J/cancel >/dev/null
check "a job cancelled while finishing ends at once; its final evaluation is cancelled" \
    test "$(job_state $J):$(q "SELECT state FROM evaluations WHERE job_id = $J AND purpose = 'final'")" = "cancelled:cancelled"
q "UPDATE workers SET state = 'gone' WHERE id = $FW" >/dev/null

# --- 2. a real worker: the job's end measures its best against its seed
start_worker --kernels "$K"
J=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "islands": 1, "budget": {"evaluations": 6}, "operator_params": {"seed": 5},
                        "seed": {"knobs": {"ORDER": 0, "BM": 16, "BN": 16, "BK": 16, "UNROLL": 1}},
                        "commit": {"min_gain": 0}}' | jq -r .id)
wait_job "$J" 400
JS=$(api GET /v1/jobs/$J)
echo "# job $J: $(jq -c '{state, reason, best, seed, speedup, speedup_detail}' <<<"$JS")"
S=$(jq -r .seed.candidate <<<"$JS")
B=$(jq -r .best.candidate <<<"$JS")
check "the tune job succeeded on its budget" test "$(jq -r .state <<<"$JS")" = succeeded
if [ "$B" = "$S" ]; then
    check "no version beat the seed: ratio 1 with the note, no final evaluation" \
        test "$(jq -r '[.speedup_detail.ratio, .speedup_detail.note, .evaluations.final] | join("|")' <<<"$JS")" = "1|no version beat the seed|0"
else
    FE=$(q "SELECT id || ' ' || candidate_id || ' ' || against_id || ' ' || state || ' ' || consumed FROM evaluations WHERE job_id = $J AND purpose = 'final'")
    check "one final evaluation: the best against the seed, done, not consumed" test "${FE#* }" = "$B $S done false"
    check "the budget counts the search only" \
        test "$(jq -r '[.evaluations.done, .evaluations.budget, .evaluations.final] | join(" ")' <<<"$JS")" = "6 6 1"
    if [ "$(q "SELECT result ? 'paired' FROM evaluations WHERE id = ${FE%% *}")" = t ]; then
        # paired when measured (the `pair` branch's worker)
        check "paired when measured: the speedup is the final paired ratio with its interval" \
            test "$(jq -r '[.speedup_detail.paired, (.speedup_detail.low | type), (.speedup_detail.ci | length), .speedup == .speedup_detail.ratio] | join(" ")' <<<"$JS")" = "true number 2 true"
    else
        check "unpaired (no paired member yet): the speedup is best/seed of the search, paired false, with the reason" \
            test "$(jq -r '[.speedup_detail.paired, .speedup_detail.reason, ((.speedup_detail.ratio - .best.aggregate / .seed.aggregate) | fabs < 1e-9)] | join("|")' <<<"$JS")" = \
                 "false|the final evaluation has no paired measurement|true"
    fi
    check "the final measurement's cost is in the job's accounting" \
        test "$(q "SELECT abs(j.cpu_seconds - (SELECT sum(k.cpu_s) FROM evaluations e, avo_eval_cost(e.target, e.result) k WHERE e.job_id = j.id AND (e.consumed OR e.purpose = 'final'))) < 1e-6 FROM jobs j WHERE id = $J")" = t
fi
timeout 60 avoctl watch "$J" >"$T/watch2.out" 2>&1
check "avoctl watch's last line is the summary with the speedup" bash -c 'tail -1 "$0" | grep -q "speedup"' "$T/watch2.out"

[ "$FAILS" -eq 0 ]
