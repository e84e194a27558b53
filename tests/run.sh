#!/usr/bin/env bash
# Runs every test group and ends with one line "N passed, N failed".
#   tests/run.sh [unit|integration|gpu]...   (default: all groups)
# Unit tests are cmocka binaries (TAP output counted per test case);
# integration tests are scripts under tests/integration/ that print
# "ok - NAME" / "not ok - NAME" lines through tests/integration/lib.sh.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(unit integration gpu)

passed=0
failed=0
failures=()

# The failed tests of a TAP file. cmocka writes a skipped test as
# "not ok N # SKIP NAME" (a test that needs what this machine lacks, e.g.
# the loop tests without PostgreSQL): skipped, not failed.
failed_lines() {
    grep -E '^not ok ' "$1" | grep -vE '^not ok [0-9]+ # SKIP'
}

count_tap() {  # name, file with TAP lines
    local name=$1 out=$2 p f
    p=$(grep -cE '^ok ' "$out" || true)
    f=$(failed_lines "$out" | wc -l)
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -gt 0 ]; then
        while IFS= read -r l; do failures+=("$name: $l"); done < <(failed_lines "$out")
    fi
    echo "$p passed, $f failed"
}

run_unit() {
    echo "== unit tests"
    for t in "$BUILD"/tests/test_*; do
        [ -x "$t" ] || continue
        local name out rc
        name=$(basename "$t")
        out=$(mktemp)
        printf '  %-28s ' "$name"
        CMOCKA_MESSAGE_OUTPUT=TAP timeout 600 "$t" >"$out" 2>&1
        rc=$?
        count_tap "$name" "$out" >/dev/null
        if [ $rc -ne 0 ] && [ -z "$(failed_lines "$out")" ]; then
            # crashed or timed out before reporting: one failure, with its output
            failed=$((failed + 1))
            failures+=("$name: exited with status $rc")
            tail -20 "$out" | sed 's/^/      /'
        fi
        echo "$(grep -cE '^ok ' "$out") ok, $(failed_lines "$out" | wc -l) not ok," \
             "$(grep -cE '^not ok [0-9]+ # SKIP' "$out") skipped (exit $rc)"
        grep -E '^not ok |^# ' "$out" | grep -vE '^# ok|^not ok [0-9]+ # SKIP' | awk '!seen[$0]++' | head -40 | sed 's/^/      /'
        rm -f "$out"
    done
}

# One script of TAP-ish lines: its lines shown, counted, its output shown
# when it failed (and kept in GPU_REPORT_DIR when set).
run_script() {  # script, timeout seconds
    local t=$1 limit=$2 name out rc
    name=$(basename "$t" .sh)
    out=$(mktemp)
    echo "  $name"
    BUILD="$BUILD" timeout "$limit" bash "$t" >"$out" 2>&1
    rc=$?
    grep -E '^(ok|not ok) ' "$out" | sed 's/^/      /'
    count_tap "$name" "$out" >/dev/null
    if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$out"; then
        failed=$((failed + 1))
        failures+=("$name: exited with status $rc")
    fi
    if [ $rc -ne 0 ] || grep -qE '^not ok ' "$out"; then
        echo "      --- output of $name (last 60 lines) ---"
        tail -60 "$out" | sed 's/^/      | /'
    fi
    [ -n "${GPU_REPORT_DIR:-}" ] && cp "$out" "$GPU_REPORT_DIR/$name.log"
    rm -f "$out"
}

run_integration() {
    echo "== integration tests (real PostgreSQL, avod, avo-worker, avoctl)"
    for t in tests/integration/test_*.sh; do
        run_script "$t" 1200
    done
}

run_gpu() {
    echo "== gpu tests"
    if [ -x "$BUILD/bin/avo-canary" ]; then
        echo "  CUDA code compiled: avo-canary, avo-gpu-probe, avo-harness-cuda (sm_90a)"
    else
        echo "  CUDA code not compiled: nvcc not found (PATH or /usr/local/cuda)"
    fi
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "  skipped: no NVIDIA GPU on this machine (nvidia-smi finds none)"
        return
    fi
    # On a bare GPU host the carried libraries and PostgreSQL come first
    # (docs/gpu-testing.md); a host with our Debian packages needs nothing.
    [ -d .devlibs ] && source tests/gpu/bare-host-setup.sh >/dev/null
    local out
    out=$(mktemp)
    {
        if "$BUILD/bin/avo-canary" 0 >"$out.canary" 2>&1 && grep -q '"ok": true' "$out.canary"; then
            echo "ok - the canary kernel runs correctly on GPU 0: $(cat "$out.canary")"
        else
            echo "not ok - the canary kernel failed on GPU 0: $(cat "$out.canary")"
        fi
        if "$BUILD/bin/avo-worker" devices >"$out.dev" 2>&1 && grep -q '"kind": "gpu"' "$out.dev"; then
            echo "ok - avo-worker sees the GPU through NVML: $(grep -m1 '"name"' "$out.dev" | tr -s ' ')"
        else
            echo "not ok - avo-worker sees no GPU through NVML: $(tr -s ' \n' ' ' <"$out.dev")"
        fi
        if "$BUILD/bin/avo-gpu-probe" >"$out.probe" 2>&1 && grep -q '"cupti"' "$out.probe"; then
            if grep -q '"available": true' "$out.probe"; then
                echo "ok - CUPTI range profiler collected counters (AutoRange, KernelReplay)"
            else
                echo "ok - CUPTI profiling unavailable here, reported with its reason: $(grep -m1 '"reason"' "$out.probe")"
            fi
        else
            echo "not ok - avo-gpu-probe failed: $(tail -3 "$out.probe")"
        fi
    } >"$out"
    sed 's/^/      /' "$out"
    count_tap gpu "$out" >/dev/null
    [ -n "${GPU_REPORT_DIR:-}" ] && cp "$out.probe" "$GPU_REPORT_DIR/gpu-probe.json"
    rm -f "$out" "$out.canary" "$out.dev" "$out.probe"
    # The system-level GPU tests: hostile GPU candidates, a tune job through
    # avod + worker + PostgreSQL.
    for t in tests/gpu/test_*.sh; do
        [ -f "$t" ] && run_script "$t" 1800
    done
}

for g in "${groups[@]}"; do
    case $g in
    unit) run_unit ;;
    integration) run_integration ;;
    gpu) run_gpu ;;
    *) echo "tests/run.sh: unknown group '$g' (unit, integration, gpu)" >&2; exit 2 ;;
    esac
done

if [ ${#failures[@]} -gt 0 ]; then
    echo "== failures"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
