#!/usr/bin/env bash
# The evolution engine through real processes: a 4-island tune job on a CPU
# problem with four workers, avod killed (-9) and restarted in the middle,
# run to its budget; then the invariants in the database (lineage scores
# never fall, every committed candidate passed its checks, accounting adds
# up, migrations and stagnation recorded consistently, no configuration
# evaluated twice). Then the other ways a job ends (target score, stagnation
# limit), custom and transferred seeds, and bad specs.
source "$(dirname "$0")/lib.sh"

api() {  # METHOD PATH [BODY]: the daemon's JSON answer
    curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
job_state() { psql_avo "SELECT state FROM jobs WHERE id = $1"; }
wait_job() {  # JOB SECONDS
    case "$1" in ''|null) return 1;; esac
    wait_for "$2" "case \$(job_state $1) in succeeded|failed|cancelled) true;; *) false;; esac"
}

# Problem packages: the shipped ones and the test fixtures side by side
# (queue/copy has a named seed).
K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
ln -s "$ROOT/tests/fixtures/kernels/queue" "$K/queue"
check "avod starts" start_avod --kernels "$K"
for _ in 1 2 3 4; do start_worker --kernels "$K"; done
W4=("${PIDS[@]:1:4}")

SPEC='{"problem": "cpu/sgemm", "islands": 4, "migrate_every": 2, "stagnation": {"patience": 2},
       "budget": {"evaluations": 28}, "operator_params": {"seed": 11}}'
JOB=$(api POST /v1/jobs "$SPEC" | jq -r .id)
check "a 4-island job is accepted" test -n "$JOB" -a "$JOB" != null

# Restart-safe: kill avod hard once islands are under way, start it again.
wait_for 120 "[ \$(psql_avo \"SELECT count(*) FROM evaluations WHERE job_id = $JOB AND consumed\") -ge 6 ]"
kill -KILL "$AVOD_PID"
wait "$AVOD_PID" 2>/dev/null
BEFORE=$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB" 2>/dev/null || echo "?")
check "avod restarts on the same state directory" start_avod --kernels "$K"
check "the job resumes and runs to its budget" wait_job "$JOB" 300
echo "# evaluations when avod was killed: $BEFORE"

q() { psql_avo "$1"; }
check "the job succeeded on its evaluation budget" \
    test "$(q "SELECT state || ':' || reason FROM jobs WHERE id = $JOB")" = "succeeded:evaluation budget reached"
check "exactly the budget was evaluated, nothing repeated or skipped across the restart" \
    test "$(q "SELECT count(*) || '/' || count(*) FILTER (WHERE consumed) FROM evaluations WHERE job_id = $JOB AND purpose = 'search'")" = "28/28"
check "no configuration was evaluated twice" \
    test "$(q "SELECT count(*) - count(DISTINCT knobs::text) FROM candidates WHERE job_id = $JOB")" = 0
check "four islands, each with its own proposals" \
    test "$(q "SELECT count(DISTINCT island) FROM candidates WHERE job_id = $JOB AND operator = 'tune'")" = 4
check "evaluations ran on more than one worker" \
    test "$(q "SELECT count(DISTINCT worker_id) FROM evaluations WHERE job_id = $JOB")" -ge 2
check "every committed candidate passed its checks" \
    test "$(q "SELECT count(*) FROM candidates WHERE job_id = $JOB AND committed AND (outcome <> 'ok' OR NOT aggregate > 0)")" = 0
# (a commit decided on a paired measurement is faster than its against by
# the paired ratio, whatever the drift of its absolute score: not counted)
check "lineage scores never fall (each unpaired commit >= its parent, epsilon 0)" \
    test "$(q "SELECT count(*) FROM candidates c JOIN candidates p ON p.id = c.parent_id WHERE c.job_id = $JOB AND c.committed AND c.aggregate < p.aggregate AND NOT EXISTS (SELECT 1 FROM events ev WHERE ev.job_id = c.job_id AND ev.kind = 'candidate_evaluated' AND (ev.data->>'candidate')::bigint = c.id AND ev.data->'rule'->>'paired' = 'true')")" = 0
