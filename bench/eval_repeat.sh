#!/usr/bin/env bash
# Repeatability of one evaluation: the sgemm seed with a good knob set,
# evaluated N times in a row by `avo-worker eval --json` (default 10).
# Prints each run's per-config median time, then per config the max
# relative spread of those medians (max/min - 1), the figure the target
# "medians within 2% of each other on an idle machine" is about.
#   bench/eval_repeat.sh [N]        (BUILD=build by default)
set -eu
cd "$(dirname "$0")/.."
N=${1:-10}
WORKER=${BUILD:-build}/bin/avo-worker
PIN=${PIN:-}
PROBLEM=kernels/cpu/sgemm
KNOBS="ORDER=1 BM=32 BN=256 BK=64 UNROLL=4"

[ -x "$WORKER" ] || { echo "eval_repeat: $WORKER missing (make all)" >&2; exit 2; }
command -v jq >/dev/null || { echo "eval_repeat: needs jq" >&2; exit 2; }
T=$(mktemp -d /tmp/avo-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
# column(1) is missing on some hosts (util-linux's bsdextrautils).
table() { if command -v column >/dev/null; then column -t; else cat; fi; }
{
    for kv in $KNOBS; do echo "#define ${kv%=*} ${kv#*=}"; done
    cat "$PROBLEM/seed.c"
} >"$T/cand.c"

echo "# avo-worker eval $PROBLEM <seed.c with $KNOBS> --json, $N runs"
echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)"
for i in $(seq 1 "$N"); do
    # The compile cache is shared by the runs on purpose: only the first
    # compiles, so every run measures the same object.
    ${PIN:+taskset -c $PIN} "$WORKER" eval "$PROBLEM" "$T/cand.c" --json --cache "$T/cache" >"$T/run$i.json" ||
        { echo "eval_repeat: run $i did not end ok:" >&2; jq -r '.outcome + ": " + .detail' "$T/run$i.json" >&2; exit 1; }
done

# KEEP=DIR keeps every run's result for a later look.
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$T"/run*.json "$KEEP"/
FILES=()
for i in $(seq 1 "$N"); do FILES+=("$T/run$i.json"); done

# One row per run: aggregate, then median_s (ms) and runs for every config.
jq -rs '
  (.[0].configs | map(.name)) as $names
  | "run  aggregate  " + ($names | map("median_ms[" + . + "]") | join("  ")),
    (to_entries[] | "\(.key + 1)  \(.value.aggregate * 1000 | round / 1000)  "
      + (.value.configs | map("\(.median_s * 1e6 | round / 1000)(n=\(.runs))") | join("  ")))' \
    "${FILES[@]}" | table

echo
{
echo "config  min_ms  max_ms  spread(max/min-1)"
jq -rs '
  [.[].configs] | transpose[] |
  (map(.median_s)) as $m |
  "\(.[0].name)  \($m | min * 1e6 | round / 1000)  \($m | max * 1e6 | round / 1000)  \((($m | max) / ($m | min) - 1) * 1000 | round / 10)%"' \
    "${FILES[@]}"
} | table
jq -rs '[.[].aggregate] | "aggregate GFLOP/s: min \(min * 100 | round / 100), max \(max * 100 | round / 100), spread \(((max / min) - 1) * 1000 | round / 10)%"' \
    "${FILES[@]}"
