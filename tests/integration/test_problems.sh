#!/usr/bin/env bash
# Problems as a user sees them (issue 22, point 5; docs/problems.md, "Your
# own kernel"), through real avod, avo-worker and avoctl on the CPU:
# GET /v1/problems and /v1/problems/{name} (avoctl problem list/show), an
# unknown name answered 404 with "did you mean"; `avoctl problem check` on a
# shipped package (passes), on one whose knob value does not compile (fails
# naming the value), on a directory that is not a package (names the missing
# file); `avoctl problem new` then `check` for cpu (evaluated) and cuda
# (compiled; without a GPU, said so); the scaffolded package tuned to a
# finished job.
source "$(dirname "$0")/lib.sh"

K="$T/kernels"
mkdir -p "$K/cpu" "$K/broken"
cp -r "$ROOT/kernels/cpu/sgemm" "$K/cpu/sgemm"
# a package that does not load: listed with its error, not hidden
jq '.tolerence = 1' "$ROOT/kernels/cpu/sgemm/problem.json" >"$K/broken/problem.json"
cp "$ROOT/kernels/cpu/sgemm/"*.c "$K/broken/"
api() { curl -s -o "$T/api.body" -w '%{http_code}' --unix-socket "$AVO_HOME/avod.sock" "http://avod$1"; }

# --- new: a cpu package, straight into avod's kernels directory
avoctl problem new "$K/mine/rowsum" --target cpu >"$T/new.out" 2>&1
check "problem new --target cpu writes problem.json, reference.c and seed.c and says what to run next" \
    bash -c 'grep -q "problem.json, reference.c, seed.c" "$0/new.out" && grep -q "avoctl problem check" "$0/new.out" &&
             [ -s "$1/problem.json" ] && [ -s "$1/reference.c" ] && [ -s "$1/seed.c" ]' "$T" "$K/mine/rowsum"
avoctl problem new "$K/mine/rowsum" --target cpu >"$T/new2.out" 2>&1
check "problem new refuses a directory that already holds a package (exit 1, names the file)" \
    bash -c '[ $? = 0 ] && grep -q "rowsum/problem.json already exists" "$0"' "$T/new2.out"
avoctl problem new "$T/x" --target gpu >"$T/new3.out" 2>&1; rc=$?
check "problem new --target gpu is a usage error naming the allowed targets" \
    bash -c '[ "$0" = 2 ] && grep -q "gpu.* is not cpu or cuda" "$1"' "$rc" "$T/new3.out"

check "avod starts" start_avod --kernels "$K"

# --- list and show over the API
avoctl --json problem list >"$T/list.json"
check "GET /v1/problems lists every package by its name under kernels/, with backend, knobs and configurations" \
    jqt '(.problems | map(.name)) == ["broken", "cpu/sgemm", "mine/rowsum"] and
         (.problems[1] | .backend == "cpu" and .knobs == 5 and (.configs | length) == 4 and .sizes == ["M","N","K"]
                         and .unit == "GFLOP/s" and (.description | test("float32")))
         and (.problems[2] | .knobs == 2 and .seeds == ["default"])' "$T/list.json"
check "a package that does not load is listed with its error" \
    jqt '.problems[0] | (.error | test("tolerence: unknown field"))' "$T/list.json"
avoctl problem list >"$T/list.out"
check "avoctl problem list prints a table (name, backend, knobs, configs, unit)" \
    bash -c 'grep -Eq "^NAME +BACKEND +KNOBS +CONFIGS +UNIT" "$0" && grep -Eq "^cpu/sgemm +cpu +5 +4 +GFLOP/s" "$0" &&
             grep -Eq "^broken .*does not load" "$0"' "$T/list.out"
avoctl --json problem show cpu/sgemm >"$T/show.json"
check "GET /v1/problems/cpu/sgemm: the spec, the files a job would pin, the knob space counted" \
    jqt '.name == "cpu/sgemm" and .spec.entry == "sgemm" and (.files | keys) == ["problem.json","reference.c","seed.c"]
         and (.package_hash | test("^[0-9a-f]{64}$")) and .knob_space[0].points == 1000
         and .knob_space[0].allowed == 875' "$T/show.json"
