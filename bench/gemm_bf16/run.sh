#!/usr/bin/env bash
# Build, check and time kernels/gemm_bf16 (seed at several knob settings)
# against the reference and cuBLAS, on the local GPU. Standalone: needs only
# nvcc, cuBLAS and (for the SASS summary) cuobjdump.
#
#   bash bench/gemm_bf16/run.sh                 # build + check + time (~2 min on an H200)
#   bash bench/gemm_bf16/run.sh --compile-only  # build, ptxas/SASS report, no GPU needed
#   SETTINGS="b d" bash bench/gemm_bf16/run.sh  # only some settings (names below)
#   SEED=seed_sm90.cu bash bench/gemm_bf16/run.sh  # the Hopper (wgmma/TMA) seed, its own settings
#
# Everything goes to ${OUT:-/tmp/gemm_out}/ (few files, so a device-run
# fetch keeps all of them):
#   build.log      nvcc commands and their full output (ptxas -v per setting)
#   resources.txt  per setting and kernel: registers, spills, smem, SASS counts
#   run.log        the checker's full output, all settings
#   table.txt      the final table (also printed last)
#   sass_b.txt     SASS of the aligned kernel of setting "b" (expected best)
# Objects and binaries go to ${BUILD:-/tmp/gemm_bf16_build}.
# Exit status: 0 when every build and every check passed.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PKG=$ROOT/kernels/gemm_bf16
SEED=${SEED:-seed.cu}
[ -f "$PKG/$SEED" ] || { echo "run.sh: no seed $PKG/$SEED" >&2; exit 64; }
OUT=${OUT:-/tmp/gemm_out}
BUILD=${BUILD:-/tmp/gemm_bf16_build}
COMPILE_ONLY=0
for a in "$@"; do
    case "$a" in
    --compile-only) COMPILE_ONLY=1 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$a'" >&2; exit 64 ;;
    esac
done

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$(dirname "$NVCC")/cuobjdump")}
CUDA_HOME=${CUDA_HOME:-$(cd "$(dirname "$NVCC")/.." && pwd)}
# libcublas found at run time even where the toolkit's lib dir is not in ld.so.conf
RPATH=(-Xlinker "-rpath=$CUDA_HOME/lib64" -Xlinker "-rpath=$CUDA_HOME/targets/x86_64-linux/lib")
ARCH="-gencode=arch=compute_90a,code=sm_90a"
# the problem's nvcc_flags + the -gencode the harness adds
FLAGS=(-O3 -std=c++17 "$ARCH")

# Knob settings: name:KNOB=V,KNOB=V (empty = the problem.json defaults).
# Threads = (BM/WM)*(BN/WN)*32; shared = STAGES*(BM*(BK+pad)+BK*(BN+pad))*2
# bytes, pad = 8 when SWIZZLE=0.
ALL_SETTINGS=(
    "default:"                                                               # 128x128x32, 8 warps 64x32, 2 stages, padded, row raster
    "a:BM=128,BN=128,BK=32,WM=64,WN=64,STAGES=4,SWIZZLE=1,GROUPM=8"           # 4 warps, 64 KB
    "b:BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=4,SWIZZLE=1,GROUPM=8"           # 8 warps, 96 KB   <- expected best
    "c:BM=256,BN=128,BK=32,WM=64,WN=64,STAGES=4,SWIZZLE=1,GROUPM=8"           # 8 warps, 96 KB
    "d:BM=128,BN=256,BK=64,WM=64,WN=64,STAGES=3,SWIZZLE=1,GROUPM=8"           # 8 warps, 144 KB
    "e:BM=128,BN=128,BK=32,WM=64,WN=32,STAGES=4,SWIZZLE=1,GROUPM=8,MINB=2"    # 2 x 8 warps/SM, 64 KB each
    "f:BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=4,SWIZZLE=0,GROUPM=8"           # b with padding instead of swizzle
    "g:BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=4,SWIZZLE=1,GROUPM=1"           # b with row-major raster
    "h:BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=3,SWIZZLE=1,GROUPM=8"           # b with 3 stages
    "i:BM=256,BN=128,BK=64,WM=64,WN=64,STAGES=3,SWIZZLE=1,GROUPM=8"           # 8 warps, 144 KB
)
# The Hopper seed's knobs (seed_sm90.cu): shared = STAGES*(BM+BN)*128 bytes.
if [ "$SEED" = seed_sm90.cu ]; then
    ALL_SETTINGS=(
        "default:"                                          # 128x256, 2 consumers, 4 stages, GROUPM=8
        "s3:STAGES=3"                                       # 144 KB ring
        "n128:BN=128,STAGES=6"                              # 128x128, 2 consumers of 64 rows
        "m256:BM=256,BN=128,STAGES=4"                       # 2 consumers of 128 rows x 128
        "c1:BM=128,BN=128,CONSUMERS=1,STAGES=6"             # one consumer, two m64 per k16
        "n192:BN=192,STAGES=5"                              # 128x192
        "g1:GROUPM=1"                                       # row-major raster
    )
