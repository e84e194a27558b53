#!/usr/bin/env bash
# The measured landscape for bench/tune_efficiency: every allowed knob
# configuration of a problem evaluated once with `avo-worker eval`, written
# as "K1=v1 K2=v2 ...<TAB>aggregate" (0 when the outcome is not ok).
#   bench/tune_sweep.sh kernels/cpu/sgemm OUT.tsv [MAX_SECONDS]
# MAX_SECONDS (default 0.1) replaces the problem's timing.max_seconds, so a
# sweep of ~900 configurations takes minutes, not an hour; the stop rule is
# otherwise the problem's own.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROB=${1:?problem directory}
OUT=${2:?output table}
MAXS=${3:-0.1}
B=$ROOT/${BUILD:-build}
for x in "$B/bin/avo-worker" "$B/bench/tune_efficiency"; do
    [ -x "$x" ] || { echo "tune_sweep: $x missing (make all)" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "tune_sweep: needs jq" >&2; exit 2; }
T=$(mktemp -d /tmp/avo-sweep.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp -r "$PROB" "$T/problem"
jq --argjson m "$MAXS" '.timing.max_seconds = $m' "$PROB/problem.json" >"$T/problem/problem.json"
seed_file=$(jq -r .seed "$PROB/problem.json")
"$B/bench/tune_efficiency" list "$PROB" >"$T/configs"
n=$(wc -l <"$T/configs")
{
    echo "# $PROB, $n configurations, timing.max_seconds $MAXS, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    i=0
    while read -r cfg; do
        i=$((i + 1))
        { for kv in $cfg; do echo "#define ${kv%=*} ${kv#*=}"; done; cat "$PROB/$seed_file"; } >"$T/cand.c"
        agg=$("$B/bin/avo-worker" eval "$T/problem" "$T/cand.c" --json --cache "$T/cache" |
              jq -r 'if .outcome == "ok" then .aggregate else 0 end') || agg=0
        printf '%s\t%s\n' "$cfg" "$agg"
        [ $((i % 50)) -eq 0 ] && echo "tune_sweep: $i/$n" >&2
    done <"$T/configs"
} >"$OUT"
echo "tune_sweep: wrote $OUT" >&2
