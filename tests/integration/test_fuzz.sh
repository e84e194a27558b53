#!/usr/bin/env bash
# The parsers that read the wire (routes, job specs, LLM answers in both
# formats, server-sent events) under libFuzzer with ASan and UBSan for a
# bounded time (AVO_FUZZ_SECONDS, default 30), starting from the corpus in
# tests/fuzz/corpus. A crash, a leak, undefined behaviour or a timeout is a
# failure; the input that caused it is kept in the output for replay.
source "$(dirname "$0")/lib.sh"

SECS=${AVO_FUZZ_SECONDS:-30}
if ! command -v clang >/dev/null; then
    echo "# skipped: no clang (make deps installs clang and libclang-rt-14-dev for libFuzzer)"
    exit 0
fi
make -s -C "$ROOT" BUILD="$BUILD" fuzz >"$T/build.log" 2>&1
check "the fuzz target builds with libFuzzer, ASan and UBSan" test -x "$ROOT/$BUILD/fuzz/fuzz_parsers"
cp -r "$ROOT/tests/fuzz/corpus" "$T/corpus"
n0=$(ls "$T/corpus" | wc -l)
( cd "$T" && "$ROOT/$BUILD/fuzz/fuzz_parsers" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 corpus >"$T/fuzz.log" 2>&1 )
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$T/fuzz.log")
check "$SECS s of fuzzing ($runs inputs, corpus $n0 -> $(ls "$T/corpus" | wc -l)) find no crash, leak or UB (exit $rc)" \
    bash -c '[ "$1" = 0 ] && ! grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\|libFuzzer\)\|runtime error:" "$0"' \
    "$T/fuzz.log" "$rc"
if [ "$rc" != 0 ]; then
    grep -m3 "ERROR\|runtime error\|SUMMARY" "$T/fuzz.log"
    ls "$T"/crash-* "$T"/leak-* "$T"/timeout-* 2>/dev/null | head -3
fi
[ "$FAILS" -eq 0 ]
