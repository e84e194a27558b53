#!/usr/bin/env bash
# What a checker kept between evaluations saves (avo-harness --serve,
# daemon/harness/serve.h): a problem's seed evaluated as a campaign's
# evaluations run it (paired against itself with the job's seed and its
# reference cache; "full", an A/A timed in full, and "screened", the seed
# doing its work three times, which the screen stops), each kind both ways
# in every round, the order alternating: a fresh avo-harness process per
# evaluation ("one-shot", as the worker runs it today) and a request to
# one avo-harness --serve that served the round before ("served"). Both
# run the harness by hand (no worker sandbox: its cost is the same either
# way). Prints per kind and way the median wall over N rounds and the
# per-round ratio served / one-shot as median [min, max].
#   bench/serve/gain.sh [N] [PROBLEM]      (default 6, kernels/attention)
# BUILD: the build directory (default build). KEEP=DIR keeps the results.
# Runs on a CPU problem too (kernels/cpu/softmax: its "screened" is a
# slower candidate the screen may or may not stop).
set -eu
cd "$(dirname "$0")/../.."
N=${1:-6} P=${2:-kernels/attention}
case $N in '' | *[!0-9]* | 0) echo "serve/gain: N must be a positive integer, not '$N'" >&2; exit 2 ;; esac
B=${BUILD:-build}/bin
backend=$(jq -r '.backend' "$P/problem.json")
H=$B/avo-harness
[ "$backend" = cuda ] && H=$B/avo-harness-cuda
[ -x "$H" ] && [ -x "$B/avo-worker" ] || { echo "serve/gain: $H or $B/avo-worker missing (make)" >&2; exit 2; }
if [ "$backend" = cuda ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "serve/gain: skipped: $P is a CUDA problem and no GPU is here (nvidia-smi lists none)"
    exit 0
fi
T=$(mktemp -d /tmp/avo-servegain.XXXXXX)
trap 'rm -rf "$T"' EXIT
seedf="$P/$(jq -r '.seed' "$P/problem.json")"
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)
[ "$CC" = 9.0 ] && [ -f "$P/seed_sm90.cu" ] && seedf=$P/seed_sm90.cu
ENTRY=$(jq -r '.entry // "kernel"' "$P/problem.json")
ext=${seedf##*.}
mkdir "$T/src"
cp "$seedf" "$T/src/seed.$ext"
# The three-times-slower seed (its entry renamed, called three times).
if [ "$backend" = cuda ]; then
    sed "s/^extern \"C\" int $ENTRY(/static int ${ENTRY}_once(/" "$seedf" >"$T/src/slow3.$ext"
    printf 'extern "C" int %s(void *const *t, const int64_t *s, cudaStream_t st)\n{\n    int rc = 0;\n    for (int k = 0; rc == 0 && k < 3; k++)\n        rc = %s_once(t, s, st);\n    return rc;\n}\n' "$ENTRY" "$ENTRY" >>"$T/src/slow3.$ext"
else
    sed "s/^int $ENTRY(/static int ${ENTRY}_once(/" "$seedf" >"$T/src/slow3.$ext"
    printf 'int %s(void *const *t, const int64_t *s)\n{\n    int rc = 0;\n    for (int k = 0; rc == 0 && k < 3; k++)\n        rc = %s_once(t, s);\n    return rc;\n}\n' "$ENTRY" "$ENTRY" >>"$T/src/slow3.$ext"
fi
grep -q "${ENTRY}_once" "$T/src/slow3.$ext" || { echo "serve/gain: cannot find the entry $ENTRY( in $seedf" >&2; exit 2; }
# The objects, compiled as the worker compiles them (its cache keeps them).
objs() {  # objs SOURCE: the new .so files the worker's cache gained
    ls "$T"/cache/obj/*.so 2>/dev/null | sort >"$T/before" || true
    "$B/avo-worker" eval "$P" "$1" --json --cache "$T/cache" >"$T/compile.json" 2>"$T/compile.err" || true
    ls "$T"/cache/obj/*.so 2>/dev/null | sort | comm -13 "$T/before" -
}
REF= SEED= BASE=
for so in $(objs "$T/src/seed.$ext"); do
    syms=$(nm -D --defined-only "$so" 2>/dev/null || true)
    if grep -q ' avo_reference$' <<<"$syms"; then REF=$so
    elif grep -q ' avo_baseline$' <<<"$syms"; then BASE=$so
    else SEED=$so; fi
done
SLOW=$(objs "$T/src/slow3.$ext" | head -1)
[ -n "$REF" ] && [ -n "$SEED" ] && [ -n "$SLOW" ] || { echo "serve/gain: no compiled objects ($(tail -1 "$T/compile.err"))" >&2; exit 1; }
JS=$(python3 -c 'import secrets; print(secrets.randbits(62) + 1)')
mkdir "$T/ref"
exec 9<"$T/ref"
CACHEARGS="--ref-cache-fd 9 --ref-cache-max $((8 << 30))"
# One-shot: a fresh process per evaluation (a script, run between the
# served requests by serve_client.py), its result and wall beside it.
cat >"$T/oneshot.sh" <<SH
cand=$SEED
[ "\$1" = screened ] && cand=$SLOW
echo "\$((1000 + \$2)) $JS" >"$T/one-\$1-\$2.in"
exec python3 -c 'import subprocess, sys, time, json
t = time.monotonic()
rc = subprocess.run(sys.argv[2:], stdin=open(sys.argv[1] + ".in"), stdout=open(sys.argv[1] + ".json", "w"), pass_fds=(9,)).returncode
json.dump({"wall": time.monotonic() - t, "rc": rc}, open(sys.argv[1] + ".wall", "w"))' "$T/one-\$1-\$2" \
    "$H" "$P" "\$cand" "$REF" --seed-stdin $CACHEARGS --against "$SEED" --screen ${BASE:+--baseline "$BASE"}
SH
python3 - "$T" "$N" "$SEED" "$SLOW" "$JS" "$BASE" >"$T/req.json" <<'PY'
import json, sys
t, n, seed, slow, js, base = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
reqs = []
for i in range(n + 1):
    for kind, cand in (("full", seed), ("screened", slow)):
        objs = {"candidate": cand, "against": seed}
        if base:
            objs["baseline"] = base
        q = {"seed": 2000 + i, "job_seed": js, "screen": True, "objects": objs, "kind": kind, "round": i}
        one = f"bash {t}/oneshot.sh {kind} {i}"
        # The order alternates: the one-shot first in even rounds.
        q["before" if (i + (kind == "screened")) % 2 == 0 else "after"] = one
        reqs.append(q)
print(json.dumps(reqs))
PY
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
echo "# serve/gain: $P ($(basename "$seedf")), $N counted rounds after one warm-up, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: ${gpu:+$gpu, }$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
SERVE_PASS_FDS=9 python3 tests/fixtures/serve/serve_client.py "$H" "$P" "$REF" "$T/req.json" -- $CACHEARGS >"$T/served.jsonl" 2>"$T/served.err" ||
    { echo "serve/gain: the server failed: $(tail -3 "$T/served.err")" >&2; exit 1; }
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$T"/served.jsonl "$T"/one-*.json "$T"/one-*.wall "$T/req.json" "$KEEP"/
python3 - "$T" "$N" <<'PY'
import json, statistics, sys
t, n = sys.argv[1], int(sys.argv[2])
served = [json.loads(l) for l in open(f"{t}/served.jsonl")][:-1]
reqs = json.load(open(f"{t}/req.json"))
for kind in ("full", "screened"):
    rows = []
    for q, s in zip(reqs, served):
        if q["kind"] != kind or q["round"] == 0:
            continue
        o = json.load(open(f"{t}/one-{kind}-{q['round']}.json"))
        ow = json.load(open(f"{t}/one-{kind}-{q['round']}.wall"))["wall"]
        rows.append((ow, s["wall"], o, s))
    if not rows:
        continue
    ow = [r[0] for r in rows]
    sw = [r[1] for r in rows]
    ratio = sorted(b / a for a, b in rows and zip(ow, sw))
    out = lambda xs: ", ".join(sorted(set(x["outcome"] + (" screened out" if x.get("screened_out") else "") for x in xs)))
    print(f"{kind}: one-shot {out([r[2] for r in rows])}; served {out([r[3] for r in rows])}, kept {sum(bool(r[3].get('served', {}).get('kept')) for r in rows)}/{len(rows)}")
    print(f"  wall, median of {len(rows)}: one-shot {statistics.median(ow):.3f} s, served {statistics.median(sw):.3f} s; "
          f"served/one-shot per round median {statistics.median(ratio):.3f} [{ratio[0]:.3f}, {ratio[-1]:.3f}]")
    keys = []
    for r in rows:
        for x in (r[2], r[3]):
            for k, v in x.get("phases", {}).items():
                if isinstance(v, (int, float)) and k not in keys:
                    keys.append(k)
    diffs = []
    for k in keys:
        m1 = statistics.median(r[2].get("phases", {}).get(k, 0) for r in rows)
        m2 = statistics.median(r[3].get("phases", {}).get(k, 0) for r in rows)
        diffs.append((abs(m2 - m1), k, m1, m2))
    for _, k, m1, m2 in sorted(diffs, reverse=True)[:8]:
        print(f"  harness.{k:<24} one-shot {m1:7.3f} s  served {m2:7.3f} s")
PY
