#!/usr/bin/env bash
# Screening (docs/evaluation.md, "Screening"; issue 20, point 6), real
# processes on the CPU, fixture tests/fixtures/kernels/screen (the paired
# fixture's softmax, REPS passes of the same work, five configurations, two
# of them the screen, 30 pairs each).
#  1. The harness through `avo-worker eval --against --screen`:
#     (a) 2x slower: screened out (outcome ok, screened_out, the screen's
#         configs timed and scored, the three others checked only, scores
#         null, aggregate over the screen's configs and said to be; paired
#         the screen's); without --screen the same pair is measured in full;
#     (b) 2x faster and an A/A copy: pass the screen, then the full run
#         (every config timed, paired over all five);
#     (c) hostile: fast only on the screen's sizes, and fast only for as
#         many calls as the screen takes (it detects the screen by count):
#         both pass the screen, and the full run shows them slower overall
#         (paired ratio under 1: nothing a commit could take);
#     (d) a candidate wrong on a configuration outside the screen (and slow
#         enough to be screened out): wrong_result, checked before timing;
#     (e) bad input: --screen without --against, a screen naming an unknown
#         configuration, too few runs, an unknown size in check_sizes: exit
#         2 naming the field;
#     (f) screen.check_sizes: the configs outside the screen checked at
#         their capped sizes (said in the result), and a candidate wrong
#         only beyond the caps caught by the full run once it passes.
#  2. A tune job through avod and a real worker (knob REPS 10/20/40 from the
#     seed's 20, budget 3): the 2x (or 4x) slower version is screened out,
#     not committed, its candidate has no aggregate; the screened_out event
#     says by how much; avoctl show, lineage, watch and report say so; the
#     faster version passes the screen and is committed; the job's final
#     measurement (the best against the seed) is not screened.
source "$(dirname "$0")/lib.sh"

F="$ROOT/tests/fixtures/kernels/screen"
(echo '#define REPS 40'; cat "$F/base.c") >"$T/slower.c"
(echo '#define REPS 10'; cat "$F/base.c") >"$T/faster.c"
(echo '#define SCREEN_SIZES 1'; cat "$F/base.c") >"$T/sizes.c"
(echo '#define SCREEN_COUNT 1'; cat "$F/base.c") >"$T/count.c"
cp "$F/base.c" "$T/copy.c"
ev() {  # ev OUT CANDIDATE [ARGS...]
    local out=$1 cand=$2
    shift 2
    avo-worker eval "${PKG:-$F}" "$cand" --json --cache "$T/cache" "$@" >"$T/$out.json" 2>"$T/$out.err"
}
show() {
    jq -c '{outcome, screened_out, screen: (.screen | {ratio, ci, error}), paired: (.paired | {ratio, low, ci, scope,
            n: (.configs | length)})}' "$T/$1.json" 2>/dev/null | sed 's/^/# /'
}

# --- 0. the fixture's reference is a link to a link (screen -> paired ->
# kernels/cpu/softmax): a package under /tmp (a private directory in the
# harness's sandbox) reaches it only when the middle link's directory is
# exposed too (a fresh clone under /tmp failed here, 2026-12-04).
mkdir -p "$T/chain/pkg" "$T/chain/mid"
cp "$F/problem.json" "$F/base.c" "$T/chain/pkg/"
ln -s "$ROOT/kernels/cpu/softmax/reference.c" "$T/chain/mid/reference.c"
ln -s ../mid/reference.c "$T/chain/pkg/reference.c"
PKG="$T/chain/pkg" ev chain "$F/base.c"
check "a package under /tmp whose reference is a link to a link: evaluated (ok)" jqt '.outcome == "ok"' "$T/chain.json"

# --- 1a. clearly slower: stopped by the screen
ev slower "$T/slower.c" --against "$F/base.c" --screen
show slower
check "2x slower: outcome ok, screened out, the screen's interval under 1, the detail says so" \
    jqt '.outcome == "ok" and .screened_out == true and .aggregate_scope == "screen" and
         (.screen | .screened_out == true and .configs == ["16x256", "8x1024"] and .runs == 30 and
          .confidence == 0.95 and .ci[1] < 1 and .ratio <= .ci[1] and .low <= .ratio) and
         (.detail | startswith("screened out:"))' "$T/slower.json"
check "screened out: the screen's configs timed and scored, the others checked only (no score, no timing)" \
    jqt '[.configs[] | select(.name == "16x256" or .name == "8x1024") | .score > 0 and .runs >= 20 and
          .checks.calls > 2] == [true, true] and
         [.configs[] | select(.timed == false) | .name] == ["64x64", "32x128", "4x512"] and
         all(.configs[] | select(.timed == false); .score == null and .calls == 2 and .check.rel_l2 < 1e-5 and
             (has("median_s") | not))' "$T/slower.json"
