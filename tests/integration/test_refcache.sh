#!/usr/bin/env bash
# The job's input sets (docs/evaluation.md, "Input sets"), real processes on
# the CPU, the fixture tests/fixtures/kernels/refcache (cpu/softmax, one
# configuration, four warm-up sets; its kernel prints a hash of the inputs
# of its first 8 calls to stderr, which comes back in sandbox.stderr_tail).
#  (a) by hand (`avo-worker eval --job-seed-stdin`): two evaluations with
#      the same job seed give their warm-up calls the same four sets (in a
#      fresh order: over five evaluations not all in one order), the timed
#      calls sets of their own; another job seed other warm-up sets. The
#      seed is in no result. Bad input: --job-seed-stdin without a number,
#      check.input_sets 0, both refused naming the field.
#  (c) the reference cache (<cache>/ref, docs/operations.md): the first
#      evaluation of a job seed computes and writes its four warm-up
#      references, the next reads them (result references.cache hits 4),
#      another seed misses; the reference's validation against its float64
#      twin is recorded in the first and recalled in the next ones (a
#      corrupt record: validated again); a corrupt file (a flipped byte, a truncation) is
#      detected, recomputed and rewritten, with a note; a config whose
#      warm-up outputs exceed the budget is not cached, with a note;
#      --ref-cache-mb 0 turns it off; bad --ref-cache-mb values are refused
#      naming the flag (the worker's too). Hostile: scan.c searches its
#      environment, every /proc it sees, its descriptors and every place a
#      cache could be for the job's seed (planted as NEEDLE) and for cache
#      files: finds nothing, outcome ok; memo.c stores outputs keyed by
#      input hash wherever it can write and serves them on a hit: no hit in
#      a second evaluation of the same job seed (nothing it wrote outlived
#      its evaluation), outcome ok.
#  (b) through avod and a worker: a job gets a secret seed (jobs.input_seed);
#      its evaluations' warm-up calls share their sets (both lanes of a
#      paired one too); the seed appears in
#      none of GET /v1/jobs/ID, `avoctl show --json`, the events, the
#      results, the worker's or avod's log.
source "$(dirname "$0")/lib.sh"

F="$ROOT/tests/fixtures/kernels/refcache"
ev() {  # ev OUT JOBSEED [ARGS...]: an evaluation of the fixture's kernel with that job seed on stdin
    local out=$1 js=$2
    shift 2
    echo "$js" | avo-worker eval "$F" "$F/base.c" --json --cache "$T/cache" --job-seed-stdin "$@" \
        >"$T/$out.json" 2>"$T/$out.err"
}
warm() { jq -r '.sandbox.stderr_tail' "$T/$1.json" | awk '$1 == "call" && $2 < 4 {print $4}'; }
timed() { jq -r '.sandbox.stderr_tail' "$T/$1.json" | awk '$1 == "call" && $2 >= 4 {print $4}'; }
sorted() { "$@" | sort -u | tr '\n' ' '; }

S1=7385092617830452311
S2=1234567
for i in 1 2 3 4 5; do ev "a$i" "$S1"; done
ev b1 "$S2"
check "(a) an evaluation with a job seed: ok, the warm-up sets said to be the job's, 4 of them" \
    jqt '.outcome == "ok" and .warm_up_sets.source == "job" and .warm_up_sets.per_config == 4' "$T/a1.json"
check "(a) four warm-up sets and four timed ones seen by the kernel" \
    test "$(warm a1 | sort -u | wc -l)/$(timed a1 | sort -u | wc -l)" = "4/4"
check "(a) same job seed: the same four warm-up sets" test "$(sorted warm a1)" = "$(sorted warm a2)"
check "(a) same job seed: the timed calls' sets are the evaluation's own" \
    test -z "$(comm -12 <(timed a1 | sort) <(timed a2 | sort))"
check "(a) no timed call had a warm-up set" test -z "$(comm -12 <(timed a1 | sort) <(warm a1 | sort))"
orders=$(for i in 1 2 3 4 5; do warm "a$i" | tr '\n' ' '; echo; done | sort -u | wc -l)
check "(a) a fresh order each evaluation: five evaluations, $orders orders" test "$orders" -gt 1
check "(a) another job seed: other warm-up sets" test -z "$(comm -12 <(warm a1 | sort) <(warm b1 | sort))"
check "(a) the job seed is in no result, no stderr" bash -c "! grep -q '$S1' '$T'/a?.json '$T'/a?.err"

