#!/usr/bin/env bash
# On a GPU host (the lead's check of issue 20 point 2; not run on the CPU
# build machine): the job's warm-up sets and the reference cache on the CUDA
# backend, through `avo-worker eval --job-seed-stdin` on kernels/attention
# (AVO_REFCACHE_PROBLEM=gemm_bf16 for the other one).
#  - first evaluation of a job seed: every config's K warm-up references
#    computed and written (cache misses K), outcome ok;
#  - second: read from the cache and uploaded (hits K, misses 0), outcome ok,
#    and the harness's "reference" phase smaller (printed, not asserted:
#    no timed assertions);
#  - paired A/A (the seed against itself) with the same job seed: the
#    against's warm-up checks reuse the references (references.reused >= K);
#  - one cache file flipped: detected (corrupt 1), recomputed, ok.
# Results under $OUT (or /tmp/avo-refcache-gpu).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source tests/integration/lib.sh
source tests/gpu/bare-host-setup.sh >/dev/null
OUTDIR=${OUT:-/tmp/avo-refcache-gpu}
mkdir -p "$OUTDIR"
P=kernels/${AVO_REFCACHE_PROBLEM:-attention}
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
SEEDF=$P/seed.cu
[ "$CC" = 9.0 ] && [ -f "$P/seed_sm90.cu" ] && SEEDF=$P/seed_sm90.cu
K=$(jq '.check.input_sets // 2' "$P/problem.json")
JS=6151298713390171463
ev() {  # ev NAME [ARGS...]
    local n=$1
    shift
    echo "$JS" | avo-worker eval "$P" "$SEEDF" --json --timeout 600 --cache "$T/cache" --job-seed-stdin "$@" \
        >"$OUTDIR/$n.json" 2>"$OUTDIR/$n.err"
    jq -c "{outcome, detail: .detail[:160], reference_s: .phases.harness.reference, total_s: .phases.total,
            refs: [.configs[] | .references | {computed, reused, hits: .cache.hits, misses: .cache.misses,
                   corrupt: .cache.corrupt}]}" "$OUTDIR/$n.json" | sed "s/^/# $n: /"
}
ev first
check "first evaluation: ok, every config's $K warm-up references written" \
    jqt ".outcome == \"ok\" and all(.configs[]; .references.cache.misses == $K and .references.cache.hits == 0)" \
    "$OUTDIR/first.json"
ev second
check "second evaluation: ok, every config's $K warm-up references read from the cache" \
    jqt ".outcome == \"ok\" and all(.configs[]; .references.cache.hits == $K and .references.cache.misses == 0)" \
    "$OUTDIR/second.json"
ev paired --against "$SEEDF"
check "paired A/A: ok, cache hits, the against's warm-up checks reuse them" \
    jqt ".outcome == \"ok\" and (.paired.ratio > 0) and all(.configs[]; .references.cache.hits == $K and .references.reused >= $K)" \
    "$OUTDIR/paired.json"
f=$(ls -t "$T/cache/ref"/*.ref | head -1)
printf '\xff' | dd of="$f" bs=1 seek=4096 conv=notrunc status=none
ev corrupt
check "a flipped cache file: detected, recomputed, noted, ok" \
    jqt '.outcome == "ok" and ([.configs[].references.cache.corrupt] | add) == 1' "$OUTDIR/corrupt.json"
[ "$FAILS" -eq 0 ]
