#!/usr/bin/env bash
# avoctl campaign run: submits a campaign's jobs, waits, writes summaries
# (JSON and markdown, NAME-latest.json for the next night) and exits 0 only
# when every job succeeded and no problem's best fell more than the
# tolerance under the previous campaign's; a failed job or a regression
# exits 1 and says which; a bad campaign file is a usage error naming the
# field.
source "$(dirname "$0")/lib.sh"

check "avod starts" start_avod
start_worker
mkdir -p "$T/out"
cat >"$T/nightly.json" <<'JSON'
{"name": "nightly", "description": "two CPU problems, the same configurations each night (RNG seed 7); timings on a shared VM vary by more than 2%",
 "tolerance": 0.5,
 "jobs": [{"problem": "cpu/sgemm", "budget": {"evaluations": 2}, "operator_params": {"seed": 7}},
          {"problem": "cpu/softmax", "budget": {"evaluations": 2}, "operator_params": {"seed": 7}}]}
JSON
timeout 600 avoctl campaign run "$T/nightly.json" --out "$T/out" >"$T/run1.out" 2>&1
rc=$?
S="$T/out/nightly-latest.json"
check "a first campaign succeeds (exit $rc) and writes NAME-STAMP.json/.md and NAME-latest.json" \
    bash -c '[ "$1" = 0 ] && ls "$0"/nightly-2*.json "$0"/nightly-2*.md >/dev/null && test -f "$0/nightly-latest.json"' \
    "$T/out" "$rc"
check "its summary: both jobs succeeded, a best per problem, nothing to compare with yet" \
    jqt '.ok and .failed == 0 and .regressions == 0 and (.jobs | length) == 2 and
         (.problems | keys) == ["cpu/sgemm", "cpu/softmax"] and ([.problems[] | .previous] == [null, null]) and
         (.problems["cpu/sgemm"].best > 0)' "$S"
check "the markdown names the campaign, its verdict and every job" \
    bash -c 'f=$(ls "$0"/nightly-2*.md | head -1); grep -q "^# Campaign nightly" "$f" && grep -q "\*\*OK\*\*" "$f" &&
             [ "$(grep -c "| cpu/s" "$f")" -ge 4 ]' "$T/out"

# The previous night was much faster on softmax: a regression, exit 1.
jq '.problems["cpu/softmax"].baseline *= 10' "$S" >"$T/fast-night.json"
sleep 1
timeout 600 avoctl --json campaign run "$T/nightly.json" --out "$T/out" --previous "$T/fast-night.json" \
    >"$T/run2.json" 2>"$T/run2.err"
rc=$?
check "a best 10x under the previous campaign's (tolerance 50%) is a regression: exit 1 ($rc), the problem marked" \
    bash -c '[ "$1" = 1 ] && jq -e ".ok == false and .regressions == 1 and .problems[\"cpu/softmax\"].regressed and
             (.problems[\"cpu/sgemm\"].regressed | not) and .problems[\"cpu/softmax\"].change < 0.5" "$0" | grep -qx true' \
    "$T/run2.json" "$rc"

# A job that fails (a seed that computes nothing): exit 1, the job named.
printf '#include <stdint.h>\nint sgemm(void *const *t, const int64_t *s) { (void)t; (void)s; return 0; }\n' >"$T/lazy.c"
jq -n --rawfile src "$T/lazy.c" '{name: "broken", jobs: [{problem: "cpu/sgemm", budget: {evaluations: 2},
                                    seed: {file: "lazy.c", source: $src}}]}' >"$T/broken.json"
timeout 600 avoctl campaign run "$T/broken.json" --out "$T/out" >"$T/run3.out" 2>&1
rc=$?
check "a failed job fails the campaign: exit 1 ($rc), FAILED with the job's reason" \
    bash -c '[ "$1" = 1 ] && grep -q "\*\*FAILED\*\*: 1 job(s) failed" "$0" && grep -q "| failed |" "$0"' "$T/run3.out" "$rc"

echo '{"name": "bad name!", "jobs": []}' >"$T/bad.json"
out=$(avoctl campaign run "$T/bad.json" 2>&1); rc=$?
check "a bad campaign file is a usage error naming the field (exit $rc)" \
    bash -c '[ "$1" = 2 ] && grep -q "name: 1 to 64 letters" <<<"$0"' "$out" "$rc"
echo '{"name": "x", "jobs": [{"budget": {}}]}' >"$T/bad.json"
check "a job without a problem is named by its index" \
    bash -c 'avoctl campaign run "$0" 2>&1 | grep -q "jobs\[0\]: a job spec object with a \"problem\""' "$T/bad.json"
[ "$FAILS" -eq 0 ]
