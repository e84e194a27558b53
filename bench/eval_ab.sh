#!/usr/bin/env bash
# Two builds of avo side by side on one candidate: evaluations alternate
# (A, B, A, B, ...; N each) so that both see the same machine, and per
# config the script prints each build's medians, their spread (max/min - 1),
# the median of each, the ratio B/A of the scores and the evaluation's wall
# time. For "does a harness change move the honest scores or their
# repeatability?".
#   bench/eval_ab.sh BUILD_A BUILD_B [N] [PROBLEM] [CANDIDATE]
# BUILD_x: a build directory (its bin/avo-worker is used, with its harness).
# Defaults: N=8, kernels/cpu/sgemm, its seed with a good knob set.
set -eu
cd "$(dirname "$0")/.."
A=$1 B=$2 N=${3:-8} PROBLEM=${4:-kernels/cpu/sgemm}
for b in "$A" "$B"; do [ -x "$b/bin/avo-worker" ] || { echo "eval_ab: $b/bin/avo-worker missing" >&2; exit 2; }; done
T=$(mktemp -d /tmp/avo-ab.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -n "${5:-}" ]; then
    cp "$5" "$T/cand.c"
else
    { for kv in ORDER=1 BM=32 BN=256 BK=64 UNROLL=4; do echo "#define ${kv%=*} ${kv#*=}"; done
      cat "$PROBLEM/seed.c"; } >"$T/cand.c"
fi
echo "# eval_ab: $A vs $B, $N evaluations each, interleaved, on $PROBLEM"
echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)"
for i in $(seq 1 "$N"); do
    for side in A B; do
        dir=$A; [ $side = B ] && dir=$B
        s=$(date +%s.%N)
        TMPDIR=$T "$dir/bin/avo-worker" eval "$PROBLEM" "$T/cand.c" --json --cache "$T/cache-$side" >"$T/$side$i.json" ||
            { echo "eval_ab: $side run $i did not end ok: $(jq -r '.outcome + ": " + .detail' "$T/$side$i.json")" >&2; exit 1; }
        awk -v e="$(date +%s.%N)" -v s="$s" 'BEGIN { print e - s }' >"$T/$side$i.wall"
    done
done
python3 - "$T" "$N" <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
runs = {s: [json.load(open(f"{d}/{s}{i}.json")) for i in range(1, n + 1)] for s in "AB"}
wall = {s: [float(open(f"{d}/{s}{i}.wall").read()) for i in range(1, n + 1)] for s in "AB"}
names = [c["name"] for c in runs["A"][0]["configs"]]
print(f"{'config':<14} {'A median ms':>12} {'A spread':>9} {'B median ms':>12} {'B spread':>9} {'B/A score':>10}")
for name in names:
    med = {s: [next(c for c in r["configs"] if c["name"] == name)["median_s"] * 1e3 for r in runs[s]] for s in "AB"}
    m = {s: statistics.median(med[s]) for s in "AB"}
    sp = {s: max(med[s]) / min(med[s]) - 1 for s in "AB"}
    print(f"{name:<14} {m['A']:>12.4f} {sp['A']*100:>8.2f}% {m['B']:>12.4f} {sp['B']*100:>8.2f}% {m['A']/m['B']:>10.3f}")
agg = {s: statistics.median(r["aggregate"] for r in runs[s]) for s in "AB"}
print(f"aggregate (median of {n}): A {agg['A']:.3f}  B {agg['B']:.3f}  B/A {agg['B']/agg['A']:.3f}")
print(f"evaluation wall (median): A {statistics.median(wall['A']):.2f} s  B {statistics.median(wall['B']):.2f} s")
PY
