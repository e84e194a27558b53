#!/usr/bin/env bash
# Which GPU a worker takes and the host's per-GPU timing lock, the parts a
# machine without a GPU can check (the lock itself between two workers on
# one GPU: tests/gpu/test_gpu_lock.sh; its semantics: unit test_gpulock):
#  - CUDA_VISIBLE_DEVICES naming a UUID no GPU here has, or neither an
#    index nor a UUID: a GPU worker refuses to start, saying which;
#  - a lock directory the worker cannot use refuses a GPU worker at start,
#    naming the path and the flag; a CPU worker does not need one.
source "$(dirname "$0")/lib.sh"
DB="dbname=avo-none host=$T"   # never reached: the worker stops before
run_worker() {  # OUT ARGS...: exit code
    local out=$1
    shift
    timeout 5 avo-worker --db "$DB" "$@" >"$out" 2>&1 </dev/null
}
CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 run_worker "$T/uuid.out" --target sm_90
rc=$?
check "a UUID no GPU here has: exit 2, saying NVML does not list it ($rc)" \
    bash -c '[ "$0" = 2 ] && grep -q "GPU-00000000-0000-0000-0000-000000000000.*names a GPU that NVML does not list" "$1"' \
    "$rc" "$T/uuid.out"
CUDA_VISIBLE_DEVICES=first run_worker "$T/bad.out" --target sm_90
rc=$?
check "neither an index nor a UUID: exit 2, saying so ($rc)" \
    bash -c '[ "$0" = 2 ] && grep -q "is neither a GPU index nor a GPU UUID" "$1"' "$rc" "$T/bad.out"
run_worker "$T/lock.out" --target sm_90 --gpu-lock-dir "$T/missing"
rc=$?
check "a lock directory it cannot use: exit 2, naming the path and --gpu-lock-dir ($rc)" \
    bash -c '[ "$0" = 2 ] && grep -q "cannot open $2/missing/avo-gpu-.*\.lock" "$1" && grep -q -- "--gpu-lock-dir" "$1"' \
    "$rc" "$T/lock.out" "$T"
mkdir -p "$T/locks"
run_worker "$T/ok.out" --target sm_90 --gpu-lock-dir "$T/locks"
rc=$?
check "a usable one: the worker gets past the check (and stops at the database it cannot reach; $rc)" \
    bash -c '! grep -q "GPU lock" "$0" && ls "$1"/avo-gpu-*.lock >/dev/null' "$T/ok.out" "$T/locks"
CUDA_VISIBLE_DEVICES=first run_worker "$T/cpu.out" --target cpu --gpu-lock-dir "$T/missing"
check "a CPU worker takes no GPU lock and ignores CUDA_VISIBLE_DEVICES" \
    bash -c '! grep -q "GPU lock\|CUDA_VISIBLE_DEVICES" "$0"' "$T/cpu.out"
[ "$FAILS" -eq 0 ]
