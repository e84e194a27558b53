#!/usr/bin/env bash
# Issue 20's paired measurement on the CPU: A/A and sensitivity, with the
# fixture of tests/integration/test_paired.sh (cpu/softmax on small rows, a
# kernel doing REPS passes of the same work): base = REPS 20; A/A = base
# against a copy of itself, N times; faster = REPS 17 (about 15% faster),
# slower = REPS 21 (about 5% slower), each against base. Printed per run:
# the aggregate ratio, its one-sided lower bound and 95% interval, whether
# the CPU default rule (lower bound > 1 + 2%) would commit it, and where a
# confirmation round ran (docs/evaluation.md) both rounds' lower bounds;
# then the A/A
# ratios' spread (max/min - 1) and the load average.
# COIN=M adds M A/A runs whose against is slower by 10% (2 of 20 passes)
# for the whole of a runner process in about half of its processes (the
# fixture's PROCESS_COIN): a stand-in for the bias of the process a lane
# runs in, to show what the confirmation round does with it (the first
# round alone commits about half of them, both rounds about a quarter).
# HOG=1 runs a busy loop on the CPU the harness pins itself to (the
# highest one) during the A/A runs, and prints how far their configs'
# ratios move and the checker's waits for that CPU (docs/evaluation.md,
# Residual risks, "A busy neighbour on the harness's CPU").
#   [N=10] [COIN=0] [HOG=0] [OUT=dir] bash bench/paired/cpu.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
N=${N:-10}
MIN_GAIN=${MIN_GAIN:-0.02}
OUTDIR=${OUT:-/tmp/avo-paired-cpu}
mkdir -p "$OUTDIR"
export PATH="$ROOT/build/bin:$PATH"
F=tests/fixtures/kernels/paired
cp "$F/base.c" "$OUTDIR/copy.c"
(echo '#define REPS 17'; cat "$F/base.c") >"$OUTDIR/faster.c"
(echo '#define REPS 21'; cat "$F/base.c") >"$OUTDIR/slower.c"
(echo '#define PROCESS_COIN 2'; cat "$F/base.c") >"$OUTDIR/coin.c"
run() {  # run NAME CANDIDATE [AGAINST]
    avo-worker eval "$F" "$2" --json --cache "$OUTDIR/cache" --against "${3:-$F/base.c}" >"$OUTDIR/$1.json" \
        2>"$OUTDIR/$1.err"
    [ -s "$OUTDIR/$1.json" ] || { echo "$1: no result ($(tail -1 "$OUTDIR/$1.err"))"; return; }
    jq -r --arg n "$1" --argjson g "$MIN_GAIN" '
        if .paired == null then "\($n): no paired result (outcome \(.outcome): \(.detail))"
        elif .paired.error then "\($n): paired error: \(.paired.error)"
        else "\($n): ratio \(.paired.ratio) low \(.paired.low) ci \(.paired.ci) commit \(.paired.low > 1 + $g)\(
            if .paired.confirmation.ran then " (confirmed: rounds \([.paired.confirmation.rounds[] | .low]), kept \(.paired.confirmation.kept))" else "" end)"
        end' "$OUTDIR/$1.json"
}
echo "# paired cpu: $N A/A runs and the sensitivity pair, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
HOG=${HOG:-0}
if [ "$HOG" = 1 ]; then
    taskset -c $(($(nproc) - 1)) sh -c 'while :; do :; done' &
    hog=$!
    trap 'kill $hog 2>/dev/null' EXIT
    echo "# a busy loop on CPU $(($(nproc) - 1)) during the A/A runs"
fi
for i in $(seq 1 "$N"); do run "aa-$i" "$OUTDIR/copy.c"; done
if [ "$HOG" = 1 ]; then
    kill $hog 2>/dev/null
    wait $hog 2>/dev/null
fi
[ "$N" -gt 0 ] && jq -s -r '[.[].paired.configs[]?.ratio] as $c
    | "A/A configs: \($c | length), ratios \($c | min) .. \($c | max), beyond 3%: \($c | map(select(. - 1 | fabs > 0.03)) | length),"
      + " beyond 10%: \($c | map(select(. - 1 | fabs > 0.1)) | length); the checker waited for its CPU (candidate lane):"
      + " \([.[].configs[]?.clock_gap.checker_wait_s // 0] | add) s"' "$OUTDIR"/aa-*.json
run faster "$OUTDIR/faster.c"
run slower "$OUTDIR/slower.c"
[ "$N" -gt 0 ] && jq -s -r --argjson g "$MIN_GAIN" '[.[] | select(.paired.ratio != null)] as $r
    | ($r | map(.paired.ratio)) as $x
    | ($r | map(select(.paired.confirmation.ran))) as $c
    | "A/A: \($x | length) runs, ratios \($x | min) .. \($x | max), spread \((($x | max) / ($x | min) - 1) * 100)%, committed \($r | map(select(.paired.low > 1 + $g)) | length); a confirmation round in \($c | length), where the first round alone would have committed \($c | map(select(.paired.confirmation.rounds[0].low > 1 + $g)) | length)"' \
    "$OUTDIR"/aa-*.json
COIN=${COIN:-0}
if [ "$COIN" -gt 0 ]; then
    for i in $(seq 1 "$COIN"); do run "coin-$i" "$OUTDIR/copy.c" "$OUTDIR/coin.c"; done
    jq -s -r --argjson g "$MIN_GAIN" '[.[] | select(.paired.ratio != null)] as $r
        | "process coin: \($r | length) runs; the first round would have committed \($r | map(select((.paired.confirmation.rounds[0].low // .paired.low) > 1 + $g)) | length), committed \($r | map(select(.paired.low > 1 + $g)) | length); no result or a paired error in \($COIN - ($r | length))"' \
        --argjson COIN "$COIN" "$OUTDIR"/coin-*.json
fi
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
