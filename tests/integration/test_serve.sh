#!/usr/bin/env bash
# avo-harness --serve (daemon/harness/serve.h; docs/evaluation.md, "A
# checker kept between evaluations"): evaluations one after another in one
# checker process, its state kept, driven as a worker would by
# tests/fixtures/serve/serve_client.py (a socket pair, one request per
# evaluation, the objects' descriptors attached), on the paired fixture
# (tests/fixtures/kernels/paired) on the CPU.
#  (a) honest evaluations: each ok, the first starts afresh, the next take
#      its state over (served.kept), a paired A/A among them has a ratio;
#  (b) a crashing and a wrong candidate in between: classified, and the
#      checker serves the next one, state kept;
#  (c) a request it cannot read (not JSON, no seed, an unknown object, a
#      screen without an against): an error line naming the cause, and the
#      next request is served;
#  (d) a channel to the next evaluation (tests/fixtures/serve/leftover.c):
#      the first candidate fills the shared region with a marker, the next
#      looks for it at its load: it finds nothing (the kept region is
#      emptied before its runners exist);
#  (e) another job's seed: the state is not taken over (started afresh);
#  (f) bad command lines: exit 2 naming the cause.
#  (g) through avod and a worker started with --serve 1, on the reference
#      cache's fixture (tests/fixtures/kernels/refcache, whose kernel
#      prints a hash of its first calls' inputs): a job's evaluations run
#      on one kept checker (the first starts it, the later ones take its
#      state over), each result's stderr its own evaluation's, the warm-up
#      sets the job's; the next job starts a checker of its own; the job
#      seed is in no log or result; at the worker's end no checker is left.
#  (i) a runner without its own IPC namespace (AVO_HARNESS_NO_IPCNS, by
#      hand): the checker keeps nothing after that evaluation and ends
#      (served.ends says why), so its sandbox goes with it.
#  (k) a runner whose private scratch mounts are missing
#      (AVO_HARNESS_NO_PRIVATE_TMP: no /tmp of its own): the same, and the
#      runner's isolation note names it (read from its mountinfo).
#  (h) a kept checker killed in the middle of a job (between or during its
#      evaluations): the job's evaluations still all ok, the next one on a
#      fresh checker (an evaluation whose checker ended without an answer
#      runs once more on a fresh one, not called the candidate's crash).
#  (j) two jobs at once on one worker: their evaluations take turns, and
#      each job's after its first are on the job's own kept checker (the
#      worker keeps one per job, up to --serve-slots).
#  (l) a fresh checker that ends without an answer beside another job's
#      kept one (killed as it starts): the kept one is closed and the
#      evaluation runs once more, ok.
#  (m) the job's warm-up references held in the kept checker's memory
#      (daemon/harness/resident.h): the next evaluation reads them from
#      there, not from the cache's files; another job's finds none of them.
source "$(dirname "$0")/lib.sh"

F="$ROOT/tests/fixtures/kernels/paired"
DRIVE="$ROOT/tests/fixtures/serve/serve_client.py"
so() { cc -O2 -shared -fPIC -o "$T/$1.so" "$2" -lm; }
so ref "$F/reference.c" && so base "$F/base.c" && so wrong "$F/wrong.c" &&
    (echo '#define CRASH_AFTER 0'; cat "$F/base.c") >"$T/crash.c" && so crash "$T/crash.c" &&
    (echo '#define WRITER 1'; cat "$ROOT/tests/fixtures/serve/leftover.c") >"$T/lw.c" && so lw "$T/lw.c" &&
    so lr "$ROOT/tests/fixtures/serve/leftover.c" || { notok "the fixture objects build"; exit 1; }
serve() {  # serve OUT REQUESTS-JSON [EXTRA...] (the environment passes to the checker)
    local out=$1 req=$2; shift 2
    echo "$req" >"$T/$out.req"
    python3 "$DRIVE" "$BIN/avo-harness" "$F" "$T/ref.so" "$T/$out.req" ${1:+--} "$@" >"$T/$out.jsonl" 2>"$T/$out.err"
}
line() { sed -n "${2}p" "$T/$1.jsonl"; }  # line OUT N
obj() { echo "{\"candidate\": \"$T/$1.so\"${2:+, \"against\": \"$T/$2.so\"}}"; }

