#!/usr/bin/env bash
# What avoctl says to a person (issue 22, "The client"), black-box through
# the real avod, worker and avoctl: "did you mean", allowed values and the
# broken constraint, the same limits as avod, the watch summary from the
# job's own state (also after --after N), a failed seed said as such,
# plural forms, the unit column, elapsed time and ETA, colour and NO_COLOR,
# Ctrl-C in watch, campaign --out making its directory, the generated
# completion scripts and man page, and named contexts.
source "$(dirname "$0")/lib.sh"

K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
# no config file of the person running the tests
export XDG_CONFIG_HOME="$T/config"

# ---- without avod ----------------------------------------------------------
out=$(avoctl sumbit --problem cpu/sgemm 2>&1); rc=$?
check "a mistyped command: exit 2, did you mean the right one" \
    bash -c '[ "$1" = 2 ] && grep -q "unknown command '"'"'sumbit'"'"'; did you mean '"'"'submit'"'"'?" <<<"$0"' "$out" "$rc"
check "a mistyped flag: did you mean" \
    bash -c 'avoctl submit --problem cpu/sgemm --evalutions 3 2>&1 | grep -q "unknown option '"'"'--evalutions'"'"'; did you mean '"'"'--evaluations'"'"'?"'
check "a mistyped global option: did you mean" \
    bash -c 'avoctl --jsno list 2>&1 | grep -q "did you mean '"'"'--json'"'"'?"'
check "help for a mistyped command: did you mean" \
    bash -c 'avoctl help wacth 2>&1 | grep -q "did you mean '"'"'watch'"'"'?"'
check "--islands: the client's limit is avod's (256, not 4096)" \
    bash -c 'avoctl submit --problem cpu/sgemm --islands 300 2>&1 | grep -q -- "--islands: expected an integer in \[1, 256\]"'
check "list --limit: the client's limit is avod's (1000)" \
    bash -c 'avoctl list --limit 5000 2>&1 | grep -q -- "--limit: expected an integer in \[1, 1000\]"'
check "the bash completion script loads: complete -p avoctl" \
    bash -c 'source <(avoctl completion bash) && complete -p avoctl | grep -q "_avoctl avoctl"'
check "bash completion offers the commands and each command's flags (from the command table)" \
    bash -c 'source <(avoctl completion bash); COMP_WORDS=(avoctl --json wat); COMP_CWORD=2; _avoctl
             [ "${COMPREPLY[*]}" = watch ] || exit 1
             COMP_WORDS=(avoctl list --li); COMP_CWORD=2; _avoctl; [ "${COMPREPLY[*]}" = --limit ]'
check "the zsh completion script is a #compdef file with every command" \
    bash -c 'avoctl completion zsh >"$0/_avoctl" && head -1 "$0/_avoctl" | grep -qx "#compdef avoctl" &&
             for c in submit watch campaign completion man; do grep -q "^        '"'"'$c:" "$0/_avoctl" || exit 1; done' "$T"
# In a real interactive zsh (zpty): compinit loads the script from fpath and
# one TAB completes commands, subcommands and flags.
zcomp() { [ "$(timeout 30 zsh -f "$ROOT/tests/integration/zsh_complete.zsh" "$T" "$1")" = "$2" ]; }
check "zsh: TAB completes a command (avoctl wat -> avoctl watch)" zcomp "avoctl wat" "avoctl watch"
check "zsh: TAB completes a subcommand (avoctl problem ch -> check)" zcomp "avoctl problem ch" "avoctl problem check"
check "zsh: TAB completes a command's flag (avoctl list --li -> --limit)" zcomp "avoctl list --li" "avoctl list --limit"
check "bash completion offers subcommands too (problem ch -> check, completion z -> zsh)" \
    bash -c 'source <(avoctl completion bash); COMP_WORDS=(avoctl problem ch); COMP_CWORD=2; _avoctl
             [ "${COMPREPLY[*]}" = check ] || exit 1
             COMP_WORDS=(avoctl completion z); COMP_CWORD=2; _avoctl; [ "${COMPREPLY[*]}" = zsh ]'
check "avoctl completion fish: a usage error naming the shells" \
    bash -c 'out=$(avoctl completion fish 2>&1); [ $? = 2 ] && grep -q "bash or zsh" <<<"$out"'
avoctl man >"$T/avoctl.1"
check "the man page renders with man -l: every command and global option in it" \
    bash -c 'out=$(MANWIDTH=120 man -l "$0" 2>/dev/null) && grep -q "^NAME" <<<"$out" &&
             for c in submit fork list status watch campaign kb completion man; do grep -q "^   $c$" <<<"$out" || exit 1; done &&
             grep -q -- "--context NAME" <<<"$out" && grep -q "NO_COLOR" <<<"$out"' "$T/avoctl.1"

# ---- with avod and a worker ----------------------------------------------
check "avod starts" start_avod --kernels "$K"
start_worker --kernels "$K"