check "every island's best is committed, and the job's best is the best of them" \
    test "$(q "SELECT count(*) FROM islands i JOIN candidates c ON c.id = i.best_candidate WHERE i.job_id = $JOB AND c.committed AND c.aggregate = i.best")/$(q "SELECT (max(i.best) = (SELECT aggregate FROM candidates WHERE id = j.best_candidate))::text FROM islands i JOIN jobs j ON j.id = i.job_id WHERE j.id = $JOB GROUP BY j.best_candidate")" = "4/true"
# A new best decided paired against the job's best is judged on its ratio:
# its absolute score, measured in another process than the record, may sit
# under the record (docs/evaluation.md, "What the daemon does with paired").
check "new_best events only ever rise (unpaired ones; a paired one is judged on its ratio)" \
    test "$(q "SELECT count(*) FROM (SELECT (data->>'aggregate')::float8 a, lag((data->>'aggregate')::float8) OVER (ORDER BY id) b, (data->>'candidate')::bigint c FROM events WHERE job_id = $JOB AND kind = 'new_best') x WHERE a <= b AND NOT EXISTS (SELECT 1 FROM events ev WHERE ev.job_id = $JOB AND ev.kind = 'candidate_evaluated' AND (ev.data->>'candidate')::bigint = x.c AND ev.data->'rule'->>'paired' = 'true')")" = 0
check "commits add up: the job's count, the islands' counts, the committed candidates" \
    test "$(q "SELECT j.commits || ':' || (SELECT sum(commits) FROM islands WHERE job_id = j.id) || ':' || (SELECT count(*) FROM candidates WHERE job_id = j.id AND committed) FROM jobs j WHERE id = $JOB" | awk -F: '{print ($1 == $2 && $2 == $3) ? "ok" : $0}')" = ok
check "accounting adds up: CPU-seconds are the sum over the applied evaluations and the final measurement" \
    test "$(q "SELECT abs(j.cpu_seconds - (SELECT sum(k.cpu_s) FROM evaluations e, avo_eval_cost(e.target, e.result) k WHERE e.job_id = j.id AND (e.consumed OR e.purpose = 'final'))) < 1e-6 AND j.cpu_seconds > 0 FROM jobs j WHERE id = $JOB")" = t
check "accounting adds up: evaluations by outcome sum to the budget" \
    test "$(api GET /v1/jobs/$JOB | jq '[.evaluations.by_outcome[]] | add')" = 28
check "migrations: one event per recorded migration, each adopting a committed candidate" \
    test "$(q "SELECT (SELECT count(*) FROM events WHERE job_id = $JOB AND kind = 'island_migrated') = (SELECT sum(migrations) FROM islands WHERE job_id = $JOB) AND NOT EXISTS (SELECT 1 FROM events e JOIN candidates c ON c.id = (e.data->>'candidate')::bigint WHERE e.job_id = $JOB AND e.kind = 'island_migrated' AND NOT c.committed)")" = t
check "each island_migrated event follows the result that caused it (a commit of the adopted candidate's job)" \
    test "$(q "SELECT count(*) FROM events m WHERE m.job_id = $JOB AND m.kind = 'island_migrated' AND NOT EXISTS (SELECT 1 FROM events c WHERE c.job_id = $JOB AND c.kind = 'committed' AND c.id < m.id AND NOT EXISTS (SELECT 1 FROM events o WHERE o.job_id = $JOB AND o.id > c.id AND o.id < m.id AND o.kind IN ('candidate_evaluated')))")" = 0
check "stagnation events come after at least 'patience' evaluations without a commit" \
    test "$(q "SELECT count(*) FROM events WHERE job_id = $JOB AND kind = 'stagnation' AND (data->>'evaluations_without_commit')::int < 2")" = 0
echo "# commits $(q "SELECT commits FROM jobs WHERE id = $JOB"), migrations $(q "SELECT count(*) FROM events WHERE job_id = $JOB AND kind = 'island_migrated'"), stagnation events $(q "SELECT count(*) FROM events WHERE job_id = $JOB AND kind = 'stagnation'")"
check "budget_reached is an event before job_finished, the final measurement of the best between them" \
    test "$(q "SELECT string_agg(kind, ',' ORDER BY id) FROM events WHERE job_id = $JOB AND id >= (SELECT max(id) FROM events WHERE job_id = $JOB AND kind = 'budget_reached')")" = "budget_reached,final_measurement,final_measurement,job_finished"
