#!/usr/bin/env bash
# On a GPU host: the hostile CUDA corpus on a kept checker
# (avo-harness-cuda --serve, daemon/harness/serve.h), as a job's
# evaluations run on a worker with --serve 1. On
# tests/fixtures/problems/gemm_bf16_small, one job seed, the reference
# cache on, every evaluation paired against the seed: the seed, then each
# case that gets past the compiler and the policy followed by the seed
# again, all as requests to one server. When the server ends (a case took
# it down, or it said served.ends) a fresh one takes the rest, as the
# worker's retry would. Checks:
#   - each case ends with an outcome its one-shot run may end with
#     (tests/hostile/gpu/expect.sh);
#   - the seed after every case is ok and within 10% of the seed's median
#     aggregate: the case left nothing in the kept checker that harms or
#     disturbs the next evaluation;
#   - no case scores above the seed, and an ok one is no faster than the
#     honest twin (tests/hostile/gpu/twins/twin_tiled.cu, the tiled kernel
#     every case repeats, served right after the first seed) on any config
#     by more than its TWIN_MAX (expect.sh): nothing the checker keeps
#     helps a candidate;
#   - most evaluations were made on a kept checker (served.kept), so this
#     tests the kept path;
#   - reads_held_reference never finds the answer the kept checker holds
#     on the device (its "found the answer" line); its planted control
#     finds it every time (the scan works);
#   - reads_seed never says it predicted the inputs (it reads the
#     checker's command line, where a kept checker never has a seed: on
#     this path a weak check);
#   - the server never exits with a signal; at the end the canary finds the
#     GPU healthy, no process of this run or named avo-hostile-* is left,
#     no process that was not there before holds GPU memory, and no
#     /dev/shm/avo-hostile-* file is left.
# The one-shot rules this does not repeat (the per-case process, file and
# GPU-memory checks, the canary after each crash, the cases' own problems
# and their stderr rules but reads_seed's) are tests/gpu/test_hostile_gpu.sh's.
# Prints "ok - ..." / "not ok - ..." lines and "N passed, N failed".
#   tests/gpu/test_serve_gpu.sh [NAME...]   (default: every case)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
setup_log=$(mktemp)
source tests/gpu/bare-host-setup.sh >"$setup_log" 2>&1
sed 's/^/# /' "$setup_log"
rm -f "$setup_log"
export PATH="$ROOT/build/bin:/usr/local/cuda/bin:$PATH"
unset AVO_DB AVO_CONFIG AVO_KERNELS

PASS=0
FAIL=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $*"; FAIL=$((FAIL + 1)); }

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "# skipped: no NVIDIA GPU on this machine"
    echo "0 passed, 0 failed"
    exit 0
fi

gpu_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -o '[0-9][0-9]*' | sort -u; }
GPU_PIDS0=$(gpu_pids)
HOSTILE="$ROOT/tests/hostile/gpu"
SMALL="$ROOT/tests/fixtures/problems/gemm_bf16_small"
source "$HOSTILE/expect.sh"
# Per-request deadlines (s): the harness's own, as the worker gives it.
declare -A DEADLINE=([deadlock]=28 [reads_held_reference]=298 [reads_held_reference_planted]=298)