serve seq "[{\"seed\": 11, \"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 12, \"job_seed\": 5, \"objects\": $(obj base base)},
 {\"seed\": 13, \"job_seed\": 5, \"objects\": $(obj crash)},
 {\"seed\": 14, \"job_seed\": 5, \"objects\": $(obj wrong)},
 {\"raw\": \"not json\", \"objects\": $(obj base)},
 {\"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 15, \"job_seed\": 5, \"objects\": {\"candidate\": \"$T/base.so\", \"nonsense\": \"$T/base.so\"}},
 {\"seed\": 16, \"job_seed\": 5, \"screen\": true, \"objects\": $(obj base)},
 {\"seed\": 17, \"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 18, \"job_seed\": 6, \"objects\": $(obj base)}]"
jq -c '{outcome, detail: ((.detail // "")[0:90]), served, error, ratio: .paired.ratio, exit}' "$T/seq.jsonl" | sed 's/^/# /'
check "(a) the first evaluation: ok, started afresh" \
    jqt '.outcome == "ok" and .served == {"evaluation": 1, "kept": false} and (.aggregate | type) == "number"' <(line seq 1)
check "(a) the next, a paired A/A: ok, the state taken over, a ratio near 1" \
    jqt '.outcome == "ok" and .served == {"evaluation": 2, "kept": true} and .paired.ratio > 0.8 and .paired.ratio < 1.25' \
    <(line seq 2)
check "(b) a candidate that crashes: crash, served by the kept checker" \
    jqt '.outcome == "crash" and (.detail | test("SIGSEGV|SIGILL|SIGTRAP|killed")) and .served.kept' <(line seq 3)
check "(b) a wrong candidate next: wrong_result" \
    jqt '.outcome == "wrong_result" and .served == {"evaluation": 4, "kept": true}' <(line seq 4)
check "(c) a request that is not JSON: an error naming it, no evaluation" \
    jqt '.error == "request is not JSON" and (has("outcome") | not)' <(line seq 5)
check "(c) a request without a seed: an error naming the field" \
    jqt '.error | test("\"seed\" wants an integer")' <(line seq 6)
check "(c) an object of no known role: an error naming it" \
    jqt '.error | test("nonsense.*is not one of candidate, against, baseline")' <(line seq 7)
check "(c) a screen without an against: an error naming it" \
    jqt '.error | test("needs an against")' <(line seq 8)
check "(b, c) the checker goes on after them: ok, the state still kept" \
    jqt '.outcome == "ok" and .served == {"evaluation": 9, "kept": true}' <(line seq 9)
check "(e) another job's seed: ok, the state not taken over" \
    jqt '.outcome == "ok" and .served == {"evaluation": 10, "kept": false}' <(line seq 10)
check "the server ends at the socket's end of file, exit 0" jqt '.exit == 0' <(line seq 11)

AVO_HARNESS_NO_IPCNS=1 serve noipc "[{\"seed\": 31, \"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 32, \"job_seed\": 5, \"objects\": $(obj base)}]"
jq -c '{outcome, served, exit, runner_note: .runner.isolation_note}' "$T/noipc.jsonl" | sed 's/^/# /'
check "(i) a runner without its own IPC namespace: ok, and the checker says it ends, keeping nothing" \
    jqt '.outcome == "ok" and (.served.ends | test("IPC namespace"))' <(line noipc 1)
check "(i) it ended after that answer (exit 0), the next request unanswered" \
    jqt '.exit == 0' <(line noipc 2)
AVO_HARNESS_NO_PRIVATE_TMP=1 serve notmp "[{\"seed\": 33, \"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 34, \"job_seed\": 5, \"objects\": $(obj base)}]"
jq -c '{outcome, served, exit, runner_note: .runner.isolation_note}' "$T/notmp.jsonl" | sed 's/^/# /'
check "(k) a runner without a /tmp of its own: ok, the note names it, and the checker ends, keeping nothing" \
    jqt '.outcome == "ok" and (.served.ends | test("private scratch")) and
         (.runner.isolation_note | test("no /tmp of its own"))' <(line notmp 1)
check "(k) it ended after that answer (exit 0), the next request unanswered" \
    jqt '.exit == 0' <(line notmp 2)

serve leftover "[{\"seed\": 21, \"job_seed\": 5, \"objects\": $(obj lw)},
 {\"seed\": 22, \"job_seed\": 5, \"objects\": $(obj lr)}]"
jq -c '{outcome, detail: ((.detail // "")[0:90]), served}' "$T/leftover.jsonl" | sed 's/^/# /'
check "(d) the marker writer ran as the first evaluation (its writes past a tensor caught)" \
    jqt '.served.evaluation == 1 and .outcome != "ok"' <(line leftover 1)
check "(d) the next evaluation finds nothing of it in the kept region: ok, not 'returned 42'" \
    jqt '.outcome == "ok" and .served.kept' <(line leftover 2)

# (m) the job's references held in the kept checker's memory: with a
# reference cache (a descriptor, as the worker passes it) the first
# evaluation computes them, the next reads every one from the checker's
# memory, not the files; another job's evaluation finds none of them (its
# state is not taken over) and computes its own; back to the first job, the
# state was released: its references come from the files again.
mkdir "$T/refm"
exec 9<"$T/refm"
SERVE_PASS_FDS=9 serve resident "[{\"seed\": 41, \"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 42, \"job_seed\": 5, \"objects\": $(obj base base)},
 {\"seed\": 43, \"job_seed\": 6, \"objects\": $(obj base)},
 {\"seed\": 44, \"job_seed\": 5, \"objects\": $(obj base)}]" --ref-cache-fd 9 --ref-cache-max 100000000
SERVE_PASS_FDS=9 AVO_HARNESS_NO_RESIDENT=1 serve noresident "[{\"seed\": 45, \"job_seed\": 5, \"objects\": $(obj base)},
 {\"seed\": 46, \"job_seed\": 5, \"objects\": $(obj base)}]" --ref-cache-fd 9 --ref-cache-max 100000000
exec 9<&-
cachesum() { jq -c '{outcome, served, cache: ([.configs[].references.cache | {hits, resident, misses}] |
                    {hits: (map(.hits) | add), resident: (map(.resident) | add), misses: (map(.misses) | add)})}'; }
cachesum <"$T/resident.jsonl" | head -4 | sed 's/^/# (m) /'
cachesum <"$T/noresident.jsonl" | head -2 | sed 's/^/# (m) off: /'
check "(m) the first evaluation computes the job's references (misses, none from memory)" \
    jqt '.outcome == "ok" and .cache.misses > 0 and .cache.resident == 0' <(line resident 1 | cachesum)
check "(m) the next, on the kept state: every warm-up reference from the checker's memory" \
    jqt '.outcome == "ok" and .served.kept and .cache.misses == 0 and .cache.hits > 0 and .cache.resident == .cache.hits' \
    <(line resident 2 | cachesum)
check "(m) another job's evaluation: none of the first job's from memory, its own computed" \
    jqt '.outcome == "ok" and (.served.kept | not) and .cache.resident == 0 and .cache.misses > 0' <(line resident 3 | cachesum)
check "(m) the first job again: its state was released, its references read from the files" \
    jqt '.outcome == "ok" and (.served.kept | not) and .cache.resident == 0 and .cache.hits > 0 and .cache.misses == 0' \
    <(line resident 4 | cachesum)
check "(m) AVO_HARNESS_NO_RESIDENT=1: the kept state's references from the files, none from memory" \
    jqt '.outcome == "ok" and .served.kept and .cache.resident == 0 and .cache.hits > 0' <(line noresident 2 | cachesum)

"$BIN/avo-harness" "$F" "$T/base.so" "$T/ref.so" --serve 4 4<&0 >"$T/bad1.out" 2>"$T/bad1.err"
check "(f) --serve with a candidate on the command line: exit 2, '-' asked for" \
    bash -c '[ $0 = 2 ] && grep -q "a candidate comes with each request.*give .-. in its place" "$1"' $? "$T/bad1.err"
"$BIN/avo-harness" "$F" - "$T/ref.so" --serve 4 --seed 3 4<&0 >"$T/bad2.out" 2>"$T/bad2.err"
check "(f) --serve with --seed: exit 2, the seed comes with each request" \
    bash -c '[ $0 = 2 ] && grep -q -- "--seed comes with each request" "$1"' $? "$T/bad2.err"
"$BIN/avo-harness" "$F" - "$T/ref.so" --serve 99 >"$T/bad3.out" 2>"$T/bad3.err"
check "(f) --serve on a descriptor that is not open: exit 2 naming it" \
    bash -c '[ $0 = 2 ] && grep -q -- "--serve wants an open socket descriptor" "$1"' $? "$T/bad3.err"

# (g) through avod and a worker.
api() { curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"; }
RF="$ROOT/tests/fixtures/kernels/refcache"
K="$T/kernels"
mkdir -p "$K"
ln -s "$RF" "$K/refcache"
check "avod starts" start_avod --kernels "$K"
start_worker --kernels "$K" --cache "$T/wcache" --serve 1
job_done() { wait_for 180 "case \$(psql_avo 'SELECT state FROM jobs WHERE id = $1') in succeeded|failed|cancelled) true;; *) false;; esac"; }
JOB=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 3}, "operator_params": {"seed": 3}}' | jq -r .id)
job_done "$JOB"
JOB2=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 1}, "operator_params": {"seed": 4}}' | jq -r .id)
job_done "$JOB2"
echo "# jobs $JOB, $JOB2: $(psql_avo "SELECT string_agg(state, ' ') FROM jobs WHERE id IN ($JOB, $JOB2)")"
psql_avo "SELECT result FROM evaluations WHERE job_id = $JOB AND result IS NOT NULL ORDER BY id" >"$T/g1.txt"
psql_avo "SELECT result FROM evaluations WHERE job_id = $JOB2 AND result IS NOT NULL ORDER BY id" >"$T/g2.txt"
jq -c '{outcome, served, paired: (.paired.ratio != null)}' "$T/g1.txt" "$T/g2.txt" | sed 's/^/# /'
check "(g) the job's evaluations, all ok, at least two" \
    jqt -s 'length >= 2 and all(.[]; .outcome == "ok")' "$T/g1.txt"
check "(g) the first started the kept checker, every later one took its state over" \
    jqt -s '.[0].served == {"evaluation": 1, "kept": false} and
            all(.[1:][]; .served.kept and .served.evaluation > 1)' "$T/g1.txt"
warm() { jq -r '.sandbox.stderr_tail' | awk '$1 == "call" && $2 < 4 {print $4}' | sort -u | tr '\n' ' '; }
same_warm() {
    local first
    first=$(head -1 "$T/g1.txt" | warm)
    [ -n "$first" ] || return 1
    while read -r line; do [ "$(echo "$line" | warm)" = "$first" ] || return 1; done <"$T/g1.txt"
}
check "(g) every evaluation's warm-up sets the job's (the kernel's own stderr, per evaluation)" same_warm
# The timed calls' input sets are each evaluation's own: an earlier
# evaluation's in a later one's stderr would be output carried over.
timed_of() { sed -n "${1}p" "$T/g1.txt" | jq -r '.sandbox.stderr_tail' | awk '$1 == "call" && $2 >= 4 {print $4}' | sort -u; }
own_stderr() {
    local n i j
    n=$(wc -l <"$T/g1.txt")
    for i in $(seq 1 "$n"); do
        [ -n "$(timed_of "$i")" ] || return 1
        for j in $(seq 1 "$n"); do
            [ "$i" = "$j" ] || [ -z "$(comm -12 <(timed_of "$i") <(timed_of "$j"))" ] || return 1
        done
    done
}
check "(g) each result's stderr its own evaluation's: no timed input of another evaluation's in it" own_stderr
jq -c "[.configs[]?.references.cache | {hits, resident, misses}]" "$T/g1.txt" | sed "s/^/# cache: /"
check "(g) the job's later evaluations read its warm-up references from the kept checker's memory" \
    jqt -s '.[0].configs[0].references.cache.misses > 0 and
            all(.[1:][]; [.configs[].references.cache | .resident == .hits and .hits > 0] | all)' "$T/g1.txt"
check "(g) the next job: a checker of its own (not kept), ok" \
    jqt '.outcome == "ok" and .served == {"evaluation": 1, "kept": false}' "$T/g2.txt"
SEED=$(psql_avo "SELECT input_seed FROM jobs WHERE id = $JOB")
check "(g) the job seed is in no result and no log" \
    bash -c "[ -n '$SEED' ] && ! grep -q '$SEED' '$T/g1.txt' '$T/worker.log' '$T/avod.log'"
pgrep -a -P "$WORKER_PID" -f -- "--serve [0-9]" | sed "s/^/# checker: /"
# (h) the checker killed once the job's first evaluation is in.
JOB3=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 5}, "operator_params": {"seed": 5}}' | jq -r .id)
wait_for 120 "[ \$(psql_avo 'SELECT count(*) FROM evaluations WHERE job_id = $JOB3 AND result IS NOT NULL') -ge 1 ]"
pkill -KILL -P "$WORKER_PID" -f -- "--serve [0-9]"
job_done "$JOB3"
psql_avo "SELECT result FROM evaluations WHERE job_id = $JOB3 AND result IS NOT NULL ORDER BY id" >"$T/h.txt"
jq -c '{outcome, detail: ((.detail // "")[0:80]), served}' "$T/h.txt" | sed 's/^/# /'
check "(h) the killed checker's job: every evaluation ok, the one after the kill on a fresh checker" \
    jqt -s 'length >= 2 and all(.[]; .outcome == "ok") and ([.[1:][] | select(.served.evaluation == 1)] | length) >= 1' "$T/h.txt"
check "(h) the worker said it ran an evaluation once more on a fresh checker, or started one for the next" \
    grep -q 'kept checker' "$T/worker.log"
# (j) two jobs at once: their evaluations take turns on the worker, and
# each job keeps a checker of its own (the pool's slots, --serve-slots).
JOB4=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 4}, "operator_params": {"seed": 6}}' | jq -r .id)
JOB5=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 4}, "operator_params": {"seed": 7}}' | jq -r .id)
job_done "$JOB4"
job_done "$JOB5"
psql_avo "SELECT job_id FROM evaluations WHERE job_id IN ($JOB4, $JOB5) AND result IS NOT NULL ORDER BY finished_at" |
    tr '\n' ' ' >"$T/j.order"