check "every tune candidate carries its diff against its parent and notes on how it was made" \
    test "$(q "SELECT count(*) FROM candidates WHERE job_id = $JOB AND operator = 'tune' AND (diff IS NULL OR diff NOT LIKE '%+#define %' OR notes NOT LIKE 'tune: %')")" = 0
B=$(q "SELECT best_candidate FROM jobs WHERE id = $JOB")
check "a candidate reads back with its score vector, compile report and worker" \
    test "$(api GET /v1/candidates/$B | jq -r '[(.configs | length > 0), (.compile.seconds != null), (.worker.host != null), (.source | length > 0)] | all')" = true
check "diff between two candidates comes from the daemon" \
    bash -c '[ "$(curl -s --unix-socket "$0/avod.sock" "http://avod/v1/candidates/$1/diff" | jq -r .diff | grep -c "^[-+]#define")" -ge 2 ]' "$AVO_HOME" "$B"
check "the report has seed and best per configuration" \
    test "$(api GET /v1/jobs/$JOB/report | jq '[.configs[] | select(.seed > 0 and .best > 0)] | length')" -ge 2

# The same through avoctl, as a person reads it.
avoctl lineage "$JOB" >"$T/lineage.out" 2>&1
check "avoctl lineage shows the committed tree with islands, seed and best marked" \
    bash -c '[ "$(grep -cE "^ *[^ ]" "$0")" -ge "$1" ] && grep -q "seed" "$0" && grep -q "best" "$0"' "$T/lineage.out" "$(q "SELECT count(*) FROM candidates WHERE job_id = $JOB AND committed")"
avoctl lineage "$JOB" --all >"$T/lineage-all.out" 2>&1
check "avoctl lineage --all lists every candidate" \
    test "$(grep -cE '^ *[^ ]' "$T/lineage-all.out")" -gt 28
avoctl diff "$B" >"$T/diff.out" 2>&1
check "avoctl diff shows what the step to the best changed" grep -qE '^\+#define' "$T/diff.out"
avoctl show "$B" >"$T/show.out" 2>&1
check "avoctl show prints the score per configuration and the worker" \
    bash -c 'grep -q "512" "$0" && grep -q "GFLOP/s" "$0" && grep -qi "worker" "$0"' "$T/show.out"
avoctl report "$JOB" --markdown "$T/report.md" >"$T/report.out" 2>&1
check "avoctl report writes a table of seed against best and a markdown file" \
    bash -c 'grep -q "384x320x288" "$0" && grep -q "^|" "$1"' "$T/report.out" "$T/report.md"
avoctl --json report "$JOB" >"$T/report.json" 2>&1
check "avoctl report --json is the daemon's report" test "$(jq '.configs | length' "$T/report.json")" -ge 4
J7=$(avoctl --json fork "$B" --evaluations 1 | jq -r .id)
check "avoctl fork seeds a new job from a candidate" \
    test "$(q "SELECT spec->'seed'->>'candidate' FROM jobs WHERE id = ${J7:-0}")" = "$B"
wait_job "$J7" 300

# Other endings.
J2=$(api POST /v1/jobs '{"problem": "cpu/softmax", "target_score": 0.000001, "budget": {"evaluations": 20}}' | jq -r .id)
check "a reached target score ends the job" \
    bash -c 'for _ in $(seq 1 600); do r=$(psql -X -A -t "host=$0/pg/run dbname=avo user=avo" -c "SELECT reason FROM jobs WHERE id = $1 AND state = '"'succeeded'"'"); [ -n "$r" ] && { echo "$r" | grep -q "target score reached"; exit; }; sleep 0.2; done; exit 1' "$AVO_HOME" "$J2"
J3=$(api POST /v1/jobs '{"problem": "cpu/sgemm", "stagnation": {"patience": 1, "limit": 1}, "budget": {"evaluations": 40}}' | jq -r .id)
wait_job "$J3" 300
check "the stagnation limit ends a job that stops committing" \
    test "$(q "SELECT state || ':' || reason FROM jobs WHERE id = $J3")" = "succeeded:stagnation limit reached: 1 evaluation without a commit"

