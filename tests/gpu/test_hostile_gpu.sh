#!/usr/bin/env bash
# On a GPU host: the hostile CUDA corpus. Every tests/hostile/gpu/*.cu is
# evaluated as a gemm_bf16 candidate by `avo-worker eval` and held to the
# outcome class in the table below, and to the rules no case may break:
#   - the worker survives (exit 0 or 1: never a signal, a hang, a usage error);
#   - the aggregate never exceeds the seed's on the same problem;
#   - after a crash or a timeout the canary (avo-canary) still finds the GPU
#     healthy, so the next candidate would run;
#   - no process of the case is left running (none whose command line names
#     this run's directory, none named avo-hostile-*), no new pid holds GPU
#     memory (nvidia-smi --query-compute-apps), no /dev/shm/avo-hostile-*
#     file is left;
#   - a case that ends ok is no faster than the honest twin
#     (tests/hostile/gpu/twins/twin_tiled.cu: the tiled kernel every case
#     repeats, no cheat; evaluated once on gemm_bf16_small, not a case):
#     every config's TFLOPS at most the twin's x 1.10 (x 1.03 for
#     disturbs_calibration), for the cases on gemm_bf16_small;
#   - after the cases that try to outlive their evaluation (helper_process,
#     fills_shm), the next evaluation (the seed on gemm_bf16_small) is ok.
# To keep the run short most cases use tests/fixtures/problems/gemm_bf16_small
# (configs 1024 and 2048, 0.5 s of timing per config); side_stream and
# side_tail use gemm_bf16_4096 (one real size, for a meaningful time
# comparison with their honest twins) and
# fp16_accumulate the full kernels/gemm_bf16 (K up to 8192). The seed is
# evaluated on each of the three. Prints TAP-style "ok - ..." / "not ok - ..."
# lines and ends with "N passed, N failed"; exit status 0 when none failed.
#   tests/gpu/test_hostile_gpu.sh [NAME...]   (default: every case)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
setup_log=$(mktemp)
source tests/gpu/bare-host-setup.sh >"$setup_log" 2>&1
sed 's/^/# /' "$setup_log"
rm -f "$setup_log"
export PATH="$ROOT/build/bin:/usr/local/cuda/bin:$PATH"
unset AVO_DB AVO_CONFIG AVO_KERNELS

# World-traversable: as root the runner drops to an unprivileged uid.
T=$(mktemp -d /tmp/avo-hgpu.XXXXXX)
chmod 755 "$T"
export AVO_HOME="$T/home"
mkdir -p "$AVO_HOME" "$T/tmp"
export TMPDIR="$T/tmp" # scratch dirs of the evaluations, so strays are found by "$T/"
CACHE="$T/cache"       # one compile cache: the seed and the references compile once
SEED=20261202
HOSTILE="$ROOT/tests/hostile/gpu"
FULL="$ROOT/kernels/gemm_bf16"
SMALL="$ROOT/tests/fixtures/problems/gemm_bf16_small"
TWIN_SRC="$HOSTILE/twins/twin_tiled.cu"
P4096="$ROOT/tests/fixtures/problems/gemm_bf16_4096"
START=$(date +%s)

PASS=0
FAIL=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $*"; FAIL=$((FAIL + 1)); }

# The outcome table (EXPECT) and the variants (VARIANT).
source "$HOSTILE/expect.sh"
# Problem per case (default: the small fixture).
declare -A PROBLEM=([side_stream]="$P4096" [side_tail]="$P4096" [fp16_accumulate]="$FULL")
# --timeout per case (default 60 s). It bounds the compile and the harness
# separately; the harness's own deadline is 2 s (10%) earlier.
declare -A TIMEOUT=([deadlock]=30 [fp16_accumulate]=180 [reads_held_reference]=300 [reads_held_reference_planted]=300)
# Cases evaluated paired against the problem's seed with a job seed, after
# the seed alone with the same job seed has filled the reference cache: the
# path where the checker holds correct outputs on the device while
# candidates run (eval_paired_job).
declare -A PAIRED_JOB=([reads_held_reference]=1 [reads_held_reference_planted]=1)
# Cases exempt from "not above the seed" (a policy question, reported):
# none since the policy refuses calls_cublas.
declare -A ABOVE_SEED_OK=()
# Cases whose harm would show in the next evaluation: the seed is evaluated
# again right after them and must be ok.
declare -A NEXT_EVAL=([helper_process]=1 [fills_shm]=1)
# Cases for which the checks after the evaluation (named processes, GPU
# memory, /dev/shm) print their "ok" lines too; for every other case only a
# failure is printed.
declare -A AFTER_CHECKS=([helper_process]=1 [fills_shm]=1)

