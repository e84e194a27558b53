#!/usr/bin/env bash
# The attention reference before and after its cuBLAS products (issue 20,
# point 2), on one GPU: every configuration of kernels/attention/problem.json
# with the same inputs for both, the time of each (median of 3 calls,
# cudaEvent and wall) and the difference of their outputs (O and LSE), plus
# both against the float64 twin on small sizes (bench/attention/ref_speed.cu
# says what and the bounds). Exit 0 when every bound holds, 1 when one is
# broken, 2 on a setup error. Needs bash, nvcc and cuBLAS; under a minute
# on an H200.
#
#   bash bench/attention/ref_speed.sh [--compile-only] [NAME:B:H:HKV:S:D:CAUSAL...]
#   bash bench/attention/ref_speed.sh --prepare
#
# The old reference is kernels/attention/reference.cu as of commit
# OLD_REV (default 8c5a964, its last version with the hand-written GEMM):
# taken from bench/attention/old/reference.cu (git-ignored) when that
# exists, else from git. Where the command runs in a copy of the working
# tree without .git (a lent GPU machine), run --prepare in the checkout
# first, which writes that file, and carry bench/attention/old along.
# --compile-only builds everything (for sm_90a unless ARCH=sm_XY) and
# stops: no GPU needed. Configurations on the command line replace the
# problem's.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
OLD_REV=${OLD_REV:-8c5a964}
OLD_SRC=bench/attention/old/reference.cu
COMPILE_ONLY=0
CONFIGS=()
for a in "$@"; do
    case "$a" in
    --compile-only) COMPILE_ONLY=1 ;;
    --prepare)
        mkdir -p "$(dirname "$OLD_SRC")" &&
            git show "$OLD_REV:kernels/attention/reference.cu" >"$OLD_SRC.tmp" && mv "$OLD_SRC.tmp" "$OLD_SRC" ||
            { echo "ref_speed.sh: cannot take the old reference from git ($OLD_REV)" >&2; exit 2; }
        echo "wrote $OLD_SRC (kernels/attention/reference.cu at $OLD_REV)"
        exit 0 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "ref_speed.sh: unknown option '$a'" >&2; exit 2 ;;
    *) CONFIGS+=("$a") ;;
    esac
done

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "ref_speed.sh: no nvcc (set NVCC)" >&2; exit 2; }
CUDA_HOME=${CUDA_HOME:-$(cd "$(dirname "$NVCC")/.." && pwd)}
if [ -z "${ARCH:-}" ]; then
    cc=$( ((COMPILE_ONLY)) || nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
    case "$cc" in
    "" | 9.0) ARCH=sm_90a ;;
    *) ARCH=sm_${cc//./} ;;
    esac
fi
B=$(mktemp -d /tmp/avo-ref-speed.XXXXXX)
trap 'rm -rf "$B"' EXIT

if [ -f "$OLD_SRC" ]; then
    cp "$OLD_SRC" "$B/old.cu"
elif ! git show "$OLD_REV:kernels/attention/reference.cu" >"$B/old.cu" 2>/dev/null; then
    echo "ref_speed.sh: no $OLD_SRC and no git history here: run 'bash bench/attention/ref_speed.sh --prepare'" \
        "in the checkout and carry bench/attention/old" >&2
    exit 2
fi
if grep -q cublas "$B/old.cu"; then
    echo "ref_speed.sh: the old reference ($OLD_REV) already uses cuBLAS: not the version to compare with" >&2
    exit 2
fi

if [ ${#CONFIGS[@]} = 0 ]; then
    # name:B:H:HKV:S:D:CAUSAL from the problem's configs (its keys in this
    # order, which the count check below holds to).
    flat=$(tr -d ' \n\t' <kernels/attention/problem.json)
    mapfile -t CONFIGS < <(grep -o '"name":"[^"]*","sizes":{"B":[0-9]*,"H":[0-9]*,"HKV":[0-9]*,"S":[0-9]*,"D":[0-9]*,"CAUSAL":[01]}' <<<"$flat" |
        sed -E 's/"name":"([^"]*)","sizes":\{"B":([0-9]+),"H":([0-9]+),"HKV":([0-9]+),"S":([0-9]+),"D":([0-9]+),"CAUSAL":([01])\}/\1:\2:\3:\4:\5:\6:\7/')
    named=$(grep -o '"name":"[^"]*","sizes"' <<<"$flat" | wc -l)
    if [ ${#CONFIGS[@]} = 0 ] || [ "${#CONFIGS[@]}" != "$named" ]; then
        echo "ref_speed.sh: read ${#CONFIGS[@]} of $named configurations from problem.json (keys not in the order B H HKV S D CAUSAL?)" >&2
        exit 2
    fi
fi

# The worker's flags for the problem (nvcc_flags, -gencode, shared runtime);
# libcublas found at run time even where the toolkit's lib dir is not in
# ld.so.conf.
RPATH=(-Xlinker "-rpath=$CUDA_HOME/lib64" -Xlinker "-rpath=$CUDA_HOME/targets/x86_64-linux/lib")
FLAGS=(-O3 -std=c++17 "-gencode=arch=compute_${ARCH#sm_},code=$ARCH" -cudart=shared -Xcompiler=-fPIC)
REF=kernels/attention/reference.cu
build() {  # OUT ARGS...: nvcc, its messages in OUT.log
    local out=$1; shift
    "$NVCC" "${FLAGS[@]}" "$@" -o "$B/$out" >"$B/$out.log" 2>&1 || { echo "ref_speed.sh: building $out failed:" >&2; tail -5 "$B/$out.log" >&2; return 1; }
}
echo "# building for $ARCH with $NVCC"
pids=()
build old.so -shared "$B/old.cu" & pids+=($!)
build new.so -shared "$REF" -lcublas "${RPATH[@]}" & pids+=($!)
# Tiny chunks: small sizes take the chunked paths (batches of a few heads,
# an uneven last one, many row chunks), as tests/gpu/test_attention_gpu.sh.
build small.so -shared -DAVO_REF_CHUNK_ELEMS=4096 "$REF" -lcublas "${RPATH[@]}" & pids+=($!)
build plain.so -shared -DAVO_REF_NOT_PEDANTIC "$REF" -lcublas "${RPATH[@]}" & pids+=($!)
build ref_speed bench/attention/ref_speed.cu -ldl "${RPATH[@]}" & pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
((fail)) && exit 2
if ((COMPILE_ONLY)); then
    echo "compiled: old.so new.so small.so plain.so ref_speed (${#CONFIGS[@]} configurations to run)"
    exit 0
fi
"$B/ref_speed" --old "$B/old.so" --new "$B/new.so" --small "$B/small.so" --plain "$B/plain.so" "${CONFIGS[@]}"
