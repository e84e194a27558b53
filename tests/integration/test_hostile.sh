#!/usr/bin/env bash
# The hostile corpus: every tests/hostile/*.c evaluated against cpu/sgemm by
# `avo-worker eval`, each held to the outcome class in the table below and
# to the rules no hostile case may break, whatever its outcome:
#   - the worker survives (exit 0 or 1, never a signal, a hang or a usage error);
#   - the aggregate never exceeds the seed's (evaluated once, here);
#   - no process of the case is left alive, no scratch directory is left.
# Scratch dirs and the compile cache live under this test's own $T, so a
# survivor is found by its command line (`pgrep -f $T/`) without touching
# anyone else's processes; fork_bomb's children also rename themselves
# avo-hostile-fb. A file without a row in the table must at least not be ok.
#
# Evaluation integrity (issue 18): the cases in NEW_RULE are held to the
# table as it must read once the harness defends against them; they fail
# before that, on purpose (tests/hostile/ATTACKS-2026-12-03.md), and are
# never waived through KNOWN_GAP. Instead of the seed's aggregate (which an
# honest i-k-j product beats) they are held to an honest twin: each case,
# where it computes honestly, uses the same single-thread i-k-j loop as
# tests/hostile/twins/gemm_ikj.c, so an ok case may score at most TWIN_MARGIN
# times the twin's score on every config (the attacks gain 5x to 10^6x).
# Two runs of the twin differ by up to ~25% on one config on the 2-core VM
# (more when something else runs there), so the twin is evaluated TWIN_RUNS
# times and its best score per config is the bar; a case above the bar gets
# one more twin run, right then, and if it is still above, a paired
# referee: the case evaluated again with the twin as its against, both
# timed in one harness call by call in random order, so a loaded host
# slows both alike (on a host running 4x its CPUs, unpaired scores of one
# kernel differed by up to 50x, 2026-12-05). The case fails when a paired
# speed ratio is above TWIN_MARGIN too; the attacks gain 5x or more in
# either form. Cases that try to outlive their evaluation are followed at
# once by the honest threaded twin (tests/hostile/twins/gemm_threads.c),
# which must be ok. include_secret and incbin_secret are never compiled as
# committed (they name /etc/shadow): the test plants a root-only 0600 file
# holding a random token and compiles copies that name it instead (sed), in
# a 0700 directory.
# HOSTILE_RESULTS_DIR=DIR keeps a copy of every result there (not the
# secret cases'); HOSTILE_CASES="NAME ..." evaluates only those cases.
source "$(dirname "$0")/lib.sh"

PROBLEM="$ROOT/kernels/cpu/sgemm"
HOSTILE="$ROOT/tests/hostile"
TWINS="$HOSTILE/twins"
# The cache directory is left for the worker to create (0700), as in real
# use: a world-readable cache would hand the reference .so to candidate code
# running as another user (calls_reference).
mkdir -p "$T/tmp"
export TMPDIR="$T/tmp"
SEED=20261202
DEFAULT_TIMEOUT=60