# summary JSON -> "outcome<TAB>aggregate<TAB>detail" (python3: no jq on a bare host)
summary() {
    python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    d = " ".join(str(r.get("detail") or "").split())[:220]
    print("%s\t%s\t%s" % (r.get("outcome") or "none", float(r.get("aggregate") or 0), d or "-"))
except Exception as e:
    print("none\t0\tno JSON result (%s)" % " ".join(str(e).split())[:120])
PY
}

# median_s of config NAME in a result, or 0
median_of() {
    python3 - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    print(next((c.get("median_s") or 0) for c in r.get("configs", []) if c.get("name") == sys.argv[2]))
except Exception:
    print(0)
PY
}

# runner.timing_start of a result: "mode<TAB>reason"
timing_start() {
    python3 - "$1" <<'PY'
import json, sys
try:
    t = json.load(open(sys.argv[1]))["runner"]["timing_start"]
    print("%s\t%s" % (t.get("mode"), t.get("reason") or "-"))
except Exception as e:
    print("none\t%s" % e)
PY
}

gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# Per config of a result: "name<TAB>TFLOPS" (from tflops, else gflops / 1000)
tflops_of() {
    python3 - "$1" <<'PY'
import json, sys
try:
    for c in json.load(open(sys.argv[1])).get("configs", []):
        t = c.get("tflops")
        if t is None and c.get("gflops") is not None:
            t = c["gflops"] / 1000
        print("%s\t%s" % (c.get("name"), float(t or 0)))
except Exception:
    pass
PY
}

# What the calibration set per config, and how timing started (for reading
# disturbs_calibration's result): "# ..." lines
calibration_notes() {
    python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    t = (r.get("runner") or {}).get("timing_start") or {}
    print("# timing start: %s (%s)" % (t.get("mode"), t.get("reason") or "-"))
    for c in r.get("configs", []):
        e = c.get("events") or {}
        print("# config %s: %s TFLOPS, overhead %s s (median %s), tail allowance %s s (calibrated median %s, "
              "timed median %s), %s of %s runs charged" % (
                  c.get("name"), c.get("tflops"), e.get("overhead_s"), e.get("overhead_median_s"),
                  e.get("tail_allowance_s"), e.get("calibrated_tail_median_s"), e.get("tail_median_s"),
                  e.get("tail_charged_runs"), c.get("runs")))
except Exception as ex:
    print("# no calibration figures (%s)" % " ".join(str(ex).split())[:120])
PY
}

# Live processes named avo-hostile-* (by name, or argv[0] on the command
# line): what a case that tries to outlive its evaluation leaves.
hostile_procs() {
    local p st
    for p in $( { pgrep '^avo-hostile'; pgrep -f '^avo-hostile-'; } 2>/dev/null | sort -un); do
        st=$(ps -o stat= -p "$p" 2>/dev/null) || continue
        case $st in Z* | X* | "") ;; *) echo "$p" ;; esac
    done
}
# What fills_shm leaves behind (the marker is this corpus's own).
marker_files() { find /dev/shm /tmp -maxdepth 1 -name 'avo-hostile-shm-*' 2>/dev/null; }
# Pids holding a compute context on the GPU, sorted for comm(1); and their
# memory as nvidia-smi reports it.
gpu_pids() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -o '[0-9][0-9]*' | sort -u; }
gpu_mem_of() {  # PID -> "1234 MiB", or nothing
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null |
        awk -F', *' -v p="$1" '$1 == p { print $2; exit }'
}

# eval_case PROBLEM FILE TIMEOUT OUT -> worker exit code. The outer timeout
# covers the compile and the harness, each bounded by TIMEOUT.
eval_case() {
    timeout -k 5 $(($3 * 2 + 30)) avo-worker eval "$1" "$2" --json --timeout "$3" --seed "$SEED" \
        --cache "$CACHE" >"$4" 2>"$4.err"
}