fi
# Timed configurations (those of problem.json) and check-only ones (c prefix):
# odd sizes take the unaligned path; the others hit partial tiles in M, N, K.
CONFIGS=(1024x1024x1024 2048x2048x2048 4096x4096x4096 8192x8192x8192 4096x4096x1024 8192x1000x4104
         c67x45x129 c264x136x40 c520x264x1032 c1000x1000x1000 c1x8x8)

if [ -n "${SETTINGS:-}" ]; then
    sel=()
    for s in "${ALL_SETTINGS[@]}"; do
        for want in $SETTINGS; do [ "${s%%:*}" = "$want" ] && sel+=("$s"); done
    done
    ALL_SETTINGS=("${sel[@]}")
fi

mkdir -p "$OUT" "$BUILD" || exit 1
BUILD_LOG=$OUT/build.log
RES=$OUT/resources.txt
RUN_LOG=$OUT/run.log
TABLE=$OUT/table.txt
: >"$BUILD_LOG"
: >"$RES"
rc_all=0

log() { echo "$*" | tee -a "$BUILD_LOG"; }

# ---- build -----------------------------------------------------------------
log "# $(date -u +%FT%TZ) nvcc: $("$NVCC" --version | tail -1)"
build_common() {
    local ok=0
    for src in "$PKG/reference.cu" "$PKG/baseline.cu" "$HERE/check.cu"; do
        local o="$BUILD/$(basename "${src%.cu}").o"
        echo "+ $NVCC ${FLAGS[*]} -Xcompiler -Wall,-Wextra -c $src -o $o" >>"$BUILD_LOG"
        "$NVCC" "${FLAGS[@]}" -Xcompiler -Wall,-Wextra -c "$src" -o "$o" >>"$BUILD_LOG" 2>&1 || ok=1
    done
    return $ok
}
build_seed() { # name defs
    local name=$1 defs=$2 d=() log=$BUILD/seed_$1.log
    IFS=, read -ra kv <<<"$defs"
    for x in "${kv[@]}"; do [ -n "$x" ] && d+=("-D$x"); done
    {
        echo "+ $NVCC ${FLAGS[*]} -Xcompiler -Wall,-Wextra -Xptxas -v ${d[*]} -c $SEED -o seed_$name.o"
        "$NVCC" "${FLAGS[@]}" -Xcompiler -Wall,-Wextra -Xptxas -v "${d[@]}" -c "$PKG/$SEED" \
            -o "$BUILD/seed_$name.o" 2>&1 &&
            "$NVCC" "$ARCH" "$BUILD/check.o" "$BUILD/seed_$name.o" "$BUILD/reference.o" "$BUILD/baseline.o" \
                -lcublas "${RPATH[@]}" -o "$BUILD/check_$name" 2>&1
        echo "exit $?"
        # host-only replay of the index arithmetic (emulate.cu): layouts, fragments, edges, bank
        # conflicts; written for seed.cu (the Hopper seed's layouts are TMA's and wgmma's own)
        if [ "$SEED" = seed.cu ]; then
            "$NVCC" "${FLAGS[@]}" -Xcompiler -Wall,-Wextra "${d[@]}" -I"$PKG" "$HERE/emulate.cu" \
                -o "$BUILD/emulate_$name" 2>&1 && "$BUILD/emulate_$name" 2>&1
            echo "emulate exit $?"
        else
            echo "emulate exit 0 (no emulation for $SEED)"
        fi
    } >"$log"
}

if ! build_common; then
    log "FAILED: common build (see $BUILD_LOG)"
    tail -30 "$BUILD_LOG"
    exit 1