# Allowed outcomes (space-separated; ANY: any outcome at all). network is
# decided at run time: ok proves the network namespace cut it off, so ok is
# required exactly when the sandbox reports netns.
declare -A EXPECT=(
    [compile_error]="compile_error"
    [segfault]="crash"
    [abort]="crash"
    [exit_early]="crash"
    [infinite_loop]="timeout"
    [sleeps]="timeout ok"
    [fork_bomb]="timeout"
    [memory_hog]="wrong_result crash timeout"
    [unwritten]="wrong_result"
    [slightly_wrong]="wrong_result"
    [nan]="wrong_result"
    [nonzero_status]="wrong_result"
    [uninit_output]="wrong_result"
    [write_outside]="wrong_result"
    # the candidate policy (issue 21, point 4; docs/evaluation.md,
    # "Policy"): refused before it runs. calls_reference, include_secret and
    # incbin_secret are evaluated again below with the rule relaxed, so the
    # defence behind the policy (the hidden cache, the confined compiler)
    # stays tested.
    [calls_reference]="policy_violation"
    [incbin_macro]="policy_violation"
    [dlopen_written]="policy_violation"
    [embedded_elf]="policy_violation"
    [modifies_inputs]="cheat_suspected"
    [caches_output]="cheat_suspected"
    [late_thread]="wrong_result cheat_suspected crash"
    [overflow_output]="cheat_suspected"
    [flood_stdout]="ok"
    [network]="NETNS"
    # issue 18, as it must be once defended
    # (crash: their proxy thread forwards the protocol through a pipe the
    # load opened, which the runner closes before the system-call filter)
    [slows_calibration]="ok cheat_suspected wrong_result crash"
    [subtle_calibration]="ok cheat_suspected wrong_result crash"
    [flush_thread]="ok cheat_suspected wrong_result"
    # a sleeping helper that works between the thaw and the clock on the
    # runner's own CPU: charged the CPU time its group used outside
    [thaw_thread]="ok cheat_suspected wrong_result"
    # a helper that finishes the call's rows after the answer, while the
    # checker waits for the CPU to freeze the group: all of it inside the
    # round trip, so no faster than its twin
    [finishes_late]="ok wrong_result cheat_suspected"
    [helper_process]="ok cheat_suspected wrong_result"
    [memo_inputs]="ok cheat_suspected wrong_result"
    [replay_when_timed]="ok cheat_suspected wrong_result"
    [reads_seed]="ok cheat_suspected wrong_result"
    [include_secret]="policy_violation"
    [incbin_secret]="policy_violation"
    [escapes_daemon]="ANY"
    [squats_nproc]="ANY"
    [fills_shm]="ANY"
    [bad_utf8]="ok"
    [dies_loading]="crash"
    # skips the product on a random 60% of its later calls: a check lands on
    # one, or the checked calls are all far slower than the median
    [skips_some]="cheat_suspected"
    # sees no other process and is not dumpable (else it returns 1)
    [sees_neighbours]="ok"
    # reaches for the host's GPU locks in /run/lock (flocks them, plants a
    # FIFO and a file there; else it returns 1): the evaluation must see an
    # empty read-only directory there
    [gpu_lock]="ok"
    # opens files, a socket, forks, makes itself dumpable, leaves its CPU
    # in a call (else it returns 1): the runner's system-call filter
    [syscalls]="ok"
    # puts a read-write file of its own under fd 0 and 2 at load and reads
    # it back in a call (else it computes): those go back to /dev/null
    [std_fds]="ok"
)
# The rule each issue-18 case is held to, besides its outcome (and instead
# of the seed's aggregate):
#   twin:    when ok, no config above TWIN_MARGIN x the honest twin's score
#   secret:  no line of the planted secret (nor of /etc/shadow) anywhere in
#            the result
#   outlive: the threaded twin evaluated right after it is ok, and no process
#            named avo-hostile-* is alive
#   files:   no avo-hostile-shm-* file left in /dev/shm or /tmp
#   tails:   .sandbox is an object whose stdout_tail and stderr_tail are strings
#   fast:    the crash is reported within FAST_CRASH_S of wall time
declare -A NEW_RULE=(
    [slows_calibration]=twin [subtle_calibration]=twin [flush_thread]=twin [helper_process]=twin
    [memo_inputs]=twin [replay_when_timed]=twin [reads_seed]=twin [skips_some]=twin [sees_neighbours]=twin [gpu_lock]=twin [syscalls]=twin [thaw_thread]=twin [std_fds]=twin
    [finishes_late]=twin
    [include_secret]=secret [incbin_secret]=secret
    [escapes_daemon]=outlive [squats_nproc]=outlive
    [fills_shm]=files [bad_utf8]=tails [dies_loading]=fast
)
TWIN_MARGIN=1.3
TWIN_RUNS=2
FAST_CRASH_S=10
# One name per run: a run killed before its trap leaves its file behind,
# and a fixed name would then make every later run skip the secret cases.
SECRET_FILE=/etc/avo-hostile-secret-$$
# Wall-clock limits for the cases that never finish on their own. memory_hog
# touches pages at ~200 MB/s on the 2-core VM, so reaching the 4 GiB
# RLIMIT_AS takes ~20 s; 8 s shows the worker survives it either way.
declare -A TIMEOUT=([infinite_loop]=3 [sleeps]=3 [fork_bomb]=3 [memory_hog]=8)
# Holes the harness does not close yet. A case listed here that breaks its
# expectation prints an "ok ... # known gap (waived)" line instead of failing the
# run; survival, strays and scratch leaks are never waived. Remove the entry
# once the gap is closed (the line then says so). Never for the NEW_RULE
# cases: failing until the harness defends against them is their point.
declare -A KNOWN_GAP=()

