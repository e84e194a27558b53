#!/usr/bin/env bash
# Compare tasks (issue 20, point 8; sql/015_compare.sql): POST /v1/compare
# queues one stored candidate measured paired against another as an
# evaluation of purpose 'compare', which any worker of the target claims
# with the against's source and the compare's confidence; GET
# /v1/compare/{id} and `avoctl compare A B [--confidence C] [--wait]` show
# the ratio and its interval. A registered fake worker claims and completes
# through avo_claim/avo_complete as a worker would, so every figure is
# known. Checked: the bad input (unknown candidate or against, two
# problems, a bad confidence, unknown fields), one compare per pair while
# queued, the claim, the result in the API and in avoctl's line, a failed
# compare's exit 1 and reason, and that a compare touches no job: no best,
# island, candidate, event or count changes. The real worker's path runs in
# test_campaign.sh (the nightly regression check).
source "$(dirname "$0")/lib.sh"

api() {  # METHOD PATH [BODY]: the daemon's JSON answer
    curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
code() {  # METHOD PATH [BODY]: the HTTP status
    curl -s -o /dev/null -w '%{http_code}' --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
q() { psql_avo "$1"; }
job_state() { q "SELECT state FROM jobs WHERE id = $1"; }
queued() { q "SELECT count(*) FROM evaluations WHERE job_id = $1 AND state = 'queued'"; }
# seed_job PROBLEM AGGREGATE: a job whose seed the fake worker scores; it
# ends succeeded with the seed as its best. Echoes the seed candidate.
seed_job() {
    local j e
    j=$(api POST /v1/jobs "{\"problem\": \"$1\", \"budget\": {\"evaluations\": 1}}" | jq -r .id)
    wait_for 30 "[ \$(queued $j) -ge 1 ]" || { echo "no seed evaluation for job $j" >&2; return 1; }
    e=$(q "SELECT id FROM avo_claim($FW, 'cpu', 60)")
    q "SELECT avo_complete($e, $FW, 'ok', $2, '{\"outcome\": \"ok\", \"aggregate\": $2, \"unit\": \"GFLOP/s\", \"configs\": []}'::jsonb)" >/dev/null
    wait_for 30 "[ \"\$(job_state $j)\" = succeeded ]" || { echo "job $j did not end" >&2; return 1; }
    q "SELECT seed_candidate FROM jobs WHERE id = $j"
}
# The state of everything a compare must not touch.
untouched() {
    q "SELECT string_agg(concat_ws(',', j.id, j.state, j.best_candidate, j.commits, j.speedup, j.gpu_seconds,
                                   j.cpu_seconds, (SELECT count(*) FROM events WHERE job_id = j.id),
                                   (SELECT string_agg(concat_ws(':', i.idx, i.best_candidate, i.best), ';') FROM islands i WHERE i.job_id = j.id),
                                   (SELECT string_agg(concat_ws(':', c.id, c.outcome, c.aggregate, c.committed), ';') FROM candidates c WHERE c.job_id = j.id),
                                   (avo_job_json(j.id)->'evaluations')::text, (avo_candidate_json(j.best_candidate, false)->>'evaluation')),
                      '|' ORDER BY j.id) FROM jobs j"
}

K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
check "avod starts" start_avod --kernels "$K"
FW=$(q "INSERT INTO workers (host, pid, target, devices) VALUES ('fake', 1, 'cpu', '[]') RETURNING id")
A=$(seed_job cpu/sgemm 10)
B=$(seed_job cpu/sgemm 11)
X=$(seed_job cpu/softmax 5)
check "three finished jobs with a best each (candidates $A, $B, $X)" bash -c '[ "$0" -gt 0 ] && [ "$1" -gt 0 ] && [ "$2" -gt 0 ]' "$A" "$B" "$X"
BEFORE=$(untouched)