echo "# (j) the order the two jobs' evaluations finished in: $(cat "$T/j.order")"
for j in "$JOB4" "$JOB5"; do
    psql_avo "SELECT result FROM evaluations WHERE job_id = $j AND result IS NOT NULL ORDER BY finished_at" >"$T/j$j.txt"
    jq -c '{outcome, served}' "$T/j$j.txt" | sed "s/^/# job $j: /"
done
check "(j) the two jobs took turns on the worker (an evaluation of one between two of the other)" \
    bash -c 'grep -Eq "(^| )$1 ($2 )+$1( |$)|(^| )$2 ($1 )+$2( |$)" "$0"' "$T/j.order" "$JOB4" "$JOB5"
check "(j) each job's evaluations ok, every one after its first on the job's own kept checker" \
    bash -c 'for f; do jq -es "length >= 2 and all(.[]; .outcome == \"ok\") and .[0].served.kept == false and
                                 all(.[1:][]; .served.kept)" "$f" >/dev/null || exit 1; done' _ "$T/j$JOB4.txt" "$T/j$JOB5.txt"
n=$(pgrep -P "$WORKER_PID" -f -- "--serve [0-9]" | wc -l)
check "(g) the kept checkers while the worker runs: one per job lately served, at most the 4 slots ($n)" \
    test "$n" -ge 1 -a "$n" -le 4