out=$(avoctl submit --problem cpu/sgem 2>&1)
check "an unknown problem: avod names the nearest one" \
    bash -c 'grep -q "unknown problem '"'"'cpu/sgem'"'"'.*did you mean '"'"'cpu/sgemm'"'"'?" <<<"$0"' "$out"
echo '{"problem": "cpu/sgemm", "budget": {"evaluations": 2}, "seed": {"knobs": {"BM": 48}}}' >"$T/knob.json"
check "a knob value that is not allowed: the error lists the allowed values" \
    bash -c 'avoctl submit "$0" 2>&1 | grep -q "seed.knobs.BM: 48 is not one of the knob'"'"'s values (allowed: 16, 32, 64, 128, 256)"' "$T/knob.json"
echo '{"problem": "cpu/sgemm", "budget": {"evaluations": 2}, "seed": {"knobs": {"ORDER": 0, "UNROLL": 8}}}' >"$T/constraint.json"
check "knob values that break a constraint: the error names the constraint" \
    bash -c 'avoctl submit "$0" 2>&1 | grep -q "break the constraint '"'"'ORDER == 1 || UNROLL <= 4'"'"'"' "$T/constraint.json"

# One job to its end; the watch summary, whole and from a late event on.
J=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 --islands 1 | jq -r .id)
timeout 600 avoctl watch "$J" >"$T/watch-all.out" 2>&1
check "watch: the job ended succeeded" test "$(avoctl --json status "$J" | jq -r .state)" = succeeded
full=$(tail -1 "$T/watch-all.out")
check "watch's summary: best and seed with their unit, the job's evaluation count (plural)" \
    bash -c 'grep -Eq "^job succeeded: .*; best [0-9.e+]+ GFLOP/s vs seed [0-9.e+]+ GFLOP/s \(.*\) after 6 evaluations on 1 island$" <<<"$0"' "$full"
late=$(psql_avo "SELECT max(id) - 2 FROM events WHERE job_id = $J")
timeout 120 avoctl watch "$J" --after "$late" >"$T/watch-late.out" 2>&1
check "watch --after N: the summary is the job's (same best, count and speedup as the full watch)" \
    test "$(tail -1 "$T/watch-late.out")" = "$full"
check "list: a UNIT column with the job's unit" \
    bash -c 'avoctl list | head -1 | grep -q " UNIT " && avoctl list | grep -E "^ *$0 " | grep -q "GFLOP/s"' "$J"
check "status of a finished job: its elapsed time" \
    bash -c 'avoctl status "$0" | grep -Eq "^elapsed +[0-9]+ (s|min)"' "$J"

# One evaluation: singular.
J1=$(avoctl --json submit --problem cpu/sgemm --evaluations 1 --islands 1 | jq -r .id)
timeout 600 avoctl watch "$J1" >"$T/watch-one.out" 2>&1
check "one evaluation reads '1 evaluation', not '1 evaluations'" \
    bash -c 'tail -1 "$0" | grep -q "after 1 evaluation on 1 island$" && ! grep -q "1 evaluations" "$0"' "$T/watch-one.out"

# A seed that computes nothing: it fails its checks.
printf '#include <stdint.h>\nint sgemm(void *const *t, const int64_t *s) { (void)t; (void)s; return 0; }\n' >"$T/lazy.c"
JF=$(avoctl --json submit --problem cpu/sgemm --evaluations 2 --seed "$T/lazy.c" | jq -r .id)
timeout 600 avoctl watch "$JF" >"$T/watch-fail.out" 2>&1
check "a failed seed: 'seed failed (REASON)' and 'no valid evaluation yet', never 'seed 0' or 'best 0'" \
    bash -c 'tail -1 "$0" | grep -Eq "seed failed \([a-z_]+\); no valid evaluation yet after [0-9]+ evaluations?" &&
             ! grep -Eq "seed 0( |$)|best 0 " "$0"' "$T/watch-fail.out"
check "status of that job: the seed failed with its outcome, no best" \
    bash -c 'out=$(avoctl status "$0") && grep -Eq "^seed +failed \([a-z_]+, cand [0-9]+\)" <<<"$out" &&
             grep -Eq "^best +no valid evaluation yet" <<<"$out"' "$JF"

# Colour: on a terminal (script(1) gives one), off with NO_COLOR or --no-color or a pipe.
if command -v script >/dev/null; then
    script -qec "avoctl watch $JF" /dev/null >"$T/tty.out" 2>&1
    NO_COLOR=1 script -qec "avoctl watch $JF" /dev/null >"$T/tty-nocolor.out" 2>&1
    script -qec "avoctl --no-color watch $JF" /dev/null >"$T/tty-flag.out" 2>&1
    check "on a terminal, failures are red" grep -q $'\033\[31m' "$T/tty.out"
    check "NO_COLOR set: no colour on the terminal" bash -c '! grep -q $'"'"'\033\[3[12]m'"'"' "$0"' "$T/tty-nocolor.out"
    check "--no-color: no colour on the terminal" bash -c '! grep -q $'"'"'\033\[3[12]m'"'"' "$0"' "$T/tty-flag.out"