check "screened out: the aggregate is the screen's configs' geometric mean, and paired is the screen's" \
    jqt '(.aggregate - .screen.aggregate | fabs) < 1e-12 and
         ((([.configs[] | select(.score != null) | .score | log] | add / 2 | exp) - .aggregate) | fabs) < 1e-9 and
         (.paired | .scope == "screen" and .screened_out == true and (.configs | length) == 2 and
          .ratio == $s.ratio and .ci == $s.ci)' --argjson s "$(jq .screen "$T/slower.json")" "$T/slower.json"
ev slower_full "$T/slower.c" --against "$F/base.c"
check "without --screen the same pair is measured in full (a final measurement's way)" \
    jqt '.outcome == "ok" and (has("screen") | not) and (has("screened_out") | not) and
         (.paired.configs | length) == 5 and .paired.ratio < 1' "$T/slower_full.json"

# --- 1b. equal or faster: pass the screen, then the full run
full='.outcome == "ok" and .screened_out == false and .aggregate_scope == "all" and .screen.screened_out == false and
      (.screen.ci[1] >= 1) and (.paired | has("scope") | not) and (.paired.configs | length) == 5 and
      all(.configs[]; .score > 0 and (has("timed") | not))'
ev faster "$T/faster.c" --against "$F/base.c" --screen
show faster
check "2x faster: passes the screen, then every config timed and paired" jqt "$full and .paired.low > 1.02" \
    "$T/faster.json"
# A/A: the screen's two-sided 95% interval misses 1 now and then on a
# loaded host (then the copy is screened out, a lost candidate, never a
# false commit): a statistical property, so a second run may show it.
ev aa "$T/copy.c" --against "$F/base.c" --screen
show aa
if ! jqt "$full" "$T/aa.json"; then
    echo "# A/A: screened out or not decided in the first run; once more"
    ev aa "$T/copy.c" --against "$F/base.c" --screen
    show aa
fi
check "A/A: a copy of the against passes the screen and is timed in full" jqt "$full" "$T/aa.json"

# --- 1c. hostile: what the screen sees is not what decides
ev sizes "$T/sizes.c" --against "$F/base.c" --screen
show sizes
check "fast only on the screen's sizes: passes the screen, the full run shows it slower overall" \
    jqt "$full and .screen.ratio > 1.3 and .paired.ratio < 1 and .paired.low < 1.02" "$T/sizes.json"