# --- bad input: each refused naming the field
bad() {  # STATUS BODY MESSAGE-PART
    local out st
    out=$(api POST /v1/compare "$2")
    st=$(code POST /v1/compare "$2")
    check "POST /v1/compare $2 -> $1 naming the cause ($(jq -r .error.message <<<"$out"))" \
        bash -c '[ "$0" = "$1" ] && jq -e --arg m "$2" ".error.message | contains(\$m)" <<<"$3" >/dev/null' "$st" "$1" "$3" "$out"
}
bad 404 "{\"candidate\": 999999, \"against\": $A}" "candidate: no candidate 999999"
bad 404 "{\"candidate\": $A, \"against\": 999999}" "against: no candidate 999999"
bad 400 "{\"candidate\": $A, \"against\": $X}" "against: candidate $X is of problem cpu/softmax and candidate $A of cpu/sgemm"
bad 400 "{\"candidate\": $A, \"against\": $B, \"confidence\": 1}" "confidence: a number in (0, 1)"
bad 400 "{\"candidate\": $A, \"against\": $B, \"confidence\": 0}" "confidence: a number in (0, 1)"
bad 400 "{\"candidate\": $A, \"against\": $B, \"confidence\": \"high\"}" "confidence: a number in (0, 1)"
bad 400 "{\"against\": $B}" "candidate: a candidate id, a positive integer (missing)"
bad 400 "{\"candidate\": $A, \"against\": -3}" "against: a candidate id, a positive integer"
bad 400 "{\"candidate\": $A, \"against\": $B, \"speed\": 1}" "speed: unknown field"
bad 400 "[1]" "expected a JSON object"
out=$(avoctl compare "$A" "$X" 2>&1); rc=$?
check "avoctl compare of two problems: exit 1 with the daemon's reason ($rc)" \
    bash -c '[ "$0" = 1 ] && grep -q "a paired comparison needs one problem" <<<"$1"' "$rc" "$out"
out=$(avoctl compare "$A" "$B" --confidence 1.5 2>&1); rc=$?
check "avoctl compare --confidence 1.5: a usage error naming the flag ($rc)" \
    bash -c '[ "$0" = 2 ] && grep -q "\-\-confidence: a number in (0, 1)" <<<"$1"' "$rc" "$out"
check "nothing was queued by the refused requests" test "$(q "SELECT count(*) FROM evaluations WHERE purpose = 'compare'")" = 0

# --- a compare queued, claimed and measured
C=$(api POST /v1/compare "{\"candidate\": $B, \"against\": $A, \"confidence\": 0.9}")
CID=$(jq -r .id <<<"$C")
ST=$(code POST /v1/compare "{\"candidate\": $B, \"against\": $A, \"confidence\": 0.9}")
check "POST /v1/compare: 202, queued, the pair, its problem, target and confidence" \
    bash -c '[ "$3" = 202 ] &&
             jq -e --argjson a "$2" --argjson b "$1" ".state == \"queued\" and .candidate == \$b and .against == \$a and
                 .problem == \"cpu/sgemm\" and .target == \"cpu\" and .confidence == 0.9 and .paired == null" <<<"$0" >/dev/null' \
    "$C" "$B" "$A" "$ST"
check "the same pair at the same confidence while queued is one compare, not two" \
    test "$(q "SELECT count(*) || ' ' || min(id) FROM evaluations WHERE purpose = 'compare'")" = "1 $CID"
E1=$(q "SELECT min(id) FROM evaluations")
check "GET /v1/compare/$CID answers it; a search evaluation is no compare (404)" \
    bash -c '[ "$0" = queued ] && [ "$1" = 404 ] && jq -e ".error.message == \"no compare $3\"" <<<"$2" >/dev/null' \
    "$(api GET /v1/compare/$CID | jq -r .state)" "$(code GET /v1/compare/$E1)" "$(api GET /v1/compare/$E1)" "$E1"
