#!/usr/bin/env bash
# Two builds of avo side by side on a GPU problem's evaluations as a
# campaign runs them: paired against the island's best, screened, with the
# job's secret seed and its reference cache. Per round, each build (the
# order alternating between rounds) runs
#   full:     the seed against itself (an A/A: it survives the screen and is
#             timed in full), and
#   screened: the seed doing its work three times against the seed (the
#             screen stops it),
# through `avo-worker eval --job-seed-stdin` with one compile and reference
# cache for both builds (round 1 compiles and writes the references: it is
# reported, not counted). Prints per kind and build the median worker wall
# (phases.total) over the counted rounds, the per-round ratio B/A (paired:
# the same round's two evaluations) as median [min, max], and the harness
# phases whose medians moved most.
#   bench/eval_ab_gpu.sh BUILD_A BUILD_B [N] [PROBLEM]
# BUILD_x: a build directory (bin/avo-worker, bin/avo-harness[-cuda]).
# Defaults: N=6 counted rounds, kernels/attention (seed_sm90.cu on sm_90).
# KEEP=DIR keeps every result JSON. Needs a GPU.
set -eu
cd "$(dirname "$0")/.."
A=$1 B=$2 N=${3:-6} P=${4:-kernels/attention}
case $N in '' | *[!0-9]* | 0) echo "eval_ab_gpu: N must be a positive integer, not '$N'" >&2; exit 2 ;; esac
for b in "$A" "$B"; do
    [ -x "$b/bin/avo-worker" ] && [ -x "$b/bin/avo-harness-cuda" ] ||
        { echo "eval_ab_gpu: $b/bin/avo-worker or avo-harness-cuda missing" >&2; exit 2; }
done
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { echo "eval_ab_gpu: skipped: no GPU here (nvidia-smi lists none)"; exit 0; }
T=$(mktemp -d /tmp/avo-abgpu.XXXXXX)
trap 'rm -rf "$T"' EXIT
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
SEEDF=$P/seed.cu
[ "$CC" = 9.0 ] && [ -f "$P/seed_sm90.cu" ] && SEEDF=$P/seed_sm90.cu
ENTRY=$(jq -r '.entry // "kernel"' "$P/problem.json")
sed "s/^extern \"C\" int $ENTRY(/static int ${ENTRY}_once(/" "$SEEDF" >"$T/slow3.cu"
cat >>"$T/slow3.cu" <<CU
extern "C" int $ENTRY(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    int rc = 0;
    for (int k = 0; rc == 0 && k < 3; k++)
        rc = ${ENTRY}_once(tensors, sizes, stream);
    return rc;
}
CU
grep -q "${ENTRY}_once" "$T/slow3.cu" || { echo "eval_ab_gpu: cannot find extern \"C\" int $ENTRY( in $SEEDF" >&2; exit 2; }
JS=$(python3 -c 'import secrets; print(secrets.randbits(62) + 1)')
echo "# eval_ab_gpu: $A (A) vs $B (B), $N counted rounds after one warm-up, on $P ($(basename "$SEEDF"))"
echo "# machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)"
ev() { # ev BUILD KIND ROUND SIDE
    local dir=$1 kind=$2 i=$3 side=$4 cand=$SEEDF
    [ "$kind" = screened ] && cand=$T/slow3.cu
    echo "$JS" | TMPDIR=$T "$dir/bin/avo-worker" eval "$P" "$cand" --json --timeout 600 --cache "$T/cache" \
        --job-seed-stdin --against "$SEEDF" --screen >"$T/$kind-$side$i.json" 2>"$T/$kind-$side$i.err" ||
        { echo "eval_ab_gpu: $side $kind round $i: $(jq -r '.outcome + ": " + .detail' "$T/$kind-$side$i.json" 2>/dev/null | head -c 300) $(tail -3 "$T/$kind-$side$i.err")" >&2; exit 1; }
}
for i in $(seq 0 "$N"); do
    order="A B"
    [ $((i % 2)) = 1 ] && order="B A"
    for side in $order; do
        dir=$A
        [ "$side" = B ] && dir=$B
        ev "$dir" full "$i" "$side"
        ev "$dir" screened "$i" "$side"
    done
done
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$T"/*.json "$KEEP"/
python3 - "$T" "$N" <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
def load(kind, side, i):
    return json.load(open(f"{d}/{kind}-{side}{i}.json"))
for kind in ("full", "screened"):
    r = {s: [load(kind, s, i) for i in range(0, n + 1)] for s in "AB"}
    so = {s: [bool(x.get("screened_out")) for x in r[s][1:]] for s in "AB"}
    w = {s: [x["phases"]["total"] for x in r[s][1:]] for s in "AB"}
    ratio = sorted(b / a for a, b in zip(w["A"], w["B"]))
    print(f"{kind}: screened out A {sum(so['A'])}/{n}, B {sum(so['B'])}/{n}; warm-up round wall A {r['A'][0]['phases']['total']:.2f} s, B {r['B'][0]['phases']['total']:.2f} s")
    print(f"  worker wall, median of {n}: A {statistics.median(w['A']):.3f} s, B {statistics.median(w['B']):.3f} s; "
          f"B/A per round median {statistics.median(ratio):.3f} [{ratio[0]:.3f}, {ratio[-1]:.3f}]")
    keys = []
    for s in "AB":
        for x in r[s][1:]:
            for k, v in x["phases"].get("harness", {}).items():
                if isinstance(v, (int, float)) and k not in keys:
                    keys.append(k)
    rows = []
    for k in keys:
        m = {s: statistics.median(x["phases"].get("harness", {}).get(k, 0) for x in r[s][1:]) for s in "AB"}
        rows.append((abs(m["B"] - m["A"]), k, m))
    hp = {s: statistics.median(x["phases"]["harness_process"] for x in r[s][1:]) for s in "AB"}
    print(f"  harness_process (the worker's view): A {hp['A']:.3f} s, B {hp['B']:.3f} s")
    for _, k, m in sorted(rows, reverse=True)[:8]:
        print(f"  harness.{k:<24} A {m['A']:7.3f} s  B {m['B']:7.3f} s")
PY
