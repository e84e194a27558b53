#!/usr/bin/env bash
# The GPU system test: embedded PostgreSQL, avod, one GPU worker and avoctl,
# a tune job on kernels/gemm_bf16 to its budget; asserts the job succeeded,
# the lineage never falls, and the best evaluation carries cuBLAS figures.
# Run by `make test-gpu` (tests/run.sh gpu) on a GPU host.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source tests/integration/lib.sh
source tests/gpu/bare-host-setup.sh >/dev/null
EVALS=${AVO_GPU_TUNE_EVALS:-6}
PG_ARGS=()
[ -n "${AVO_PG_BINDIR:-}" ] && PG_ARGS+=(--pg-bindir "$AVO_PG_BINDIR")
[ -n "${AVO_PG_USER:-}" ] && PG_ARGS+=(--pg-user "$AVO_PG_USER")
check "avod starts (embedded PostgreSQL)" start_avod "${PG_ARGS[@]}"
start_worker --target gpu --timeout 600
# Two islands on one GPU: they take turns on it, each with its own head.
# On a Hopper GPU the job starts from the package's sm90 seed (wgmma/TMA;
# AVO_GPU_TUNE_SEED= picks the default seed instead), elsewhere from the
# default (mma.sync) one.
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
SEED_NAME=${AVO_GPU_TUNE_SEED-$([ "$CC" = 9.0 ] && echo sm90)}
SEED_ARGS=()
[ -n "$SEED_NAME" ] && SEED_ARGS=(--seed-name "$SEED_NAME")
JOB=$(avoctl --json submit --problem gemm_bf16 "${SEED_ARGS[@]}" --evaluations "$EVALS" --islands 2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "a gemm_bf16 tune job is accepted (target sm_90 by default; seed ${SEED_NAME:-default})" test -n "$JOB"
timeout 1500 avoctl watch "$JOB" >"$T/watch.out" 2>&1
check "the job ends succeeded" test $? -eq 0
tail -3 "$T/watch.out"
check "every committed candidate passed and none falls below its parent" \
    test "$(psql_avo "SELECT count(*) FROM candidates c LEFT JOIN candidates p ON p.id = c.parent_id WHERE c.job_id = $JOB AND c.committed AND (c.outcome <> 'ok' OR c.aggregate < COALESCE(p.aggregate, 0))")" = 0
if [ "$SEED_NAME" = sm90 ]; then
    check "the candidates are the sm90 seed's (its knob CONSUMERS, its file)" \
        test "$(psql_avo "SELECT count(*) FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.job_id = $JOB AND (NOT c.knobs ? 'CONSUMERS' OR s.body NOT LIKE '%seed_sm90.cu%')")" = 0
fi
check "both islands proposed candidates" \
    test "$(psql_avo "SELECT count(DISTINCT island) FROM candidates WHERE job_id = $JOB AND operator = 'tune'")" = 2
check "GPU-seconds and energy are accounted, equal to the sum over the applied evaluations" \
    test "$(psql_avo "SELECT j.gpu_seconds > 0 AND j.energy_j > 0 AND abs(j.gpu_seconds - s.g) < 1e-6 AND abs(j.energy_j - s.e) < 1e-6 FROM jobs j, (SELECT sum(k.gpu_s) g, sum(k.energy_j) e FROM evaluations e, avo_eval_cost(e.target, e.result) k WHERE e.job_id = $JOB AND e.consumed) s WHERE j.id = $JOB")" = t
psql_avo "SELECT 'accounting: ' || round(gpu_seconds::numeric, 1) || ' GPU-s, ' || round(cpu_seconds::numeric, 1) || ' CPU-s, ' || round(energy_j::numeric) || ' J' FROM jobs WHERE id = $JOB"
check "the worker registered its GPU" bash -c "avoctl --json workers | grep -q '\"arch\": \"sm_90\"'"
psql_avo "SELECT jsonb_pretty(jsonb_build_object('candidate', c.id, 'knobs', c.knobs, 'aggregate_gflops', c.aggregate,
    'configs', (SELECT jsonb_agg(jsonb_build_object('config', x->>'name', 'tflops', x->'tflops',
                 'cublas_tflops', x->'baseline'->'tflops', 'vs_cublas', x->'baseline'->'vs_baseline'))
                FROM jsonb_array_elements(e.result->'configs') x),
    'energy_mj', e.result->'energy_mj'))
  FROM jobs j JOIN candidates c ON c.id = j.best_candidate
  JOIN evaluations e ON e.candidate_id = c.id AND e.state = 'done' WHERE j.id = $JOB" >"$T/best.json"
cat "$T/best.json"
if [ -n "${OUT:-}" ]; then cp "$T/best.json" "$OUT/tune-best.json" && cp "$T/watch.out" "$OUT/tune-watch.txt"; fi
check "the best evaluation reports cuBLAS measured in the same run" grep -q cublas_tflops "$T/best.json"
# The baseline decides nothing: no more timed runs than the candidate's on
# the config (at least timing.min_runs), its runner started beside the
# others (gemm_bf16 has no screen to stop a candidate first).
MINR=$(jq '.timing.min_runs' kernels/gemm_bf16/problem.json)
check "every baseline stopped by its rule within the candidate's runs (min_runs $MINR)" \
    test "$(psql_avo "SELECT count(*) FROM evaluations e, jsonb_array_elements(e.result->'configs') x WHERE e.job_id = $JOB AND e.state = 'done' AND e.result->>'outcome' = 'ok' AND x->'baseline' ? 'median_s' AND ((x->'baseline'->>'runs')::int > greatest($MINR, (x->>'runs')::int) OR x->'baseline'->>'stopped_by' IS NULL)")" = 0
check "every ok evaluation started the baseline's runner beside the others" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done' AND result->>'outcome' = 'ok' AND NOT (result->'phases'->'harness' ? 'baseline_runner')")" = 0
check "every evaluation was timed from a gated start" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done' AND result->>'outcome' = 'ok' AND result->'runner'->'timing_start'->>'mode' IS DISTINCT FROM 'gated'")" = 0
# A GPU worker keeps a checker per job by default (--serve -1): the job's
# evaluations after its first are answered by one kept checker, unless it
# ended (a runner not wholly confined ends it: docs/evaluation.md).
SERVED=$(psql_avo "SELECT count(*) FILTER (WHERE result->'served'->>'kept' = 'true') || '/' || count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done'")
echo "# evaluations answered by a kept checker: $SERVED"
check "at least half of the job's evaluations were answered by a kept checker (the GPU default)" \
    bash -c 'k=${0%/*}; n=${0#*/}; [ "$n" -gt 0 ] && [ $((2 * k)) -ge "$n" ]' "$SERVED"
# Two islands keep two evaluations queued: the worker compiles the next one
# while the GPU times the current one.
check "the worker compiled an evaluation while the previous one ran" grep -q "precompiled in" "$T/worker.log"
if [ -n "${OUT:-}" ]; then cp "$T/worker.log" "$OUT/tune-worker.log"; fi
# The script's status is its checks': run.sh counts a non-zero exit with
# no "not ok" as a failure, so no copy for $OUT may decide it.
[ "$FAILS" -eq 0 ]