timeout 60 avoctl compare "$B" "$A" --confidence 0.9 --wait >"$T/wait.out" 2>&1 &
WAITER=$!
ROW=$(q "SELECT id || '|' || candidate_id || '|' || against_id || '|' || (against_source IS NOT NULL) || '|' || confidence
           FROM avo_claim($FW, 'cpu', 60)")
check "a worker claims it with the against's source and the compare's confidence" test "$ROW" = "$CID|$B|$A|true|0.9"
q "SELECT avo_complete($CID, $FW, 'ok', 11.2, '{\"outcome\": \"ok\", \"aggregate\": 11.2, \"unit\": \"GFLOP/s\", \"configs\": [],
   \"paired\": {\"against\": $A, \"method\": \"bootstrap-percentile\", \"confidence\": 0.9, \"ratio\": 1.023,
                \"low\": 1.013, \"ci\": [1.011, 1.035], \"configs\": []}}'::jsonb)" >/dev/null
wait "$WAITER"; rc=$?
check "avoctl compare --wait, queued before the claim, prints the ratio and interval and exits 0 ($rc)" \
    bash -c '[ "$0" = 0 ] && grep -qx "candidate $1 vs $2: x1.023, 90% \[1.011, 1.035\]" "$3"' "$rc" "$B" "$A" "$T/wait.out"
api GET /v1/compare/$CID >"$T/done.json"
check "GET /v1/compare/$CID: done, the paired result whole" \
    jqt '.state == "done" and .outcome == "ok" and .paired.ratio == 1.023 and .paired.ci == [1.011, 1.035] and
         .paired.low == 1.013 and .unit == "GFLOP/s" and .finished_at != null' "$T/done.json"
check "avoctl --json compare queues another (the first is over) and prints the compare object" \
    bash -c 'avoctl --json compare "$0" "$1" | jq -e ".state == \"queued\" and .id > $2 and .confidence == 0.95" >/dev/null' "$B" "$A" "$CID"
C2=$(q "SELECT max(id) FROM evaluations WHERE purpose = 'compare'")
q "SELECT avo_complete(id, $FW, 'crash', 0, '{\"outcome\": \"crash\", \"detail\": \"segfault in call 3\", \"aggregate\": 0, \"configs\": []}'::jsonb)
     FROM avo_claim($FW, 'cpu', 60)" >/dev/null
check "a compare whose candidate crashed: state done, no paired" \
    test "$(api GET /v1/compare/$C2 | jq -c '[.state, .outcome, .paired]')" = '["done","crash",null]'
timeout 60 avoctl compare "$B" "$A" --wait >"$T/wait2.out" 2>&1 &
WAITER=$!
wait_for 30 "[ \$(q \"SELECT count(*) FROM evaluations WHERE purpose = 'compare' AND state = 'queued'\") = 1 ]"
q "SELECT avo_complete(id, $FW, 'ok', 11, '{\"outcome\": \"ok\", \"aggregate\": 11, \"configs\": [],
     \"paired\": {\"against\": $A, \"error\": \"the against does not compile: x.c:1: error\"}}'::jsonb)
     FROM avo_claim($FW, 'cpu', 60)" >/dev/null
wait "$WAITER"; rc=$?
check "avoctl compare --wait when the pairing failed: exit 1 ($rc) and why" \
    bash -c '[ "$0" = 1 ] && grep -q "candidate $1 vs $2: no paired measurement: the paired measurement failed: the against does not compile" "$3"' \
    "$rc" "$B" "$A" "$T/wait2.out"

# --- what a compare must not touch
AFTER=$(untouched); [ "$AFTER" = "$BEFORE" ] || { echo "# before: $BEFORE"; echo "# after:  $AFTER"; }
check "no job, island, candidate, event, count or cost changed; the candidates' API views are their search evaluations" \
    test "$(untouched)" = "$BEFORE"
check "a compare is never consumed: the engine applies nothing from it" \
    test "$(q "SELECT bool_or(consumed) FROM evaluations WHERE purpose = 'compare'")" = f
check "GET /v1/jobs/{id} counts no compare as a search or final evaluation" \
    test "$(api GET /v1/jobs/$(q "SELECT job_id FROM candidates WHERE id = $B") | jq -c '[.evaluations.done, .evaluations.final]')" = '[1,0]'
# A running job whose candidate has a finished compare: the completion of
# its next search result still wakes avod (sql/003's wake-up counts waiting
# results; an unconsumed compare must not count as one).
J=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "budget": {"evaluations": 3}}' | jq -r .id)
wait_for 30 "[ \$(queued $J) -ge 1 ]"
E=$(q "SELECT id FROM avo_claim($FW, 'cpu', 60)")
S=$(q "SELECT candidate_id FROM evaluations WHERE id = $E")
api POST /v1/compare "{\"candidate\": $S, \"against\": $A}" >/dev/null
q "SELECT avo_complete(id, $FW, 'ok', 10, '{\"outcome\": \"ok\", \"aggregate\": 10, \"configs\": [],
     \"paired\": {\"ratio\": 1, \"low\": 0.99, \"ci\": [0.98, 1.02]}}'::jsonb) FROM avo_claim($FW, 'cpu', 60)" >/dev/null
psql -X -A -t "host=$AVO_HOME/pg/run dbname=avo user=avo" -c "LISTEN avo_eval_done" \
    -c "SELECT avo_complete($E, $FW, 'ok', 10, '{\"outcome\": \"ok\", \"aggregate\": 10, \"configs\": []}'::jsonb)" \
    >"$T/notify.out" 2>&1
check "a finished compare of a running job's candidate does not hold back the job's next wake-up" \
    grep -q "notification \"avo_eval_done\" with payload \"$J\"" "$T/notify.out"
refuses_bogus_purpose() { ! q "UPDATE evaluations SET purpose = 'bogus' WHERE id = $CID" 2>/dev/null; }
check "the purpose check admits 'compare' and still refuses anything else" refuses_bogus_purpose
[ "$FAILS" -eq 0 ]