ev count "$T/count.c" --against "$F/base.c" --screen
show count
# Its speed changes fourfold in the middle of the full run's first config
# (fast for its first FAST_CALLS calls in the process, slow after), so the
# order test (its calls right after the against's against those before)
# sometimes sees the two halves split by order and calls it
# cheat_suspected ("ran 61% faster ... the against's work reached it":
# four fresh-clone runs of 2026-12-05 out of seven, when the test was on
# medians alone; with its rank test, time and place being independent,
# that should be rare): also nothing a commit could take. The figures go
# into the line: a CI log keeps the not-ok lines, not the JSON.
check "fast for as many calls as the screen takes: passes it, the full run shows it slower overall (or the order test calls it cheat_suspected) $(jq -c \
    '[.outcome, .screened_out, .screen.ratio, .paired.ratio, .paired.low, .paired.error, (.detail // "" | .[0:160])]' \
    "$T/count.json" 2>/dev/null | cut -c1-400)" \
    jqt "($full and .screen.ratio > 1.3 and .paired.ratio < 1 and .paired.low < 1.02) or
         (.outcome == \"cheat_suspected\" and (.detail | test(\"right after the against.s\")))" "$T/count.json"

# --- 1d. checked on every configuration before the screen decides
# 2x slower, and wrong on 64x64 (outside the screen) only
sed 's/^int softmax(void \*const \*tensors, const int64_t \*sizes)$/static int softmax_ok(void *const *tensors, const int64_t *sizes)/' \
    "$T/slower.c" >"$T/wrong64.c"
cat >>"$T/wrong64.c" <<'C'
int softmax(void *const *tensors, const int64_t *sizes)
{
    int rc = softmax_ok(tensors, sizes);
    if (sizes[0] == 64 && sizes[1] == 64)
        ((float *)tensors[1])[7] += 0.5f;
    return rc;
}
C
ev wrong64 "$T/wrong64.c" --against "$F/base.c" --screen
show wrong64
check "wrong on a config outside the screen (and 2x slower): wrong_result, checked before timing, not screened out" \
    jqt '.outcome == "wrong_result" and (.detail | test("^config 64x64, call 0 \\(checked before timing\\)")) and
         (has("screened_out") | not) and (has("paired") | not)' "$T/wrong64.json"

# --- 1f. stand-in sizes (screen.check_sizes {"C": 128}): the configs
# outside the screen are checked at C <= 128 before the screen (4x512 at
# 4x128; 64x64 and 32x128 as they are); a survivor's full run checks every
# config at its own sizes, so a candidate wrong only beyond the caps and fast
# enough to pass the screen is wrong_result there.
mkdir -p "$T/caps"
cp "$F/base.c" "$F/reference.c" "$T/caps/"
jq '.screen.check_sizes = {"C": 128}' "$F/problem.json" >"$T/caps/problem.json"
PKG="$T/caps" ev caps_slower "$T/slower.c" --against "$F/base.c" --screen
show caps_slower
check "check_sizes: 2x slower screened out; 4x512 checked at 4x128 (said in its entry), 64x64 as it is" \
    jqt '.outcome == "ok" and .screened_out == true and
         (.configs[] | select(.name == "4x512") | .check_sizes == {"R": 4, "C": 128} and (.note | test("check_sizes"))) and
         (.configs[] | select(.name == "64x64") | has("check_sizes") | not)' "$T/caps_slower.json"
sed 's/^int softmax(void \*const \*tensors, const int64_t \*sizes)$/static int softmax_ok(void *const *tensors, const int64_t *sizes)/' \
    "$T/faster.c" >"$T/wrong512.c"
cat >>"$T/wrong512.c" <<'C'
int softmax(void *const *tensors, const int64_t *sizes)
{
    int rc = softmax_ok(tensors, sizes);
    if (sizes[1] == 512)
        ((float *)tensors[1])[7] += 0.5f;
    return rc;
}
C
PKG="$T/caps" ev caps_wrong "$T/wrong512.c" --against "$F/base.c" --screen
show caps_wrong
jq -r '.detail' "$T/caps_wrong.json" 2>/dev/null | sed 's/^/# /'
check "check_sizes: wrong only at C = 512 (beyond the cap) and 2x faster: passes the screen, wrong_result in the full run" \
    jqt '.outcome == "wrong_result" and (.detail | test("^config 4x512, call 0")) and (.screened_out | not) and
         .phases.harness.against_calls > 0' "$T/caps_wrong.json"
# (the against's calls are the screen's: without the caps the same candidate
# fails the check before the screen and the against never runs)

# --- 1g. two looks: a screen whose runs hold twice the pairs an interval
# needs (40 here, timing.min_runs 20) is looked at after 20 pairs too, each
# look at 97.5% (half the risk of the single 95% look: Bonferroni). 2x
# slower stops at the first look; an A/A copy passes both; the 2x faster
# version remembering every input it gets (REPEAT_PROBE) passes both and
# never sees an input twice after the job's warm-up sets, through the
# screen's two stages and the full run: the second stage has input sets of
# its own (SCREEN_MORE_SET).
mkdir -p "$T/looks"
cp "$F/base.c" "$F/reference.c" "$T/looks/"
jq '.screen.runs = 40' "$F/problem.json" >"$T/looks/problem.json"
(echo '#define REPEAT_PROBE 1'; cat "$T/faster.c") >"$T/probe.c"
PKG="$T/looks" ev looks_slower "$T/slower.c" --against "$F/base.c" --screen
show looks_slower
check "two looks: 2x slower screened out at the first (20 pairs each, 97.5% interval), the detail says after how many $(jq -c \
    '[.screened_out, .screen.looks, .screen.confidence, [.paired.configs[]?.runs]]' "$T/looks_slower.json" 2>/dev/null)" \
    jqt '.outcome == "ok" and .screened_out == true and
         .screen.looks == {"made": 1, "pairs": [20, 40], "confidence": 0.975} and .screen.confidence == 0.975 and
         .paired.confidence == 0.975 and .screen.ci[1] < 1 and
         all(.paired.configs[]; .runs >= 20 and .runs < 40) and (.detail | test("after 20 pairs each \\(97.5% interval"))' \
    "$T/looks_slower.json"
PKG="$T/looks" ev looks_aa "$T/copy.c" --against "$F/base.c" --screen
show looks_aa
if ! jqt "$full" "$T/looks_aa.json"; then
    echo "# A/A with two looks: screened out or not decided in the first run; once more"
    PKG="$T/looks" ev looks_aa "$T/copy.c" --against "$F/base.c" --screen
    show looks_aa
fi
check "two looks: an A/A copy passes both and is timed in full $(jq -c '.screen.looks' "$T/looks_aa.json" 2>/dev/null)" \
    jqt "$full and .screen.looks.made == 2 and .screen.confidence == 0.975" "$T/looks_aa.json"
# The probe costs a hash of every input and a search of those seen (about
# 5% of a call here): on the 2x faster version, which passes both looks.
PKG="$T/looks" ev looks_probe "$T/probe.c" --against "$F/base.c" --screen
show looks_probe
check "two looks: the 2x faster version with the input probe passes both $(jq -c '.screen.looks' "$T/looks_probe.json" 2>/dev/null)" \
    jqt "$full and .screen.looks.made == 2" "$T/looks_probe.json"
probe_on=$(cat "$T/looks_probe.json" "$T/looks_probe.err" 2>/dev/null | grep -c 'avo-test: repeat probe on')
repeated=$(grep -oh 'avo-test: timed input repeated[^"\\]*' "$T/looks_probe.json" "$T/looks_probe.err" 2>/dev/null | head -1)
check "two looks: the input probe ran in the candidate's process" test "${probe_on:-0}" -gt 0
check "two looks: no input after the warm-up sets reached the candidate twice (${repeated:-none})" test -z "$repeated"

# --- 1e. bad input
ev noag "$F/base.c" --screen
rc=$?
check "--screen without --against: exit 2 naming it" bash -c "[ $rc -eq 2 ] && grep -q -- '--screen goes with --against' '$T/noag.err'"
avo-harness "$F" /dev/null /dev/null --seed 1 --screen >"$T/hnoag.out" 2>"$T/hnoag.err"
rc=$?
check "avo-harness --screen without --against: exit 2 naming it" \
    bash -c "[ $rc -eq 2 ] && grep -q -- '--screen times paired: it needs --against' '$T/hnoag.err'"
mkdir -p "$T/bad"
cp "$F/base.c" "$F/reference.c" "$T/bad/"
for v in 'unknown|{"configs": ["16x256", "2x2"], "runs": 30}|screen.configs[1]: no configuration is named '"'"'2x2'"'"'' \
         'runs|{"configs": ["16x256"], "runs": 5}|screen.runs: must be an integer in [20, 10000]' \
         'key|{"configs": ["16x256"], "runs": 30, "subset": 2}|screen: unknown field '"'"'subset'"'"'' \
         'caps|{"configs": ["16x256"], "runs": 30, "check_sizes": {"N": 4}}|screen.check_sizes.N: unknown size '"'"'N'"'"''; do
    IFS='|' read -r name screen want <<<"$v"
    jq --argjson s "$screen" '.screen = $s' "$F/problem.json" >"$T/bad/problem.json"
    PKG="$T/bad" ev "bad_$name" "$F/base.c" --against "$F/base.c" --screen
    rc=$?
    check "a bad screen ($name): exit 2 naming the field" \
        bash -c '[ "$0" -eq 2 ] && grep -qF -- "$1" "$2"' "$rc" "$want" "$T/bad_$name.err"
done

# --- 2. a tune job through avod and a real worker
K="$T/kernels"
mkdir -p "$K/test"
ln -s "$F" "$K/test/screen"
check "avod starts" start_avod --kernels "$K"
start_worker --kernels "$K"
q() { psql_avo "$1"; }
api() { curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"; }
J=$(api POST /v1/jobs '{"problem": "test/screen", "islands": 1, "budget": {"evaluations": 3},
                        "operator_params": {"seed": 3}}' | jq -r .id)
wait_for 300 "case \$(q \"SELECT state FROM jobs WHERE id = $J\") in succeeded|failed|cancelled) true;; *) false;; esac"
q "SELECT e.id, e.purpose, c.knobs->>'REPS', e.outcome, e.result->>'screened_out', e.result->'paired'->>'ratio',
          c.committed, c.aggregate FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
    WHERE e.job_id = $J ORDER BY e.id" | sed 's/^/# /'
check "the job succeeded" test "$(q "SELECT state FROM jobs WHERE id = $J")" = succeeded
SO=$(q "SELECT e.candidate_id FROM evaluations e WHERE e.job_id = $J AND (e.result->>'screened_out')::boolean")
FAST=$(q "SELECT id FROM candidates WHERE job_id = $J AND knobs->>'REPS' = '10'")
check "the slower version (REPS 40) was screened out: ok, not committed, no aggregate on its candidate" \
    test "$(q "SELECT knobs->>'REPS' || ' ' || outcome || ' ' || committed || ' ' || (aggregate IS NULL)
                 FROM candidates WHERE id = ${SO:-0}")" = "40 ok false true"
check "its evaluation keeps the partial aggregate (the screen's configs)" \
    test "$(q "SELECT aggregate > 0 AND result->>'aggregate_scope' = 'screen' FROM evaluations
                WHERE candidate_id = ${SO:-0} AND purpose = 'search'")" = t
check "the screened_out event says by how much, with the interval, on which configs" \
    test "$(q "SELECT (data->>'ratio')::float8 < 1 AND (data->'ci'->>1)::float8 < 1 AND (data->>'confidence')::float8 = 0.95
                      AND data->'configs' = '[\"16x256\", \"8x1024\"]'::jsonb
                 FROM events WHERE job_id = $J AND kind = 'screened_out' AND (data->>'candidate')::bigint = ${SO:-0}")" = t
check "no not_significant event for it, and its candidate_evaluated has no aggregate" \
    test "$(q "SELECT count(*) FILTER (WHERE kind = 'not_significant') || ' ' ||
                      bool_and(data->'aggregate' = 'null'::jsonb) FILTER (WHERE kind = 'candidate_evaluated')
                 FROM events WHERE job_id = $J AND (data->>'candidate')::bigint = ${SO:-0}")" = "0 true"
check "the faster version (REPS 10) passed the screen, was timed in full and committed" \
    test "$(q "SELECT e.result->>'screened_out' || ' ' || jsonb_array_length(e.result->'paired'->'configs') || ' ' ||
                      c.committed FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                WHERE c.id = ${FAST:-0} AND e.purpose = 'search'")" = "false 5 true"
check "the seed (no against) and the final measurement (the best against the seed) are not screened" \
    test "$(q "SELECT string_agg(e.purpose || ':' || (e.result ? 'screen'), ',' ORDER BY e.id) FROM evaluations e
                JOIN jobs j ON j.id = e.job_id
                WHERE e.job_id = $J AND (e.purpose = 'final' OR e.candidate_id = j.seed_candidate)")" = \
         "search:false,final:false"
check "the API's candidate carries its screen" \
    test "$(api GET /v1/candidates/${SO:-0} | jq -c '[.screen.screened_out, .aggregate, .screen.configs]')" = \
         '[true,null,["16x256","8x1024"]]'
avoctl show "${SO:-0}" >"$T/show.out" 2>&1
sed 's/^/# /' "$T/show.out" | head -14
check "avoctl show says screened out, by how much, and that the aggregate is partial" \
    bash -c 'grep -q "^outcome *ok, screened out, not committed" "$0" &&
             grep -Eq "^screen *screened out \(x0\.[0-9]{4}, 95% \[0\.[0-9]{4}, 0\.[0-9]{4}\] on 2 configs\): slower than the island.s best beyond noise" "$0" &&
             grep -q "partial aggregate .* GB/s over the screen.s configurations" "$0"' "$T/show.out"
avoctl show "${FAST:-0}" >"$T/show_fast.out" 2>&1
check "avoctl show says a survivor passed the screen" \
    grep -Eq '^screen *passed \(x[0-9.]+ on 2 configs\), then timed on every configuration' "$T/show_fast.out"
avoctl lineage "$J" --all >"$T/lineage.out" 2>&1
sed 's/^/# /' "$T/lineage.out"
check "avoctl lineage --all shows the screened-out attempt with its ratio and interval" \
    grep -Eq "(^|[^0-9])${SO:-x} .*screened out \(x0\.[0-9]{4}, 95% \[0\.[0-9]{4}, 0\.[0-9]{4}\] on 2 configs\)" "$T/lineage.out"
timeout 60 avoctl watch "$J" >"$T/watch.out" 2>&1
check "avoctl watch shows the screened_out event and the evaluation's detail" \
    bash -c 'grep -Eq "screened_out cand $1 .*x0\.[0-9]{4} vs cand [0-9]+ \(95% \[0\.[0-9]{4}, 0\.[0-9]{4}\]\) on 2 screen configs" "$0" &&
             grep -q "candidate_evaluated cand $1 .*ok.*screened out:" "$0"' "$T/watch.out" "${SO:-x}"
(cd "$T" && avoctl report "$J") >"$T/report.out" 2>&1
check "avoctl report counts the screened-out evaluations" \
    grep -q '^screened *1 of 2 screened evaluations stopped by the screen' "$T/report.out"
[ "$FAILS" -eq 0 ]