# Seeds: a file, a transfer, a broken file.
SEEDSRC=$(jq -Rs . <"$ROOT/kernels/cpu/softmax/seed.c")
J4=$(api POST /v1/jobs "{\"problem\": \"cpu/softmax\", \"seed\": {\"file\": \"mine.c\", \"source\": $SEEDSRC, \"knobs\": {\"VEC\": 4}}, \"budget\": {\"evaluations\": 3}}" | jq -r .id)
wait_job "$J4" 300
check "a job seeded from a file runs, its seed rendered with the start knobs" \
    test "$(q "SELECT j.state || ':' || (c.knobs->>'VEC') FROM jobs j JOIN candidates c ON c.id = j.seed_candidate WHERE j.id = $J4")" = "succeeded:4"
J5=$(api POST /v1/jobs "{\"problem\": \"cpu/sgemm\", \"seed\": {\"candidate\": $B}, \"budget\": {\"evaluations\": 2}}" | jq -r .id)
wait_job "$J5" 300
check "a transferred seed starts from the candidate's knobs, without its old defines" \
    test "$(q "SELECT (a.knobs = b.knobs)::text || ':' || (SELECT count(*) FROM regexp_matches(s.body, '/\* avo knobs \*/', 'g')) FROM jobs j JOIN candidates a ON a.id = j.seed_candidate JOIN candidates b ON b.id = $B JOIN sources s ON s.sha256 = a.sha256 WHERE j.id = $J5")" = "true:1"
# Knobs that are allowed only together (sgemm: UNROLL=8 needs ORDER=1) are
# carried over together.
C8=$(q "INSERT INTO candidates (job_id, sha256, operator, knobs) SELECT $J3, sha256, 'tune', '{\"ORDER\":1,\"BM\":32,\"BN\":256,\"BK\":64,\"UNROLL\":8}' FROM candidates WHERE id = $B RETURNING id")
J8=$(api POST /v1/jobs "{\"problem\": \"cpu/sgemm\", \"seed\": {\"candidate\": $C8}, \"budget\": {\"evaluations\": 1}}" | jq -r .id)
check "a transfer keeps knob values that are allowed only together" \
    test "$(q "SELECT (spec->'seed'->'knobs'->>'ORDER') || (spec->'seed'->'knobs'->>'UNROLL') FROM jobs WHERE id = ${J8:-0}")" = 18
wait_job "$J8" 300
NJOBS=$(q "SELECT count(*) FROM jobs")
out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "seed": {"file": "broken.c", "source": "int softmax(void) { return syntax error; }"}, "budget": {"evaluations": 5}}')
check "a seed that does not compile is refused at submission with the compiler's message, naming its file" \
    bash -c 'jq -r .error.message <<<"$0" | grep -q "^seed: broken.c does not compile: broken.c:1:[0-9]*: error: .syntax. undeclared"' "$out"
check "the refusal carries the compiler's log, and no job was created" \
    test "$(jq -r '.error.log | contains("expected")' <<<"$out"):$(q "SELECT count(*) FROM jobs")" = "true:$NJOBS"
printf 'int softmax(void) { return oops; }\n' >"$T/bad.c"
avoctl submit --problem cpu/softmax --seed "$T/bad.c" >"$T/bad.out" 2>&1
rc=$?
check "avoctl submit --seed with a broken file is refused (exit 1) with the compiler's error" \
    bash -c '[ "$0" = 1 ] && grep -q "bad.c:1:[0-9]*: error" "$1"' "$rc" "$T/bad.out"

# Bad specs: each refused with the field and the reason.
out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "budget": {"tokens": 1000}}')
check "an LLM budget on a tune job is refused" grep -q 'budget.tokens: applies to agent jobs only' <<<"$out"
out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "seed": {"knobs": {"NOPE": 1}}}')
check "an unknown knob is refused, naming the problem's knobs" grep -q 'seed.knobs.NOPE: unknown knob' <<<"$out"
out=$(api POST /v1/jobs "{\"problem\": \"cpu/stencil2d\", \"seed\": {\"candidate\": $B}}")
check "a fork from a candidate of an incompatible problem is refused" grep -q "not compatible with 'cpu/stencil2d'" <<<"$out"
out=$(api GET /v1/candidates/999999)
check "a missing candidate is a 404 that names it" test "$(jq -r .error.message <<<"$out")" = "no candidate 999999"
out=$(api GET /v1/jobs/999999/lineage)
check "the lineage of a missing job is a 404 that names it" test "$(jq -r .error.message <<<"$out")" = "no job 999999"
out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "seed": {"candidate": 999999}}')
check "a fork from a missing candidate is refused" grep -q 'seed.candidate: no candidate 999999' <<<"$out"
out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "stagnation": {"limit": 0}}')
check "a zero stagnation limit is refused" grep -q 'stagnation.limit: 0 is outside' <<<"$out"
out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "budget": {"gpu_seconds": 0}}')
check "a zero GPU-seconds budget is refused" grep -q 'budget.gpu_seconds: 0 is outside' <<<"$out"

