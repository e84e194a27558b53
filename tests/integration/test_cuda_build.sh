#!/usr/bin/env bash
# CUDA candidates are built on any machine with nvcc, GPU or not (CI has
# nvcc but no GPU): the worker's sandboxed compile (`avo-worker eval
# --compile-only`, as avod's seed check and the agent's compile tool run it)
# builds both gemm_bf16 seeds and both attention seeds for sm_90a with the
# ptxas report (the attention seeds without spills), serves the
# second build from the cache, reports a broken candidate as compile_error
# with nvcc's message, and says what is missing for a disassembly. The
# attention reference builds with the warnings on, and a whole evaluation
# (which stops at the harness where there is no GPU) links the reference it
# compiles with cuBLAS, for its fp32 products, and the candidate with no
# vendor library.
source "$(dirname "$0")/lib.sh"

NVCC=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
if [ -z "$NVCC" ]; then
    echo "# skipped: no nvcc on this machine (the CUDA build is checked where nvcc exists)"
    exit 0
fi
G="$ROOT/kernels/gemm_bf16"
build() {  # SOURCE OUT [extra args]
    local src=$1 out=$2; shift 2
    avo-worker eval "$G" "$src" --compile-only --json --gpu-arch sm_90a --cache "$T/cache" "$@" >"$out" 2>"$out.err"
}
for seed in seed.cu seed_sm90.cu; do
    build "$G/$seed" "$T/$seed.json"
    check "$seed compiles for sm_90a in the worker's sandbox ($(jq -r .detail "$T/$seed.json"))" \
        test "$(jq -r .outcome "$T/$seed.json")" = ok
    check "$seed: the ptxas report gives each kernel's registers and spills" \
        jqt '.compile.ptxas | length > 0 and all(.[]; .registers > 0 and has("spill_store_bytes"))' "$T/$seed.json"
done
# The GPU colluding pair (tests/gpu/test_collusion_gpu.sh runs it on a GPU
# host): both roles build, so a GPU call is not spent on a compile error.
PAIR="$ROOT/tests/hostile/gpu/pairs/stash_pair.cu"
(echo '#define AGAINST 1'; cat "$PAIR") >"$T/stash_against.cu"
for role in "$PAIR" "$T/stash_against.cu"; do
    build "$role" "$T/pair.json"
    check "the colluding pair's $(basename "$role") compiles for sm_90a ($(jq -r .detail "$T/pair.json" | head -c 200))" \
        test "$(jq -r .outcome "$T/pair.json")" = ok
done
A="$ROOT/kernels/attention"
for seed in seed.cu seed_sm90.cu; do
    avo-worker eval "$A" "$A/$seed" --compile-only --json --gpu-arch sm_90a --cache "$T/cache" \
        >"$T/attn-$seed.json" 2>"$T/attn-$seed.err"
    check "attention $seed compiles for sm_90a in the worker's sandbox ($(jq -r .detail "$T/attn-$seed.json"))" \
        test "$(jq -r .outcome "$T/attn-$seed.json")" = ok
    check "attention $seed: no kernel spills or uses a stack frame" \
        jqt '.compile.ptxas | length > 0 and all(.[]; .spill_store_bytes == 0 and .spill_load_bytes == 0 and .stack_bytes == 0)' \
        "$T/attn-$seed.json"
done
check "the attention reference compiles with the warnings on" \
    "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler=-Wall,-Wextra,-Werror -cudart=shared \
    -Xcompiler=-fPIC -shared -lcublas -o "$T/ref.so" "$A/reference.cu"
# One small configuration (the package's screen, naming configs dropped
# here, goes too), so that a GPU host runs it in seconds; the
# objects land in the cache whether the harness then finds a GPU or not.
mkdir -p "$T/attn"
cp "$A"/*.cu "$T/attn/"
jq '.configs |= [.[0] | .sizes.B = 1 | .sizes.S = 128] | .counters.configs = [.configs[0].name] | del(.screen)' \
    "$A/problem.json" >"$T/attn/problem.json"
avo-worker eval "$T/attn" "$A/seed.cu" --json --gpu-arch sm_90a --cache "$T/refcache" --timeout 120 \
    >"$T/attn-eval.json" 2>&1
links_cublas() {  # OBJECT: its dynamic section needs libcublas
    readelf -d "$1" | grep -q 'NEEDED.*libcublas\.so'
}
ref_obj="" cand_obj=""
for so in "$T/refcache"/obj/*.so; do
    [ -e "$so" ] || continue
    if readelf --dyn-syms -W "$so" | grep -qw avo_reference; then ref_obj=$so; else cand_obj=$so; fi
done
check "a cuda evaluation compiles the reference and the candidate ($(jq -r .detail "$T/attn-eval.json" 2>/dev/null | head -c 200))" \
    test -n "$ref_obj" -a -n "$cand_obj"
check "the worker links the attention reference with cuBLAS (its fp32 products)" links_cublas "$ref_obj"
check "the worker links the candidate with no vendor library" eval '! links_cublas "$cand_obj"'
build "$G/seed_sm90.cu" "$T/again.json"
check "the same source again is served from the compile cache" jqt '.compile.cached == true' "$T/again.json"
printf 'this is not CUDA;\n' | cat "$G/seed.cu" - >"$T/broken.cu"
build "$T/broken.cu" "$T/broken.json"
check "a broken candidate is a compile_error with nvcc's message" \
    jqt '.outcome == "compile_error" and (.detail | test("error"))' "$T/broken.json"
build "$G/seed.cu" "$T/dis.json" --disassemble
if command -v cuobjdump >/dev/null || [ -x "$(dirname "$NVCC")/cuobjdump" ]; then
    check "--disassemble gives the SASS of the kernels" \
        jqt '.disassembly.text | test("Function :")' "$T/dis.json"
else
    check "--disassemble says cuobjdump is missing and where it comes from" \
        jqt '.disassembly.error | test("cuobjdump ships with the CUDA toolkit")' "$T/dis.json"
fi
[ "$FAILS" -eq 0 ]
