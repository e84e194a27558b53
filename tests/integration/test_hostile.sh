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
source "$(dirname "$0")/lib.sh"

PROBLEM="$ROOT/kernels/cpu/sgemm"
HOSTILE="$ROOT/tests/hostile"
# The cache directory is left for the worker to create (0700), as in real
# use: a world-readable cache would hand the reference .so to candidate code
# running as another user (calls_reference).
mkdir -p "$T/tmp"
export TMPDIR="$T/tmp"
SEED=20261202
DEFAULT_TIMEOUT=60

# Allowed outcomes (space-separated). network is decided at run time: ok
# proves the network namespace cut it off, so ok is required exactly when
# the sandbox reports netns.
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
    [calls_reference]="wrong_result"
    [modifies_inputs]="cheat_suspected"
    [caches_output]="cheat_suspected"
    [late_thread]="wrong_result cheat_suspected crash"
    [overflow_output]="cheat_suspected"
    [flood_stdout]="ok"
    [network]="NETNS"
)
# Wall-clock limits for the cases that never finish on their own. memory_hog
# touches pages at ~200 MB/s on the 2-core VM, so reaching the 4 GiB
# RLIMIT_AS takes ~20 s; 8 s shows the worker survives it either way.
declare -A TIMEOUT=([infinite_loop]=3 [sleeps]=3 [fork_bomb]=3 [memory_hog]=8)
# Holes the harness does not close yet. A case listed here that breaks its
# expectation prints an "ok ... # known gap (waived)" line instead of failing the
# run; survival, strays and scratch leaks are never waived. Remove the entry
# once the gap is closed (the line then says so).
declare -A KNOWN_GAP=()

# Live (non-zombie) processes of this test's cases. A SIGKILLed group may
# stay as zombies for a moment until init reaps them: those are dead.
strays() {
    local p st
    for p in $(pgrep -f "$T/") $(pgrep '^avo-hostile'); do
        st=$(ps -o stat= -p "$p" 2>/dev/null) || continue
        case $st in Z* | X* | "") ;; *) echo "$p" ;; esac
    done
}

kill_strays() {  # never leave a case running: by pid, one at a time
    local p
    for p in $(strays); do kill -KILL "$p" 2>/dev/null; done
}
trap 'kill_strays; cleanup' EXIT

eval_case() {  # FILE TIMEOUT OUTJSON -> worker exit code
    local rc
    timeout -k 5 $(($2 + 60)) avo-worker eval "$PROBLEM" "$1" --json --timeout "$2" --seed "$SEED" \
        --cache "$T/cache" >"$3" 2>"$3.err"
    rc=$?
    return $rc
}

# The seed: the number no hostile case may beat.
eval_case "$PROBLEM/seed.c" "$DEFAULT_TIMEOUT" "$T/seed.json"
SEED_AGG=$(jq -r 'if .outcome == "ok" then .aggregate else 0 end' "$T/seed.json" 2>/dev/null)
check "the sgemm seed evaluates ok (aggregate ${SEED_AGG:-?})" \
    awk -v a="${SEED_AGG:-0}" 'BEGIN { exit !(a > 0) }'

HOME_DIR=$(getent passwd "$(id -u)" | cut -d: -f6)
touch "$T/start"

for src in "$HOSTILE"/*.c; do
    name=$(basename "$src" .c)
    to=${TIMEOUT[$name]:-$DEFAULT_TIMEOUT}
    out="$T/$name.json"
    eval_case "$src" "$to" "$out"
    rc=$?
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
    if [ -n "$gap" ] && { [ $pass -eq 0 ] || [ "$above" = 1 ]; }; then
        ok "$label, aggregate $agg vs seed $SEED_AGG # known gap (waived): $gap"
    else
        if [ -n "$gap" ]; then
            label="$label (known gap closed: remove it from KNOWN_GAP)"
        fi
        if [ $pass -eq 1 ]; then ok "$label"; else notok "$label: $detail"; fi
        check "$name: aggregate $agg does not exceed the seed's $SEED_AGG" test "$above" = 0
    fi

    case $name in
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

    # No survivors: give a killed group a moment to die, then look.
    left=""
    for _ in $(seq 1 50); do
        left=$(strays)
        [ -z "$left" ] && break
        sleep 0.1
    done
    check "$name: no process left running$( [ -n "$left" ] && echo " (left: $(echo $left | wc -w))")" test -z "$left"
    kill_strays
    leaked=$(find "$T/tmp" -mindepth 1 -maxdepth 1 2>/dev/null)
    check "$name: no scratch directory left" test -z "$leaked"
    rm -rf "${T:?}/tmp/"*
done

exit 0