echo "x" | avo-worker eval "$F" "$F/base.c" --json --cache "$T/cache" --job-seed-stdin >"$T/bad.json" 2>"$T/bad.err"
rc=$?
check "(a) --job-seed-stdin with no number: exit 2 naming the flag" \
    bash -c "[ $rc -eq 2 ] && grep -q -- '--job-seed-stdin' '$T/bad.err'"
mkdir -p "$T/k0"
cp "$F/base.c" "$F/reference.c" "$T/k0/"
jq '.check.input_sets = 0' "$F/problem.json" >"$T/k0/problem.json"
avo-worker eval "$T/k0" "$T/k0/base.c" --json --cache "$T/cache" >"$T/k0.json" 2>"$T/k0.err"
rc=$?
check "(a) check.input_sets 0: refused naming the field" \
    bash -c "[ $rc -eq 2 ] && grep -q 'check.input_sets' '$T/k0.err'"

# (c) the reference cache.
refs() { jq -c '.configs[0].references.cache | {hits, misses, corrupt, used}' "$T/$1.json"; }
check "(c) the first evaluation of job seed S1 wrote its four warm-up references" \
    test "$(refs a1)" = '{"hits":0,"misses":4,"corrupt":0,"used":true}'
check "(c) every later one read them: four hits, the reference run only for timed checks" \
    bash -c "for i in 2 3 4 5; do [ \"\$(jq -c '.configs[0].references.cache | {hits, misses}' '$T/a'\$i.json)\" = '{\"hits\":4,\"misses\":0}' ] || exit 1; done"
check "(c) another job seed: four misses" test "$(refs b1)" = '{"hits":0,"misses":4,"corrupt":0,"used":true}'
check "(c) the cache directory is the worker's alone (0700), files 0600" \
    bash -c "[ \"\$(stat -c %a '$T/cache/ref')\" = 700 ] && [ -z \"\$(find '$T/cache/ref' -type f ! -perm 600)\" ]"
check "(c) eight cache files (four sets, two job seeds), named by hash only" \
    test "$(find "$T/cache/ref" -type f -name '*.ref' | grep -cE '/[0-9a-f]{64}\.ref$')" = 8
# The reference's validation against its float64 twin, recorded beside the
# outputs: run in a job's first evaluation on this cache, recalled after.
recalled() { jq -e '.reference_validated == true and (.reference_validation | test("^within tolerance of avo_reference_f64.*recalled from the reference cache"))' "$T/$1.json" >/dev/null; }
check "(c) a job's first evaluation validates its reference; the next four recall the record" \
    bash -c "$(declare -f recalled); T='$T'; ! recalled a1 && jq -e '.reference_validated' '$T/a1.json' >/dev/null &&
             recalled a2 && recalled a3 && recalled a4 && recalled a5"
check "(c) another job seed: validated anew" bash -c "$(declare -f recalled); T='$T'; ! recalled b1"
check "(c) one validation record per job seed (named by hash only)" \
    test "$(find "$T/cache/ref" -type f -name '*.valid' | grep -cE '/[0-9a-f]{64}\.valid$')" = 2
