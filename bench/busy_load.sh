#!/usr/bin/env bash
# The GPU busy probe under host load: is an honest kernel's evaluation ever
# called cheat_suspected ("the GPU was still busy ... after call N") when
# another process shares the CPU the checker is pinned to? The probe is
# timed by the host clock (docs/evaluation.md, "Work left running"), so a
# checker thread that waits for its CPU measures that wait too.
#
#   bash bench/busy_load.sh [N] [PROBLEM] [SEED_FILE]
#        (default 4, kernels/gemm_bf16, its seed_sm90.cu on Hopper, else seed.cu)
#
# Runs N rounds; each round evaluates the seed with `avo-worker eval` once
# on an idle host and once with SPINNERS (default 2) busy loops pinned to
# the checker's CPU (the highest one this shell may use: avo-harness pins
# itself there), the order alternating. Prints one line per evaluation:
# the condition, the outcome, the longest busy probe and its soft limit over
# the configs, how many probes were over it, how many were taken again
# because the checker had waited for a CPU, and the detail of a verdict.
# CONDS="load" runs the loaded condition only. OUT=DIR keeps every result
# JSON there. Needs a GPU (skips otherwise).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${1:-4}
P=${2:-kernels/gemm_bf16}
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { echo "busy_load: skipped: no GPU here (nvidia-smi lists none)"; exit 0; }
source tests/gpu/bare-host-setup.sh >/dev/null
# BIN=DIR: another build's binaries (an earlier commit's, side by side).
export PATH="${BIN:-$ROOT/build/bin}:/usr/local/cuda/bin:$PATH"
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
SEEDF=${3:-$P/seed.cu}
[ -z "${3:-}" ] && [ "$CC" = 9.0 ] && [ -f "$P/seed_sm90.cu" ] && SEEDF=$P/seed_sm90.cu
T=$(mktemp -d /tmp/avo-busy.XXXXXX)
chmod 755 "$T"
export AVO_HOME="$T/home" TMPDIR="$T/tmp"
mkdir -p "$AVO_HOME" "$TMPDIR"
# CACHE=DIR: a compile cache kept across runs (default: this run's own).
CACHE=${CACHE:-$T/cache}
KEEP=${OUT:+$OUT/busy_load}
SPIN=()
stop_spin() {
    for p in "${SPIN[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    SPIN=()
}
keep() {  # every result JSON under $KEEP, named with $TAG first (runs side by side)
    [ -n "$KEEP" ] || return 0
    mkdir -p "$KEEP"
    for f in "$T"/*.json; do [ -e "$f" ] && cp "$f" "$KEEP/${TAG:-}$(basename "$f")"; done
}
trap 'stop_spin; keep; rm -rf "$T"' EXIT
CPU=$(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | sed 's/.*-//' | sort -n | tail -1)
echo "# busy_load: $P ($SEEDF), $N rounds, ${SPINNERS:-2} spinner(s) on CPU $CPU; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); $(date -u +%Y-%m-%dT%H:%MZ)"
# The first compile is paid once, outside the rounds.
avo-worker eval "$P" "$SEEDF" --json --timeout 300 --cache "$CACHE" --compile-only >/dev/null 2>&1
one() {  # NAME
    avo-worker eval "$P" "$SEEDF" --json --timeout 300 --cache "$CACHE" >"$T/$1.json" 2>"$T/$1.err"
    jq -r --arg n "$1" '[$n, .outcome,
        ([.configs[]?.events.busy_probe_max_s // 0] | max * 1e6 | floor),
        ([.configs[]?.events.busy_probe_limit_s // 0] | max * 1e6 | floor),
        ([.configs[]?.events.busy_probes_over // 0] | add),
        ([.configs[]?.events.busy_probes_retaken // 0] | add),
        ((.detail // "")[0:160])] | @tsv' "$T/$1.json" 2>/dev/null || echo "$1	no result: $(tail -2 "$T/$1.err")"
}
echo "# name	outcome	busy_max_us	limit_us	over	retaken	detail"
for r in $(seq 1 "$N"); do
    for cond in ${CONDS:-$([ $((r % 2)) = 1 ] && echo "idle load" || echo "load idle")}; do
        if [ "$cond" = load ]; then
            for _ in $(seq 1 "${SPINNERS:-2}"); do
                taskset -c "$CPU" bash -c 'while :; do :; done' &
                SPIN+=($!)
            done
        fi
        one "$cond-$r"
        stop_spin
    done
done
