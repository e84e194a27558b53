#!/usr/bin/env bash
# The agent operator end to end (issue 7), with a fake provider on loopback
# (tests/fakes/fake_llm.py) speaking each wire format: a scripted step that
# reads the problem and the seed, writes a version that does not compile,
# evaluates it, fixes it with edit_source, evaluates again and commits a
# faster sgemm; then a hostile step (malformed or unknown tool calls, a
# huge argument, answers without tools, a 429, a cut-off answer) that ends
# with give_up; a provider that is not configured, and one without its key.
source "$(dirname "$0")/lib.sh"
q() { psql_avo "$1"; }
api() { curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"; }
SEEDSRC="$ROOT/kernels/cpu/sgemm/seed.c"
export AVO_TEST_KEY="sk-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

start_fake() { start_fake_llm "$1" "$2" "$3" "$SEEDSRC" "$4"; }  # NAME FORMAT SCENARIO COMMIT_ID
start_fake oa openai step 3
start_fake an anthropic step 6
start_fake oah openai hostile 0
start_fake anh anthropic hostile 0
start_fake tb openai step 0
start_fake cp openai compact 9
start_fake sv anthropic supervise 0
start_fake fl openai failing 0
cat >"$T/providers.json" <<JSON
[
 {"name": "fake-openai", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_oa/v1", "model": "fake-1",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 2, "timeout_s": 30, "price_per_mtok": {"input": 3, "output": 15}},
 {"name": "fake-anthropic", "kind": "anthropic", "base_url": "http://127.0.0.1:$PORT_an", "model": "fake-2",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 2, "timeout_s": 30, "price_per_mtok": {"input": 3, "output": 15}},
 {"name": "hostile-openai", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_oah/v1", "model": "fake-1",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 2, "timeout_s": 30},
 {"name": "hostile-anthropic", "kind": "anthropic", "base_url": "http://127.0.0.1:$PORT_anh", "model": "fake-2",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 2, "timeout_s": 30},
 {"name": "budgeted", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_tb/v1", "model": "fake-1",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 0, "timeout_s": 30},
 {"name": "compacting", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_cp/v1", "model": "fake-1",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 0, "timeout_s": 30, "context_tokens": 1200},
 {"name": "supervised", "kind": "anthropic", "base_url": "http://127.0.0.1:$PORT_sv", "model": "fake-2",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 0, "timeout_s": 30},
 {"name": "failing", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_fl/v1", "model": "fake-1",
  "api_key_env": "AVO_TEST_KEY", "max_retries": 2, "timeout_s": 1}
]
JSON
sed 's/^]$/,{"name": "keyless", "kind": "openai", "model": "fake-1", "api_key_env": "AVO_TEST_NO_SUCH_KEY"}]/' \
    "$T/providers.json" >"$T/keyless.json"
avod --providers "$T/keyless.json" >"$T/keyless.out" 2>&1
check "a provider without its key stops avod at start, naming the provider and the variable" \
    bash -c '[ "$1" = 2 ] && grep -q "providers .*\[8\] (keyless): API key: environment variable AVO_TEST_NO_SUCH_KEY is not set" "$0"' \
    "$T/keyless.out" "$?"
check "avod starts with the providers file" start_avod --providers "$T/providers.json"
start_worker

agent_job() {  # PROVIDER EVALS -> job id
    api POST /v1/jobs "{\"problem\": \"cpu/sgemm\", \"operator\": \"agent\", \"agent\": {\"provider\": \"$1\"},
                        \"budget\": {\"evaluations\": $2}}" | jq -r .id
}
wait_job() { wait_for "$2" "case \$(q \"SELECT state FROM jobs WHERE id = $1\") in succeeded|failed|cancelled) true;; *) false;; esac"; }

step_checks() {  # LABEL JOB SEED AGENT_CANDS LOG
    local label=$1 job=$2 seed=$3 broken=$4 fixed=$5 log=$6
    check "$label: the job succeeds at its evaluation budget" \
        test "$(q "SELECT state || ': ' || reason FROM jobs WHERE id = $job")" = "succeeded: evaluation budget reached"
    check "$label: the version that does not compile is an attempt, not committed" \
        test "$(q "SELECT operator || ':' || outcome || ':' || committed FROM candidates WHERE id = $broken")" = "agent:compile_error:false"
    check "$label: the fixed version is committed, faster than the seed, with the agent's notes, parent and diff" \
        test "$(q "SELECT c.committed AND c.aggregate > s.aggregate AND c.parent_id = $seed AND c.notes LIKE 'i-k-j loop order%' AND c.diff LIKE '%+#define ORDER 1%' FROM candidates c, candidates s WHERE c.id = $fixed AND s.id = $seed")" = t
    check "$label: it is the job's best" test "$(q "SELECT best_candidate FROM jobs WHERE id = $job")" = "$fixed"
    check "$label: one step, committed, 4 turns, 2 evaluations" \
        test "$(q "SELECT state || ':' || turns || ':' || evaluations FROM agent_steps WHERE job_id = $job")" = "committed:4:2"
    check "$label: every request and answer is stored, with tokens and cost, and the job's totals add up" \
        test "$(q "SELECT count(*) = 4 AND sum(in_tokens + out_tokens) = (SELECT tokens FROM jobs WHERE id = $job) AND abs(sum(cost_usd) - (SELECT cost_usd FROM jobs WHERE id = $job)) < 1e-9 AND bool_and(response IS NOT NULL) FROM llm_calls WHERE job_id = $job")" = t
    check "$label: the first message carries the problem, the lineage and the working copy" \
        bash -c 'sed -n 1p "$0" | grep -q "The lineage so far" && sed -n 1p "$0" | grep -q "island_best" &&
                 sed -n 1p "$0" | grep -q "Your working copy is candidate $1"' "$log" "$seed"
    check "$label: the provider saw the tool results: the problem, the compiler's error, compile, diff, the score" \
        bash -c 'sed -n 2p "$0" | grep -q "int sgemm(void" && sed -n 3p "$0" | grep -q "outcome compile_error" &&
                 sed -n 4p "$0" | grep -q "\"compiles" && sed -n 4p "$0" | grep -q "+#define ORDER 1" &&
                 sed -n 4p "$0" | grep -q "outcome ok, aggregate"' "$log"
    if [ "$(id -u)" = 0 ]; then
        check "$label: microbenchmarks ran on a worker in the sandbox (as nobody), a broken one is reported, CUDA on a CPU job refused" \
            bash -c 'sed -n 3p "$0" | grep -q "microbenchmark [0-9]*: ran, exit code 0" &&
                     sed -n 3p "$0" | grep -q "probe: 499999500000 uid 65534" &&
                     sed -n 3p "$0" | grep -q "does not compile" && sed -n 3p "$0" | grep -q "which have no GPU; write it in c"' "$log"
    else
        check "$label: a worker that cannot drop privileges refuses to run microbenchmarks, saying why" \
            bash -c 'sed -n 3p "$0" | grep -q "did not run: microbenchmarks run only on workers started as root"' "$log"
    fi
    check "$label: the programs are stored, not candidates, and cost no evaluation" \
        test "$(q "SELECT count(*) FILTER (WHERE state = 'done') || ':' || count(*) FROM programs WHERE job_id = $job")" = "2:2"
    check "$label: profile and disassemble answered from the evaluated version and its object" \
        bash -c 'sed -n 4p "$0" | grep -q "counters of candidate $1, configuration" &&
                 sed -n 4p "$0" | grep -Eq "instructions? match" && sed -n 4p "$0" | grep -q "== sgemm"' "$log" "$fixed"
    check "$label: the key went to the provider and nowhere into the database" \
        bash -c 'grep -q REDACTED "$0" && ! pg_dump_avo | grep -q "$AVO_TEST_KEY"' "$log"
}
pg_dump_avo() { q "SELECT string_agg(request::text || response::text, '') FROM llm_calls"; q "SELECT string_agg(spec::text, '') FROM jobs"; }
export -f pg_dump_avo q psql_avo

# --- a full step, OpenAI Chat Completions --------------------------------------
J1=$(agent_job fake-openai 3)
wait_job "$J1" 180
step_checks openai "$J1" 1 2 3 "$T/oa.log"
check "openai: requests go to /v1/chat/completions with the tools declared" \
    bash -c 'head -1 "$0" | jq -e ".path == \"/v1/chat/completions\" and (.body | fromjson | .tools | length) == 15" | grep -qx true' "$T/oa.log"

avoctl transcript "$J1" >"$T/tr.out"
check "avoctl transcript shows the step, each turn's calls and results" \
    bash -c 'grep -q "^step 1 (island 0): committed after 4 turns, 2 evaluations, [0-9]* tokens" "$0" &&
             grep -q "^  turn 1: fake-openai/fake-1, 1001 + 51 tokens" "$0" && grep -q "^    -> write_source " "$0" &&
             grep -A1 "^    tool result (error):" "$0" | grep -q "candidate 2: outcome compile_error" &&
             grep -A1 "^    tool result:" "$0" | grep -q "candidate 3: outcome ok, aggregate" &&
             grep -q "^    -> commit {.*\"candidate\":3}" "$0" && grep -q "^job total: [0-9]* tokens" "$0"' "$T/tr.out"
avoctl transcript "$J1" --step 2 >"$T/tr2.out"
check "avoctl transcript --step N shows one step (none here)" grep -q "no agent steps" "$T/tr2.out"
avoctl transcript "$J1" --step 0 >/dev/null 2>&1
check "a bad --step is a usage error (exit 2)" test $? = 2
avoctl transcript 99999 >"$T/tr3.out" 2>&1
check "the transcript of a missing job names it (exit 1)" bash -c '[ "$1" = 1 ] && grep -q "no job 99999" "$0"' "$T/tr3.out" "$?"

# --- the same step, Anthropic Messages -----------------------------------------
J2=$(agent_job fake-anthropic 3)
wait_job "$J2" 180
step_checks anthropic "$J2" 4 5 6 "$T/an.log"
check "anthropic: requests go to /v1/messages with tool_use/tool_result blocks and prompt caching" \
    bash -c 'sed -n 2p "$0" | jq -e "(.path == \"/v1/messages\") and (.body | fromjson | [.messages[].content | arrays | .[] | .type] | index(\"tool_result\") != null) and (.body | test(\"cache_control\"))" | grep -qx true' "$T/an.log"

# --- a model with a small context window: older turns are compacted ----------------
J5=$(agent_job compacting 3)
wait_job "$J5" 180
check "compaction: the step still commits its fixed version" \
    test "$(q "SELECT state || ':' || (reason LIKE 'committed candidate 9 %') FROM agent_steps WHERE job_id = $J5")" = "committed:true"
check "compaction: the model summarised the older turns (one request without tools, the dropped turns in it)" \
    bash -c 'sed -n 4p "$0" | jq -e ".body | fromjson | (has(\"tools\") | not) and (.messages[0].content | test(\"keep the notes\")) and (.messages[1].content | test(\"\\\\[call\\\\] read_candidate\"))" | grep -qx true' "$T/cp.log"
check "compaction: the summary replaced them in the first message of the next request" \
    bash -c 'sed -n 5p "$0" | grep -q "summarised by the model" && sed -n 5p "$0" | grep -q "SUMMARY-MARKER" &&
             ! sed -n 5p "$0" | grep -q "Let me look at the problem first"' "$T/cp.log"
check "compaction: a failed summary request falls back to one line per turn; both are events" \
    test "$(q "SELECT string_agg(data->>'by', ',' ORDER BY id) FROM events WHERE job_id = $J5 AND kind = 'agent_compacted'")" = "model,mechanical"

# --- a stalled search: after three steps without a commit, a supervisor call --------
J6=$(agent_job supervised 5)
wait_for 120 "[ \"\$(q \"SELECT count(*) FROM agent_steps WHERE job_id = $J6 AND state = 'ended'\")\" -ge 4 ]"
api POST "/v1/jobs/$J6/cancel" >/dev/null
check "supervisor: called after three steps without a commit, its call recorded as turn 0 of the fourth step" \
    bash -c 'sed -n 4p "$0" | grep -q "You supervise avo" && sed -n 4p "$0" | grep -q "3 steps in a row ended without a commit" &&
             [ "$(q "SELECT count(*) FROM llm_calls WHERE job_id = $1 AND turn = 0")" -ge 1 ]' "$T/sv.log" "$J6"
check "supervisor: its directions are an event and open the next step's first message" \
    bash -c 'sed -n 5p "$0" | grep -q "A supervisor reviewed the search so far" && sed -n 5p "$0" | grep -q "Stop giving up. Try ORDER=1" &&
             [ "$(q "SELECT data->>'"'"'directions'"'"' FROM events WHERE job_id = $1 AND kind = '"'"'agent_supervised'"'"'")" = "Stop giving up. Try ORDER=1 with BM=32 BN=256 BK=64 UNROLL=4 first." ]' "$T/sv.log" "$J6"

# A tune job beside the agent jobs that follow (after the scripted ones, whose
# candidate ids the scripts know): the daemon serves both kinds at once.
TUNE=$(avoctl --json submit --problem cpu/softmax --evaluations 6 | jq -r .id)

# --- hostile answers: each gets an error the model can act on; the step ends by give_up
for fmt in openai anthropic; do
    prov=hostile-$fmt
    log=$T/$([ $fmt = openai ] && echo oah || echo anh).log
    # the 2 MiB argument goes back in every later request (about 524,000
    # tokens at 4 bytes a token): a step limit above it lets the step go on
    J=$(api POST /v1/jobs "{\"problem\": \"cpu/sgemm\", \"operator\": \"agent\",
                            \"agent\": {\"provider\": \"$prov\", \"step_tokens\": 4000000}, \"budget\": {\"evaluations\": 5}}" | jq -r .id)
    wait_for 120 "[ \"\$(q \"SELECT count(*) FROM agent_steps WHERE job_id = $J AND state <> 'running'\")\" -ge 1 ]"
    api POST "/v1/jobs/$J/cancel" >/dev/null
    check "$fmt hostile: the step ends by give_up with its reason, having evaluated nothing" \
        test "$(q "SELECT state || ':' || reason || ':' || evaluations FROM agent_steps WHERE job_id = $J ORDER BY id LIMIT 1")" = "ended:gave up: scripted hostile step:0"
    check "$fmt hostile: the bad arguments, the unknown tool and the huge argument are answered with errors" \
        bash -c 'sed -n 2p "$0" | grep -q "edit_source: \(the arguments are not a JSON object\|missing argument\)" &&
                 sed -n 3p "$0" | grep -q "there is no tool .rm_rf.; the tools are: problem" &&
                 sed -n 4p "$0" | grep -q "write_source: .source. is 2097152 bytes; it must be 1 to 1048576"' "$log"
    check "$fmt hostile: an answer without a tool call is nudged, a 429 is retried, a cut-off answer is told" \
        bash -c 'sed -n 5p "$0" | grep -q "Continue by calling a tool" && sed -n 6p "$0" | grep -q "Continue by calling a tool" &&
                 sed -n 7p "$0" | grep -q "cut off by the output token limit"' "$log"
done

# --- configuration errors ------------------------------------------------------------
out=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "operator": "agent", "agent": {"provider": "nope"}}')
check "an agent job for a provider avod does not have is refused, naming the configured ones" \
    grep -q "agent.provider: no provider 'nope' is configured in avod (configured: fake-openai, fake-anthropic" <<<"$out"
out=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "operator": "agent"}' | jq -r .error.message)
check "an agent job without a provider is refused" grep -q 'agent: an agent job needs {"provider": NAME}' <<<"$out"
out=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "agent": {"provider": "fake-openai"}}' | jq -r .error.message)
check "agent settings on a tune job are refused" grep -q "agent: applies to agent jobs only" <<<"$out"
J4=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "operator": "agent", "agent": {"provider": "budgeted"},
                         "budget": {"evaluations": 10, "tokens": 1000}}' | jq -r .id)
wait_job "$J4" 120
check "a token budget smaller than one request ends the job before any request is sent, saying so" \
    test "$(q "SELECT j.state || ':' || (j.reason LIKE 'token budget reached: the next request could use up to % tokens (a prompt of about %, up to 4096 of output), 1000 of 1000 are left; not sent') || ':' || (s.reason = j.reason) || ':' || (SELECT count(*) FROM llm_calls WHERE job_id = j.id) FROM jobs j JOIN agent_steps s ON s.job_id = j.id WHERE j.id = $J4")" = "succeeded:true:true:0"
out=$(avoctl submit "$ROOT/kernels/gemm_bf16/agent-job.json" 2>&1)
check "the example agent job file of docs/agent.md is a valid spec (refused here only for its provider)" \
    grep -q "agent.provider: no provider 'claude' is configured in avod" <<<"$out"
J7=$(agent_job failing 5)
wait_for 120 "[ \"\$(q \"SELECT count(*) FROM agent_steps WHERE job_id = $J7 AND state = 'ended'\")\" -ge 2 ]"
api POST "/v1/jobs/$J7/cancel" >/dev/null
check "repeated 500s end a step after the retries, saying so; the next step's answers time out, saying so" \
    test "$(q "SELECT string_agg((reason = 'provider failing: failing answered 500 after 3 attempts: upstream overloaded' OR reason ~ '^provider failing: failing unreachable after 3 attempts: .*[Tt]imed? ?out')::text, ',' ORDER BY id) FROM (SELECT * FROM agent_steps WHERE job_id = $J7 ORDER BY id LIMIT 2) s"):$(q "SELECT count(*) FROM agent_steps WHERE job_id = $J7 AND reason LIKE '%unreachable%'")" = "true,true:1"
timeout 120 avoctl watch "$TUNE" >/dev/null 2>&1
check "the tune job submitted beside them succeeded meanwhile" test "$(q "SELECT state FROM jobs WHERE id = $TUNE")" = succeeded
check "avod keeps serving" avoctl health
check "the other jobs' lineage is intact" test "$(q "SELECT count(*) FROM candidates WHERE job_id IN ($J1, $J2) AND committed")" = 4

[ "$FAILS" -eq 0 ]