kill -TERM "$WORKER_PID"
wait_for 30 "! kill -0 $WORKER_PID 2>/dev/null"
check "(g) the worker stopped: no checker left (none serving this fixture)" \
    bash -c '! pgrep -f -- "avo-harness $0 - /proc/self/fd/5 --serve" >/dev/null' "$(readlink -f "$RF")"
# (l) a fresh checker that ends without an answer while the worker keeps
# another job's: the others are closed and the evaluation runs once more
# (daemon/worker/served.c; on a GPU they may hold the memory it lacked).
# The new job's checker is killed as soon as it appears, before it answers.
start_worker --kernels "$K" --cache "$T/wcache2" --serve 1
JOB6=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 2}, "operator_params": {"seed": 8}}' | jq -r .id)
job_done "$JOB6"
KEPT=$(pgrep -P "$WORKER_PID" -f -- "--serve [0-9]" | tr '\n' ' ')
JOB7=$(api POST /v1/jobs '{"problem": "refcache", "budget": {"evaluations": 1}, "operator_params": {"seed": 9}}' | jq -r .id)
KILLED=
for _ in $(seq 1 2000); do
    for p in $(pgrep -P "$WORKER_PID" -f -- "--serve [0-9]"); do
        case " $KEPT " in *" $p "*) ;; *) kill -KILL "$p" && KILLED=$p ;; esac
    done
    [ -n "$KILLED" ] && break
    sleep 0.005
done
job_done "$JOB7"
psql_avo "SELECT result FROM evaluations WHERE job_id = $JOB7 AND result IS NOT NULL ORDER BY id" >"$T/l.txt"
jq -c '{outcome, served}' "$T/l.txt" | sed 's/^/# (l) /'
check "(l) the first job's checker was kept (${KEPT:-none}), the second job's first one killed (${KILLED:-none})" \
    bash -c '[ "$(wc -w <<<"$0")" = 1 ] && [ -n "$1" ]' "$KEPT" "$KILLED"
check "(l) the worker closed the other kept checker and ran the evaluation once more" \
    grep -q "a fresh checker ended without an answer (signal 9) beside other kept checkers: they are closed, the evaluation once more" "$T/worker.log"
check "(l) the kept one is gone" bash -c '! kill -0 $0 2>/dev/null' "${KEPT:-0}"
check "(l) the evaluation: ok, on a checker of its own, not called the candidate's crash" \
    jqt -s 'length == 1 and .[0].outcome == "ok" and .[0].served == {"evaluation": 1, "kept": false}' "$T/l.txt"
kill -TERM "$WORKER_PID"
wait_for 30 "! kill -0 $WORKER_PID 2>/dev/null"
[ "$FAILS" -eq 0 ]
