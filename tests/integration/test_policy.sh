#!/usr/bin/env bash
# The candidate policy (issue 21, point 4; docs/evaluation.md, "Policy"),
# through real processes: `avo-worker eval` on the fixtures of
# tests/fixtures/policy against a copy of cpu/sgemm. Each rule broken is
# outcome policy_violation naming the rule and the offending line, never
# scored; a problem that relaxes the rule lets the same candidate through
# (ok); an unknown rule name is refused naming the field; a violation the
# compile reveals is found again on a cache hit; the kept intermediates
# change no generated code. Then through avod and a worker: a job whose
# seed breaks the policy stores the evaluation as done/policy_violation
# (sql/017_policy.sql), and a seed given at submission is refused with the
# line. Where nvcc is installed, the CUDA rules too (compiled for sm_90a;
# no GPU needed: the policy decides before anything runs).
source "$(dirname "$0")/lib.sh"

FIX="$ROOT/tests/fixtures/policy"
HONEST="$ROOT/tests/hostile/twins/gemm_ikj.c"
K="$T/kernels"
P="$K/test/pkg"
mkdir -p "$K/test" "$T/tmp"
export TMPDIR="$T/tmp"
cp -r "$ROOT/kernels/cpu/sgemm" "$P"
# one small configuration and short timing: the test is about the policy
jq '.configs = [.configs[0]] | .timing.max_seconds = 0.05' "$ROOT/kernels/cpu/sgemm/problem.json" >"$P/problem.json"
CACHE="$T/cache"

ev() {  # PROBLEM_DIR FILE OUT [extra args]: avo-worker eval, exit code kept in OUT.rc
    timeout -k 5 300 avo-worker eval "$1" "$2" --json --timeout 60 --seed 7 --cache "$CACHE" "${@:4}" \
        >"$3" 2>"$3.err"
    echo $? >"$3.rc"
}
said() {  # OUT: outcome, rule, where, for the check's name
    jq -r '"\(.outcome) \(.policy.rule // "-") \(.policy.file // "-"):\(.policy.line // "-")"' "$1" 2>/dev/null
}
refused() {  # OUT RULE FILE LINE TEXT: policy_violation of RULE at FILE:LINE, the line quoted, no score
    jqt --arg r "$2" --arg f "$3" --argjson l "$4" --arg t "$5" '
        .outcome == "policy_violation" and .policy.rule == $r and .policy.file == $f and .policy.line == $l
        and (.policy.text | contains($t)) and (.detail | contains($t)) and (.detail | startswith($r + ": "))
        and .aggregate == 0 and (.configs | length) == 0 and .sandbox == null' "$1"
}

# --- 1. each CPU rule broken: refused with its line, never run, never scored
ev "$P" "$FIX/incbin.c" "$T/incbin.json"
check "incbin.c: file_inclusion at cand.c:10, quoted, no score ($(said "$T/incbin.json"))" \
    refused "$T/incbin.json" file_inclusion cand.c 10 '.incbin \"/etc/hostname\"'
check "incbin.c: refused before any compile (no compile ran, exit 1)" \
    bash -c 'jq -e ".compile == null" "$0" >/dev/null && [ "$(cat "$0.rc")" = 1 ]' "$T/incbin.json"
ev "$P" "$FIX/dlopen.c" "$T/dlopen.json"
check "dlopen.c: module_loading at cand.c:41 ($(said "$T/dlopen.json"))" \
    refused "$T/dlopen.json" module_loading cand.c 41 'dlopen("/tmp/avo-fixture.so"'
ev "$P" "$FIX/elf.c" "$T/elf.json"
check "elf.c: embedded_binaries at cand.c:7 ($(said "$T/elf.json"))" \
    refused "$T/elf.json" embedded_binaries cand.c 7 '0x7f, 0x45, 0x4c, 0x46'
{ echo '#include </etc/hostname>'; cat "$HONEST"; } >"$T/include.c"
ev "$P" "$T/include.c" "$T/include.json"
check "#include </etc/hostname>: file_inclusion at cand.c:1 ($(said "$T/include.json"))" \
    refused "$T/include.json" file_inclusion cand.c 1 '#include </etc/hostname>'

# --- 2. found after the compile (a macro built the directive), and again
# from the cache
ev "$P" "$FIX/macro_incbin.c" "$T/macro1.json"
ev "$P" "$FIX/macro_incbin.c" "$T/macro2.json"
check "macro_incbin.c: file_inclusion on the kept assembler input, cand.s ($(said "$T/macro1.json"))" \
    jqt '.outcome == "policy_violation" and .policy.rule == "file_inclusion" and .policy.file == "cand.s"
         and (.policy.text | test("^\\.incbin")) and .compile.cached == false and .aggregate == 0' "$T/macro1.json"
