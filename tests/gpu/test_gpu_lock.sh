#!/usr/bin/env bash
# Two workers given the same GPU never time on it together (issue 24's
# prerequisite; daemon/worker/gpulock.h): embedded PostgreSQL, avod, two
# GPU workers started as the systemd template starts them (one
# CUDA_VISIBLE_DEVICES each, here the same GPU: once by index, once by
# UUID), a tune job on gemm_bf16_small with two islands, so both workers
# hold an evaluation at once. Asserts:
#   - both workers resolved the same GPU (the UUID in each result's
#     gpu_lock), and each evaluated some of the job's work;
#   - no two evaluations' harness runs (gpu_lock.held_from .. held_to)
#     overlap, and some evaluation waited for the lock;
#   - the two workers' harnesses timed on two CPUs, each the one its worker
#     leased (daemon/worker/cpulease.h), not both on the highest;
#   - a worker given a UUID no GPU has refuses to start, naming it.
# Run by `make test-gpu` (tests/run.sh gpu) on a GPU host.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source tests/integration/lib.sh
source tests/gpu/bare-host-setup.sh >/dev/null
PG_ARGS=()
[ -n "${AVO_PG_BINDIR:-}" ] && PG_ARGS+=(--pg-bindir "$AVO_PG_BINDIR")
[ -n "${AVO_PG_USER:-}" ] && PG_ARGS+=(--pg-user "$AVO_PG_USER")
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | head -1 | tr -d ' ')
check "the GPU has a UUID ($UUID)" test -n "$UUID"
CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 timeout 20 avo-worker --target gpu >"$T/bogus.out" 2>&1
RC=$?
check "a worker whose CUDA_VISIBLE_DEVICES names no GPU here refuses to start, saying so (exit $RC)" \
    bash -c '[ "$0" = 2 ] && grep -q "names a GPU that NVML does not list" "$1"' "$RC" "$T/bogus.out"
# The small gemm fixture as a package of its own kernels root.
mkdir -p "$T/kernels"
ln -s "$ROOT/tests/fixtures/problems/gemm_bf16_small" "$T/kernels/gemm_bf16_small"
check "avod starts (embedded PostgreSQL)" start_avod --kernels "$T/kernels" "${PG_ARGS[@]}"
CUDA_VISIBLE_DEVICES=0 avo-worker --target gpu --kernels "$T/kernels" --timeout 600 --gpu-lock-dir "$T" \
    --prefetch 0 >>"$T/worker-a.log" 2>&1 &
PIDS+=($!)
CUDA_VISIBLE_DEVICES="$UUID" avo-worker --target gpu --kernels "$T/kernels" --timeout 600 --gpu-lock-dir "$T" \
    --prefetch 0 >>"$T/worker-b.log" 2>&1 &
PIDS+=($!)
JOB=$(avoctl --json submit --problem gemm_bf16_small --evaluations 8 --islands 2 | jq -r .id)
check "a tune job with two islands is accepted" test -n "$JOB"
timeout 900 avoctl watch "$JOB" >"$T/watch.out" 2>&1
check "the job ends succeeded" test $? -eq 0
psql_avo "SELECT e.id, e.worker_id, e.result->'gpu_lock' FROM evaluations e WHERE e.job_id = $JOB AND e.state = 'done'
          ORDER BY e.id" >"$T/locks.txt"
cat "$T/locks.txt"
[ -n "${OUT:-}" ] && cp "$T/locks.txt" "$OUT/gpu-lock.txt" && cat "$T"/worker-?.log >"$OUT/gpu-lock-workers.log"
check "every evaluation's harness held the lock of the same GPU ($UUID), whichever worker ran it" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done'
                      AND result->'gpu_lock'->>'gpu' IS DISTINCT FROM '$UUID'")" = 0
check "both workers evaluated the job's work" \
    test "$(psql_avo "SELECT count(DISTINCT worker_id) FROM evaluations WHERE job_id = $JOB AND state = 'done'")" = 2
check "no two evaluations' harness runs overlap on the GPU" \
    test "$(psql_avo "SELECT count(*) FROM evaluations a JOIN evaluations b ON a.id < b.id
                      WHERE a.job_id = $JOB AND b.job_id = $JOB AND a.state = 'done' AND b.state = 'done'
                        AND (a.result->'gpu_lock'->>'held_from')::float8 < (b.result->'gpu_lock'->>'held_to')::float8
                        AND (b.result->'gpu_lock'->>'held_from')::float8 < (a.result->'gpu_lock'->>'held_to')::float8")" = 0
check "some evaluation waited for the other worker's (the two ran at once)" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done'
                      AND (result->'gpu_lock'->>'waited_s')::float8 > 0.1")" -ge 1
check "each worker's harnesses timed on the CPU it leased, the two workers' apart" \
    test "$(psql_avo "SELECT count(DISTINCT result->'runner'->>'cpu') || ':' ||
                             count(*) FILTER (WHERE result->'runner'->>'cpu' IS DISTINCT FROM
                                                    result->'load'->'harness_cpu'->>'cpu'
                                                 OR result->'load'->'harness_cpu'->>'how' IS DISTINCT FROM 'leased')
                      FROM evaluations WHERE job_id = $JOB AND state = 'done' AND result ? 'runner'")" = "2:0"
[ "$FAILS" -eq 0 ]