fi
pids=()
for s in "${ALL_SETTINGS[@]}"; do
    build_seed "${s%%:*}" "${s#*:}" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

# ptxas report, warnings, SASS summary
printf '%-8s %-6s %5s %6s %6s %6s %6s %6s %6s %5s\n' setting kernel regs spillB stackB H_MMA LDSM LDGSTS LDL/STL BAR >>"$RES"
good=()
for s in "${ALL_SETTINGS[@]}"; do
    name=${s%%:*}
    slog=$BUILD/seed_$name.log
    {
        echo "=== setting $name: ${s#*:}"
        cat "$slog"
    } >>"$BUILD_LOG"
    if ! grep -q '^exit 0$' "$slog"; then
        log "FAILED: build of setting $name (see $BUILD_LOG)"
        rc_all=1
        continue
    fi
    if grep -qi 'warning' "$slog"; then
        log "WARNINGS in setting $name:"
        grep -i 'warning' "$slog" | tee -a "$BUILD_LOG"
        rc_all=1
    fi
    if ! grep -q '^emulate exit 0' "$slog"; then
        log "FAILED: host emulation of setting $name:"
        sed -n '/^emulate BM=/,/^emulate exit/p' "$slog" | tee -a "$BUILD_LOG"
        rc_all=1
    fi
    good+=("$s")
    # ptxas: one "Compiling entry function" block per kernel (ILb1 = aligned, ILb0 = unaligned path)
    awk -v n="$name" '
        /Compiling entry function/ { k = ($0 ~ /ILb1E|gemm_sm90/) ? "aligned" : (($0 ~ /ILb0E|fallback/) ? "odd" : "other") }
        /bytes stack frame/ { stack[k] = $1; spill[k] = $5 + $9 }
        /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") regs[k] = $(i + 1) }
        END { for (k in regs) printf "%s %s %s %s %s\n", n, k, regs[k], spill[k], stack[k] }' "$slog" >"$BUILD/ptxas_$name.txt"
    if [ -x "$CUOBJDUMP" ]; then
        "$CUOBJDUMP" --dump-sass "$BUILD/seed_$name.o" >"$BUILD/sass_$name.txt" 2>&1
        sass_counts=$(awk '
            /Function :/ { k = ($0 ~ /ILb1E|gemm_sm90/) ? "aligned" : (($0 ~ /ILb0E|fallback/) ? "odd" : "other") }
            / HMMA| HGMMA/ { h[k]++ } / LDSM/ { l[k]++ } / LDGSTS/ { g[k]++ } / (LDL|STL)/ { ls[k]++ } / BAR/ { b[k]++ }
            END { for (k in h) printf "%s %d %d %d %d %d\n", k, h[k], l[k], g[k], ls[k], b[k] }' "$BUILD/sass_$name.txt")
    else
        sass_counts=""
    fi
    while read -r n k regs spill stack; do
        c=$(echo "$sass_counts" | awk -v k="$k" '$1 == k { print $2, $3, $4, $5, $6 }')
        [ -z "$c" ] && c="- - - - -"
        # shellcheck disable=SC2086
        printf '%-8s %-6s %5s %6s %6s %6s %6s %6s %6s %5s\n' "$n" "$k" "$regs" "$spill" "$stack" $c >>"$RES"
    done <"$BUILD/ptxas_$name.txt"
done
[ -x "$CUOBJDUMP" ] || echo "(cuobjdump not found at $CUOBJDUMP: SASS columns are '-')" >>"$RES"
if [ -f "$BUILD/sass_b.txt" ]; then
    awk '/Function :/ { p = ($0 ~ /ILb1E/) } p' "$BUILD/sass_b.txt" >"$OUT/sass_b.txt"
fi
if [ "$SEED" != seed.cu ] && [ -f "$BUILD/sass_default.txt" ]; then
    awk '/Function :/ { p = ($0 ~ /gemm_sm90/) } p' "$BUILD/sass_default.txt" >"$OUT/sass_sm90.txt"
fi
echo
echo "## resources (regs per thread, spill/stack bytes; SASS instruction counts per kernel;"
echo "##   'aligned' = the fast path, 'odd' = the K%8/N%8 != 0 fallback)"
cat "$RES"
echo "## host emulation (emulate.cu) per setting"
for s in "${good[@]}"; do
    grep -h -E '^emulate BM=|worst bank|^emulation|EMULATION' "$BUILD/seed_${s%%:*}.log" | sed "s/^/  ${s%%:*}: /"
done | tee -a "$RES"

if [ "$COMPILE_ONLY" = 1 ]; then
    if [ $rc_all = 0 ]; then echo "compile-only: all ${#ALL_SETTINGS[@]} settings built, no warnings"; fi
    exit $rc_all
fi

# ---- run ---------------------------------------------------------------------
: >"$RUN_LOG"
{
    echo "# $(date -u +%FT%TZ) $(hostname)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used \
        --format=csv 2>&1 || true
    nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv 2>&1 || true
} | tee -a "$RUN_LOG"
for s in "${good[@]}"; do
    name=${s%%:*}
    echo "=== setting $name: ${s#*:}" | tee -a "$RUN_LOG"
    # 150 s is far above the ~10 s a setting takes: only a hung kernel hits it
    timeout -k 5 150 "$BUILD/check_$name" --label "$name" "${CONFIGS[@]}" >>"$RUN_LOG" 2>&1
    rc=$?
    if [ $rc != 0 ]; then
        echo "setting $name: checker exit $rc (124 = timeout; see run.log)" | tee -a "$RUN_LOG"
        rc_all=1
    fi
    grep '^#' "$RUN_LOG" | grep " $name " | tail -n "${#CONFIGS[@]}" | sed 's/^/  /'
done
{
    echo "# after: $(nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 || true)"
} | tee -a "$RUN_LOG"

# ---- table ---------------------------------------------------------------------
# Kept under ~7 KB so that it fits in the last 12 000 characters of a device run.
{
    echo "## gemm_bf16 seed vs cuBLAS (bf16 in/out, fp32 accumulate), median of >= 20 runs, L2 flushed"
    echo "## check: rel_l2 <= 5e-3 and max_abs <= 2 vs the fp32 reference; cub = cuBLAS's own check"
    printf '%-7s %-15s %-8s %8s %7s %7s %7s %6s %4s\n' setting config status rel_l2 max_abs TFLOPS cuBLAS ratio cub
    grep '^RESULT' "$RUN_LOG" | awk -F'\t' '$7 != "-" || $4 != "ok" || $11 != "ok" {
        printf "%-7s %-15s %-8s %8s %7s %7s %7s %6s %4s\n", $2, $3, substr($4, 1, 18), $5, $6, $7, $8, $9, $11 }'
    echo
    echo "## per setting: geometric means over the timed configs; checks = configs passed (timed + check-only)"
    grep '^RESULT' "$RUN_LOG" | awk -F'\t' '
        { s = $2; if (!(s in seen)) { seen[s] = 1; order[++n] = s }; tot[s]++ }
        $4 == "ok" { okc[s]++ }
        $7 != "-" && $9 != "-" { lt[s] += log($7); lr[s] += log($9); lb[s] += log($8); c[s]++ }
        END {
            printf "%-8s %8s %8s %7s %s\n", "setting", "TFLOPS", "cuBLAS", "ratio", "checks"
            for (i = 1; i <= n; i++) { s = order[i]
                if (c[s]) printf "%-8s %8.1f %8.1f %7.3f %d/%d\n", s, exp(lt[s]/c[s]), exp(lb[s]/c[s]), exp(lr[s]/c[s]), okc[s], tot[s]
                else printf "%-8s %8s %8s %7s %d/%d\n", s, "-", "-", "-", okc[s], tot[s] } }'
    for s in "${ALL_SETTINGS[@]}"; do printf '  %-8s %s\n' "${s%%:*}" "${s#*:}"; done
    if [ "$SEED" = seed.cu ]; then
        echo "  (default = problem.json defaults: BM=128,BN=128,BK=32,WM=64,WN=32,STAGES=2,SWIZZLE=0,GROUPM=1,MINB=1)"
    else
        echo "  (default = $SEED's own defaults: BM=128,BN=256,CONSUMERS=2,STAGES=4,GROUPM=8)"
    fi
    [ $rc_all = 0 ] && echo "ALL OK" || echo "SOME FAILURES (exit 1): see $RUN_LOG and $BUILD_LOG"
} >"$TABLE"
echo
cat "$TABLE"
exit $rc_all