check "macro_incbin.c again: a cache hit, still refused on the same line ($(jq -r '.compile.cached' "$T/macro2.json" 2>/dev/null))" \
    jqt --slurpfile a "$T/macro1.json" '.outcome == "policy_violation" and .compile.cached == true
         and .policy.line == $a[0].policy.line' "$T/macro2.json"
ev "$P" "$FIX/macro_incbin.c" "$T/macro3.json" --compile-only
check "the compile-only path (the agent's compile tool) says policy_violation too" \
    jqt '.outcome == "policy_violation" and .policy.rule == "file_inclusion"' "$T/macro3.json"

# --- 3. relaxed by the problem: the same candidates pass and score
R="$K/test/relaxed"
cp -r "$P" "$R"
jq '.policy = {"relax": {"file_inclusion": "test: reads /etc/hostname on purpose",
                         "module_loading": "test: loads its own copy of libm",
                         "embedded_binaries": "test: carries ELF magic"}}' "$P/problem.json" >"$R/problem.json"
for f in incbin dlopen elf; do
    ev "$R" "$FIX/$f.c" "$T/$f.relaxed.json"
    check "$f.c on a problem that relaxes its rule: ok, scored ($(jq -r '"\(.outcome) \(.aggregate)"' "$T/$f.relaxed.json" 2>/dev/null; head -c 200 "$T/$f.relaxed.json.err"))" \
        jqt '.outcome == "ok" and .aggregate > 0 and .policy == null' "$T/$f.relaxed.json"
done
# relaxing one rule leaves the others: module_loading relaxed, the ELF still refused
jq '.policy = {"relax": {"module_loading": "test"}}' "$P/problem.json" >"$R/problem.json"
ev "$R" "$FIX/elf.c" "$T/elf.partly.json"
check "relaxing module_loading leaves embedded_binaries in force ($(said "$T/elf.partly.json"))" \
    jqt '.outcome == "policy_violation" and .policy.rule == "embedded_binaries" and .policy.relaxed == ["module_loading"]' \
    "$T/elf.partly.json"

# --- 4. an unknown rule name is refused, naming the field
jq '.policy = {"relax": {"module_loding": "a typo"}}' "$P/problem.json" >"$R/problem.json"
ev "$R" "$HONEST" "$T/typo.json"
check "an unknown rule in policy.relax: exit 2, the field and the rules named ($(head -c 240 "$T/typo.json.err"))" \
    bash -c '[ "$(cat "$0.rc")" = 2 ] && grep -q "policy.relax.module_loding: unknown rule .module_loding. (ptx_instructions, embedded_binaries, module_loading, file_inclusion)" "$0.err"' \
    "$T/typo.json"

# --- 5. honest code passes; the kept intermediates change no code and a
# cache entry without them is compiled again
ev "$P" "$HONEST" "$T/honest.json"
check "the honest twin: ok ($(jq -r '"\(.outcome) \(.aggregate)"' "$T/honest.json" 2>/dev/null))" \
    jqt '.outcome == "ok" and .aggregate > 0' "$T/honest.json"
KEY=$(find "$CACHE/obj" -name '*.s' -newer "$T/typo.json" | head -n 1)
rm -f "$KEY"
ev "$P" "$HONEST" "$T/honest2.json"
check "a cached object whose kept .s is gone is compiled again, not served unchecked" \
    jqt '.outcome == "ok" and .compile.cached == false' "$T/honest2.json"
mkdir -p "$T/cc1" "$T/cc2"
cp "$ROOT/kernels/cpu/sgemm/seed.c" "$T/cc1/cand.c"
cp "$ROOT/kernels/cpu/sgemm/seed.c" "$T/cc2/cand.c"
(cd "$T/cc1" && cc -O3 -march=native -shared -fPIC -o o.so cand.c) &&
    (cd "$T/cc2" && cc -O3 -march=native -save-temps -shared -fPIC -o o.so cand.c)
