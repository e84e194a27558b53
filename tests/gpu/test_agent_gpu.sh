#!/usr/bin/env bash
# The agent operator's GPU-side tools on a GPU host (issue 7): a scripted
# step (fake provider on loopback, OpenAI wire format) on gemm_bf16 that
# compiles and evaluates a version on the GPU worker, runs a CUDA
# microbenchmark in the worker's sandbox, reads the version's CUPTI counters
# (profile) and its SASS (disassemble: cuobjdump beside nvcc), and commits.
# Run by `make test-gpu` (tests/run.sh gpu) on a GPU host.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source tests/integration/lib.sh
source tests/gpu/bare-host-setup.sh >/dev/null
q() { psql_avo "$1"; }
PG_ARGS=()
[ -n "${AVO_PG_BINDIR:-}" ] && PG_ARGS+=(--pg-bindir "$AVO_PG_BINDIR")
[ -n "${AVO_PG_USER:-}" ] && PG_ARGS+=(--pg-user "$AVO_PG_USER")
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
SEED_NAME=$([ "$CC" = 9.0 ] && echo sm90)
SEEDSRC=kernels/gemm_bf16/$([ "$SEED_NAME" = sm90 ] && echo seed_sm90.cu || echo seed.cu)
export AVO_TEST_KEY="sk-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# A fresh database: the seed is candidate 1, the agent's version 2.
start_fake_llm gpu openai gpu "$SEEDSRC" 2
cat >"$T/providers.json" <<JSON
[{"name": "fake-openai", "kind": "openai", "base_url": "http://127.0.0.1:$PORT_gpu/v1",
  "model": "fake-1", "api_key_env": "AVO_TEST_KEY", "max_retries": 1, "timeout_s": 60}]
JSON
check "avod starts (embedded PostgreSQL) with the fake provider" start_avod "${PG_ARGS[@]}" --providers "$T/providers.json"
start_worker --target gpu --timeout 600
# avoctl, not curl: on a bare host our libraries on LD_LIBRARY_PATH would
# break the host's own curl.
SEED_SPEC=
[ -n "$SEED_NAME" ] && SEED_SPEC=", \"seed\": {\"name\": \"$SEED_NAME\"}"
cat >"$T/job.json" <<JSON
{"problem": "gemm_bf16", "operator": "agent", "agent": {"provider": "fake-openai"},
 "budget": {"evaluations": 2}$SEED_SPEC}
JSON
JOB=$(avoctl --json submit "$T/job.json" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))')
check "an agent job on gemm_bf16 is accepted (seed ${SEED_NAME:-default})" test -n "$JOB"
[ -n "$JOB" ] || exit 1
wait_for 900 "case \$(q \"SELECT state FROM jobs WHERE id = $JOB\") in succeeded|failed|cancelled) true;; *) false;; esac"
avoctl transcript "$JOB" >"$T/transcript.txt" 2>&1
[ -n "${OUT:-}" ] && cp "$T/transcript.txt" "$OUT/agent-gpu-transcript.txt" && cp "$T/gpu.log" "$OUT/agent-gpu-provider.log" &&
    cp "$T/worker.log" "$OUT/agent-gpu-worker.log"
check "the job succeeded at its evaluation budget" \
    test "$(q "SELECT state || ': ' || reason FROM jobs WHERE id = $JOB")" = "succeeded: evaluation budget reached"
STEP=$(q "SELECT state || ': ' || reason FROM agent_steps WHERE job_id = $JOB ORDER BY id LIMIT 1")
echo "# step 1: $STEP"
# The seed measured again: the noise-aware rule (docs/evaluation.md) commits
# it only as a significant gain; otherwise it is refused, saying so.
check "the step ended by the commit rule: committed, or refused (slower, or not a significant gain) and given up" \
    bash -c 'case "$0" in "committed: committed candidate 2 "*) true;; "ended: gave up: the commit rule refused"*)
             grep -Eq "commit: candidate 2 (scores .*, under the island.s best|is [0-9.]+% (slower|faster) than the island.s best .*(not a significant gain|faster beyond noise, but below commit.min_gain))" "$1";;
             *) false;; esac' "$STEP" "$T/transcript.txt"
check "compile answered with the ptxas report of the GPU build" \
    bash -c 'sed -n 3p "$0" | grep -q "compiles" && sed -n 3p "$0" | grep -Eq "Used [0-9]+ registers"' "$T/gpu.log"
check "evaluate ran the version on the GPU worker: outcome ok with a score" \
    bash -c 'sed -n 3p "$0" | grep -q "candidate 2: outcome ok, aggregate"' "$T/gpu.log"
if [ "$(id -u)" = 0 ]; then
    check "the CUDA microbenchmark ran in the sandbox on the GPU and its output came back" \
        bash -c 'sed -n 3p "$0" | grep -q "microbenchmark [0-9]*: ran, exit code 0" &&
                 sed -n 3p "$0" | grep -Eq "probe-gpu: [^,]* sm_[0-9]+, [0-9]+ SMs, dependent fma [0-9.]+ cycles"' "$T/gpu.log"
else
    check "a worker that cannot drop privileges refuses the microbenchmark, saying why" \
        bash -c 'sed -n 3p "$0" | grep -q "did not run: microbenchmarks run only on workers started as root"' "$T/gpu.log"
fi
check "profile answered with the CUPTI counters of the evaluated version" \
    bash -c 'sed -n 4p "$0" | grep -q "counters of candidate 2, configuration" &&
             sed -n 4p "$0" | grep -q "sm__throughput.avg.pct_of_peak_sustained_elapsed"' "$T/gpu.log"
if [ "$SEED_NAME" = sm90 ]; then
    check "disassemble answered with the SASS of the version: HGMMA (wgmma) instructions" \
        bash -c 'sed -n 4p "$0" | grep -Eq "[1-9][0-9]* instructions? match" && sed -n 4p "$0" | grep -Eq "HGMMA\.64x[0-9]+x16"' "$T/gpu.log"
else
    check "disassemble answered from the version's SASS" bash -c 'sed -n 4p "$0" | grep -Eq "[1-9][0-9]* instructions? match"' "$T/gpu.log"
fi
check "the program is stored as a program, not a candidate" \
    test "$(q "SELECT count(*) FILTER (WHERE state = 'done') || ':' || count(*) FROM programs WHERE job_id = $JOB"):$(q "SELECT count(*) FROM candidates WHERE job_id = $JOB")" = "1:1:2"
SERVED=$(q "SELECT count(*) FILTER (WHERE result->'served'->>'kept' = 'true') || '/' || count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done'")
echo "# evaluations answered by a kept checker: $SERVED"
check "an evaluation after the job's first was answered by its kept checker (the GPU default)" test "${SERVED%/*}" -ge 1
q "SELECT string_agg(request::text || response::text, '') FROM llm_calls" >"$T/calls.txt"
check "the calls are stored, and the key never reached the database" \
    bash -c '[ -s "$0" ] && ! grep -q "$AVO_TEST_KEY" "$0"' "$T/calls.txt"
[ "$FAILS" -eq 0 ]
