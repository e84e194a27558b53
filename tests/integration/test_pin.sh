#!/usr/bin/env bash
# A job pins its problem package (issue 21, point 1; docs/jobs.md, "Pinned
# problems"), through real processes on the CPU: a copy of kernels/cpu/sgemm
# under $T that the test edits. A seed edited between two submissions and
# an avod restart mid-job: the first job keeps its seed, the second uses the
# new one; a worker whose package differs from the pinned one refuses;
# `avoctl problem diff` shows the change; a package whose file cannot be read
# is refused at submission with the path.
source "$(dirname "$0")/lib.sh"

K="$T/kernels"
P="$K/test/pkg"
mkdir -p "$K/test"
cp -r "$ROOT/kernels/cpu/sgemm" "$P"
# one small configuration and short timing: the test is about versions
jq '.configs = [.configs[0]] | .timing.max_seconds = 0.05' "$ROOT/kernels/cpu/sgemm/problem.json" >"$P/problem.json"
q() { psql_avo "$1"; }
api() { curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"; }
job_state() { q "SELECT state FROM jobs WHERE id = $1"; }
ended() { case $(job_state "$1") in succeeded|failed|cancelled) true;; *) false;; esac; }
# the sources of a job's candidates carrying / lacking a marker: "with without"
marked() { q "SELECT count(*) FILTER (WHERE s.body LIKE '%$2%') || ' ' || count(*) FILTER (WHERE s.body NOT LIKE '%$2%')
                FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.job_id = $1"; }

check "avod starts" start_avod --kernels "$K"

# --- 1. two versions of the seed, an avod restart mid-job (no worker yet:
# the first job's evaluations wait in the queue)
A=$(avoctl --json submit --problem test/pkg --evaluations 3 --islands 1 | jq -r .id)
wait_for 30 "[ -n \"\$(q \"SELECT seed_candidate FROM jobs WHERE id = ${A:-0}\")\" ]"
HA=$(avoctl --json status "$A" | jq -r .problem_hash)
check "the job pinned a package hash, shown by avoctl status" \
    bash -c '[[ "$0" =~ ^[0-9a-f]{64}$ ]] && avoctl status "$1" | grep -Eq "^package +$0$"' "$HA" "$A"
check "the pin holds the manifest and the texts of problem.json and the seed, byte for byte" \
    test "$(q "SELECT problem_files ?& array['problem.json','reference.c','seed.c'] || ' ' || md5(problem_json) || ' ' ||
                      md5(seed_text) FROM jobs WHERE id = $A")" = \
         "true $(md5sum <"$P/problem.json" | cut -d' ' -f1) $(md5sum <"$P/seed.c" | cut -d' ' -f1)"

{ echo "/* seed v2 */"; cat "$ROOT/kernels/cpu/sgemm/seed.c"; } >"$P/seed.c"
B=$(avoctl --json submit --problem test/pkg --evaluations 3 --islands 1 | jq -r .id)
wait_for 30 "[ -n \"\$(q \"SELECT seed_candidate FROM jobs WHERE id = ${B:-0}\")\" ]"
HB=$(avoctl --json status "$B" | jq -r .problem_hash)
check "a job submitted after the edit pins the new version" bash -c '[ -n "$1" ] && [ "$0" != "$1" ]' "$HA" "$HB"
check "its first candidate is the new seed, though avod had the package loaded for the first job (no stale cache)" \
    test "$(marked "$B" 'seed v2')" = "1 0"

stop_pid "$AVOD_PID"
check "avod restarts mid-job" start_avod --kernels "$K"
start_worker --kernels "$K"
wait_for 240 "ended $A && ended $B"
q "SELECT c.job_id, c.id, c.operator, c.outcome, c.committed FROM candidates c WHERE c.job_id IN ($A, $B) ORDER BY c.id" |
    sed 's/^/# /'
check "both jobs succeeded" test "$(job_state "$A") $(job_state "$B")" = "succeeded succeeded"
check "the first job kept its seed through the edit and the restart: none of its candidates has the new text" \
    bash -c '[[ "$0" =~ ^0\ [3-9]$ ]]' "$(marked "$A" 'seed v2')"
check "the second job's candidates all start from the new seed" bash -c '[[ "$0" =~ ^[3-9]\ 0$ ]]' "$(marked "$B" 'seed v2')"
check "the worker evaluated both (only the seed changed, and workers never read seeds)" \
    test "$(q "SELECT count(*) FILTER (WHERE outcome <> 'ok') FROM evaluations WHERE job_id IN ($A, $B)")" = 0

avoctl problem diff "$A" >"$T/diffA.out" 2>&1
rc=$?
sed 's/^/# /' "$T/diffA.out" | head -20
check "avoctl problem diff: exit 1, the pinned and disk hashes, seed.c changed, its unified diff" \
    bash -c '[ "$0" = 1 ] && grep -Eq "^pinned +$1$" "$2" && grep -Eq "^on disk +$3$" "$2" &&
             grep -Eq "^ +changed +seed\.c " "$2" && grep -q "^+/\* seed v2 \*/" "$2" && ! grep -q "problem.json" "$2"' \
    "$rc" "$HA" "$T/diffA.out" "$HB"
avoctl problem diff "$B" >"$T/diffB.out" 2>&1
rc=$?
check "avoctl problem diff of the job that pinned what is on disk: exit 0, same" \
    bash -c '[ "$0" = 0 ] && grep -q "is the version the job pinned" "$1"' "$rc" "$T/diffB.out"

# --- 2. a worker whose package differs refuses: the reference edited
# while a job's evaluation waits in the queue
stop_workers
C=$(avoctl --json submit --problem test/pkg --evaluations 2 --islands 1 | jq -r .id)
wait_for 30 "[ \"\$(q \"SELECT count(*) FROM evaluations WHERE job_id = ${C:-0} AND state = 'queued'\")\" = 1 ]"
HC=$(avoctl --json status "$C" | jq -r .problem_hash)
echo "/* reference v2 */" >>"$P/reference.c"
start_worker --kernels "$K"
wait_for 120 "[ \"\$(q \"SELECT count(*) FROM evaluations WHERE job_id = ${C:-0} AND state IN ('done','failed')\")\" -ge 1 ]"
q "SELECT id, state, outcome, result->>'detail' FROM evaluations WHERE job_id = $C ORDER BY id" | sed 's/^/# /'
DETAIL=$(q "SELECT result->>'detail' FROM evaluations WHERE job_id = $C ORDER BY id LIMIT 1")
check "the evaluation is refused: failed, outcome package_mismatch, nothing measured" \
    test "$(q "SELECT state || ' ' || outcome || ' ' || aggregate || ' ' || jsonb_array_length(result->'configs')
                 FROM evaluations WHERE job_id = $C ORDER BY id LIMIT 1")" = "failed package_mismatch 0 0"
check "its detail names the file, both package hashes and the package path" \
    bash -c 'grep -q "reference.c is [0-9a-f]\{12\} here, [0-9a-f]\{12\} pinned" <<<"$0" && grep -qF "$1 pinned" <<<"$0" &&
             grep -qF "$2" <<<"$0" && grep -Eq "package [0-9a-f]{64} here" <<<"$0"' "$DETAIL" "$HC" "$(realpath "$P")"
wait_for 60 "ended $C"
SC=$(q "SELECT seed_candidate FROM jobs WHERE id = $C")
avoctl show "${SC:-0}" >"$T/showC.out" 2>&1
sed "s/^/# /" "$T/showC.out" | head -20
check "avoctl show of the refused candidate says package_mismatch with the reason" \
    bash -c 'grep -q "package_mismatch" "$0" && grep -q "not the version its job pinned" "$0"' "$T/showC.out"
avoctl profile "${SC:-0}" --wait >"$T/profC.out" 2>&1
rc=$?
sed "s/^/# /" "$T/profC.out" | head -5
PROFC=$(q "SELECT state || ' ' || (result->>'outcome') FROM profiles WHERE candidate_id = ${SC:-0}")
check "a profile of that job's candidate is refused the same way: exit 1, failed, package_mismatch, the reason ($PROFC)" \
    bash -c '[ "$0" = 1 ] && grep -q "not the version its job pinned" "$1" && [ "$2" = "failed package_mismatch" ]' \
    "$rc" "$T/profC.out" "$PROFC"
avoctl problem diff "$C" >"$T/diffC.out" 2>&1
check "avoctl problem diff names the changed reference (no text diff: only problem.json and the seed are kept)" \
    bash -c 'grep -Eq "^ +changed +reference\.c " "$0" && ! grep -q "^+/\* reference v2" "$0"' "$T/diffC.out"

# --- 3. bad input: a package file that cannot be read is refused at
# submission with its path
cp -r "$P" "$K/test/bad"
rm "$K/test/bad/seed.c"
mkdir "$K/test/bad/seed.c"
out=$(api POST /v1/jobs '{"problem": "test/bad", "budget": {"evaluations": 1}}')
echo "# $out"
check "a package whose seed cannot be read is refused (400), naming the path" \
    bash -c 'grep -q "\"bad_request\"" <<<"$0" && grep -qF "$1/seed.c: Is a directory" <<<"$0"' "$out" "$(realpath "$K/test/bad")"
check "and no job was made of it" test "$(q "SELECT count(*) FROM jobs WHERE problem = 'test/bad'")" = 0
out=$(api GET /v1/jobs/999999/problem/diff)
check "problem diff of an unknown job: 404" grep -q '"not_found"' <<<"$out"

[ "$FAILS" -eq 0 ]
