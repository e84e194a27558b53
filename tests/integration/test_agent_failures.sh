#!/usr/bin/env bash
# The agent operator under failing providers (issue 19), with the fake
# provider (tests/fakes/fake_llm.py), which refuses what the real services
# refuse: empty answers in both wire formats and a provider that fails
# after each step's first answer fail the job by the failure rule, with the
# backoff between failing steps (request counts and spacing from the fake's
# log); a token budget stops requests before one could overrun it; a step
# after a commit starts from the committed head; the OpenAI output-limit
# field follows the provider's max_tokens_field; a key file others can read
# is refused at start, at reload and at submission.
source "$(dirname "$0")/lib.sh"
q() { psql_avo "$1"; }
api() { curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"; }
SEEDSRC="$ROOT/kernels/cpu/sgemm/seed.c"
export AVO_TEST_KEY="sk-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

start_fake() { start_fake_llm "$1" "$2" "$3" "$SEEDSRC" 0 "${@:4}"; }  # NAME FORMAT SCENARIO [OPTIONS]
start_fake eo openai empty --loop
start_fake ea anthropic empty --loop
start_fake fo openai fail_after_one --loop
start_fake bu openai budget --loop
start_fake ca anthropic commit_then_step
start_fake co openai commit_then_step --refuse-max-tokens
printf '%s\n' "$AVO_TEST_KEY" >"$T/key"
chmod 644 "$T/key"
prov() {  # NAME KIND PORT_OR_URL [EXTRA JSON FIELDS]
    echo "{\"name\": \"$1\", \"kind\": \"$2\", \"base_url\": \"$3\", \"model\": \"fake\", \"api_key_env\": \"AVO_TEST_KEY\",
           \"max_retries\": 0, \"timeout_s\": 30${4:+, $4}},"
}
cat >"$T/providers.json" <<JSON
[
 $(prov empty-openai openai "http://127.0.0.1:$PORT_eo/v1")
 $(prov empty-anthropic anthropic "http://127.0.0.1:$PORT_ea")
 $(prov after-one openai "http://127.0.0.1:$PORT_fo/v1")
 $(prov budget-edge openai "http://127.0.0.1:$PORT_bu/v1" '"max_tokens": 1000')
 $(prov commit-anthropic anthropic "http://127.0.0.1:$PORT_ca")
 $(prov commit-openai openai "http://127.0.0.1:$PORT_co/v1" '"max_tokens_field": "max_completion_tokens"')
 {"name": "keyfile", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "fake", "api_key_file": "$T/key"}
]
JSON

# --- keys are checked at start, reload and submission ------------------------------
avod --providers "$T/providers.json" >"$T/refused.out" 2>&1
check "avod refuses to start with a key file others can read, naming the provider, the file and its mode" \
    bash -c '[ "$1" = 2 ] && grep -q "providers .*\[6\] (keyfile): API key: $2 must be owned by uid [0-9]* and readable by its owner only (chmod 600); it is uid [0-9]*, mode 644" "$0"' \
    "$T/refused.out" "$?" "$T/key"
chmod 600 "$T/key"
check "avod starts once the key file is private" start_avod --providers "$T/providers.json"
start_worker

agent_job() {  # PROVIDER EVALS [EXTRA AGENT FIELDS] [EXTRA BUDGET FIELDS] -> job id
    api POST /v1/jobs "{\"problem\": \"cpu/sgemm\", \"operator\": \"agent\",
                        \"agent\": {\"provider\": \"$1\", \"backoff_s\": 1${3:+, $3}},
                        \"budget\": {\"evaluations\": $2${4:+, $4}}}" | jq -r .id
}
export -f q psql_avo
wait_job() { wait_for "$2" "case \$(q \"SELECT state FROM jobs WHERE id = $1\") in succeeded|failed|cancelled) true;; *) false;; esac"; }

chmod 640 "$T/key"
echo '{"problem": "cpu/sgemm", "operator": "agent", "agent": {"provider": "keyfile"}}' >"$T/keyjob.json"
avoctl submit "$T/keyjob.json" >"$T/keyjob.out" 2>&1
check "a job naming a provider whose key file became readable by others is refused at submission, saying why" \
    bash -c '[ "$1" != 0 ] && grep -q "agent.provider: provider .keyfile. cannot be used: API key: .* mode 640" "$0"' \
    "$T/keyjob.out" "$?"
kill -HUP "$AVOD_PID"
check "a reload with that key file is refused, naming the provider and the mode; the old configuration stays" \
    wait_for 10 "grep -q 'reload failed, the running configuration stays: providers .*(keyfile): API key: .*mode 640' '$T/avod.log'"
chmod 600 "$T/key"
KJ=$(avoctl --json submit "$T/keyjob.json" 2>/dev/null | jq -r .id)
check "with the key private again the job is accepted" test "$KJ" -gt 0
api POST "/v1/jobs/$KJ/cancel" >/dev/null

JE1=$(agent_job empty-openai 10)
JE2=$(agent_job empty-anthropic 10)
JF=$(agent_job after-one 10)
JB=$(agent_job budget-edge 10 "" '"tokens": 20000')
JC1=$(agent_job commit-anthropic 3)
JC2=$(agent_job commit-openai 3)
for j in $JE1 $JE2 $JF $JB $JC1 $JC2; do wait_job "$j" "${AGENT_WAIT_S:-180}"; done

# gaps LOG: the seconds between consecutive requests in the fake's log
gaps() { jq -s -r '[.[].t] | [range(1; length) as $i | (.[$i] - .[$i - 1])] | map(tostring) | join(" ")' "$1"; }
spaced() {  # LOG N_PER_STEP: N steps' requests, 1 s then 2 s apart at least (backoff_s 1, doubled)
    local g; read -r -a g <<<"$(gaps "$1")"
    [ "${#g[@]}" = $((3 * $2 - 1)) ] &&
        awk -v a="${g[$(($2 - 1))]}" -v b="${g[$((2 * $2 - 1))]}" 'BEGIN { exit !(a >= 1.0 && b >= 2.0) }'
}
export -f gaps spaced
for fmt in openai anthropic; do
    J=$([ $fmt = openai ] && echo "$JE1" || echo "$JE2"); log=$T/$([ $fmt = openai ] && echo eo || echo ea).log
    check "$fmt empty answers: the job fails by the failure rule, saying why" \
        test "$(q "SELECT state || ': ' || reason FROM jobs WHERE id = $J")" = "failed: agent: 3 steps in a row failed (provider errors or unusable answers); the last: the model answered without a tool call 3 times in a row (3 of them empty)"
    check "$fmt empty answers: 9 requests (3 steps of 3 answers), none refused: no empty assistant turn was sent" \
        bash -c '[ "$(wc -l <"$0")" = 9 ] && [ "$(jq -s "map(select(.rejected != null)) | length" "$0")" = 0 ]' "$log"
    check "$fmt empty answers: each one is nudged, saying it was empty" \
        bash -c 'sed -n 2p "$0" | grep -q "Your answer was empty: no text and no tool call"' "$log"
    check "$fmt empty answers: failing steps are spaced by the backoff (>= 1 s, then >= 2 s)" spaced "$log" 3
    check "$fmt empty answers: every request is in the transcript with its tokens" \
        test "$(q "SELECT count(*) || ':' || (sum(in_tokens + out_tokens) = (SELECT tokens FROM jobs WHERE id = $J)) FROM llm_calls WHERE job_id = $J")" = "9:true"
done

check "a provider that fails after each step's first answer fails the job after 3 steps, saying why" \
    test "$(q "SELECT state || ': ' || reason FROM jobs WHERE id = $JF")" = "failed: agent: 3 steps in a row failed (provider errors or unusable answers); the last: provider after-one: after-one refused the request (400): scripted failure after one answer"
check "... after 6 requests (an answer and a failure per step), spaced by the backoff" \
    bash -c '[ "$(wc -l <"$0")" = 6 ] && spaced "$0" 2' "$T/fo.log"

check "budget edge: the job ends on its token budget before a request could overrun it" \
    test "$(q "SELECT state || ':' || (reason LIKE 'token budget reached: the next request could use up to % tokens (a prompt of about %, up to 1000 of output), % of 20000 are left; not sent') FROM jobs WHERE id = $JB")" = "succeeded:true"
check "budget edge: the tokens used stay within the budget, recorded per call, and every request sent is recorded" \
    test "$(q "SELECT (j.tokens <= 20000 AND j.tokens = sum(c.in_tokens + c.out_tokens) AND count(*) >= 3)::text || ':' || count(*) FROM jobs j JOIN llm_calls c ON c.job_id = j.id WHERE j.id = $JB GROUP BY j.tokens")" = "true:$(wc -l <"$T/bu.log")"
check "budget edge: a budget_reached event carries what the next request could have used" \
    test "$(q "SELECT count(*) FROM events WHERE job_id = $JB AND kind = 'budget_reached' AND (data->>'next_request')::float > (data->>'limit')::float - (data->>'used')::float")" = 1

for fmt in anthropic openai; do
    J=$([ $fmt = openai ] && echo "$JC2" || echo "$JC1"); log=$T/$([ $fmt = openai ] && echo co || echo ca).log
    C1=$(q "SELECT id FROM candidates WHERE job_id = $J AND operator = 'agent' AND committed")
    check "$fmt commit then step: the job used its evaluations, the first step's version committed" \
        bash -c '[ "$(q "SELECT state || '"': '"' || reason FROM jobs WHERE id = $0")" = "succeeded: evaluation budget reached" ] && [ -n "$1" ]' "$J" "$C1"
    check "$fmt commit then step: the next step's first message names the committed version as its working copy" \
        bash -c 'sed -n 3p "$0" | grep -q "Your working copy is candidate $1, the current version of island 0"' "$log" "$C1"
    check "$fmt commit then step: every agent candidate's parent is the island's head when its step started" \
        test "$(q "SELECT count(*) || ':' || bool_and(c.parent_id = (SELECT max(h.id) FROM candidates h WHERE h.job_id = c.job_id AND h.committed AND h.created_at < s.started_at)) FROM candidates c JOIN agent_steps s ON s.job_id = c.job_id AND c.created_at BETWEEN s.started_at AND s.ended_at WHERE c.job_id = $J AND c.operator = 'agent'")" = "2:true"
done
check "openai max_tokens_field: the bodies carry max_completion_tokens only, and the strict server refused none" \
    test "$(jq -s 'map(select(.rejected == null and (.body | fromjson | has("max_completion_tokens") and (has("max_tokens") | not)))) | length' "$T/co.log")" = "$(wc -l <"$T/co.log")"
check "avod keeps serving" avoctl health

[ "$FAILS" -eq 0 ]