# World-traversable: as root the runner drops to an unprivileged uid.
T=$(mktemp -d /tmp/avo-sgpu.XXXXXX)
chmod 755 "$T"
export AVO_HOME="$T/home" TMPDIR="$T/tmp"
mkdir -p "$AVO_HOME" "$TMPDIR" "$T/ref" "$T/src"
strays() {
    local p st
    for p in $(pgrep -f "$T/"); do
        st=$(ps -o stat= -p "$p" 2>/dev/null) || continue
        case $st in Z* | X* | "") ;; *) echo "$p" ;; esac
    done
}
cleanup() {
    [ -n "${SERVE_RESULTS_DIR:-}" ] && mkdir -p "$SERVE_RESULTS_DIR" && cp "$T"/*.jsonl "$T"/*.json "$T"/*.tsv "$T"/*.err "$SERVE_RESULTS_DIR"/ 2>/dev/null
    local p
    for p in $(strays) $( { pgrep '^avo-hostile'; pgrep -f '^avo-hostile-'; } 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    find /dev/shm /tmp -maxdepth 1 -name 'avo-hostile-shm-*' -delete 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

# The objects, compiled as the worker compiles them; the seed's evaluation
# (one-shot) also compiles the reference and the baseline.
newobjs() {  # newobjs ARGS...: the .so files the cache gained
    ls "$T"/cache/obj/*.so 2>/dev/null | sort >"$T/before" || true
    avo-worker eval "$SMALL" "$@" --json --cache "$T/cache" >"$T/compile.json" 2>"$T/compile.err" || true
    ls "$T"/cache/obj/*.so 2>/dev/null | sort | comm -13 "$T/before" -
}
REF= SEED=
for so in $(newobjs "$SMALL/seed.cu"); do
    syms=$(nm -D --defined-only "$so" 2>/dev/null || true)
    if grep -q ' avo_reference$' <<<"$syms"; then REF=$so
    elif ! grep -q ' avo_baseline$' <<<"$syms"; then SEED=$so; fi
done
if [ -z "$REF" ] || [ -z "$SEED" ]; then
    notok "the seed and the reference compile: $(tail -2 "$T/compile.err" | tr '\n' ' ')"
    echo "$PASS passed, $FAIL failed"
    exit 1
fi
ok "the seed and the reference compile"

cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    for src in "$HOSTILE"/*.cu; do cases+=("$(basename "$src" .cu)"); done
    cases+=("${!VARIANT[@]}")
fi
# Each case compiled alone (its own cache, so its object is the one .so
# there; eight at a time), as an evaluation compiles it. A case the
# compiler or the policy refuses never reaches a checker: not served.
compile_case() {  # compile_case NAME SRC
    avo-worker eval "$SMALL" "$2" --compile-only --json --cache "$T/cc-$1" >"$T/cc-$1.json" 2>"$T/cc-$1.err" || true
}
export -f compile_case
export SMALL T
for name in "${cases[@]}"; do
    src="$HOSTILE/$name.cu"
    if [ -n "${VARIANT[$name]:-}" ]; then
        { echo "${VARIANT[$name]#*:}"; cat "$HOSTILE/${VARIANT[$name]%%:*}.cu"; } >"$T/src/$name.cu"
        src="$T/src/$name.cu"
    fi
    if [ -f "$src" ]; then echo "$name $src" >>"$T/compile.list"; else notok "$name: no such case"; fi
done
echo "twin $HOSTILE/twins/twin_tiled.cu" >>"$T/compile.list"
xargs -P 8 -n 2 bash -c 'compile_case "$0" "$1"' <"$T/compile.list"
TWIN=$(ls "$T"/cc-twin/obj/*.so 2>/dev/null | head -1)
declare -A OBJ
for name in "${cases[@]}"; do
    outcome=$(jq -r '.outcome' "$T/cc-$name.json" 2>/dev/null)
    so=$(ls "$T/cc-$name"/obj/*.so 2>/dev/null | head -1)
    if [ "$outcome" = ok ] && [ -n "$so" ]; then
        OBJ[$name]=$so
    else
        echo "# $name: not served (${outcome:-no result}: $(tail -1 "$T/cc-$name.err" 2>/dev/null | cut -c1-120))"
    fi
done
served_cases=()
for name in "${cases[@]}"; do [ -n "${OBJ[$name]:-}" ] && served_cases+=("$name"); done
ok "${#served_cases[@]} cases compiled to be served"

JS=$(python3 -c 'import secrets; print(secrets.randbits(62) + 1)')
{
    [ -n "$TWIN" ] && printf 'twin\t%s\t58\n' "$TWIN"
    for n in "${served_cases[@]}"; do printf '%s\t%s\t%s\n' "$n" "${OBJ[$n]}" "${DEADLINE[$n]:-58}"; done
} >"$T/cases.tsv"
# The requests: the seed, then each case and the seed after it.
python3 - "$T/cases.tsv" "$SEED" "$JS" >"$T/req.json" <<'PY'
import json, sys
cases, seed, js = sys.argv[1], sys.argv[2], int(sys.argv[3])
reqs = []
def req(name, so, deadline):
    reqs.append({"name": name, "seed": 5000 + len(reqs), "job_seed": js, "deadline": float(deadline),
                 "screen": False, "objects": {"candidate": so, "against": seed}})
req("seed", seed, 58)
for line in open(cases):
    name, so, d = line.rstrip("\n").split("\t")
    req(name, so, d)
    if name != "twin":
        req("seed after " + name, seed, 58)
print(json.dumps(reqs))
PY

# Serve them; a server that ended takes the rest on a fresh one.
exec 9<"$T/ref"
total=$(jq length "$T/req.json")
done_n=0 servers=0 signals=0
: >"$T/results.jsonl"
while [ "$done_n" -lt "$total" ] && [ "$servers" -lt 12 ]; do
    servers=$((servers + 1))
    jq ".[$done_n:]" "$T/req.json" >"$T/rest.json"
    SERVE_PASS_FDS=9 SERVE_STDERR="$T/server-$servers.err" timeout -k 5 1800 python3 tests/fixtures/serve/serve_client.py avo-harness-cuda "$SMALL" "$REF" \
        "$T/rest.json" -- --ref-cache-fd 9 --ref-cache-max $((4 << 30)) >"$T/server-$servers.jsonl" 2>>"$T/client.err"
    got=$(grep -vc '"process_wall"' "$T/server-$servers.jsonl")
    code=$(jq -r 'select(.process_wall) | .exit' "$T/server-$servers.jsonl" 2>/dev/null | tail -1)
    grep -v '"process_wall"' "$T/server-$servers.jsonl" >>"$T/results.jsonl"
    echo "# server $servers: $got evaluations, exit ${code:-none} ($(tail -1 "$T/server-$servers.err" | cut -c1-160))"
    case ${code:-none} in -* | none | 1[2-9][0-9] | 2[0-9][0-9]) signals=$((signals + 1)) ;; esac
    if [ "$got" -eq 0 ]; then
        # The evaluation at the head took the server down before answering:
        # recorded as such, and the next one goes on.
        jq -c ".[$done_n] | {name, error: \"the server ended without an answer\"}" "$T/req.json" >>"$T/results.jsonl"
        got=1
    fi
    done_n=$((done_n + got))
done
exec 9<&-
if [ "$signals" -eq 0 ]; then
    ok "no server ended on a signal ($servers servers for $total evaluations)"
else
    notok "$signals of $servers servers ended on a signal (server-*.err)"
fi

# Each result beside its request's name.
python3 - "$T/req.json" "$T/results.jsonl" >"$T/table.tsv" <<'PY'
import json, sys
reqs = json.load(open(sys.argv[1]))
res = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
for q, r in zip(reqs, res):
    served = r.get("served") or {}
    text = r.get("stderr") or ""
    print("\t".join([q["name"], r.get("outcome") or ("error: " + str(r.get("error")))[:100],
                     "kept" if served.get("kept") else "fresh",
                     "found" if "avo-hostile: found the answer" in text else "-",
                     "seedline" if "avo-hostile: predicted the inputs" in text else "-",
                     str(float(r.get("aggregate") or 0)),
                     ",".join("%s:%s" % (c.get("name"), float(c["tflops"] if c.get("tflops") is not None
                                                              else (c.get("gflops") or 0) / 1000))
                              for c in r.get("configs") or []) or "-",
                     " ".join(str(r.get("detail") or "").split())[:160] or "-"]))
PY
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }
# The bounds: the seed's aggregate (the median of its evaluations: a
# checker's first can be slower), the twin's TFLOPS per config.
SEED_AGG=$(awk -F'\t' '$1 == "seed" || $1 ~ /^seed after / { print $6 }' "$T/table.tsv" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
declare -A TWIN_TF
TWIN_OK=0
IFS=$'\t' read -r _ toutcome _ _ _ _ tcfgs _ < <(awk -F'\t' '$1 == "twin"' "$T/table.tsv")
if [ "${toutcome:-}" = ok ]; then
    TWIN_OK=1
    for kv in ${tcfgs//,/ }; do TWIN_TF[${kv%%:*}]=${kv#*:}; done
    ok "twin: ok on a kept checker; TFLOPS per config: $tcfgs"
else
    notok "twin: ${toutcome:-not served}, expected ok: the twin rule cannot be applied"
fi
twin_rule() {  # NAME CONFIGS: an ok case's TFLOPS per config against the twin's
    local fac=${TWIN_MAX[$1]:-1.10} kv cfg tf tw bad=""
    [ "$TWIN_OK" = 1 ] && [ -z "${TWIN_EXEMPT[$1]:-}" ] || return 0
    for kv in ${2//,/ }; do
        cfg=${kv%%:*} tf=${kv#*:} tw=${TWIN_TF[${kv%%:*}]:-0}
        if ! gt "$tw" 0 || gt "$tf" "$(awk -v t="$tw" -v f="$fac" 'BEGIN { print t * f }')"; then
            bad+=" $cfg: $tf TFLOPS against the twin's $tw"
        fi
    done
    if [ -z "$bad" ]; then ok "$1: within $fac x the honest twin on every config"; else notok "$1: above $fac x the honest twin:$bad"; fi
}
kept=0 n=0
while IFS=$'\t' read -r name outcome how found seedline agg cfgs detail; do
    n=$((n + 1))
    [ "$how" = kept ] && kept=$((kept + 1))
    case $name in
    "seed after "*)
        if [ "$outcome" = ok ] && ! gt "$agg" "$(awk -v s="${SEED_AGG:-0}" 'BEGIN { print s * 1.1 }')" &&
            ! gt "$(awk -v s="${SEED_AGG:-0}" 'BEGIN { print s * 0.9 }')" "$agg"; then
            ok "$name: ok on a $how checker, aggregate $agg (the seed's median ${SEED_AGG:-0})"
        elif [ "$outcome" = ok ]; then
            notok "$name: aggregate $agg, more than 10% from the seed's median ${SEED_AGG:-0}"
        else
            notok "$name: $outcome on a $how checker, expected ok ($detail)"
        fi
        ;;
    seed)
        if [ "$outcome" = ok ]; then ok "seed: ok"; else notok "seed: $outcome, expected ok ($detail)"; fi
        ;;
    twin) ;;
    *)
        want=${EXPECT[$name]:-}
        if [ "$want" = any ] || { [ -n "$want" ] && [[ " $want " == *" $outcome "* ]]; } ||
            { [ -z "$want" ] && [ "$outcome" != ok ]; }; then
            ok "$name: $outcome on a $how checker (allowed: ${want:-anything but ok})"
        else
            notok "$name: $outcome on a $how checker, allowed ${want:-anything but ok} ($detail)"
        fi
        if gt "$agg" "${SEED_AGG:-0}"; then
            notok "$name: aggregate $agg above the seed's ${SEED_AGG:-0}"
        fi
        [ "$outcome" = ok ] && twin_rule "$name" "$cfgs"
        case $name in
        reads_held_reference)
            if [ "$found" = - ]; then ok "$name: did not find the answer the kept checker holds"; else notok "$name: found the answer the kept checker holds"; fi
            ;;
        reads_held_reference_planted)
            if [ "$found" = found ]; then ok "$name: the control finds its planted answer"; else notok "$name: the control did not find its planted answer (the scan is broken)"; fi
            ;;
        reads_seed)
            if [ "$seedline" = - ]; then ok "$name: did not read the seed"; else notok "$name: read the seed"; fi
            ;;
        esac
        ;;
    esac
done <"$T/table.tsv"
[ "$n" -eq "$total" ] || notok "$n results for $total requests"
# All but each server's first evaluation can be kept.
if [ $((kept * 4)) -ge $((n * 3)) ]; then
    ok "$kept of $n evaluations on a kept checker"
else
    notok "only $kept of $n evaluations on a kept checker: the kept path is not what was tested"
fi

out=$(timeout 60 avo-canary 0 2>&1)
if echo "$out" | grep -q '"ok": true'; then ok "the canary finds the GPU healthy at the end"; else notok "the canary fails at the end: $(echo "$out" | tr '\n' ' ' | cut -c1-200)"; fi
hostile=$( { pgrep '^avo-hostile'; pgrep -f '^avo-hostile-'; } 2>/dev/null | sort -un | tr '\n' ' ')
if [ -z "$hostile" ]; then ok "no process named avo-hostile-* is left"; else notok "processes named avo-hostile-* left: $hostile"; fi
newgpu=$(comm -13 <(echo "$GPU_PIDS0") <(gpu_pids) | tr '\n' ' ')
if [ -z "${newgpu// /}" ]; then ok "no new process holds GPU memory"; else notok "new processes hold GPU memory: $newgpu"; fi
shm=$(find /dev/shm /tmp -maxdepth 1 -name 'avo-hostile-shm-*' 2>/dev/null | tr '\n' ' ')
if [ -z "$shm" ]; then ok "no avo-hostile-shm-* file is left"; else notok "files left: $shm"; fi
left=$(strays | wc -l)
if [ "$left" -eq 0 ]; then ok "no process of this run is left"; else notok "$left processes of this run are left: $(strays | head -3 | xargs -r ps -o args= -p | cut -c1-120)"; fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
