#!/usr/bin/env bash
# Where a timed call's wall time goes, step by step: one paired evaluation
# (the seed against itself) run by hand under AVO_HARNESS_TRACE=1, and its
# trace summed per step. The calls phase of an attention evaluation was
# 5-19 ms a call on an H100 for kernels of 0.3-8 ms (2026-12-05,
# docs/benchmarks.md): this says which steps the rest is.
#
#   bench/call_trace.sh [PROBLEM-DIR]     (default kernels/attention)
#
# The steps (daemon/harness: harness_trace): on a GPU "prep" (the inputs
# generated, the outputs poisoned, L2 flushed, on the checker's stream),
# "run" (the round trip to the runner: thaw, the gated call, the answer,
# the freeze), "clock and busy probe"; for a checked call "check:
# reference" (whole, by rows, or held) and "check: inputs compared"; on
# any problem the call's remainder up to its "config ... call" line. Per
# step: count, median and total ms; then the calls' own round trips. The
# objects come from a throwaway `avo-worker eval` cache (compiled once).
# BUILD: the build directory (default build). KEEP=DIR keeps the trace.
# CACHE=1: with a job seed and a reference cache, as a job's evaluations
# run; one untraced evaluation fills the cache first, so the traced one
# reads every warm-up reference from it ("cache: ..." steps).
set -eu
cd "$(dirname "$0")/.."
DIR=${1:-kernels/attention}
[ -f "$DIR/problem.json" ] || { echo "call_trace: $DIR has no problem.json" >&2; exit 2; }
B=${BUILD:-build}/bin
backend=$(jq -r '.backend' "$DIR/problem.json")
HARNESS=$B/avo-harness
[ "$backend" = cuda ] && HARNESS=$B/avo-harness-cuda
[ -x "$HARNESS" ] && [ -x "$B/avo-worker" ] || { echo "call_trace: $HARNESS or $B/avo-worker missing (make)" >&2; exit 2; }
if [ "$backend" = cuda ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "call_trace: $DIR is a CUDA problem and this host has no GPU (nvidia-smi lists none)" >&2
    exit 2
fi
T=$(mktemp -d /tmp/avo-calltrace.XXXXXX)
trap 'rm -rf "$T"' EXIT
seed="$DIR/$(jq -r '.seed' "$DIR/problem.json")"
"$B/avo-worker" eval "$DIR" "$seed" --json --cache "$T/cache" >"$T/compile.json" 2>"$T/compile.err" || true
REF= SEED= BASE=
for so in "$T"/cache/obj/*.so; do
    syms=$(nm -D --defined-only "$so" 2>/dev/null || true)
    if grep -q ' avo_reference$' <<<"$syms"; then REF=$so
    elif grep -q ' avo_baseline$' <<<"$syms"; then BASE=$so
    else SEED=$so; fi
done
# The vendor baseline (gemm_bf16's cuBLAS) timed as the worker times it, in
# lane 1, where the problem has one and it compiled.
BASEARG=()
[ -n "$BASE" ] && BASEARG=(--baseline "$BASE")
[ -n "$REF" ] && [ -n "$SEED" ] || { echo "call_trace: no compiled objects ($(tail -1 "$T/compile.err"))" >&2; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
echo "# call_trace: $DIR, $(date -u +%Y-%m-%dT%H:%MZ), ${gpu:+$gpu, }$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${CACHE:-}" ]; then
    mkdir "$T/ref"
    exec 9<"$T/ref"
    echo "12345 $(python3 -c 'import secrets; print(secrets.randbits(62) + 1)')" >"$T/seeds"
    cached() { "$HARNESS" "$DIR" "$SEED" "$REF" --seed-stdin --ref-cache-fd 9 --ref-cache-max $((8 << 30)) --against "$SEED" ${BASEARG[@]+"${BASEARG[@]}"} <"$T/seeds"; }
    cached 3>"$T/fill.json" 2>"$T/fill.err" || true
    echo "# cache filled: $(du -sh "$T/ref" | cut -f1), $(jq -r '.outcome' "$T/fill.json" 2>/dev/null)"
    AVO_HARNESS_TRACE=1 cached 3>"$T/result.json" 2>"$T/trace.txt" || true
else
    AVO_HARNESS_TRACE=1 "$HARNESS" "$DIR" "$SEED" "$REF" --seed 12345 --against "$SEED" ${BASEARG[@]+"${BASEARG[@]}"} 3>"$T/result.json" 2>"$T/trace.txt" || true
fi
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$T/trace.txt" "$T/result.json" "$KEEP/"
echo "# outcome: $(jq -r '.outcome' "$T/result.json" 2>/dev/null)${BASE:+; baseline timed (lane 1)}"
python3 - "$T/trace.txt" <<'PY'
import re, statistics, sys
# A step's lines come before the "config NAME lane L call I" line that
# closes its call: they are charged to that lane (0 the candidate, 1 the
# baseline, 2 the against) as well as to the step.
steps, rts, calls, pending = {}, [], 0, []
by_lane = {}
for line in open(sys.argv[1]):
    m = re.match(r"trace\s+([0-9.]+) s  (.*)", line.rstrip("\n"))
    if not m:
        continue
    dt, what = float(m.group(1)) * 1e3, m.group(2)
    lm = re.match(r"config \S+ lane (\d+) call \d+", what)
    if lm:
        calls += 1
        steps.setdefault("rest of the call (bookkeeping)", []).append(dt)
        pending.append(("rest of the call (bookkeeping)", dt))
        for key, v in pending:
            by_lane.setdefault((int(lm.group(1)), key), []).append(v)
        pending = []
        continue
    if not what.startswith("  "):
        pending = []
        continue
    key = what.strip()
    r = re.match(r"run \(round trip ([0-9.]+) ms\)", key)
    if r:
        rts.append(float(r.group(1)))
        key = "run"
    steps.setdefault(key, []).append(dt)
    pending.append((key, dt))
print(f"{'step':38s} {'count':>6s} {'median ms':>10s} {'total ms':>10s}")
for k, v in sorted(steps.items(), key=lambda kv: -sum(kv[1])):
    print(f"{k:38s} {len(v):6d} {statistics.median(v):10.3f} {sum(v):10.1f}")
if rts:
    print(f"# round trips of the runs: median {statistics.median(rts):.3f} ms over {len(rts)}")
print(f"# calls traced: {calls}")
print(f"# per lane (0 candidate, 1 baseline, 2 against):")
print(f"{'lane':>4s} {'step':38s} {'count':>6s} {'median ms':>10s} {'total ms':>10s}")
for (ln, k), v in sorted(by_lane.items(), key=lambda kv: (kv[0][0], -sum(kv[1]))):
    print(f"{ln:4d} {k:38s} {len(v):6d} {statistics.median(v):10.3f} {sum(v):10.1f}")
PY