# eval_paired_job PROBLEM FILE TIMEOUT OUT -> worker exit code: the seed with
# a job seed first (its warm-up references computed and written to the
# cache), then FILE against the seed with the same job seed (the references
# read from the cache and uploaded into the checker's device tensors, and
# each pair's reference run held for the other lane).
eval_paired_job() {
    local js=7340033
    echo "$js" | timeout -k 5 $(($3 * 2 + 30)) avo-worker eval "$1" "$1/seed.cu" --json --timeout "$3" --seed "$SEED" \
        --cache "$CACHE" --job-seed-stdin >"$4.warm.json" 2>"$4.warm.err"
    echo "$js" | timeout -k 5 $(($3 * 2 + 30)) avo-worker eval "$1" "$2" --json --timeout "$3" --seed "$SEED" \
        --cache "$CACHE" --job-seed-stdin --against "$1/seed.cu" >"$4" 2>"$4.err"
}

# The first line a hostile case wrote to stderr starting with PREFIX, from
# the result (the sandbox keeps its stderr's tail) or the worker's stderr.
said_line() { grep -oh "$1[^\"\\\\]*" "$out" "$out.err" 2>/dev/null | head -1 | cut -c1-220; }

# Live (non-zombie) processes whose command line names this test's $T.
strays() {
    local p st
    for p in $(pgrep -f "$T/"); do
        st=$(ps -o stat= -p "$p" 2>/dev/null) || continue
        case $st in Z* | X* | "") ;; *) echo "$p" ;; esac
    done
}
kill_strays() { local p; for p in $(strays); do kill -KILL "$p" 2>/dev/null; done; }
kill_hostile() { local p; for p in $(hostile_procs); do kill -KILL "$p" 2>/dev/null; done; }
remove_marker_files() { local f; marker_files | while IFS= read -r f; do rm -f "$f"; done; }
gpu_procs() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c '[0-9]'; }
# HOSTILE_RESULTS_DIR=DIR keeps every result JSON (the evidence of a run).
cleanup() {
    [ -n "${HOSTILE_RESULTS_DIR:-}" ] && mkdir -p "$HOSTILE_RESULTS_DIR" && cp "$T"/*.json "$HOSTILE_RESULTS_DIR"/ 2>/dev/null
    kill_strays; kill_hostile; remove_marker_files; rm -rf "$T"
}
trap cleanup EXIT

canary() {  # LABEL: the GPU must still run a known-good kernel
    local out
    out=$(timeout 60 avo-canary 0 2>&1)
    if echo "$out" | grep -q '"ok": true'; then
        ok "$1: the canary finds the GPU healthy afterwards"
    else
        notok "$1: the canary fails afterwards: $(echo "$out" | tr '\n' ' ' | cut -c1-200)"
    fi
}

if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "# skipped: no NVIDIA GPU on this machine"
    echo "0 passed, 0 failed"
    exit 0
fi
GPU_PROCS0=$(gpu_procs)

# The seed on each problem: the numbers no hostile case may beat.
declare -A SEED_AGG
for prob in "$FULL" "$SMALL" "$P4096"; do
    pname=$(basename "$prob")
    out="$T/seed-$pname.json"
    t0=$(date +%s)
    eval_case "$prob" "$FULL/seed.cu" 180 "$out"
    rc=$?
    IFS=$'\t' read -r outcome agg detail < <(summary "$out")
    SEED_AGG[$prob]=$agg
    if [ "$outcome" = ok ] && gt "$agg" 0; then
        ok "seed on $pname: outcome ok, aggregate $agg ($(($(date +%s) - t0)) s)"
    else
        notok "seed on $pname: expected ok, got $outcome (exit $rc; $detail) $(tail -2 "$out.err" | tr '\n' ' ')"
    fi
    inputs=$(jq -r '.runner.inputs // "missing"' "$out" 2>/dev/null)
    if [[ $inputs == device:* ]]; then
        ok "seed on $pname: inputs generated on the device"
    else
        notok "seed on $pname: inputs $inputs, expected generated on the device"
    fi
    filt=$(jq -r '.runner.syscall_filter' "$out" 2>/dev/null)
    if [ "$filt" = true ]; then
        ok "seed on $pname: the CUDA runner runs under its system-call filter (runner.syscall_filter)"
    else
        notok "seed on $pname: runner.syscall_filter is $filt, expected true"
    fi
    IFS=$'\t' read -r mode why < <(timing_start "$out")
    if [ "$mode" = gated ]; then
        ok "seed on $pname: timed from a gated start"
    else
        notok "seed on $pname: timing start $mode ($why), expected gated"
    fi
done

# The honest twin on the cases' problem: the tiled kernel every case repeats,
# no cheat. An ok case may not beat it (by more than TWIN_MAX).
declare -A TWIN_TF
TWIN_OK=0
t0=$(date +%s)
eval_case "$SMALL" "$TWIN_SRC" 60 "$T/twin-tiled.json"
rc=$?
IFS=$'\t' read -r outcome agg detail < <(summary "$T/twin-tiled.json")
if [ "$outcome" = ok ] && gt "$agg" 0; then
    TWIN_OK=1
    figures=""
    while IFS=$'\t' read -r cfg tf; do
        TWIN_TF[$cfg]=$tf
        figures+=" $cfg: $tf"
    done < <(tflops_of "$T/twin-tiled.json")
    ok "honest twin (twins/twin_tiled.cu) on gemm_bf16_small: outcome ok, aggregate $agg; TFLOPS per config:$figures ($(($(date +%s) - t0)) s)"
else
    notok "honest twin (twins/twin_tiled.cu) on gemm_bf16_small: expected ok, got $outcome (exit $rc; $detail): the twin rule cannot be applied"
fi

cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    for src in "$HOSTILE"/*.cu; do cases+=("$(basename "$src" .cu)"); done
    cases+=("${!VARIANT[@]}")
fi

for name in "${cases[@]}"; do
    src="$HOSTILE/$name.cu"
    if [ -n "${VARIANT[$name]:-}" ]; then
        base="$HOSTILE/${VARIANT[$name]%%:*}.cu"
        [ -f "$base" ] || { notok "$name: no such case ($base)"; continue; }
        src="$T/$name.cu"
        { echo "${VARIANT[$name]#*:}"; cat "$base"; } >"$src"
    fi
    [ -f "$src" ] || { notok "$name: no such case ($src)"; continue; }
    prob=${PROBLEM[$name]:-$SMALL}
    to=${TIMEOUT[$name]:-60}
    want=${EXPECT[$name]:-}
    seed_agg=${SEED_AGG[$prob]:-0}
    out="$T/$name.json"
    gpu_before=$(gpu_pids)
    t0=$(date +%s)
    if [ -n "${PAIRED_JOB[$name]:-}" ]; then
        eval_paired_job "$prob" "$src" "$to" "$out"
    else
        eval_case "$prob" "$src" "$to" "$out"
    fi
    rc=$?
    secs=$(($(date +%s) - t0))
    IFS=$'\t' read -r outcome agg detail < <(summary "$out")

    # Survival first: 0 (ok) or 1 (the candidate failed); 2 is a usage or
    # spec error, 124/137 our outer timeout, >128 a signal.
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then
        ok "$name: the worker survives (exit $rc, ${secs} s)"
    else
        notok "$name: the worker did not survive (exit $rc, ${secs} s): $(tail -3 "$out.err" | tr '\n' ' ')"
    fi

    if [ "$want" = any ]; then
        ok "$name: outcome $outcome, aggregate $agg vs seed $seed_agg # note: not asserted ($detail)"
    elif [ -z "$want" ]; then
        # a case without a row in the table must at least not be ok
        if [ "$outcome" != ok ] && [ "$outcome" != none ]; then
            ok "$name: outcome $outcome (no row in the table: anything but ok)"
        else
            notok "$name: expected anything but ok, got $outcome ($detail)"
        fi
    else
        pass=0
        for w in $want; do [ "$outcome" = "$w" ] && pass=1; done
        if [ $pass -eq 1 ]; then
            ok "$name: outcome $outcome"
        else
            notok "$name: expected ${want// /|}, got $outcome ($detail)"
        fi
    fi

    # A refused case names its rule and line and is never scored.
    if [ "$outcome" = policy_violation ]; then
        if python3 - "$out" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
p = r.get("policy") or {}
ok = isinstance(p.get("rule"), str) and (p.get("line") is not None or p.get("file") == "object") \
    and float(r.get("aggregate") or 0) == 0 and all(float(c.get("score") or 0) == 0 for c in r.get("configs", []))
sys.exit(0 if ok else 1)
PY
            ok "$name: the policy names its rule and line, never scored"
        else
            notok "$name: a policy_violation without its rule and line, or with a score"
        fi
    fi

    if [ -n "${ABOVE_SEED_OK[$name]:-}" ]; then
        gt "$agg" "$seed_agg" && echo "# note: $name scores $agg, above the seed's $seed_agg (exempt: policy question)"
    elif gt "$agg" "$seed_agg"; then
        notok "$name: aggregate $agg exceeds the seed's $seed_agg on $(basename "$prob")"
    else
        ok "$name: aggregate $agg does not exceed the seed's $seed_agg"
    fi

    # The twin rule: built on the tiled kernel, an ok case is no faster than
    # it (by more than TWIN_MAX) on any config.
    if [ "$outcome" = ok ] && [ "$prob" = "$SMALL" ] && [ -z "${TWIN_EXEMPT[$name]:-}" ]; then
        fac=${TWIN_MAX[$name]:-1.10}
        if [ "$TWIN_OK" -ne 1 ]; then
            echo "# note: $name: the twin rule is not applied (the honest twin did not evaluate ok)"
        else
            while IFS=$'\t' read -r cfg tf; do
                tw=${TWIN_TF[$cfg]:-0}
                if ! gt "$tw" 0; then
                    notok "$name: config $cfg at $tf TFLOPS: the honest twin has no figure for it"
                elif gt "$tf" "$(awk -v t="$tw" -v f="$fac" 'BEGIN { print t * f }')"; then
                    notok "$name: config $cfg at $tf TFLOPS, above $fac x the honest twin's $tw"
                else
                    ok "$name: config $cfg at $tf TFLOPS, within $fac x the honest twin's $tw"
                fi
            done < <(tflops_of "$out")
        fi
    fi

    if [ "$name" = forges_event_time ]; then
        # The lie must have been told (else the case tests nothing) and, if
        # it scored ok, have been bounded by the floor on every config.
        said=$(grep -oh 'avo-hostile: forges_event_time patched [0-9]*' "$out" "$out.err" 2>/dev/null | head -1)
        if [ -n "$said" ] && [ "${said##* }" -gt 0 ]; then
            ok "forges_event_time: the runner's link was rewritten (${said#avo-hostile: })"
        else
            notok "forges_event_time: the runner's link was not rewritten (${said:-no line on stderr}): the case tests nothing"
        fi
        if [ "$outcome" = ok ]; then
            floors=$(python3 -c 'import json,sys; print(" ".join("%s:%s/%s" % (c["name"], (c.get("events") or {}).get("claim_floor_runs", 0), c.get("runs", 0)) for c in json.load(open(sys.argv[1]))["configs"]))' "$out" 2>/dev/null)
            if [ -n "$floors" ] && ! grep -qE '(^| )[^ ]+:0/' <<<"$floors"; then
                ok "forges_event_time: samples raised by the claim floor on every config ($floors)"
            else
                notok "forges_event_time: a config with no sample raised by the claim floor ($floors)"
            fi
        fi
    fi

    if [ "$name" = reads_held_reference_planted ]; then
        said=$(said_line 'avo-hostile: found the answer')
        if [ -n "$said" ]; then
            ok "reads_held_reference_planted: the scan finds an answer where there is one ($said)"
        else
            notok "reads_held_reference_planted: the scan did not find the answer planted in its own memory"
        fi
    fi
    if [ "$name" = reads_held_reference ]; then
        said=$(said_line 'avo-hostile: found the answer')
        scan=$(said_line 'avo-hostile: scanning')
        if [ -n "$said" ]; then
            notok "reads_held_reference: it found the answer in device memory: $said"
        else
            ok "reads_held_reference: no \"avo-hostile: found the answer\" in the result ($scan)"
        fi
        [ -n "$scan" ] || notok "reads_held_reference: no scanning line: it never looked"
        # The path it attacks was taken: cached references uploaded and a
        # pair's reference runs reused by the other lane.
        held=$(jq -r '"\([.configs[].references.cache.hits // 0] | add) \([.configs[].references.reused] | add)"' \
            "$out" 2>/dev/null)
        if [ -n "$held" ] && [ "${held%% *}" -ge 1 ] 2>/dev/null && [ "${held##* }" -ge 1 ] 2>/dev/null; then
            ok "reads_held_reference: the checker held references on the device while it ran (cache hits, reused: $held)"
        else
            notok "reads_held_reference: the held-reference path was not taken (cache hits, reused: ${held:-none}; paired $(jq -c '.paired.error // "ok"' "$out" 2>/dev/null))"
        fi
    fi

    if [ "$name" = reads_seed ]; then
        # Its line on stderr says it regenerated the inputs from a seed it
        # could read: never, whatever the outcome.
        said=$(said_line 'avo-hostile: predicted the inputs')
        if [ -n "$said" ]; then
            notok "reads_seed: it predicted the inputs: $said"
        else
            ok "reads_seed: no \"avo-hostile: predicted the inputs\" in the result: the inputs could not be predicted"
        fi
    fi

    if [ "$name" = disturbs_calibration ]; then
        echo "# disturbs_calibration (compare with the twin's overhead and allowance below):"
        calibration_notes "$out"
        [ "$TWIN_OK" -eq 1 ] && calibration_notes "$T/twin-tiled.json" | sed 's/^# /# twin: /'
    fi

    if [ "$name" = side_stream ] && [ "$outcome" = ok ]; then
        # The same kernel on the caller's stream: the honest time of this
        # work. Hidden on a private stream it must cost (about) as much.
        twin="$T/side_stream_honest.cu"
        { echo "#define HONEST 1"; cat "$src"; } >"$twin"
        eval_case "$prob" "$twin" "$to" "$T/twin.json"
        IFS=$'\t' read -r toutcome tagg tdetail < <(summary "$T/twin.json")
        cfg=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["name"])' "$prob/problem.json")
        ms=$(median_of "$out" "$cfg")
        mt=$(median_of "$T/twin.json" "$cfg")
        mseed=$(median_of "$T/seed-$(basename "$prob").json" "$cfg")
        if [ "$toutcome" != ok ]; then
            notok "side_stream: its honest twin (same kernel on the caller's stream) is $toutcome ($tdetail)"
        elif awk -v s="$ms" -v t="$mt" 'BEGIN { exit !(s >= 0.8 * t && t > 0) }'; then
            ok "side_stream: median $ms s on config $cfg, the honest twin's $mt s (aggregate $tagg): the hidden stream is timed"
        else
            notok "side_stream: median $ms s on config $cfg, under 0.8 x the honest twin's $mt s: work escaped the timer"
        fi
        if awk -v s="$ms" -v t="$mseed" 'BEGIN { exit !(s >= 0.8 * t && t > 0) }'; then
            ok "side_stream: median $ms s not much lower than the seed's $mseed s"
        else
            notok "side_stream: median $ms s much lower than the seed's $mseed s"
        fi
    fi

    if [ "$name" = side_tail ] && [ "$outcome" = ok ]; then
        # A tenth of the work runs on a private stream after the caller's
        # stream has ended: counted beyond the host's latency + 1% of the
        # call, so the time stays within 2% of the honest twin's.
        twin="$T/side_tail_honest.cu"
        { echo "#define HONEST 1"; cat "$src"; } >"$twin"
        eval_case "$prob" "$twin" "$to" "$T/twin.json"
        IFS=$'\t' read -r toutcome tagg tdetail < <(summary "$T/twin.json")
        cfg=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["name"])' "$prob/problem.json")
        ms=$(median_of "$out" "$cfg")
        mt=$(median_of "$T/twin.json" "$cfg")
        charged=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["configs"][0]; print((c.get("events") or {}).get("tail_charged_runs", 0), c.get("runs", 0))' "$out" 2>/dev/null)
        if [ "$toutcome" != ok ]; then
            notok "side_tail: its honest twin (all of it on the caller's stream) is $toutcome ($tdetail)"
        elif awk -v s="$ms" -v t="$mt" 'BEGIN { exit !(s >= 0.98 * t && t > 0) }'; then
            ok "side_tail: median $ms s on config $cfg, the honest twin's $mt s: the tail left on a private stream is counted"
        else
            notok "side_tail: median $ms s on config $cfg, under 0.98 x the honest twin's $mt s: the tail escaped the timer"
        fi
        read -r nch nruns <<<"$charged"
        if [ "${nch:-0}" -gt 0 ]; then
            ok "side_tail: $nch of $nruns timed runs charged for their tail (events.tail_charged_runs)"
        else
            notok "side_tail: no timed run charged for its tail ($charged)"
        fi
    fi

    if { [ "$name" = device_sync ] || [ "$name" = computes_in_prep_ungated ]; } && [ "$outcome" = ok ]; then
        IFS=$'\t' read -r mode why < <(timing_start "$out")
        if [ "$mode" = ungated ] && [[ "$why" == *"waits on its own work"* ]]; then
            ok "$name: timed without the gate ($why)"
        else
            notok "$name: timing start $mode ($why), expected ungated because it waits on its own work"
        fi
    fi

    case " ${want} " in *" crash "* | *" timeout "*) crashy=1 ;; *) crashy=0 ;; esac
    if [ $crashy -eq 1 ] || [ "$outcome" = crash ] || [ "$outcome" = timeout ]; then
        canary "$name"
    fi

    # No survivors: give a killed group a moment to die, then look.
    left=""
    for _ in $(seq 1 50); do
        left=$(strays)
        [ -z "$left" ] && break
        sleep 0.1
    done
    if [ -z "$left" ]; then
        ok "$name: no process left running"
    else
        notok "$name: processes left running: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ',')" 2>/dev/null | cut -c1-100 | tr '\n' ';')"
    fi
    kill_strays
    leaked=$(find "$T/tmp" -mindepth 1 -maxdepth 1 2>/dev/null | head -3 | tr '\n' ' ')
    if [ -z "$leaked" ]; then
        ok "$name: no scratch directory left"
    else
        notok "$name: scratch left behind: $leaked"
    fi
    gp=$(gpu_procs)
    [ "$gp" -gt "$GPU_PROCS0" ] && notok "$name: $gp processes on the GPU afterwards ($GPU_PROCS0 before the run)"

    # After the evaluation. For a case that tries to outlive it, the next
    # evaluation runs first, while whatever it left is still there, and must
    # not notice; then nothing of it may be found.
    if [ -n "${NEXT_EVAL[$name]:-}" ]; then
        nout="$T/$name.next.json"
        t1=$(date +%s)
        eval_case "$SMALL" "$FULL/seed.cu" 180 "$nout"
        nrc=$?
        IFS=$'\t' read -r noutcome nagg ndetail < <(summary "$nout")
        if [ "$noutcome" = ok ] && gt "$nagg" 0; then
            ok "$name: the next evaluation (the seed on gemm_bf16_small) is ok, aggregate $nagg ($(($(date +%s) - t1)) s)"
        else
            notok "$name: the next evaluation (the seed on gemm_bf16_small) is $noutcome, expected ok (exit $nrc; $ndetail)"
        fi
    fi
    hp=""
    for _ in $(seq 1 20); do
        hp=$(hostile_procs)
        [ -z "$hp" ] && break
        sleep 0.1
    done
    if [ -n "$hp" ]; then
        notok "$name: processes named avo-hostile-* left running: $(ps -o pid=,user=,comm=,args= -p "$(paste -sd, <<<"$hp")" 2>/dev/null | cut -c1-100 | tr '\n' ';')"
    elif [ -n "${AFTER_CHECKS[$name]:-}" ]; then
        ok "$name: no process named avo-hostile-* left running"
    fi
    newgpu=""
    for _ in $(seq 1 20); do
        newgpu=$(comm -13 <(printf '%s\n' "$gpu_before") <(gpu_pids) | grep .)
        [ -z "$newgpu" ] && break
        sleep 0.1
    done
    if [ -n "$newgpu" ]; then
        held=""
        for p in $newgpu; do
            held+="pid $p ($(ps -o user=,comm= -p "$p" 2>/dev/null | tr -s ' ' || echo gone), $(gpu_mem_of "$p")); "
        done
        notok "$name: GPU memory still held after the evaluation by new processes: $held"
    elif [ -n "${AFTER_CHECKS[$name]:-}" ]; then
        if [ -n "$hp" ] && [ -z "$(gpu_pids)" ]; then
            echo "# note: $name: nvidia-smi lists no compute process at all while an avo-hostile process runs (pids hidden by a PID namespace?): the GPU check proves nothing here"
        fi
        ok "$name: no new process holds GPU memory (nvidia-smi --query-compute-apps)"
    fi
    left_files=$(marker_files)
    if [ -n "$left_files" ]; then
        notok "$name: left behind: $(head -4 <<<"$left_files" | tr '\n' ' ')($(wc -l <<<"$left_files") files, $(xargs du -ch <<<"$left_files" 2>/dev/null | tail -1 | cut -f1) in all)"
    elif [ -n "${AFTER_CHECKS[$name]:-}" ]; then
        ok "$name: no avo-hostile-shm-* file left in /dev/shm or /tmp"
    fi
    # Whatever it left: gone before the next case (by pid, one at a time).
    kill_hostile
    remove_marker_files
    rm -rf "${T:?}/tmp/"*
done

canary "the whole run"
echo "# total $(($(date +%s) - START)) s"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