# Corrupt S1's files: one flipped byte, one truncated.
mapfile -t s1files < <(ls -t "$T/cache/ref"/*.ref | tail -4)
printf '\xff' | dd of="${s1files[0]}" bs=1 seek=100 conv=notrunc status=none
truncate -s 50 "${s1files[1]}"
ev c1 "$S1"
check "(c) two corrupt cache files: detected, recomputed, rewritten, noted; outcome ok" \
    jqt '.outcome == "ok" and (.configs[0].references.cache | .corrupt == 2 and .hits == 2 and .misses == 2 and
         (.note | test("2 cache file.*checksum")))' "$T/c1.json"
ev c2 "$S1"
check "(c) ... and read again in the next evaluation" test "$(refs c2)" = '{"hits":4,"misses":0,"corrupt":0,"used":true}'
for f in "$T/cache/ref"/*.valid; do printf '\xff' | dd of="$f" bs=1 seek=60 conv=notrunc status=none; done
ev v1 "$S1"
ev v2 "$S1"
check "(c) a corrupt validation record: the reference validated again, ok; recalled in the next evaluation" \
    bash -c "$(declare -f recalled); T='$T'; jq -e '.outcome == \"ok\" and .reference_validated' '$T/v1.json' >/dev/null &&
             ! recalled v1 && recalled v2"
ev off "$S1" --ref-cache-mb 0
check "(c) --ref-cache-mb 0: no cache" jqt '.outcome == "ok" and .configs[0].references.cache == null' "$T/off.json"
mkdir -p "$T/big"
cp "$F/base.c" "$F/reference.c" "$T/big/"
jq '.configs = [{"name": "1024x512", "sizes": {"R": 1024, "C": 512}}] | .timing.max_seconds = 0.2' "$F/problem.json" \
    >"$T/big/problem.json"
echo "$S1" | avo-worker eval "$T/big" "$T/big/base.c" --json --cache "$T/cache" --job-seed-stdin --ref-cache-mb 1 \
    >"$T/big.json" 2>"$T/big.err"
check "(c) a config whose warm-up outputs (8 MB) exceed the budget (1 MB): computed, not cached, noted; ok" \
    jqt '.outcome == "ok" and (.configs[0].references | .computed >= 4 and .cache.used == false and .cache.hits == 0
         and .cache.misses == 0 and (.cache.note | test("exceed the cache.s budget")))' "$T/big.json"
for v in -1 abc '' 1.5 1099511627776; do
    echo "$S1" | avo-worker eval "$F" "$F/base.c" --json --cache "$T/cache" --job-seed-stdin --ref-cache-mb "$v" \
        >"$T/badmb.json" 2>"$T/badmb.err"
    rc=$?
    check "(c) --ref-cache-mb '$v': exit 2 naming the flag" bash -c "[ $rc -eq 2 ] && grep -q -- '--ref-cache-mb' '$T/badmb.err'"
done
avo-worker --ref-cache-mb -5 >"$T/badw.out" 2>&1
rc=$?
check "(c) avo-worker --ref-cache-mb -5: refused naming the option" bash -c "[ $rc -ne 0 ] && grep -q 'ref-cache-mb' '$T/badw.out'"

# Hostile: the scanner, with the seed it must not find planted.
(echo "#define CACHE_DIR \"$T/cache\""; echo "#define NEEDLE \"$S1\""; cat "$F/scan.c") >"$T/scan.c"
echo "$S1" | avo-worker eval "$F" "$T/scan.c" --json --cache "$T/cache" --job-seed-stdin >"$T/scan.json" 2>"$T/scan.err"
jq -r '.sandbox.stderr_tail' "$T/scan.json" | grep -E '^(scan done|FOUND)' | head -5 | sed 's/^/# /'
check "(c) scan.c: searched (summary there), found neither the seed nor a cache file, outcome ok" \
    jqt '.outcome == "ok" and (.sandbox.stderr_tail | test("scan done: found=0 files=[1-9]") and (test("FOUND") | not))' \
    "$T/scan.json"
check "(c) scan.c: the seed and the cache's file names appear nowhere in its result" \
    bash -c "! grep -q '$S1' '$T/scan.json' && ! grep -qE '[0-9a-f]{64}\.ref' '$T/scan.json'"
# The memo: a world-writable directory outside the sandbox, and two evaluations of one job seed.
mkdir -p "$T/memo"
chmod 1777 "$T/memo"
(echo "#define MEMO_DIR \"$T/memo\""; cat "$F/memo.c") >"$T/memo.c"
for i in 1 2; do
    echo "$S1" | avo-worker eval "$F" "$T/memo.c" --json --cache "$T/cache" --job-seed-stdin >"$T/memo$i.json" 2>"$T/memo$i.err"
done
echo "# memo: $(jq -r '.sandbox.stderr_tail' "$T/memo1.json" | grep -c 'memo stored') stores in the first evaluation (its private /tmp, /var/tmp, /dev/shm)"
check "(c) memo.c: both evaluations ok, no cached output served in the second (nothing outlived the first)" \
    jqt '.outcome == "ok" and (.sandbox.stderr_tail | test("memo hit") | not)' "$T/memo1.json" "$T/memo2.json"
check "(c) memo.c: nothing written outside its sandbox" test -z "$(ls -A "$T/memo")"

# (b) through avod and a worker.
api() { curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"; }
K="$T/kernels"
mkdir -p "$K"
ln -s "$F" "$K/refcache"
check "avod starts" start_avod --kernels "$K"
start_worker --kernels "$K" --cache "$T/wcache"
JOB=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 2}, "operator_params": {"seed": 3}}' | jq -r .id)
check "(b) a job is accepted" test -n "$JOB" -a "$JOB" != null
wait_for 120 "case \$(psql_avo 'SELECT state FROM jobs WHERE id = $JOB') in succeeded|failed|cancelled) true;; *) false;; esac"
SEED=$(psql_avo "SELECT input_seed FROM jobs WHERE id = $JOB")
echo "# job $JOB: $(psql_avo "SELECT state || ' ' || coalesce(reason, '') FROM jobs WHERE id = $JOB")"
check "(b) the job has a secret input seed (63 bits, > 0)" bash -c "[ -n '$SEED' ] && [ '$SEED' -gt 0 ]"
psql_avo "SELECT result FROM evaluations WHERE job_id = $JOB AND result IS NOT NULL ORDER BY id" >"$T/results.txt"
check "(b) at least two evaluations of the job, all ok" \
    test "$(psql_avo "SELECT count(*) FILTER (WHERE outcome = 'ok') || '/' || count(*) FROM evaluations WHERE job_id = $JOB" | awk -F/ '$1 == $2 && $1 >= 2 {print "ok"}')" = ok
n=0
while read -r line; do
    n=$((n + 1))
    echo "$line" >"$T/r$n.json"
done <"$T/results.txt"
same_warm() {  # every result's warm-up sets are r1's, four of them
    [ "$(warm r1 | sort -u | wc -l)" = 4 ] || return 1
    for i in $(seq 2 "$n"); do [ "$(sorted warm "r$i")" = "$(sorted warm r1)" ] || return 1; done
}
check "(b) every evaluation's warm-up calls had the job's four sets" same_warm
check "(b) the job's first evaluation wrote the warm-up references, every later one read them" \
    bash -c "[ \"\$(jq -c '.configs[0].references.cache | {hits, misses}' '$T/r1.json')\" = '{\"hits\":0,\"misses\":4}' ] &&
             for i in \$(seq 2 $n); do [ \"\$(jq -c '.configs[0].references.cache | {hits, misses}' '$T/r'\$i.json)\" = '{\"hits\":4,\"misses\":0}' ] || exit 1; done"
check "(b) a paired evaluation's other lane reused the references read from the cache" \
    bash -c "jq -e '.paired.ratio and .configs[0].references.reused >= 4' '$T/r$n.json' >/dev/null"
JOB2=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 1}, "operator_params": {"seed": 4}}' | jq -r .id)
wait_for 120 "case \$(psql_avo 'SELECT state FROM jobs WHERE id = $JOB2') in succeeded|failed|cancelled) true;; *) false;; esac"
check "(b) another job: another seed, its first evaluation misses the cache" \
    test "$(psql_avo "SELECT (j2.input_seed <> j1.input_seed)::text || ' ' || (SELECT result->'configs'->0->'references'->'cache'->>'misses' FROM evaluations WHERE job_id = j2.id ORDER BY id LIMIT 1) FROM jobs j1, jobs j2 WHERE j1.id = $JOB AND j2.id = $JOB2")" = "true 4"
api GET "/v1/jobs/$JOB" >"$T/job.json"
avoctl show "$JOB" --json >"$T/show.json" 2>&1
psql_avo "SELECT data FROM events WHERE job_id = $JOB" >"$T/events.txt"
api GET "/v1/jobs/$JOB/lineage" >"$T/lineage.json"
api GET "/v1/jobs/$JOB/report" >"$T/report.json"
api GET "/v1/jobs/$JOB/best" >"$T/best.json"
check "(b) the API's job answered" jqt '.id' "$T/job.json"
for f in job.json show.json events.txt results.txt lineage.json report.json best.json worker.log avod.log; do
    check "(b) the job seed is not in $f" bash -c "! grep -q '$SEED' '$T/$f'"
done
[ "$FAILS" -eq 0 ]