check "cc -save-temps builds the same object byte for byte (the sgemm seed at -O3 -march=native)" \
    cmp -s "$T/cc1/o.so" "$T/cc2/o.so"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ]; then
    # the device compile's command lines (cicc, ptxas, fatbinary) with and
    # without the keep flags, file names taken out
    dry() {
        (cd "$T/cc1" && cp "$ROOT/kernels/gemm_bf16/seed.cu" cand.cu &&
            "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas=-v -cudart=shared \
                -Xcompiler=-fPIC "$@" -shared -o o.so cand.cu --dryrun 2>&1) |
            grep -E '(cicc|ptxas|nvlink)"? ' |
            sed -E 's/"[^"]*"//g; s/--orig_src_path_name//; s/--(create|include_file_name|stub_file_name)[= ]*//g; s/ +/ /g'
    }
    dry >"$T/dry.plain"
    dry -keep -Xcompiler=-save-temps >"$T/dry.keep"
    check "nvcc -keep: the same cicc, ptxas and nvlink command lines but for file names ($(wc -l <"$T/dry.plain") lines)" \
        bash -c '[ -s "$0" ] && cmp -s "$0" "$1"' "$T/dry.plain" "$T/dry.keep"

    # --- 6. CUDA rules (compiled for sm_90a: the policy decides before any GPU is needed)
    G="$ROOT/tests/fixtures/problems/gemm_bf16_small"
    ev "$G" "$ROOT/tests/hostile/gpu/undocumented_ptx.cu" "$T/ptx.json" --gpu-arch sm_90a
    check "an undocumented PTX opcode: ptx_instructions at its line of cand.ptx ($(said "$T/ptx.json"))" \
        jqt '.outcome == "policy_violation" and .policy.rule == "ptx_instructions" and .policy.file == "cand.ptx"
             and .policy.text == "cctl.ivall;" and (.policy.ptx_isa | length) > 0 and .aggregate == 0' "$T/ptx.json"
    ev "$G" "$ROOT/tests/hostile/gpu/module_from_bytes.cu" "$T/modbytes.json" --gpu-arch sm_90a
    check "cuModuleLoadData from a byte array: module_loading at its line ($(said "$T/modbytes.json"))" \
        jqt '.outcome == "policy_violation" and .policy.rule == "module_loading" and .policy.file == "cand.cu"
             and (.policy.text | contains("cuModuleLoadData(&mod, avo_hostile_ptx)"))' "$T/modbytes.json"
    ev "$G" "$ROOT/tests/hostile/gpu/loads_cubin.cu" "$T/cubin.json" --gpu-arch sm_90a
    check "an embedded cubin loaded at run time: refused ($(said "$T/cubin.json"))" \
        jqt '.outcome == "policy_violation" and .policy.rule == "embedded_binaries" and .policy.line != null' "$T/cubin.json"
    ev "$G" "$ROOT/tests/hostile/gpu/raw_string_crash.cu" "$T/rawstr.json" --gpu-arch sm_90a --compile-only
    check "a source ending inside a raw string prefix: the worker survives the scan, nvcc refuses it (exit $(cat "$T/rawstr.json.rc"), $(jq -r .outcome "$T/rawstr.json" 2>/dev/null))" \
        bash -c '[ "$(cat "$0.rc")" = 1 ] && jq -e ".outcome == \"compile_error\"" "$0" >/dev/null' "$T/rawstr.json"
    ev "$G" "$ROOT/kernels/gemm_bf16/seed_sm90.cu" "$T/sm90.json" --gpu-arch sm_90a --compile-only
    check "the wgmma/TMA seed (inline PTX, a driver entry point by name) passes the policy ($(jq -r .outcome "$T/sm90.json" 2>/dev/null))" \
        jqt '.outcome == "ok"' "$T/sm90.json"
else
    ok "CUDA rules: skipped # SKIP no nvcc on this host"
fi

# --- 7. through avod and a worker
S="$K/test/badseed"
cp -r "$P" "$S"
cp "$FIX/dlopen.c" "$S/seed.c"
check "avod starts" start_avod --kernels "$K"
J=$(avoctl --json submit --problem test/badseed --evaluations 2 --islands 1 | jq -r .id)
start_worker --kernels "$K" --cache "$T/wcache"
wait_for 180 "case \$(psql_avo \"SELECT state FROM jobs WHERE id = ${J:-0}\") in succeeded|failed|cancelled) true;; *) false;; esac"
psql_avo "SELECT id, state, outcome, aggregate FROM evaluations WHERE job_id = ${J:-0}" | sed 's/^/# /'
# (the tune operator renders the seed with its knobs' #defines in front: the
# line is the evaluated file's, the quoted text the same)
check "a seed that breaks the policy: its evaluation stored done, policy_violation, aggregate 0, with the finding" \
    test "$(psql_avo "SELECT state || ' ' || outcome || ' ' || aggregate || ' ' || (result->'policy'->>'rule') || ': ' ||
                             (result->'policy'->>'text') FROM evaluations WHERE job_id = ${J:-0} ORDER BY id LIMIT 1")" = \
         'done policy_violation 0 module_loading: return dlopen("/tmp/avo-fixture.so", RTLD_NOW | RTLD_LOCAL);'
check "the job failed, saying why" \
    bash -c 'grep -q "the seed failed its evaluation: policy_violation: module_loading: cand.c line" <<<"$0"' \
    "$(psql_avo "SELECT reason FROM jobs WHERE id = ${J:-0}")"
check "and its candidate is never scored nor committed" \
    test "$(psql_avo "SELECT count(*) FROM candidates WHERE job_id = ${J:-0} AND (committed OR aggregate > 0)")" = 0
out=$(avoctl submit --problem test/pkg --seed "$FIX/elf.c" --evaluations 2 2>&1)
check "a seed given at submission that breaks the policy is refused with the rule and the line ($(head -c 200 <<<"$out"))" \
    grep -q 'embedded_binaries: cand.c line [0-9]*: `0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0};`' <<<"$out"

[ "$FAILS" -eq 0 ]
