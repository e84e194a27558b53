#!/usr/bin/env bash
# One job end to end through real processes: avod on a throwaway embedded
# PostgreSQL, one avo-worker, avoctl. Then the lineage invariants, checked
# in the database itself, and the bad-input paths.
source "$(dirname "$0")/lib.sh"

# The shipped CPU problems, and the noise fixtures (tests/fixtures/kernels/noise).
K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
ln -s "$ROOT/tests/fixtures/kernels/noise" "$K/noise"

check "avod starts on an empty state directory (embedded PostgreSQL)" start_avod --kernels "$K"
check "a second avod on the same state directory refuses" \
    bash -c '! avod >"$0/second.out" 2>&1 && grep -q "already running on state directory" "$0/second.out"' "$T"
check "avod with a missing state directory names it" \
    bash -c '! avod --home /nonexistent/avo >"$0/missing.out" 2>&1 && grep -q "state directory /nonexistent/avo does not exist" "$0/missing.out"' "$T"
mkdir -p "$T/other"
check "avod with an unreachable database says so" \
    bash -c '! AVO_HOME=$0/other avod --db "host=/nonexistent dbname=x connect_timeout=2" >"$0/nodb.out" 2>&1 && grep -q "cannot connect to the database" "$0/nodb.out"' "$T"

start_worker --kernels "$K"
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 8 --islands 1 | jq -r .id)
check "submit returns a job id" test -n "$JOB"

