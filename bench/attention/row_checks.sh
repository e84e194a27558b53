#!/usr/bin/env bash
# What row-subset checks (docs/evaluation.md, "Row-subset checks") save in
# a paired attention evaluation, side by side: N rounds, each one
# evaluation of the Hopper seed (a new candidate: the seed plus a comment)
# paired against the seed itself, as a campaign's evaluation is (a job
# seed, its warm-up references from the worker's cache), on
# kernels/attention as shipped (timed calls checked on check.rows.sample
# random query rows) and on a copy without check.rows (every check whole),
# in alternating order. Per evaluation: the worker's wall (phases.total),
# the harness's reference and check phases, the calls, the timed calls'
# checks, and the paired ratio; then the medians of each side. One
# evaluation per side first fills the cache (not counted).
#
#   bash bench/attention/row_checks.sh [N]     (default 3; about 40 s a round on an H200)
# BUILD: the build directory (default build). KEEP=DIR keeps the result JSONs.
set -eu
cd "$(dirname "$0")/../.."
N=${1:-3}
case $N in '' | *[!0-9]* | 0) echo "row_checks: N must be a positive integer, not '$N'" >&2; exit 2 ;; esac
WORKER=${BUILD:-build}/bin/avo-worker
[ -x "$WORKER" ] || { echo "row_checks: $WORKER missing (make)" >&2; exit 2; }
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { echo "row_checks: no GPU on this host (nvidia-smi lists none)" >&2; exit 2; }
T=$(mktemp -d /tmp/avo-rowchk.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/whole"
cp kernels/attention/*.cu "$T/whole/"
python3 - kernels/attention/problem.json "$T/whole/problem.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["check"].pop("rows", None)
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
echo "# row_checks: $N rounds, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# rows: kernels/attention (check.rows.sample $(jq '.check.rows.sample' kernels/attention/problem.json)); whole: the same without check.rows"
JS=91234567
one() { # SIDE TAG
    local dir=kernels/attention
    [ "$1" = whole ] && dir=$T/whole
    { cat kernels/attention/seed_sm90.cu; echo "/* row_checks $2 $$ $(date +%s%N) */"; } >"$T/cand-$2.cu"
    echo "$JS" | TMPDIR=$T "$WORKER" eval "$dir" "$T/cand-$2.cu" --json --cache "$T/cache-$1" --job-seed-stdin \
        --against kernels/attention/seed_sm90.cu >"$T/$1-$2.json" 2>"$T/$1-$2.err" || true
}
one rows warm
one whole warm
for i in $(seq 1 "$N"); do
    if [ $((i % 2)) = 1 ]; then one rows "$i"; one whole "$i"; else one whole "$i"; one rows "$i"; fi
done
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$T"/*.json "$KEEP/"
python3 - "$T" "$N" <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
cols = ["total", "harness", "reference", "against_checks", "checks", "calls", "timed checks", "ratio"]
print("%-6s %-5s %-8s" % ("side", "round", "outcome") + "".join("%15s" % c for c in cols))
med = {}
for side in ("rows", "whole"):
    for i in range(1, n + 1):
        try:
            r = json.load(open(f"{d}/{side}-{i}.json"))
        except (OSError, ValueError) as e:
            print(f"{side:<6} {i:<5} no result ({e})")
            continue
        ph = r.get("phases") or {}
        h = ph.get("harness") or {}
        checks = sum((c.get("checks") or {}).get("random_checks", 0) for c in r.get("configs", []))
        v = [ph.get("total", 0), h.get("total", 0), h.get("reference", 0), h.get("against_checks", 0),
             h.get("checks", 0), h.get("calls", 0), checks, (r.get("paired") or {}).get("ratio") or 0]
        print("%-6s %-5d %-8s" % (side, i, r.get("outcome")) + "".join("%15.4f" % x for x in v))
        for c, x in zip(cols, v):
            med.setdefault(side, {}).setdefault(c, []).append(x)
for side, m in med.items():
    print("%-6s %-5s %-8s" % (side, "med", "") + "".join("%15.4f" % statistics.median(m[c]) for c in cols))
if len(med) == 2:
    a, b = statistics.median(med["rows"]["total"]), statistics.median(med["whole"]["total"])
    print(f"# median wall: rows {a:.2f} s, whole {b:.2f} s ({(1 - a / b) * 100:.0f}% less)")
PY
