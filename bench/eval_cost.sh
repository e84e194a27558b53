#!/usr/bin/env bash
# Where one full evaluation's wall time goes: N evaluations of each
# problem's seed through `avo-worker eval --json`, and per phase (the
# result's "phases": the worker's, with the harness's nested under
# harness_process; docs/evaluation.md) the median wall time and its share of
# the median evaluation wall time, then evaluations per hour for one worker
# (3600 s / that median). Each evaluation gets a candidate the cache has not
# seen (the seed plus a comment line), as in a campaign: the candidate is
# compiled every time, the reference from the cache after the first.
#
# GPU problems also get the fraction of the evaluation's wall time in which
# the GPU runs the candidate's or the baseline's kernels. Method: the
# harness's own CUDA event times (not CUPTI activity records, not NVML
# utilisation sampling): the sum over every call of the entry point
# (checked warm-ups and timed samples, the candidate's and the baseline's)
# of the call's own stream time (start mark -> its stream's end), which the
# harness already measures for timing (phases.harness.gpu), over the
# worker's evaluation wall time (phases.total). Calibration calls, the
# reference on the checker's context and the counters pass are not counted.
#
#   bench/eval_cost.sh [N] [PROBLEM-DIR...]
# Defaults: N=5; every CPU problem under kernels/cpu, and on a host with a
# GPU (nvidia-smi lists one) kernels/gemm_bf16 and kernels/attention too
# (skipped with a message where there is none). BUILD: the build directory
# (default build). KEEP=DIR keeps every result JSON there. ARGS: more
# `avo-worker eval` arguments, e.g. a paired, screened evaluation
# (docs/evaluation.md, "Screening"):
#   ARGS="--against kernels/attention/seed_sm90.cu --screen" bench/eval_cost.sh 5 kernels/attention
# (the screened evaluations, and how many the screen stopped, are counted).
set -eu
cd "$(dirname "$0")/.."
N=${1:-5}
shift || true
BUILD=${BUILD:-build}
WORKER=$BUILD/bin/avo-worker
[ -x "$WORKER" ] || { echo "eval_cost: $WORKER missing (make)" >&2; exit 2; }
case $N in '' | *[!0-9]* | 0) echo "eval_cost: N must be a positive integer, not '$N'" >&2; exit 2 ;; esac
gpu=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1
problems=("$@")
if [ ${#problems[@]} -eq 0 ]; then
    for d in kernels/cpu/*/; do problems+=("${d%/}"); done
    [ $gpu = 1 ] && problems+=(kernels/gemm_bf16 kernels/attention)
fi
T=$(mktemp -d /tmp/avo-cost.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "# eval_cost: $N evaluations of each problem's seed ($WORKER eval --json), a new candidate each time"
echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $gpu = 1 ]; then
    echo "# gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
elif [ $# -eq 0 ]; then
    echo "# kernels/gemm_bf16, kernels/attention: skipped, no GPU on this host (nvidia-smi lists none)"
fi
echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)"
for prob in "${problems[@]}"; do
    backend=$(jq -r '.backend // "cpu"' "$prob/problem.json")
    if [ "$backend" = cuda ] && [ $gpu = 0 ]; then
        echo "== $prob: skipped, a CUDA problem and no GPU on this host"
        continue
    fi
    seed=$(jq -r '.seed' "$prob/problem.json")
    name=$(basename "$prob")
    ext=${seed##*.}
    mkdir -p "$T/$name"
    for i in $(seq 1 "$N"); do
        { cat "$prob/$seed"; echo "/* eval_cost $i $$ $(date +%s%N) */"; } >"$T/$name/cand$i.$ext"
        s=$(date +%s.%N)
        # shellcheck disable=SC2086 # ARGS is a list of arguments
        TMPDIR=$T "$WORKER" eval "$prob" "$T/$name/cand$i.$ext" --json --cache "$T/cache" ${ARGS:-} \
            >"$T/$name/r$i.json" || true
        awk -v e="$(date +%s.%N)" -v s="$s" 'BEGIN { print e - s }' >"$T/$name/w$i"
    done
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP/$name" && cp "$T/$name"/r*.json "$KEEP/$name/"
    python3 - "$T/$name" "$N" "$prob" <<'PY'
import json, statistics, sys
d, n, prob = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs, walls = [], []
for i in range(1, n + 1):
    try:
        runs.append(json.load(open(f"{d}/r{i}.json")))
        walls.append(float(open(f"{d}/w{i}").read()))
    except (OSError, ValueError):
        pass
bad = [r.get("outcome", "?") for r in runs if r.get("outcome") != "ok"]
print(f"== {prob}: {len(runs)} evaluations, {len(runs) - len(bad)} ok" + (f" (not ok: {', '.join(bad)})" if bad else ""))
screened = [r for r in runs if "screened_out" in r]
if screened:
    print(f"   screened: {len(screened)}, stopped by the screen: {sum(1 for r in screened if r['screened_out'])}"
          + "".join(f"; screen x{r['screen'].get('ratio', float('nan')):.4f}" for r in screened[:3]))
runs = [r for r in runs if isinstance(r.get("phases"), dict)]
if not runs:
    print("   no result with phases")
    sys.exit(0)
med = statistics.median

def numeric_keys(objs):
    keys = []
    for o in objs:
        for k, v in o.items():
            if k != "total" and isinstance(v, (int, float)) and not isinstance(v, bool) and k not in keys:
                keys.append(k)
    return keys

ph = [r["phases"] for r in runs]
hp = [p.get("harness") if isinstance(p.get("harness"), dict) else {} for p in ph]
total = med(p["total"] for p in ph)
rows = []
for k in numeric_keys(ph):
    rows.append((k, med(p.get(k, 0) for p in ph)))
    if k == "harness_process" and any(hp):
        # "close" comes after the harness's total (docs/evaluation.md).
        for hk in numeric_keys(hp):
            if hk != "close":
                rows.append(("  " + hk, med(h.get(hk, 0) for h in hp)))
        rows.append(("  (the harness's other steps)",
                     med(h.get("total", 0) - sum(h.get(k, 0) for k in numeric_keys([h]) if k != "close") for h in hp)))
        rows.append(("  close (after the harness's total)", med(h.get("close", 0) for h in hp)))
        rows.append(("  (process start and exit, sandbox)",
                     med(p.get("harness_process", 0) - h.get("total", 0) - h.get("close", 0) for p, h in zip(ph, hp))))
rows.append(("(the worker's other steps)", med(p["total"] - sum(p.get(k, 0) for k in numeric_keys([p])) for p in ph)))
print(f"   {'phase':<38} {'median s':>10} {'share':>7}")
for k, v in rows:
    print(f"   {k:<38} {v:>10.4f} {v / total * 100:>6.1f}%")
print(f"   {'evaluation wall (phases.total)':<38} {total:>10.4f} {100:>6.1f}%")
print(f"   avo-worker eval end to end: {med(walls):.3f} s median; one worker: {3600 / total:.0f} evaluations per hour")
gpus = [h.get("gpu") for h in hp if isinstance(h.get("gpu"), dict)]
if gpus:
    frac = [(g.get("candidate_s", 0) + g.get("baseline_s", 0)) / p["total"]
            for p, h in zip(ph, hp) for g in [h.get("gpu")] if isinstance(g, dict)]
    print(f"   GPU running candidate or baseline kernels (CUDA event times): {med(frac) * 100:.1f}% of the wall "
          f"(candidate {med(g.get('candidate_s', 0) for g in gpus):.3f} s in {med(g.get('candidate_calls', 0) for g in gpus):.0f} calls, "
          f"baseline {med(g.get('baseline_s', 0) for g in gpus):.3f} s)")
PY
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
