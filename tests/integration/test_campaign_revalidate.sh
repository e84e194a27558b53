#!/usr/bin/env bash
# The campaign's re-validation option (issue 21, point 3; client/campreval.c):
# with "revalidate": "on_toolchain_change", a campaign compares the toolchain
# of the live workers that would claim each problem's work with the one
# recorded in the previous campaign's best for it, and when it changed
# re-validates that best on the changed worker and writes the ratios (per
# candidate, geometric mean, both toolchains) into its summary and output;
# when nothing changed it says so in one line and queues nothing. A real
# worker whose --toolchain-file says cc 12.2.0 runs the first night, one
# that says cc 14.1.0 the next two. Bad values of the option are refused
# naming the field. `avoctl show` prints the toolchain of a result.
source "$(dirname "$0")/lib.sh"

K="$T/kernels"
mkdir -p "$K" "$T/out" "$T/badout"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
check "avod starts" start_avod --kernels "$K"
echo '{"versions": {"cc": "12.2.0"}, "note": "before the upgrade"}' >"$T/tc-old.json"
echo '{"versions": {"cc": "14.1.0"}, "note": "after the upgrade"}' >"$T/tc-new.json"
start_worker --kernels "$K" --target cpu --toolchain-file "$T/tc-old.json"
cat >"$T/rv.json" <<'JSON'
{"name": "rv", "description": "two CPU problems, their seeds only; tolerance wide: a shared 2-CPU VM drifts",
 "tolerance": 0.9, "revalidate": "on_toolchain_change",
 "jobs": [{"problem": "cpu/sgemm", "budget": {"evaluations": 1}, "operator_params": {"seed": 7}},
          {"problem": "cpu/softmax", "budget": {"evaluations": 1}, "operator_params": {"seed": 7}}]}
JSON
revals() { psql_avo "SELECT count(*) FROM revalidations"; }

# --- bad values: refused naming the field, before anything is submitted
jq '.revalidate = "sometimes"' "$T/rv.json" >"$T/bad.json"
out=$(avoctl campaign run "$T/bad.json" --out "$T/badout" 2>&1); rc=$?
check "\"revalidate\": \"sometimes\" is refused naming the field (exit $rc)" \
    bash -c '[ "$1" = 2 ] && grep -q "revalidate: one of \"off\", \"on_toolchain_change\", \"always\"" <<<"$0"' "$out" "$rc"
jq '.revalidate = true' "$T/rv.json" >"$T/bad.json"
out=$(avoctl campaign run "$T/bad.json" --out "$T/badout" 2>&1); rc=$?
check "\"revalidate\": true (not a string) is refused too (exit $rc)" \
    bash -c '[ "$1" = 2 ] && grep -q "revalidate: one of" <<<"$0"' "$out" "$rc"
out=$(avoctl campaign run "$T/rv.json" --out "$T/badout" --revalidate yes 2>&1); rc=$?
check "--revalidate yes is a usage error naming the flag (exit $rc)" \
    bash -c '[ "$1" = 2 ] && grep -q -- "--revalidate: one of off, on_toolchain_change, always" <<<"$0"' "$out" "$rc"
check "... and nothing was submitted" test "$(psql_avo "SELECT count(*) FROM jobs")" = 0

# --- night 1 on cc 12.2.0: nothing to compare with
timeout 600 avoctl campaign run "$T/rv.json" --out "$T/out" >"$T/run1.out" 2>&1; rc=$?
check "night 1 succeeds (exit $rc) and says there is nothing to re-validate" \
    bash -c '[ "$1" = 0 ] && grep -q "^campaign rv: no previous campaign: nothing to re-validate$" "$0" &&
             jq -e ".revalidation.mode == \"on_toolchain_change\" and .revalidation.revalidate == 0" "$2" >/dev/null' \
    "$T/run1.out" "$rc" "$T/out/rv-latest.json"
[ "$rc" = 0 ] || tail -20 "$T/run1.out" | sed 's/^/# /'
cp "$T/out/rv-latest.json" "$T/night1.json"
B1=$(jq -r '.problems["cpu/sgemm"].candidate' "$T/night1.json")
avoctl show "$B1" >"$T/show.txt"
check "avoctl show $B1 prints its result's toolchain on one line (cc 12.2.0 from the worker's file)" \
    grep -Eq "^toolchain +cc 12\.2\.0, .*avo [0-9]" "$T/show.txt"
avoctl --json show "$B1" >"$T/show.json"
check "avoctl --json show: .toolchain has the versions" jqt '.toolchain.cc == "12.2.0" and (.toolchain.avo | type) == "string"' "$T/show.json"