avoctl problem show cpu/sgemm >"$T/show.out"
check "avoctl problem show prints the knobs with values and defaults, the constraints and the knob space" \
    bash -c 'grep -Eq "^  UNROLL +default 1 +values 1, 2, 4, 8$" "$0" && grep -q "constraint   BM \* BN <= 65536" "$0" &&
             grep -q "1000 settings, 875 allowed by the constraints" "$0"' "$T/show.out"
code=$(api /v1/problems/cpu/sgemm/)
check "one trailing slash after the name is tolerated" \
    bash -c '[ "$0" = 200 ] && jq -e ".name == \"cpu/sgemm\"" "$1" >/dev/null' "$code" "$T/api.body"
code=$(api /v1/problems/cpu/sgem)
check "an unknown problem is a 404 not_found with a \"did you mean\"" \
    bash -c '[ "$0" = 404 ] && jq -e ".error.code == \"not_found\" and
             (.error.message | test(\"no problem .cpu/sgem.*did you mean .cpu/sgemm.\"))" "$1" >/dev/null' \
    "$code" "$T/api.body"
avoctl problem show sgemm >"$T/unknown.out" 2>&1; rc=$?
check "avoctl problem show of an unknown name exits 1 and suggests the full name" \
    bash -c '[ "$0" = 1 ] && grep -q "did you mean .cpu/sgemm." "$1"' "$rc" "$T/unknown.out"
code=$(api /v1/problems/zzzzzz)
check "nothing close: the 404 points at the list instead" \
    bash -c '[ "$0" = 404 ] && grep -q "avoctl problem list" "$1" && ! grep -q "did you mean" "$1"' "$code" "$T/api.body"
code=$(api /v1/problems/../etc)
check "a name that leaves the kernels directory is refused" \
    bash -c '[ "$0" = 400 ] || [ "$0" = 404 ]' "$code"

# --- check: a shipped package passes
avoctl problem check cpu/sgemm --kernels "$ROOT/kernels" --max-builds 4 --sample-seed 11 >"$T/sgemm.out" 2>&1
rc=$?
check "check cpu/sgemm (shipped) passes: reference, the sampled knob settings, one evaluation" \
    bash -c '[ "$0" = 0 ] && grep -Eq "^ok +compile +reference.c" "$1" &&
             [ "$(grep -Ec "^ok +compile +seed.c ORDER=" "$1")" = 4 ] &&
             grep -Eq "^ok +evaluate +seed.c \(defaults\): .* GFLOP/s" "$1" && grep -q "^check: .* 0 failed" "$1"' \
    "$rc" "$T/sgemm.out"
check "check says it sampled, how many of how many, and the seed that repeats it" \
    grep -Eq "^note +knobs +seed.c: 1000 settings, 875 allowed by the constraints: compiling the defaults and a random sample of 3 \(--sample-seed 11 repeats it" \
    "$T/sgemm.out"

# --- check: a knob value that does not compile is named
B="$T/badknob"
cp -r "$K/mine/rowsum" "$B"
{ printf '#if UNROLL == 8\n#error UNROLL=8 is not supported by this seed\n#endif\n'; cat "$K/mine/rowsum/seed.c"; } \
    >"$B/seed.c"
avoctl problem check "$B" >"$T/bad.out" 2>&1
rc=$?
check "check fails (exit 1) on a package whose knob value does not compile" test "$rc" = 1
check "the failing builds are the UNROLL=8 ones, with the compiler's first error" \
    bash -c '[ "$(grep -Ec "^FAIL +compile +seed.c UNROLL=8 ACC=[124]: compile_error: .*UNROLL=8 is not supported" "$0")" = 3 ] &&
             ! grep -Eq "^FAIL +compile +seed.c UNROLL=[124] " "$0"' "$T/bad.out"
check "check names the knob value that fails in every build that has it" \
    grep -Eq "^FAIL +knob +seed.c: UNROLL=8 fails in every build that has it \(3 of 3\)" "$T/bad.out"

# --- check: not a package, and a package missing its seed
mkdir -p "$T/empty"
avoctl problem check "$T/empty" >"$T/empty.out" 2>&1; rc=$?
check "check of a directory that is not a package names the missing problem.json" \
    bash -c '[ "$0" = 1 ] && grep -q "is not a problem package: $1/problem.json: No such file" "$2"' \
    "$rc" "$T/empty" "$T/empty.out"
cp -r "$K/mine/rowsum" "$T/noseed" && rm "$T/noseed/seed.c"
avoctl problem check "$T/noseed" >"$T/noseed.out" 2>&1; rc=$?
check "check of a package without its seed names the missing file" \
    bash -c '[ "$0" = 1 ] && grep -q "seed: cannot read $1/seed.c" "$2"' "$rc" "$T/noseed" "$T/noseed.out"
avoctl problem check no/such >"$T/nosuch.out" 2>&1; rc=$?
check "check of a name that is neither a directory nor a problem says so" \
    bash -c '[ "$0" = 1 ] && grep -q "neither a directory nor a problem" "$1"' "$rc" "$T/nosuch.out"

avoctl problem show cpu/sgemm --target cpu >"$T/opt.out" 2>&1; rc=$?
check "an option of another verb is a usage error naming where it belongs" \
    bash -c '[ "$0" = 2 ] && grep -q -- "--target goes with .problem new., not .problem show." "$1"' "$rc" "$T/opt.out"

# --- new + check round trips
avoctl problem check mine/rowsum --kernels "$K" >"$T/rt.out" 2>&1
rc=$?
check "new --target cpu, then check: every knob setting compiles and the seed evaluates" \
    bash -c '[ "$0" = 0 ] && grep -q "compiling all of them" "$1" && [ "$(grep -Ec "^ok +compile +seed.c" "$1")" = 9 ] &&
             grep -Eq "^ok +evaluate +seed.c \(defaults\): .* GB/s" "$1"' "$rc" "$T/rt.out"
avoctl --json problem check mine/rowsum --kernels "$K" --no-eval >"$T/rt.json"
check "check --json: every step with its status" \
    jqt '.ok and .failed == 0 and .skipped == 1 and (.steps | map(.status) | index("skip")) != null' "$T/rt.json"

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
    avoctl problem new "$T/cu/rowsum" --target cuda >"$T/cunew.out" 2>&1
    avoctl problem check "$T/cu/rowsum" >"$T/cu.out" 2>&1
    rc=$?
    check "new --target cuda, then check: reference, baseline and every knob setting compile" \
        bash -c 'grep -Eq "^ok +compile +reference.cu" "$0" && grep -Eq "^ok +compile +baseline.cu" "$0" &&
                 [ "$(grep -Ec "^ok +compile +seed.cu THREADS=" "$0")" = 11 ] && ! grep -q "^FAIL" "$0"' "$T/cu.out"
    if nvidia-smi -L >/dev/null 2>&1; then
        check "with a GPU, the cuda seed evaluates" bash -c '[ "$0" = 0 ] && grep -Eq "^ok +evaluate +seed.cu" "$1"' \
            "$rc" "$T/cu.out"
    else
        check "without a GPU, check says the cuda seed compiled but was not evaluated (exit 0)" \
            bash -c '[ "$0" = 0 ] && grep -Eq "^skip +evaluate +seed.cu: compiled, but not evaluated: no GPU" "$1" &&
                     grep -q "seeds not evaluated: no GPU here (compile steps only)" "$1"' "$rc" "$T/cu.out"
    fi
else
    echo "ok - # SKIP cuda scaffold: no nvcc on this host"
fi

# --- the walkthrough's end: the scaffolded package tuned to a finished job
start_worker --kernels "$K"
J=$(avoctl --json submit --problem mine/rowsum --operator tune --evaluations 4 --islands 1 | jq -r .id)
avoctl watch "$J" >"$T/watch.out" 2>&1; rc=$?
check "a tune job on the scaffolded package finishes (succeeded)" \
    bash -c '[ "$0" = 0 ] && [ "$(avoctl --json status "$1" | jq -r .state)" = succeeded ]' "$rc" "$J"

[ "$FAILS" -eq 0 ]
