#!/usr/bin/env bash
# The gemm_bf16 reference's tiled path against its cuBLAS product (issue 20,
# point 2): kernels/gemm_bf16/reference.cu built three ways (AVO_REF_TILED,
# as the checker builds it, and AVO_REF_NOT_PEDANTIC for information), then
# bench/gemm_bf16/ref_speed.cu on every configuration of the problem: the
# time of each (median of 3 calls, cudaEvent), how far the new C is from the
# tiled one, and every build against the float64 twin on small sizes
# (ref_speed.cu says what and the bounds). Exit 0 when every bound holds, 1
# when one is broken, 2 on a setup error. Needs nvcc and cuBLAS.
#
#   bash bench/gemm_bf16/ref_speed.sh [--compile-only] [NAME:M:N:K...]
#
# --compile-only builds everything (for sm_90a unless ARCH=sm_XY) and stops:
# no GPU needed. Configurations on the command line replace the problem's.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
COMPILE_ONLY=0
CONFIGS=()
for a in "$@"; do
    case "$a" in
    --compile-only) COMPILE_ONLY=1 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "ref_speed.sh: unknown option '$a'" >&2; exit 2 ;;
    *) CONFIGS+=("$a") ;;
    esac
done
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "ref_speed.sh: no nvcc (set NVCC)" >&2; exit 2; }
if [ -z "${ARCH:-}" ]; then
    cc=$( ((COMPILE_ONLY)) || nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
    case "$cc" in
    "" | 9.0) ARCH=sm_90a ;;
    *) ARCH=sm_${cc//./} ;;
    esac
fi
B=$(mktemp -d /tmp/avo-gemm-ref-speed.XXXXXX)
trap 'rm -rf "$B"' EXIT
if [ ${#CONFIGS[@]} = 0 ]; then
    mapfile -t CONFIGS < <(jq -r '.configs[] | "\(.name):\(.sizes.M):\(.sizes.N):\(.sizes.K)"' kernels/gemm_bf16/problem.json)
    [ ${#CONFIGS[@]} -gt 0 ] || { echo "ref_speed.sh: no configurations read from kernels/gemm_bf16/problem.json" >&2; exit 2; }
fi
SRC=kernels/gemm_bf16/reference.cu
build() { # out defs...
    local out=$1
    shift
    "$NVCC" -arch="$ARCH" -O3 -std=c++17 "$@" -Xcompiler -fPIC,-Wall,-Wextra -shared "$SRC" -o "$B/$out" -lcublas \
        >"$B/$out.log" 2>&1 || { echo "ref_speed.sh: building $out failed:" >&2; cat "$B/$out.log" >&2; exit 2; }
}
build tiled.so -DAVO_REF_TILED
build new.so
build plain.so -DAVO_REF_NOT_PEDANTIC
"$NVCC" -arch="$ARCH" -O2 -std=c++17 bench/gemm_bf16/ref_speed.cu -o "$B/ref_speed" -ldl >"$B/driver.log" 2>&1 ||
    { echo "ref_speed.sh: building the driver failed:" >&2; cat "$B/driver.log" >&2; exit 2; }
if ((COMPILE_ONLY)); then
    echo "ref_speed.sh: built tiled.so, new.so, plain.so and the driver for $ARCH"
    exit 0
fi
echo "# gemm_bf16 reference: tiled vs cuBLAS (pedantic), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"
"$B/ref_speed" --tiled "$B/tiled.so" --new "$B/new.so" --plain "$B/plain.so" "${CONFIGS[@]}"