# --- the upgrade: the worker comes back with cc 14.1.0
stop_workers
start_worker --kernels "$K" --target cpu --toolchain-file "$T/tc-new.json"
NEWPID=$WORKER_PID
wait_for 30 "[ -n \"\$(psql_avo \"SELECT id FROM workers WHERE pid = $NEWPID AND state <> 'gone'\")\" ]"
WNEW=$(psql_avo "SELECT id FROM workers WHERE pid = $NEWPID")
sleep 1
timeout 900 avoctl campaign run "$T/rv.json" --out "$T/out" >"$T/run2.out" 2>&1; rc=$?
cp "$T/out/rv-latest.json" "$T/night2.json"
jq -c '.revalidation.problems[] | {candidate, worker, action, changes, ratio, state}' "$T/night2.json" 2>/dev/null | sed 's/^/# /'
check "night 2 on cc 14.1.0 succeeds (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || tail -20 "$T/run2.out" | sed 's/^/# /'
check "its output names the change and the re-validation of each previous best" \
    bash -c '[ "$(grep -c "^campaign rv: cpu/s[a-z]*: toolchain changed (cc 12.2.0 -> 14.1.0) on worker '"$WNEW"': re-validating the previous best (candidate [0-9]*), revalidation [0-9]*$" "$0")" = 2 ]' \
    "$T/run2.out"
check "the summary: both previous bests re-validated on worker $WNEW, a ratio each, old and new toolchains" \
    jqt --slurpfile n1 "$T/night1.json" '.revalidation | .revalidate == 2 and .measured == 2 and
         ([.problems | to_entries[] | .key as $p | .value |
           .action == "revalidate" and .candidate == $n1[0].problems[$p].candidate and .worker == '"$WNEW"' and
           .changes == "cc 12.2.0 -> 14.1.0" and .state == "done" and .outcome == "ok" and
           (.ratio > 0) and (.ratio - .aggregate / .recorded_aggregate | fabs) < 1e-9 and
           .recorded.cc == "12.2.0" and .toolchain.cc == "14.1.0" and (.revalidation | type) == "number"] == [true, true])' \
    "$T/night2.json"
check "... and the geometric mean of the ratios, between their min and max" \
    jqt '.revalidation | (.geomean_ratio | type) == "number" and .min_ratio <= .geomean_ratio and
         .geomean_ratio <= .max_ratio and ((.geomean_ratio - ([.problems[].ratio | log] | add / length | exp)) | fabs) < 1e-9' \
    "$T/night2.json"
check "the re-validations are stored, asked by the campaign and bound to the new worker" \
    test "$(psql_avo "SELECT count(*) || ' ' || bool_and(why = 'campaign' AND on_worker = $WNEW) FROM revalidations")" = "2 true"
check "the markdown (written and printed) has the Re-validation section with the ratios and both toolchains" \
    bash -c 'f=$(ls -t "$0"/rv-2*.md | head -1)
             for g in "$f" "$1"; do
                 grep -q "^## Re-validation (on_toolchain_change)" "$g" &&
                 [ "$(grep -Ec "^\| cpu/s[a-z]+ \| [0-9]+ \| [0-9]+ \| [0-9.e+-]+ \| [0-9.e+-]+ \| x[0-9.]+ \| cc 14\.1\.0, .* \| cc 12\.2\.0, .* \| cc 12\.2\.0 -> 14\.1\.0 \|$" "$g")" = 2 ] &&
                 grep -q "^Geometric mean of the ratios: x[0-9.]* over 2 (min x[0-9.]*, max x[0-9.]*)\.$" "$g" || return 1
             done' "$T/out" "$T/run2.out"

# --- night 3, same toolchain: one line, nothing queued
sleep 1
before=$(revals)
timeout 900 avoctl campaign run "$T/rv.json" --out "$T/out" >"$T/run3.out" 2>&1; rc=$?
after=$(revals)
check "night 3 on the same toolchain: exit $rc, one line says unchanged, no re-validation queued ($before, $after)" \
    bash -c '[ "$1" = 0 ] &&
             [ "$(grep -c "^campaign rv: toolchain unchanged since the previous campaign.s bests (2 problems): nothing re-validated$" "$0")" = 1 ] &&
             ! grep -q "re-validating" "$0" && [ "$2" = "$3" ]' \
    "$T/run3.out" "$rc" "$before" "$after"
check "its summary says unchanged for both, with the toolchain they share" \
    jqt '.revalidation | .revalidate == 0 and .unchanged == 2 and
         ([.problems[] | .action == "unchanged" and .recorded.cc == "14.1.0" and .current.cc == "14.1.0"] == [true, true])' \
    "$T/out/rv-latest.json"
check "its markdown says so in one line" \
    bash -c 'f=$(ls -t "$0"/rv-2*.md | head -1); grep -q "^toolchain unchanged since the previous campaign.s bests (2 problems): nothing re-validated\.$" "$f" &&
             ! grep -q "^| problem | candidate | worker" "$f"' "$T/out"

# --- the flag overrides the file
sleep 1
timeout 900 avoctl --json campaign run "$T/rv.json" --out "$T/out" --revalidate off >"$T/run4.json" 2>"$T/run4.err"; rc=$?
check "--revalidate off: no re-validation section, exit $rc" \
    bash -c '[ "$1" = 0 ] && jq -e "has(\"revalidation\") | not" "$0" >/dev/null' "$T/run4.json" "$rc"
[ "$FAILS" -eq 0 ]