# Live (non-zombie) processes of this test's cases. A SIGKILLed group may
# stay as zombies for a moment until init reaps them: those are dead.
strays() {
    local p st
    for p in $({ pgrep -f "$T/"; pgrep '^avo-hostile'; } | sort -u); do
        st=$(ps -o stat= -p "$p" 2>/dev/null) || continue
        case $st in Z* | X* | "") ;; *) echo "$p" ;; esac
    done
}

kill_strays() {  # never leave a case running: by pid, one at a time
    local p
    for p in $(strays); do kill -KILL "$p" 2>/dev/null; done
}

marker_files() {  # what fills_shm leaves behind (the marker is this corpus's own)
    find /dev/shm /tmp -maxdepth 1 -name 'avo-hostile-shm-*' 2>/dev/null
}

remove_marker_files() {
    local f
    marker_files | while IFS= read -r f; do rm -f "$f"; done
}

PLANTED=0
# A GPU lock file as a worker makes it (gpulock.c: 0644, in the default
# directory), for gpu_lock to reach for; /run/lock made (sticky, as Debian
# has it) where this host lacks it, and removed again.
LOCK_DIR=/run/lock
MADE_LOCK_DIR=0
if [ ! -d "$LOCK_DIR" ] && mkdir -m 1777 "$LOCK_DIR" 2>/dev/null; then MADE_LOCK_DIR=1; fi
# A run killed outright (SIGKILL: no trap) left its files: those whose
# run is gone are removed first.
for f in "$LOCK_DIR"/avo-gpu-hostile-[0-9]*.lock "$LOCK_DIR"/avo-harness-cpu-hostile-[0-9]*.lock; do
    [ -f "$f" ] || continue
    pid=${f##*-}
    pid=${pid%.lock}
    kill -0 "$pid" 2>/dev/null || rm -f "$f"
done
HOST_LOCK="$LOCK_DIR/avo-gpu-hostile-$$.lock"
(umask 022 && : >"$HOST_LOCK") 2>/dev/null
# and a CPU lease file as a worker makes it (cpulease.c, same directory)
HOST_LEASE="$LOCK_DIR/avo-harness-cpu-hostile-$$.lock"
(umask 022 && : >"$HOST_LEASE") 2>/dev/null
remove_planted() {
    [ "$PLANTED" = 1 ] && rm -f "$SECRET_FILE"
    remove_marker_files
    rm -f "$HOST_LOCK" "$HOST_LEASE" "$LOCK_DIR"/avo-gpu-hostile-planted-* "$LOCK_DIR"/avo-harness-cpu-hostile-planted-*
    [ "$MADE_LOCK_DIR" = 1 ] && rmdir "$LOCK_DIR" 2>/dev/null
    return 0
}
trap 'kill_strays; remove_planted; cleanup' EXIT

keep() {  # FILE
    if [ -n "${HOSTILE_RESULTS_DIR:-}" ]; then cp "$1" "$HOSTILE_RESULTS_DIR/" 2>/dev/null; fi
    return 0
}

eval_case() {  # FILE TIMEOUT OUTJSON [avo-worker eval args] -> worker exit code
    local rc
    timeout -k 5 $(($2 + 60)) avo-worker eval "$PROBLEM" "$1" --json --timeout "$2" --seed "$SEED" \
        --cache "$T/cache" "${@:4}" >"$3" 2>"$3.err"
    rc=$?
    return $rc
}

# The seed: the number no (old) hostile case may beat.
eval_case "$PROBLEM/seed.c" "$DEFAULT_TIMEOUT" "$T/seed.json"
SEED_AGG=$(jq -r 'if .outcome == "ok" then .aggregate else 0 end' "$T/seed.json" 2>/dev/null)
check "the sgemm seed evaluates ok (aggregate ${SEED_AGG:-?})" \
    awk -v a="${SEED_AGG:-0}" 'BEGIN { exit !(a > 0) }'
check "the CPU runner runs under its system-call filter, as the kernel reports it (runner.syscall_filter)" \
    jqt '.runner.syscall_filter == true' "$T/seed.json"

# A package under a private directory (/tmp) whose reference and seed are
# links out of the package's own directory (as the test fixtures link to
# kernels/ and to each other):
# the harness's sandbox shows the link's target too, so the seed is ok (it
# was a "crash" of the candidate's: the harness could not read the
# reference).
LINKED="$T/linked-problem"
mkdir -p "$LINKED/pkg" "$LINKED/src"
cp "$PROBLEM"/* "$LINKED/pkg/"
for f in reference.c seed.c; do
    mv "$LINKED/pkg/$f" "$LINKED/src/$f"
    ln -s "$LINKED/src/$f" "$LINKED/pkg/$f"
done
timeout -k 5 120 avo-worker eval "$LINKED/pkg" "$PROBLEM/seed.c" --json --seed "$SEED" --cache "$T/cache" \
    >"$T/linked.json" 2>"$T/linked.json.err"
check "a package whose reference and seed link out of its directory evaluates ok ($(jq -r '.outcome + ": " + (.detail // "")' "$T/linked.json" 2>/dev/null | cut -c1-160))" \
    jqt '.outcome == "ok"' "$T/linked.json"

# A scratch root outside the private directories (/tmp, /var/tmp,
# /dev/shm), as a worker's `scratch` setting may put it: the sandbox's root
# is read-only there, and every compile failed ("ld returned 1") until the
# compile's own directory was mounted writable. A fresh cache: a failed
# compile is cached.
OUTSIDE=$(mktemp -d /var/lib/avo-test-scratch.XXXXXX)
TMPDIR="$OUTSIDE" timeout -k 5 120 avo-worker eval "$PROBLEM" "$PROBLEM/seed.c" --json --seed "$SEED" \
    --cache "$OUTSIDE/cache" >"$T/outside.json" 2>"$T/outside.json.err"
check "with the scratch root outside /tmp ($OUTSIDE) the seed evaluates ok ($(jq -r '.outcome' "$T/outside.json" 2>/dev/null; head -c 160 "$T/outside.json.err"))" \
    jqt '.outcome == "ok"' "$T/outside.json"
rm -rf "$OUTSIDE"

# The honest twins. gemm_ikj's best score per config over TWIN_RUNS runs is
# the bar of the twin rule ({"config name": score} in TWIN_SCORES).
TWIN_SCORES="$T/twin.scores.json"
TWIN_EVALS=0
echo '{}' >"$TWIN_SCORES"
twin_eval() {  # one more run of gemm_ikj, merged into TWIN_SCORES (a config's bar only rises)
    TWIN_EVALS=$((TWIN_EVALS + 1))
    local out="$T/twin.$TWIN_EVALS.json"
    eval_case "$TWINS/gemm_ikj.c" "$DEFAULT_TIMEOUT" "$out"
    keep "$out"
    jq -s '.[0] as $best | .[1] | if .outcome == "ok" then
               reduce .configs[] as $c ($best; .[$c.name] = ([.[$c.name] // 0, $c.score] | max))
           else $best end' "$TWIN_SCORES" "$out" >"$TWIN_SCORES.new" 2>/dev/null &&
        mv "$TWIN_SCORES.new" "$TWIN_SCORES"
    TWIN_AGG=$(jq -r '[.[]] | if length > 0 then (map(log) | add / length | exp) else 0 end' "$TWIN_SCORES")
}
for run in $(seq 1 "$TWIN_RUNS"); do
    twin_eval
    check "twin gemm_ikj (run $run) evaluates ok (aggregate $(jq -r '.aggregate // 0' "$T/twin.$TWIN_EVALS.json" 2>/dev/null))" \
        jqt '.outcome == "ok" and .aggregate > 0' "$T/twin.$TWIN_EVALS.json"
done
eval_case "$TWINS/gemm_threads.c" "$DEFAULT_TIMEOUT" "$T/twin_threads.json"
keep "$T/twin_threads.json"
check "twin gemm_threads evaluates ok (aggregate $(jq -r '.aggregate // 0' "$T/twin_threads.json" 2>/dev/null))" \
    jqt '.outcome == "ok" and .aggregate > 0' "$T/twin_threads.json"

# The planted secret: a random token in a root-only file, which
# include_secret and incbin_secret name instead of /etc/shadow. Their sources
# and results stay in a 0700 directory.
mkdir -m 700 "$T/secret"
SECRET_TOKEN=""
# What killed runs left: a file whose run is gone (or, of the single name
# earlier versions used, one over an hour old) and that holds a planted
# token, nothing else.
remove_stale_secrets() {
    local f pid
    for f in /etc/avo-hostile-secret /etc/avo-hostile-secret-*; do
        [ -f "$f" ] && head -1 "$f" 2>/dev/null | grep -q '^AVOSECRET[0-9a-f]*$' || continue
        pid=${f##*-}
        if [ "$f" = /etc/avo-hostile-secret ]; then
            [ -n "$(find "$f" -mmin +60 2>/dev/null)" ] && rm -f "$f"
        elif [ "$pid" -gt 0 ] 2>/dev/null && ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$f"
        fi
    done
}
[ "$(id -u)" -eq 0 ] && remove_stale_secrets
if [ "$(id -u)" -eq 0 ] && [ ! -e "$SECRET_FILE" ]; then
    SECRET_TOKEN="AVOSECRET$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    PLANTED=1
    (umask 077 && printf '%s\navohostile:$6$%s$c2VjcmV0:20000:0:99999:7:::\n' "$SECRET_TOKEN" "$SECRET_TOKEN" \
        >"$SECRET_FILE")
    for n in include_secret incbin_secret; do
        sed 's#/etc/shadow#'"$SECRET_FILE"'#g' "$HOSTILE/$n.c" >"$T/secret/$n.c"
    done
fi

# How many lines of the planted secret and of /etc/shadow (and the token
# itself) occur in FILE, as its bytes stand or as jq decodes its strings.
# Only the count is ever printed.
secret_hits() {  # FILE
    local f=$1 hits=0 line
    jq -r '.. | strings' "$f" >"$T/secret/strings" 2>/dev/null
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        if grep -qF -- "$line" "$f" "$T/secret/strings" 2>/dev/null; then hits=$((hits + 1)); fi
    done < <(cat "$SECRET_FILE" /etc/shadow 2>/dev/null; echo "$SECRET_TOKEN")
    rm -f "$T/secret/strings"
    echo "$hits"
}

# The configs of an ok result above TWIN_MARGIN x the twin's score, with
# their ratio; empty when there are none (or the result is not ok).
above_twin() {  # FILE
    jq -r --slurpfile tw "$TWIN_SCORES" --argjson m "$TWIN_MARGIN" '
        $tw[0] as $t |
        if .outcome != "ok" then empty
        elif (.configs | length) != ($t | length) then
            "\(.configs | length) configs, the twin has \($t | length)"
        else
            .configs[] | select(($t[.name] // 0) <= 0 or .score > $m * $t[.name]) |
            "\(.name) x\(if ($t[.name] // 0) > 0 then (.score / $t[.name] * 10 | floor / 10) else "inf" end)"
        end' "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'
}

# The paired referee: FILE evaluated with the twin as its against, judged
# by lib.sh's paired_above.
paired_above_twin() {  # FILE TIMEOUT OUTJSON
    eval_case "$1" "$2" "$3" --against "$TWINS/gemm_ikj.c"
    keep "$3"
    paired_above "$3" "$TWIN_MARGIN"
}

HOME_DIR=$(getent passwd "$(id -u)" | cut -d: -f6)
touch "$T/start"

for src in "$HOSTILE"/*.c; do
    name=$(basename "$src" .c)
    if [ -n "${HOSTILE_CASES:-}" ] && [[ " $HOSTILE_CASES " != *" $name "* ]]; then
        continue
    fi
    to=${TIMEOUT[$name]:-$DEFAULT_TIMEOUT}
    out="$T/$name.json"
    rule=${NEW_RULE[$name]:-}
    if [ "$rule" = secret ]; then
        # Never the committed file: it names /etc/shadow.
        if [ -z "$SECRET_TOKEN" ]; then
            ok "$name: skipped # SKIP needs root and no $SECRET_FILE already there (the planted secret)"
            continue
        fi
        src="$T/secret/$name.c"
        out="$T/secret/$name.json"
    fi
    t_start=$(date +%s.%N)
    eval_case "$src" "$to" "$out"
    rc=$?
    wall=$(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    [ "$rule" = secret ] || keep "$out"
    outcome=$(jq -r '.outcome // "none"' "$out" 2>/dev/null || echo none)
    agg=$(jq -r '.aggregate // 0' "$out" 2>/dev/null || echo 0)
    detail=$(jq -r '.detail // ""' "$out" 2>/dev/null | cut -c1-120)

    # Survival first: 0 (ok) or 1 (candidate failed); 2 is a usage/spec
    # error, >= 124 a hang (timeout) or a signal.
    check "$name: the worker survives (exit $rc)" test "$rc" -eq 0 -o "$rc" -eq 1

    want=${EXPECT[$name]:-}
    note=""
    if [ "$want" = NETNS ]; then
        if [ "$(jq -r '.sandbox.netns' "$out" 2>/dev/null)" = true ]; then
            want=ok
            note=" (in a network namespace: ok proves both connections failed)"
        else
            want=wrong_result
            note=" (no network namespace: the connections were possible)"
        fi
    fi
    pass=0
    if [ -z "$want" ]; then
        [ "$outcome" != ok ] && [ "$outcome" != none ] && pass=1
        shown="anything but ok (no row in the table)"
    elif [ "$want" = ANY ]; then
        [ "$outcome" != none ] && pass=1
        shown="any outcome"
    else
        for w in $want; do [ "$outcome" = "$w" ] && pass=1; done
        shown=${want// /|}
    fi
    # sleeps may finish under a generous limit, but only with a score that
    # shows the sleep was timed.
    if [ "$name" = sleeps ] && [ "$outcome" = ok ] &&
        ! awk -v a="$agg" -v s="$SEED_AGG" 'BEGIN { exit !(a < s / 10) }'; then
        pass=0
    fi
    above=$(awk -v a="$agg" -v s="${SEED_AGG:-0}" 'BEGIN { print (a > s) ? 1 : 0 }')
    label="$name: outcome $outcome, expected $shown$note"
    gap=${KNOWN_GAP[$name]:-}
    if [ -n "$rule" ]; then
        # issue 18: never waived; the twin instead of the seed.
        if [ $pass -eq 1 ]; then ok "$label"; else notok "$label: $detail"; fi
    elif [ -n "$gap" ] && { [ $pass -eq 0 ] || [ "$above" = 1 ]; }; then
        ok "$label, aggregate $agg vs seed $SEED_AGG # known gap (waived): $gap"
    else
        if [ -n "$gap" ]; then
            label="$label (known gap closed: remove it from KNOWN_GAP)"
        fi
        if [ $pass -eq 1 ]; then ok "$label"; else notok "$label: $detail"; fi
        check "$name: aggregate $agg does not exceed the seed's $SEED_AGG" test "$above" = 0
    fi

    if [ "$outcome" = policy_violation ]; then
        check "$name: the policy names its rule and the offending line, never scored ($(jq -r '.policy | "\(.rule) \(.file):\(.line)"' "$out" 2>/dev/null))" \
            jqt '(.policy.rule | type) == "string" and (.policy.line != null or .policy.file == "object")
                 and .aggregate == 0 and ([.configs[].score] | all(. == 0))' "$out"
    fi

    case $rule in
    twin)
        over=$(above_twin "$out")
        if [ -n "$over" ]; then
            # A gain or the VM's noise? The twin once more, now: a real
            # attack stays far above it.
            twin_eval
            over=$(above_twin "$out")
        fi
        referee=""
        if [ -n "$over" ]; then
            # Still above: the paired referee decides, and says so.
            referee="; unpaired above: $over, paired within the margin"
            over=$(paired_above_twin "$src" "$to" "$T/$name.paired.json")
            [ -n "$over" ] && referee=""
        fi
        check "$name: no config above ${TWIN_MARGIN}x its honest twin (aggregate $agg, twin's best $TWIN_AGG)${over:+; above: $over}$referee" \
            test -z "$over"
        ;;
    secret)
        hits=$(secret_hits "$out")
        check "$name: no line of the planted secret or of /etc/shadow anywhere in the result ($hits found)" \
            test "$hits" -eq 0
        ;;
    outlive)
        # At once, before what it left behind has a chance to end by itself.
        eval_case "$TWINS/gemm_threads.c" "$DEFAULT_TIMEOUT" "$T/$name.after.json"
        keep "$T/$name.after.json"
        after=$(jq -r '"\(.outcome // "none"): \(.detail // "" | .[0:100])"' "$T/$name.after.json" 2>/dev/null)
        check "$name: the honest threaded twin evaluated right after it is ok (${after:-no result})" \
            jqt '.outcome == "ok"' "$T/$name.after.json"
        alive=0
        for p in $(pgrep '^avo-hostile'); do
            case $(ps -o stat= -p "$p" 2>/dev/null) in Z* | X* | "") ;; *) alive=$((alive + 1)) ;; esac
        done
        check "$name: no process named avo-hostile-* alive afterwards ($alive alive)" test "$alive" -eq 0
        ;;
    files)
        nleft=$(marker_files | wc -l)
        check "$name: no avo-hostile-shm-* file left in /dev/shm or /tmp ($nleft left)" test "$nleft" -eq 0
        remove_marker_files
        ;;
    tails)
        check "$name: .sandbox is an object whose stdout_tail and stderr_tail are strings (.sandbox is $(jq -r '.sandbox | type' "$out" 2>/dev/null))" \
            jqt '(.sandbox | type) == "object" and (.sandbox.stdout_tail | type) == "string"
                 and (.sandbox.stderr_tail | type) == "string"' "$out"
        ;;
    fast)
        sw=$(jq -r '.sandbox.wall_s // "none"' "$out" 2>/dev/null)
        check "$name: the crash is reported within ${FAST_CRASH_S} s although the timeout is ${to} s (${wall} s measured, sandbox.wall_s ${sw})" \
            awk -v w="$wall" -v m="$FAST_CRASH_S" 'BEGIN { exit !(w < m) }'
        ;;
    esac

    case $name in
    gpu_lock)
        planted=$(find "$LOCK_DIR" -maxdepth 1 \( -name 'avo-gpu-hostile-planted-*' -o \
            -name 'avo-harness-cpu-hostile-planted-*' \) 2>/dev/null | wc -l)
        check "gpu_lock: nothing planted in the host's $LOCK_DIR ($planted found)" test "$planted" -eq 0
        rm -f "$LOCK_DIR"/avo-gpu-hostile-planted-* "$LOCK_DIR"/avo-harness-cpu-hostile-planted-*
        check "gpu_lock: the host's lock file is free right after (flock -n $HOST_LOCK)" \
            flock -n "$HOST_LOCK" true
        check "gpu_lock: the host's CPU lease file is free right after (flock -n $HOST_LEASE)" \
            flock -n "$HOST_LEASE" true
        ;;
    flood_stdout)
        # 200 MB written; what comes back must be the capped tail.
        ol=$(jq -r '.sandbox.stdout_tail // "" | length' "$out" 2>/dev/null || echo -1)
        el=$(jq -r '.sandbox.stderr_tail // "" | length' "$out" 2>/dev/null || echo -1)
        check "flood_stdout: stdout/stderr captured within the 4 KiB cap ($ol, $el bytes)" \
            test "$ol" -ge 0 -a "$ol" -le 4096 -a "$el" -ge 0 -a "$el" -le 4096
        check "flood_stdout: the result stays small ($(wc -c <"$out") bytes)" test "$(wc -c <"$out")" -lt 65536
        ;;
    write_outside)
        # Not an assertion: how strong the sandbox is. Files it managed to
        # create outside its scratch dir are reported and removed.
        escaped=$(find /tmp "$HOME_DIR" -maxdepth 1 -name '*avo-hostile-escape-*' -newer "$T/start" 2>/dev/null | tr '\n' ' ')
        if [ -n "$escaped" ]; then
            ok "write_outside: note: writes outside the scratch dir succeeded (no filesystem isolation): $escaped"
            # shellcheck disable=SC2086
            rm -f $escaped
        else
            ok "write_outside: note: no file outside the scratch dir was created"
        fi
        ;;
    esac

    # No survivors: give a killed group a moment (5 s of wall time, however
    # long one look takes: 63 squatters make it seconds) to die, then look.
    left=""
    until_s=$((SECONDS + 5))
    while :; do
        left=$(strays)
        [ -z "$left" ] && break
        [ "$SECONDS" -ge "$until_s" ] && break
        sleep 0.1
    done
    check "$name: no process left running$( [ -n "$left" ] && echo " (left: $(echo $left | wc -w))")" test -z "$left"
    kill_strays
    # Until init has reaped them too: a zombie still counts against its
    # uid's RLIMIT_NPROC (63 killed squatters would starve the next case).
    until_s=$((SECONDS + 10))
    while [ -n "$({ pgrep -f "$T/"; pgrep '^avo-hostile'; } 2>/dev/null)" ] && [ "$SECONDS" -lt "$until_s" ]; do
        sleep 0.1
    done
    leaked=$(find "$T/tmp" -mindepth 1 -maxdepth 1 2>/dev/null)
    check "$name: no scratch directory left" test -z "$leaked"
    rm -rf "${T:?}/tmp/"*
done

# The defence behind the policy: the cases the policy refuses, evaluated on
# a copy of the package that relaxes the rule they break, must still get the
# outcome they had before the policy (the cache hidden from the runner, the
# compiler confined), and the secret must still be nowhere in the result.
RELAXED="$T/relaxed-sgemm"
mkdir -p "$RELAXED"
cp "$PROBLEM"/* "$RELAXED/"
jq '.policy = {"relax": {"module_loading": "test: the hidden cache is the defence under test",
                         "file_inclusion": "test: the confined compiler is the defence under test"}}' \
    "$PROBLEM/problem.json" >"$RELAXED/problem.json"
declare -A RELAXED_EXPECT=([calls_reference]="wrong_result" [include_secret]="compile_error"
                           [incbin_secret]="compile_error")
for name in calls_reference include_secret incbin_secret; do
    src="$HOSTILE/$name.c"
    out="$T/$name.relaxed.json"
    if [ "${NEW_RULE[$name]:-}" = secret ]; then
        if [ -z "$SECRET_TOKEN" ]; then
            ok "$name (policy relaxed): skipped # SKIP needs root and no $SECRET_FILE already there"
            continue
        fi
        src="$T/secret/$name.c"
        out="$T/secret/$name.relaxed.json"
    fi
    timeout -k 5 120 avo-worker eval "$RELAXED" "$src" --json --timeout "$DEFAULT_TIMEOUT" --seed "$SEED" \
        --cache "$T/cache" >"$out" 2>"$out.err"
    outcome=$(jq -r '.outcome // "none"' "$out" 2>/dev/null || echo none)
    check "$name (policy relaxed): outcome $outcome, expected ${RELAXED_EXPECT[$name]}" \
        test "$outcome" = "${RELAXED_EXPECT[$name]}"
    if [ "${NEW_RULE[$name]:-}" = secret ]; then
        hits=$(secret_hits "$out")
        check "$name (policy relaxed): no line of the planted secret or of /etc/shadow anywhere in the result ($hits found)" \
            test "$hits" -eq 0
    fi
done

[ "$FAILS" -eq 0 ]
