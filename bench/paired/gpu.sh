#!/usr/bin/env bash
# Issue 20's paired measurement on a GPU host: A/A and sensitivity.
#
# The candidate is the Hopper seed (kernels/gemm_bf16/seed_sm90.cu at its
# defaults) on bench/gemm_bf16/repeat (4096^3 and 8192^3), wrapped so that
# after the product a one-thread kernel on the call's stream spins for a
# given fraction of the product's time (2 M N K / 720 TFLOP/s, about the
# seed's rate on the H200): a calibrated extra delay.
#   base  = the seed + 3% delay
#   fast  = the seed, no delay          (about 3% faster than base)
#   slow  = the seed + 3.3% delay       (about 0.3% slower than base)
# Each is evaluated with `avo-worker eval --against base` (the paired
# protocol, docs/evaluation.md): A/A is base against a copy of itself (a
# comment apart), N times; then fast and slow against base. Printed per run:
# the aggregate ratio, its one-sided lower bound and two-sided interval at
# 95%, and whether the commit rule (lower bound > 1 + min_gain, 0.5% on GPU
# problems) would commit it. Ends with the A/A ratios' spread (max/min - 1).
#   [N=10] [OUT=dir] bash bench/paired/gpu.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
N=${N:-10}
MIN_GAIN=${MIN_GAIN:-0.005}
OUTDIR=${OUT:-/tmp/avo-paired-gpu}
mkdir -p "$OUTDIR"
[ -f tests/gpu/bare-host-setup.sh ] && source tests/gpu/bare-host-setup.sh >/dev/null
export PATH="$ROOT/build/bin:/usr/local/cuda/bin:$PATH"
export AVO_HOME=${AVO_HOME:-/tmp/avo-paired-home}
mkdir -p "$AVO_HOME"
PROB=bench/gemm_bf16/repeat

variant() {  # variant FILE FRACTION TAG
    {
        printf '// %s\n#define gemm_bf16 avo_paired_inner\n' "$3"
        cat kernels/gemm_bf16/seed_sm90.cu
        cat <<EOC
#undef gemm_bf16
__global__ void avo_paired_spin(long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while ((long long)(t - t0) < ns);
}
extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    int rc = avo_paired_inner(tensors, sizes, stream);
    const double fraction = $2;
    if (rc == 0 && fraction > 0) {
        const double s = 2.0 * (double)sizes[0] * (double)sizes[1] * (double)sizes[2] / 720e12;
        avo_paired_spin<<<1, 1, 0, stream>>>((long long)(fraction * s * 1e9));
        rc = cudaGetLastError() == cudaSuccess ? 0 : 1;
    }
    return rc;
}
EOC
    } >"$1"
}
variant "$OUTDIR/base.cu" 0.03 base
variant "$OUTDIR/base_copy.cu" 0.03 base-copy
variant "$OUTDIR/fast.cu" 0 fast
variant "$OUTDIR/slow.cu" 0.033 slow

run() {  # run NAME CANDIDATE
    AVO_NO_COUNTERS=1 avo-worker eval "$PROB" "$2" --json --timeout 300 --against "$OUTDIR/base.cu" \
        >"$OUTDIR/$1.json" 2>"$OUTDIR/$1.err"
    [ -s "$OUTDIR/$1.json" ] || { echo "$1: no result ($(tail -1 "$OUTDIR/$1.err"))"; return; }
    jq -r --arg n "$1" --argjson g "$MIN_GAIN" '
        if .paired == null then "\($n): no paired result (outcome \(.outcome): \(.detail))"
        elif .paired.error then "\($n): paired error: \(.paired.error)"
        else "\($n): ratio \(.paired.ratio) low \(.paired.low) ci \(.paired.ci) commit \(.paired.low > 1 + $g)  "
             + ([.paired.configs[] | "\(.config) \(.ratio) [\(.ci[0]), \(.ci[1])] n=\(.runs)"] | join("; "))
        end' "$OUTDIR/$1.json"
}
echo "# paired gpu: $N A/A runs and the sensitivity pair, $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
for i in $(seq 1 "$N"); do run "aa-$i" "$OUTDIR/base_copy.cu"; done
run fast "$OUTDIR/fast.cu"
run slow "$OUTDIR/slow.cu"
jq -s -r --argjson g "$MIN_GAIN" '[.[] | select(.paired.ratio != null)] as $r
    | ($r | map(.paired.ratio)) as $x
    | "A/A: \($x | length) runs, ratios \($x | min) .. \($x | max), spread \((($x | max) / ($x | min) - 1) * 100)%, committed \($r | map(select(.paired.low > 1 + $g)) | length)"' \
    "$OUTDIR"/aa-*.json