# A named seed: another of the package's seeds, with a knob space of its own.
J9=$(avoctl --json submit --problem queue/copy --seed-name wide --evaluations 2 | jq -r .id)
wait_job "$J9" 120
check "a job on a named seed starts from that seed's defaults" \
    test "$(q "SELECT j.state || ':' || (c.knobs->>'UNROLL') FROM jobs j JOIN candidates c ON c.id = j.seed_candidate WHERE j.id = ${J9:-0}")" = "succeeded:8"
check "and tunes inside that seed's values only" \
    test "$(q "SELECT count(*) || ':' || count(*) FILTER (WHERE (knobs->>'UNROLL')::int IN (8, 16)) FROM candidates WHERE job_id = ${J9:-0}")" = "2:2"
J10=$(avoctl --json fork "$(q "SELECT seed_candidate FROM jobs WHERE id = ${J9:-0}")" --evaluations 1 | jq -r .id)
check "a fork of its candidate keeps the named seed (and its knobs)" \
    test "$(q "SELECT spec->'seed'->>'name' FROM jobs WHERE id = ${J10:-0}")" = wide
wait_job "$J10" 60
out=$(avoctl submit --problem queue/copy --seed-name narrow 2>&1)
rc=$?
check "an unknown seed name is refused (exit 1), listing the problem's named seeds" \
    bash -c '[ "$0" = 1 ] && grep -q "seed.name: problem .queue/copy. has no seed named .narrow. (its named seeds: wide)" <<<"$1"' "$rc" "$out"

out=$(api POST /v1/jobs '{"problem": "cpu/softmax", "gpu": "H200"}')
check "a GPU model on a CPU problem is refused" grep -q "gpu: problem 'cpu/softmax' runs on the CPU" <<<"$out"

# A GPU model: only a worker that registered that GPU claims the work (the
# claim itself, against two registered workers; no GPU needed).
H200W=$(q "INSERT INTO workers (host, pid, target, devices) VALUES ('g1', 1, 'sm_90', '[{\"kind\":\"gpu\",\"index\":0,\"name\":\"NVIDIA H200\"}]') RETURNING id")
H100W=$(q "INSERT INTO workers (host, pid, target, devices) VALUES ('g2', 2, 'sm_90', '[{\"kind\":\"gpu\",\"index\":0,\"name\":\"NVIDIA H100 80GB HBM3\"}]') RETURNING id")
S=$(q "SELECT seed_candidate FROM jobs WHERE id = $JOB")
q "INSERT INTO evaluations (job_id, candidate_id, problem, target, gpu_model) VALUES ($JOB, $S, 'x', 'sm_90', 'H200'), ($JOB, $S, 'x', 'sm_90', NULL)" >/dev/null
check "a worker with another GPU model skips the job's evaluation and takes the unconstrained one" \
    test "$(q "SELECT count(*) FROM avo_claim($H100W, 'sm_90', 60) c JOIN evaluations e ON e.id = c.id WHERE e.gpu_model IS NULL")" = 1
check "nothing else for it; the H200 worker claims the H200 evaluation" \
    test "$(q "SELECT count(*) FROM avo_claim($H100W, 'sm_90', 60)"):$(q "SELECT e.gpu_model FROM avo_claim($H200W, 'sm_90', 60) c JOIN evaluations e ON e.id = c.id")" = "0:H200"
q "UPDATE evaluations SET state = 'cancelled' WHERE problem = 'x'; UPDATE workers SET state = 'gone' WHERE id IN ($H200W, $H100W)" >/dev/null

[ "$FAILS" -eq 0 ]