# Bad input while the job runs: each a clear error, none harming the job.
out=$(curl -s --unix-socket "$AVO_HOME/avod.sock" -X POST -d '{"problem": "cpu/sgemm", "budget": {"evals": 3}}' http://avod/v1/jobs)
check "a job spec with a wrong field is refused, naming the field" grep -q 'budget.evals: unknown field' <<<"$out"
out=$(curl -s --unix-socket "$AVO_HOME/avod.sock" -X POST -d '{"problem": "cpu/nope"}' http://avod/v1/jobs)
check "an unknown problem is refused, naming it" grep -q "unknown problem 'cpu/nope'" <<<"$out"
out=$(curl -s --unix-socket "$AVO_HOME/avod.sock" -X POST -d '{"problem": ' http://avod/v1/jobs)
check "malformed JSON is refused with its position" grep -q 'not valid JSON (line 1' <<<"$out"
out=$(curl -s --unix-socket "$AVO_HOME/avod.sock" -X POST -d '{"problem": "../../etc"}' http://avod/v1/jobs)
check "a problem name escaping kernels/ is refused" grep -q '"bad_request"' <<<"$out"
avoctl submit --problem cpu/sgemm --evaluations 0 >"$T/zero.out" 2>&1
check "avoctl refuses a zero budget with exit 2" test $? -eq 2

timeout 600 avoctl watch "$JOB" >"$T/watch.out" 2>&1
rc=$?
check "watch streams until the job ends and exits 0" test $rc -eq 0
check "watch showed commits and the final summary" \
    bash -c 'grep -q "committed" "$0" && grep -q "finished: succeeded" "$0"' "$T/watch.out"
check "watch ends with a summary line: state, reason, best against the seed, evaluations and islands" \
    bash -c 'tail -1 "$0" | grep -Eq "^job succeeded: evaluation budget reached; best [0-9.e+]+ GFLOP/s vs seed [0-9.e+]+ GFLOP/s \((x[0-9.]+|speedup x[0-9.]+ .+)\) after 8 evaluations on [0-9]+ islands?$"' "$T/watch.out"
# On a terminal the island lines stay under the scrolling events (script(1) gives avoctl a pty).
if command -v script >/dev/null; then
    script -qec "avoctl watch $JOB" /dev/null >"$T/watch-tty.out" 2>&1
    check "on a terminal, watch draws a live line per island (evaluations of the budget, best, sparkline)" \
        bash -c 'grep -aq "island 0 .* evals (job [0-9]*/8)  best " "$0" && grep -aq $'"'"'\033\[[0-9]*A'"'"' "$0"' "$T/watch-tty.out"
fi

check "job succeeded with its budget spent" \
    test "$(psql_avo "SELECT state || ':' || (SELECT count(*) FROM evaluations WHERE job_id = $JOB AND purpose = 'search') FROM jobs WHERE id = $JOB")" = "succeeded:8"
check "every committed candidate passed its checks" \
    test "$(psql_avo "SELECT count(*) FROM candidates WHERE job_id = $JOB AND committed AND (outcome <> 'ok' OR NOT aggregate > 0)")" = 0
check "no committed candidate scores below its parent (unpaired commits; a paired one is judged on its ratio)" \
    test "$(psql_avo "SELECT count(*) FROM candidates c JOIN candidates p ON p.id = c.parent_id WHERE c.job_id = $JOB AND c.committed AND c.aggregate < p.aggregate * (1 - (SELECT (spec->>'epsilon')::float8 FROM jobs WHERE id = $JOB)) AND NOT EXISTS (SELECT 1 FROM events ev WHERE ev.job_id = c.job_id AND ev.kind = 'candidate_evaluated' AND (ev.data->>'candidate')::bigint = c.id AND ev.data->'rule'->>'paired' = 'true')")" = 0
check "the lineage is in the database (seed plus at least one commit)" \
    test "$(psql_avo "SELECT count(*) FROM candidates WHERE job_id = $JOB AND committed")" -ge 2
check "every evaluation was consumed exactly once by the engine" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JOB AND state = 'done' AND NOT consumed AND purpose = 'search'")" = 0
check "the best candidate beats the seed" \
    test "$(psql_avo "SELECT (b.aggregate > s.aggregate)::text FROM jobs j JOIN candidates b ON b.id = j.best_candidate JOIN candidates s ON s.id = j.seed_candidate WHERE j.id = $JOB")" = true
check "sources are stored once by content hash" \
    test "$(psql_avo "SELECT count(*) FROM sources s WHERE s.sha256 <> encode(sha256(convert_to(s.body, 'UTF8')), 'hex')")" = 0
check "event ids are monotonic and end with job_finished" \
    test "$(psql_avo "SELECT kind FROM events WHERE job_id = $JOB ORDER BY id DESC LIMIT 1")" = job_finished

avoctl best "$JOB" -o "$T/best.c" >"$T/best.out" 2>&1
check "best -o writes the best source" grep -q '#define' "$T/best.c"
# One speedup, the job's: best's line says what status says (the final
# paired measurement), not an unlabelled ratio of the recorded aggregates.
avoctl status "$JOB" >"$T/status.out" 2>&1
check "best's speedup is the job's final measurement, as status shows it" \
    bash -c 'sp=$(sed -n "s/^ *speedup  *//p" "$0" | head -1); [ -n "$sp" ] &&
             head -1 "$1" | grep -qF "speedup $sp" && grep -q "paired\|unpaired" "$1"' "$T/status.out" "$T/best.out"
check "the best source evaluates standalone (avo-worker eval)" \
    bash -c 'avo-worker eval "$0/kernels/cpu/sgemm" "$1" --json >"$2/eval.json" 2>&1 && grep -q "\"outcome\": *\"ok\"" "$2/eval.json"' "$ROOT" "$T/best.c" "$T"
check "status --json reports the job" bash -c "avoctl --json status $JOB | grep -q '\"state\": *\"succeeded\"'"
check "workers lists the worker" bash -c "avoctl workers | grep -q cpu"
check "watch after the end replays from an event id and exits 0" \
    bash -c "avoctl watch $JOB --after 3 | grep -q 'finished: succeeded'"

# Noise made visible (issue 20, point 8). The result's fields, from a real
# evaluation of the sgemm seed, whatever the machine's noise: ...
avo-worker eval "$ROOT/kernels/cpu/sgemm" "$ROOT/kernels/cpu/sgemm/seed.c" --json >"$T/sgemm.json" 2>"$T/sgemm.err"
check "eval --json: every config says noisy, its rse target (the problem's 0.005) and why it stopped" \
    jqt '(.configs | length) == 4 and all(.configs[]; (.noisy | type) == "boolean" and .rse_target == 0.005
         and (.stopped_by | IN("rse", "max_seconds", "check_floor", "max_runs")))' "$T/sgemm.json"
check "eval --json: noisy exactly where the rse is over the target, and counted at the top" \
    jqt 'all(.configs[]; .noisy == (.rse > .rse_target))
         and .noisy_configs == ([.configs[] | select(.noisy)] | length)' "$T/sgemm.json"
check "eval --json: the host's 1-minute load at the start and end, and its CPUs" \
    jqt '(.load.load1_start | type) == "number" and (.load.load1_end | type) == "number" and .load.cpus >= 1' \
    "$T/sgemm.json"
check "eval --json: the timed wall time against the runner's task clock, or why not" \
    jqt '(.clock_gap.wall_s > 0 and .clock_gap.task_clock_s > 0 and .clock_gap.off_cpu_fraction >= 0
          and .clock_gap.note == null and all(.configs[]; .clock_gap.wall_s > 0))
         or ((.clock_gap.note | type) == "string" and .clock_gap.task_clock_s == null)' "$T/sgemm.json"
# ... and from problems whose target no timing can meet (1e-9, a 5 ms
# budget) and every timing meets (0.99), so the flag is certain either way.
avo-worker eval "$K/noise/noisy" "$K/noise/noisy/seed.c" --json >"$T/noisy.json" 2>"$T/noisy.err"
check "eval --json: a config out of time over its rse target is flagged noisy" \
    jqt '.noisy_configs == 2 and all(.configs[]; .noisy and .stopped_by == "max_seconds" and .rse > .rse_target)' \
    "$T/noisy.json"
avo-worker eval "$K/noise/steady" "$K/noise/steady/seed.c" --json >"$T/steady.json" 2>"$T/steady.err"
check "eval --json: a config within its rse target is not" \
    jqt '.noisy_configs == 0 and all(.configs[]; (.noisy | not) and .stopped_by == "rse")' "$T/steady.json"
# Through avod: stored with the result, shown by watch, show, lineage, report.
NJOB=$(avoctl --json submit --problem noise/noisy --evaluations 2 --islands 1 | jq -r .id)
SJOB=$(avoctl --json submit --problem noise/steady --evaluations 2 --islands 1 | jq -r .id)
timeout 300 avoctl watch "$NJOB" >"$T/nwatch.out" 2>&1
timeout 300 avoctl watch "$SJOB" >"$T/swatch.out" 2>&1
check "the stored results count their noisy configs (2 of 2, and 0 of 2)" \
    test "$(psql_avo "SELECT string_agg(DISTINCT job_id || ':' || (result->>'noisy_configs'), ',') FROM evaluations WHERE job_id IN ($NJOB, $SJOB) AND state = 'done'")" = "$NJOB:2,$SJOB:0"
check "watch marks an evaluation with noisy configs, and only that" \
    bash -c 'grep -Eq "candidate_evaluated cand [0-9]+ (island [0-9]+ )?ok .* \(noisy: 2 configs\)" "$0" && grep -q "candidate_evaluated" "$1" && ! grep -q noisy "$1"' "$T/nwatch.out" "$T/swatch.out"
NSEED=$(avoctl --json status "$NJOB" | jq -r .seed.candidate)
SSEED=$(avoctl --json status "$SJOB" | jq -r .seed.candidate)
avoctl show "$NSEED" >"$T/nshow.out" 2>&1
avoctl show "$SSEED" >"$T/sshow.out" 2>&1
check "show marks each noisy config with its rse and why it stopped, and shows the host's load and clock gap" \
    bash -c 'grep -Eq "^64 .*% noisy$" "$0" && grep -q "^noisy        2 of 2 configurations: 64 (noisy: rse [0-9.]*% > 0.0%, stopped by max_seconds)" "$0" && grep -q "^host load    [0-9.]* at start, [0-9.]* at end" "$0" && grep -q "^off CPU      " "$0"' "$T/nshow.out"
check "show marks nothing where every config met its target" \
    bash -c '! grep -q noisy "$0" && grep -q "^host load" "$0"' "$T/sshow.out"
check "lineage marks the noisy candidates" \
    bash -c 'avoctl lineage "$0" | grep -q "(noisy 2)" && ! avoctl lineage "$1" | grep -q noisy' "$NJOB" "$SJOB"
avoctl report "$NJOB" >"$T/nreport.out" 2>&1
avoctl report "$SJOB" >"$T/sreport.out" 2>&1
check "report marks the noisy scores with their rse and counts them" \
    bash -c 'grep -Eq "^64 .* noisy \(rse [0-9.]+%\)" "$0" && grep -q "^noisy        seed 2 of 2, best 2 of 2 over the rse target 0.0%" "$0"' "$T/nreport.out"
check "report counts none where every config met its target" \
    bash -c 'grep -q "^noisy        seed none, best none over the rse target 99.0%" "$0" && ! grep -q "noisy (rse" "$0"' "$T/sreport.out"

# Clean shutdown: SIGTERM stops avod with status 0 and the embedded server.
kill -TERM "$AVOD_PID"
wait "$AVOD_PID"
check "avod exits 0 on SIGTERM" test $? -eq 0
check "the embedded PostgreSQL is stopped with avod" test ! -e "$AVO_HOME/pg/data/postmaster.pid"

# Restart on the same state: nothing lost, migrations not applied again.
check "avod restarts on the existing state" start_avod --kernels "$K"
check "migrations are recorded once and not re-applied" \
    bash -c '[ "$(grep -c "applied 001_init.sql" "$0/avod.log")" = 1 ]' "$T"
check "the finished job survived the restart" bash -c "avoctl --json status $JOB | grep -q succeeded"

[ "$FAILS" -eq 0 ]
