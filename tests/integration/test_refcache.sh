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

S1=4611686018427387903
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