fi
check "not a terminal: no colour" bash -c '! grep -q $'"'"'\033\['"'"' "$0"' "$T/watch-fail.out"

# campaign run --out DIR: made when missing; a path that cannot be one is named.
echo '{"name": "ux", "jobs": [{"problem": "cpu/sgemm", "budget": {"evaluations": 1}}]}' >"$T/ux.json"
timeout 600 avoctl campaign run "$T/ux.json" --out "$T/new/nested/out" >"$T/camp.out" 2>&1
check "campaign run --out a directory that does not exist yet: made (with its parents), summaries in it" \
    bash -c 'ls "$0"/ux-2*.json >/dev/null && test -f "$0/ux-latest.json"' "$T/new/nested/out"
touch "$T/afile"
check "campaign run --out under a file: exit 2, an error naming the path" \
    bash -c 'out=$(avoctl campaign run "$0" --out "$1/sub" 2>&1); [ $? = 2 ] && grep -q "$1/sub.*cannot create the directory" <<<"$out"' \
    "$T/ux.json" "$T/afile"

# No worker: a job that runs without progress; its ETA cannot be computed yet.
stop_workers
JR=$(avoctl --json submit --problem cpu/sgemm --evaluations 4 | jq -r .id)
wait_for 60 "[ \"\$(avoctl --json status $JR | jq -r .started_at)\" != null ]"
check "status of a running job with nothing done: elapsed and 'ETA unknown'" \
    bash -c 'avoctl status "$0" | grep -Eq "^elapsed +[0-9]+ s, ETA unknown"' "$JR"
# Ctrl-C (SIGINT) in watch: the job keeps running, and the command to come back.
avoctl watch "$JR" >"$T/int.out" 2>"$T/int.err" &
WP=$!
wait_for 30 "grep -q 'job $JR' '$T/int.out'"
kill -INT "$WP"
# (a watch that ignored the signal would run on: stop it, and fail below)
wait_for 30 "! kill -0 $WP 2>/dev/null" || kill "$WP"
wait "$WP"
rc=$?
check "Ctrl-C in watch: exit 130, the job keeps running, the exact command to watch it again" \
    bash -c '[ "$1" = 130 ] && grep -q "job $2 keeps running" "$0" && grep -Eq "to watch it again: avoctl watch $2 --after [0-9]+$" "$0" &&
             [ "$(avoctl --json status "$2" | jq -r .state)" = running ]' "$T/int.err" "$rc" "$JR"
again=$(sed -n 's/.*to watch it again: //p' "$T/int.err")
check "that command resumes the watch" bash -c 'timeout 3 $0 >/dev/null 2>&1; [ $? = 124 ]' "$again"
avoctl cancel "$JR" >/dev/null 2>&1

# Contexts: a config file of named avods; flags > environment > context > default.
mkdir -p "$XDG_CONFIG_HOME/avo"
cat >"$XDG_CONFIG_HOME/avo/config" <<EOF
# contexts for the test
current = here
[context here]
socket = $AVO_HOME/avod.sock
[context gone]
socket = $T/nonexistent.sock
EOF
check "the current context names avod (no AVO_HOME, no flag)" \
    bash -c 'env -u AVO_HOME avoctl health | grep -q "at '"$AVO_HOME"'/avod.sock: ok"'
check "--context NAME picks another context" \
    bash -c 'out=$(env -u AVO_HOME avoctl --context gone health 2>&1); [ $? = 3 ] && grep -q "'"$T"'/nonexistent.sock" <<<"$out"'
check "AVO_CONTEXT picks one too" \
    bash -c 'out=$(env -u AVO_HOME AVO_CONTEXT=gone avoctl health 2>&1); [ $? = 3 ] && grep -q nonexistent.sock <<<"$out"'
check "a flag beats the context: --socket" \
    bash -c 'env -u AVO_HOME avoctl --context gone --socket "'"$AVO_HOME"'/avod.sock" health | grep -q ": ok"'
check "the environment beats the context: AVO_URL" \
    bash -c 'out=$(env -u AVO_HOME AVO_URL=http://127.0.0.1:1 avoctl health 2>&1); grep -q "http://127.0.0.1:1\|token" <<<"$out"'
check "an unknown context: the file named, the contexts listed, did you mean" \
    bash -c 'out=$(avoctl --context her health 2>&1); [ $? = 2 ] &&
             grep -q "'"$XDG_CONFIG_HOME"'/avo/config: no context '"'"'her'"'"' (contexts: here, gone); did you mean '"'"'here'"'"'?" <<<"$out"'
printf '[context x]\nsocket = /a\nsokcet = /b\n' >"$XDG_CONFIG_HOME/avo/config"
check "a bad config file: a clear error naming the file and the line" \
    bash -c 'out=$(avoctl --context x health 2>&1); [ $? = 2 ] &&
             grep -q "'"$XDG_CONFIG_HOME"'/avo/config:3: unknown key '"'"'sokcet'"'"'.*did you mean '"'"'socket'"'"'?" <<<"$out"'

[ "$FAILS" -eq 0 ]
