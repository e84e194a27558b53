/* An agent step's tools with I/O: each tool's handler (agenttools.c's table
 * names them beside their declarations), run one call at a time, answering
 * from the database, the sandboxed compile beside avod, or a worker through
 * the queues (evaluations, programs, profiles), waited for by polling. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "avo_hash.h"
#include "seedcheck.h"
#include "srcdiff.h"

#define POLL_MS 250
/* How long a microbenchmark may wait for a worker and run (compile + run
 * bounds on the worker are 120 s + AVO_PROGRAM_TIMEOUT_S). */
#define PROGRAM_WAIT_S 300
/* How long the profile tool waits for its task (a CUDA profile replays the
 * kernels for seconds per configuration) before telling the agent to ask
 * again later. */
#define PROFILE_WAIT_S 300

static void tool_result(step *s, const char *text, int is_error)
{
    json_array_append_new(s->conv, json_pack("{s:s,s:s,s:s,s:b}", "role", "tool", "tool_call_id",
                                             s->call_id ? s->call_id : "", "text", text, "is_error", is_error));
    agent_run_next_tool(s);
}

static void tool_errorf(step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tool_errorf(step *s, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tool_result(s, buf, 1);
}

/* The lineage as the agent reads it ($1 job, $2 island, $3 how many): the
 * island's best, the committed versions with their notes, and the failed
 * attempts' one-line summaries, newest first. The first message of a step
 * carries it too, so each step starts from what earlier steps learnt. */
const char agent_lineage_sql[] =
    "SELECT jsonb_pretty(jsonb_build_object("
    "'island_best', (SELECT jsonb_build_object('candidate', best_candidate, 'aggregate', best) "
    "FROM islands WHERE job_id = $1 AND idx = $2::int), "
    "'committed', COALESCE((SELECT jsonb_agg(jsonb_build_object('candidate', id, 'island', island, "
    "'parent', parent_id, 'aggregate', aggregate, 'operator', operator, 'notes', notes) ORDER BY id DESC) "
    "FROM (SELECT * FROM candidates WHERE job_id = $1 AND committed ORDER BY id DESC LIMIT $3::int) x), "
    "'[]'), "
    "'failed_attempts', COALESCE((SELECT jsonb_agg(jsonb_build_object('candidate', c.id, 'outcome', "
    "c.outcome, 'aggregate', c.aggregate, 'detail', left(e.result->>'detail', 200)) ORDER BY c.id DESC) "
    "FROM (SELECT * FROM candidates WHERE job_id = $1 AND NOT committed AND outcome IS NOT NULL "
    "ORDER BY id DESC LIMIT $3::int) c LEFT JOIN LATERAL (SELECT result FROM evaluations "
    "WHERE candidate_id = c.id AND purpose = 'search' ORDER BY id DESC LIMIT 1) e ON true), '[]')))";

/* A query whose one JSON (or text) column is the tool's answer; NULL means
 * not found, with the message given. */
typedef struct {
    step *s;
    char missing[160];
} answer_q;

static void on_answer(void *arg, PGresult *res, const char *err)
{
    answer_q *q = arg;
    step *s = q->s;
    char missing[160];
    snprintf(missing, sizeof missing, "%s", q->missing);
    free(q);
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    if (err)
        tool_errorf(s, "the database failed: %s; try again", err);
    else if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0))
        tool_result(s, missing, 1);
    else
        tool_result(s, PQgetvalue(res, 0, 0), 0);
}

static void answer(step *s, const char *sql, int n, const char *const *params, const char *missing)
{
    answer_q *q = calloc(1, sizeof *q);
    if (!q) {
        tool_errorf(s, "out of memory");
        return;
    }
    q->s = s;
    snprintf(q->missing, sizeof q->missing, "%s", missing);
    s->pending++;
    if (avo_db_query(s->a->db, sql, n, params, on_answer, q) < 0) {
        s->pending--;
        free(q);
        tool_errorf(s, "the database is unavailable; try again");
    }
}

static void poll_eval(uv_timer_t *t);

static void on_eval_row(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    if (err || PQntuples(res) != 1) {
        uv_timer_start(&s->timer, poll_eval, POLL_MS, 0);
        return;
    }
    const char *state = PQgetvalue(res, 0, 0);
    if (strcmp(state, "done") != 0 && strcmp(state, "failed") != 0 && strcmp(state, "cancelled") != 0) {
        uv_timer_start(&s->timer, poll_eval, POLL_MS, 0);
        return;
    }
    s->last_eval = s->wait_eval;
    s->wait_eval = 0;
    json_t *r = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
    int failed = 1;
    char *buf = avo_agenttools_eval_text(&s->cp, r, state, strtoll(PQgetvalue(res, 0, 3), NULL, 10),
                                         atof(PQgetvalue(res, 0, 2)), strtoll(PQgetvalue(res, 0, 4), NULL, 10),
                                         &failed);
    json_decref(r);
    if (!buf) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, buf, failed);
    free(buf);
}

static void poll_eval(uv_timer_t *t)
{
    step *s = t->data;
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_TOOLS)) || !s->wait_eval)
        return;
    char e[32], job[32], isl[16];
    snprintf(e, sizeof e, "%lld", s->wait_eval);
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    const char *p[] = {e, job, isl};
    if (agent_query(s,
                    "SELECT e.state, COALESCE(e.result, '{}'::jsonb)::text, "
                    "COALESCE((SELECT best FROM islands WHERE job_id = $2 AND idx = $3::int), 0), e.candidate_id, "
                    "COALESCE((SELECT best_candidate FROM islands WHERE job_id = $2 AND idx = $3::int), 0) "
                    "FROM evaluations e WHERE e.id = $1",
                    3, p, on_eval_row) < 0)
        uv_timer_start(&s->timer, poll_eval, POLL_MS * 4, 0);
}

static void on_proposed(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    json_t *r = !err && PQntuples(res) == 1 ? json_loads(PQgetvalue(res, 0, 0), 0, NULL) : NULL;
    if (!r) {
        tool_errorf(s, "the evaluation could not be queued: %s; try again", err ? err : "no answer");
        return;
    }
    const char *e = json_string_value(json_object_get(r, "error"));
    if (e) {
        tool_errorf(s, "evaluate: %s; commit an evaluated version or give_up", e);
        json_decref(r);
        return;
    }
    s->wait_eval = json_integer_value(json_object_get(r, "evaluation"));
    const int fresh = json_is_true(json_object_get(r, "fresh"));
    if (fresh)
        s->evals++;
    else
        s->repeats++;
    char sid[32];
    snprintf(sid, sizeof sid, "%lld", s->id);
    agent_query(s, "SELECT avo_agent_step_evaluated($1, $2)", 2, (const char *const[]){sid, fresh ? "true" : "false"},
                agent_on_ignored);
    json_decref(r);
    poll_eval(&s->timer);
}

void agent_tool_evaluate(step *s, json_t *args)
{
    (void)args;
    if (!s->ws.src) {
        tool_errorf(s, "evaluate: there is no working copy; write_source first");
        return;
    }
    char sha[AVO_SHA256_HEX], job[32], isl[16], head[32];
    char *diff = NULL;
    if (avo_hash_sha256_hex(s->ws.src, strlen(s->ws.src), sha) < 0) {
        tool_errorf(s, "out of memory");
        return;
    }
    if (s->head_src && avo_srcdiff(s->head_src, s->prob.seed, s->ws.src, s->prob.seed, &diff) < 0)
        diff = NULL;
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    snprintf(head, sizeof head, "%lld", s->head);
    const char *p[] = {job, isl, head, sha, s->ws.src, diff};
    if (agent_query(s, "SELECT avo_agent_propose($1, $2::int, $3, $4, $5, $6)", 6, p, on_proposed) < 0)
        tool_errorf(s, "the database is unavailable; try again");
    free(diff);
}

static void on_commit_check(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    if (err) {
        tool_errorf(s, "the database failed: %s; try again", err);
        return;
    }
    json_t *call = json_array_get(s->calls, s->next_call - 1);
    json_t *args = json_object_get(call, "arguments");
    long long cand = json_integer_value(json_object_get(args, "candidate"));
    if (PQntuples(res) != 1 || atoll(PQgetvalue(res, 0, 0)) != s->job || strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
        tool_errorf(s,
                    "commit: candidate %lld is not one of this step's evaluated attempts (evaluate returns "
                    "their ids)",
                    cand);
        return;
    }
    if (PQgetisnull(res, 0, 2)) {
        tool_errorf(s, "commit: candidate %lld has no finished evaluation yet", cand);
        return;
    }
    const char *outcome = PQgetvalue(res, 0, 2);
    double agg = atof(PQgetvalue(res, 0, 3)), best = atof(PQgetvalue(res, 0, 4));
    if (strcmp(outcome, "ok") != 0) {
        tool_errorf(s,
                    "commit: candidate %lld failed its evaluation (%s); only a version that passed every check "
                    "can be committed",
                    cand, outcome);
        return;
    }
    json_t *paired = PQgetisnull(res, 0, 5) ? NULL : json_loads(PQgetvalue(res, 0, 5), JSON_DECODE_ANY, NULL);
    avo_commit_verdict v;
    avo_commit_judge(&s->cp, paired, agg, best, strtoll(PQgetvalue(res, 0, 6), NULL, 10), &v);
    json_decref(paired);
    if (!v.commit) {
        char why[1024];
        avo_commit_explain(&s->cp, &v, cand, agg, best, why, sizeof why);
        tool_errorf(s, "commit: %s; improve it or give_up", why);
        return;
    }
    char c[32], why[160];
    snprintf(c, sizeof c, "%lld", cand);
    const char *p[] = {c, json_string_value(json_object_get(args, "notes"))};
    agent_query(s, "SELECT avo_agent_commit_request($1, $2)", 2, p, agent_on_ignored);
    snprintf(why, sizeof why, "committed candidate %lld (%.6g, island best was %.6g)", cand, agg, best);
    agent_end_step(s, "committed", why);
}

void agent_tool_commit(step *s, json_t *args)
{
    char c[32], isl[16];
    snprintf(c, sizeof c, "%lld", (long long)json_integer_value(json_object_get(args, "candidate")));
    snprintf(isl, sizeof isl, "%d", s->island);
    const char *p[] = {c, isl};
    if (agent_query(s,
                    "SELECT c.job_id, c.hold, e.outcome, e.aggregate, "
                    "COALESCE((SELECT best FROM islands WHERE job_id = c.job_id AND idx = $2::int), 0), "
                    "e.result->'paired', "
                    "COALESCE((SELECT best_candidate FROM islands WHERE job_id = c.job_id AND idx = $2::int), 0) "
                    "FROM candidates c LEFT JOIN LATERAL (SELECT outcome, aggregate, result FROM evaluations "
                    "WHERE candidate_id = c.id AND state IN ('done','failed') AND purpose = 'search' "
                    "ORDER BY id DESC LIMIT 1) e ON true "
                    "WHERE c.id = $1",
                    2, p, on_commit_check) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

static void on_compiled(void *arg, int compiled, const char *detail, const char *log, const json_t *disasm)
{
    step *s = arg;
    (void)disasm;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    char *buf = NULL;
    const int policy = compiled == 0 && detail && !strncmp(detail, AVO_SEEDCHECK_POLICY, strlen(AVO_SEEDCHECK_POLICY));
    if (policy)
        detail += strlen(AVO_SEEDCHECK_POLICY);
    if (asprintf(&buf, "%s%s%s%s",
                 compiled > 0    ? "compiles"
                 : policy        ? "is refused by the candidate policy (outcome policy_violation; see the system "
                                   "prompt): "
                 : compiled == 0 ? "does not compile: "
                                 : "could not compile here: ",
                 compiled > 0 ? ""
                 : detail     ? detail
                              : "",
                 log && *log ? "\ncompiler output:\n" : "",
                 log ? (strlen(log) > 6000 ? log + strlen(log) - 6000 : log) : "") < 0) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, buf, compiled <= 0);
    free(buf);
}

static void on_disassembled(void *arg, int compiled, const char *detail, const char *log, const json_t *disasm)
{
    step *s = arg;
    (void)log;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    if (compiled <= 0) {
        tool_errorf(s, "disassemble: the working copy %s%s; compile shows the compiler's messages",
                    compiled == 0 ? "does not compile: " : "could not be compiled here: ", detail ? detail : "");
        return;
    }
    const char *text = json_string_value(json_object_get(disasm, "text"));
    if (!text) {
        const char *why = json_string_value(json_object_get(disasm, "error"));
        tool_errorf(s, "disassemble: %s", why ? why : "the worker returned no disassembly");
        return;
    }
    json_t *args = json_object_get(json_array_get(s->calls, s->next_call - 1), "arguments");
    char *out = NULL, err[600];
    if (avo_agenttools_disasm_filter(text, json_string_value(json_object_get(args, "pattern")),
                                     json_string_value(json_object_get(args, "kernel")), &out, err, sizeof err) < 0) {
        tool_result(s, err, 1);
        return;
    }
    tool_result(s, out, 0);
    free(out);
}

/* compile and disassemble: the worker's sandboxed compile beside avod
 * (`avo-worker eval --compile-only`, nothing of the source runs), which for
 * disassemble also disassembles the object there; avod only reads text. */
static void start_compile(step *s, const char *tool, int disassemble, avo_seedcheck_cb cb)
{
    if (!s->ws.src) {
        tool_errorf(s, "%s: there is no working copy; write_source first", tool);
        return;
    }
    if (!s->a->worker_bin[0]) {
        tool_errorf(s, "%s: avod cannot find avo-worker beside itself; evaluate reports the compiler's messages", tool);
        return;
    }
    s->pending++;
    if (avo_seedcheck_start(s->a->loop, s->a->worker_bin, s->a->compile_cache, s->prob.dir, s->target, s->ws.src,
                            disassemble, cb, s) < 0) {
        s->pending--;
        tool_errorf(s, "%s: the compiler could not be started; evaluate reports the compiler's messages", tool);
    }
}

static void poll_program(uv_timer_t *t);

static void on_program_row(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    const char *state = !err && PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : NULL;
    if (!state || !strcmp(state, "queued") || !strcmp(state, "running")) {
        if (uv_now(s->a->loop) / 1e3 < s->program_deadline) {
            uv_timer_start(&s->timer, poll_program, state ? POLL_MS : POLL_MS * 4, 0);
            return;
        }
        char pid[32];
        snprintf(pid, sizeof pid, "%lld", s->wait_program);
        agent_query(s, "SELECT avo_agent_program_expire($1)", 1, (const char *const[]){pid}, agent_on_ignored);
        s->wait_program = 0;
        tool_errorf(s, "microbenchmark: %s within %d s (are the job's %s workers busy or gone?); go on without it",
                    state && !strcmp(state, "running") ? "it did not finish" : "no worker took it", PROGRAM_WAIT_S,
                    s->target);
        return;
    }
    long long id = s->wait_program;
    s->wait_program = 0;
    json_t *r = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    char *buf = NULL;
    int rc;
    if (outcome && !strcmp(outcome, "compile_error"))
        rc = asprintf(&buf, "microbenchmark %lld does not compile:\n%s", id,
                      json_string_value(json_object_get(r, "compile_log")) ?: "");
    else if (outcome && (!strcmp(outcome, "ran") || !strcmp(outcome, "timeout") || !strcmp(outcome, "crash")))
        rc = asprintf(&buf, "microbenchmark %lld: %s, exit code %lld, signal %lld, %.3f s%s\nstdout:\n%s\nstderr:\n%s",
                      id, outcome, (long long)json_integer_value(json_object_get(r, "exit_code")),
                      (long long)json_integer_value(json_object_get(r, "signal")),
                      json_number_value(json_object_get(r, "wall_s")),
                      !strcmp(outcome, "timeout") ? " (killed at the time limit)" : "",
                      json_string_value(json_object_get(r, "stdout")) ?: "",
                      json_string_value(json_object_get(r, "stderr")) ?: "");
    else
        rc = asprintf(&buf, "microbenchmark %lld did not run: %s", id,
                      json_string_value(json_object_get(r, "detail")) ?: (outcome ? outcome : "no result"));
    const int ran = outcome && !strcmp(outcome, "ran");
    json_decref(r);
    if (rc < 0) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, buf, !ran);
    free(buf);
}

static void poll_program(uv_timer_t *t)
{
    step *s = t->data;
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_TOOLS)) || !s->wait_program)
        return;
    char pid[32];
    snprintf(pid, sizeof pid, "%lld", s->wait_program);
    if (agent_query(s, "SELECT state, COALESCE(result, '{}'::jsonb)::text FROM programs WHERE id = $1", 1,
                    (const char *const[]){pid}, on_program_row) < 0)
        uv_timer_start(&s->timer, poll_program, POLL_MS * 4, 0);
}

static void on_program_queued(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    if (err || PQntuples(res) != 1) {
        tool_errorf(s, "microbenchmark: it could not be queued (%s); try again", err ? err : "no row");
        return;
    }
    s->wait_program = atoll(PQgetvalue(res, 0, 0));
    s->program_deadline = uv_now(s->a->loop) / 1e3 + PROGRAM_WAIT_S;
    poll_program(&s->timer);
}

/* The program runs on a worker of the job's target, in the sandbox, never in
 * avod: it goes through its own queue (sql/007_programs.sql). */
void agent_tool_microbenchmark(step *s, json_t *args)
{
    char job[32], sid[32];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(sid, sizeof sid, "%lld", s->id);
    const char *lang = json_string_value(json_object_get(args, "language"));
    if (!strcmp(lang, "cuda") && strncmp(s->target, "sm_", 3) != 0) {
        tool_errorf(s, "microbenchmark: this job runs on %s workers, which have no GPU; write it in c", s->target);
        return;
    }
    const char *p[] = {job, sid, s->target, lang, json_string_value(json_object_get(args, "source"))};
    if (agent_query(s, "SELECT avo_agent_program_queue($1, $2, $3, $4, $5)", 5, p, on_program_queued) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

static void poll_profile(uv_timer_t *t);

/* The profile task's row: wait while it is queued or running (up to
 * PROFILE_WAIT_S; it stays queued after, and a later call finds it), then
 * its counters in the same words as ever. */
static void on_profile_row(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    const char *state = !err && PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : NULL;
    if (!state || !strcmp(state, "queued") || !strcmp(state, "running")) {
        if (uv_now(s->a->loop) / 1e3 < s->profile_deadline) {
            uv_timer_start(&s->timer, poll_profile, state ? POLL_MS : POLL_MS * 4, 0);
            return;
        }
        tool_errorf(s,
                    "profile: task %lld is still %s after %d s (are the job's %s workers busy or gone?); call "
                    "profile again later for its counters",
                    s->wait_profile, state ? state : "unread", PROFILE_WAIT_S, s->target);
        s->wait_profile = 0;
        return;
    }
    s->wait_profile = 0;
    json_t *r = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
    json_t *args = json_object_get(json_array_get(s->calls, s->next_call - 1), "arguments");
    char *out = NULL, why[900];
    if (!r)
        tool_errorf(s, "profile: its result could not be read; try again");
    else if (avo_agenttools_profile_text(r, atoll(PQgetvalue(res, 0, 2)),
                                         json_string_value(json_object_get(args, "config")), &out, why, sizeof why) < 0)
        tool_result(s, why, 1);
    else
        tool_result(s, out, 0);
    free(out);
    json_decref(r);
}

static void poll_profile(uv_timer_t *t)
{
    step *s = t->data;
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_TOOLS)) || !s->wait_profile)
        return;
    char pid[32];
    snprintf(pid, sizeof pid, "%lld", s->wait_profile);
    if (agent_query(s, "SELECT state, COALESCE(result, '{}'::jsonb)::text, candidate_id FROM profiles WHERE id = $1", 1,
                    (const char *const[]){pid}, on_profile_row) < 0)
        uv_timer_start(&s->timer, poll_profile, POLL_MS * 4, 0);
}

static void on_profile_queued(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    if (err || PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        tool_errorf(s, "profile: it could not be queued (%s); try again", err ? err : "no evaluated candidate");
        return;
    }
    s->wait_profile = atoll(PQgetvalue(res, 0, 0));
    s->profile_deadline = uv_now(s->a->loop) / 1e3 + PROFILE_WAIT_S;
    poll_profile(&s->timer);
}

/* Counters are no part of an evaluation: profile queues a profile task of
 * the step's last evaluated version on a worker of the job's target (or
 * finds the one already queued or done for it) and waits for it, as
 * evaluate and microbenchmark wait for theirs. */
void agent_tool_profile(step *s, json_t *args)
{
    if (!s->last_eval) {
        tool_errorf(s, "profile: nothing has been evaluated in this step yet; evaluate first (the counters are "
                       "read from the version evaluated last)");
        return;
    }
    const char *config = json_string_value(json_object_get(args, "config"));
    char why[700];
    if (config && avo_problem_config_index(&s->prob, config, why, sizeof why) < 0) {
        tool_errorf(s, "profile: config: %s", why);
        return;
    }
    char e[32];
    snprintf(e, sizeof e, "%lld", s->last_eval);
    if (agent_query(s, "SELECT avo_profile_request(candidate_id, $2, 'agent') FROM evaluations WHERE id = $1", 2,
                    (const char *const[]){e, config}, on_profile_queued) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

static void on_diff_sources(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_TOOLS)))
        return;
    json_t *args = json_object_get(json_array_get(s->calls, s->next_call - 1), "arguments");
    const int to_ws = !json_object_get(args, "to");
    if (err || PQntuples(res) != 1 || PQgetisnull(res, 0, 0) || (!to_ws && PQgetisnull(res, 0, 1))) {
        tool_errorf(s, "diff: %s", err ? err : "no such candidate (read_candidate and lineage give ids)");
        return;
    }
    const char *b = to_ws ? s->ws.src : PQgetvalue(res, 0, 1);
    char *d = NULL;
    if (!b || avo_srcdiff(PQgetvalue(res, 0, 0), s->prob.seed, b, s->prob.seed, &d) < 0) {
        tool_errorf(s, "diff: %s", b ? "the diff failed" : "there is no working copy");
        return;
    }
    tool_result(s, d && *d ? d : "(no differences)", 0);
    free(d);
}

/* The tools without a callback of their own: they answer at once, or
 * through answer() or a query of their own. */

void agent_tool_problem(step *s, json_t *args)
{
    (void)args;
    char *t = avo_agenttools_problem_text(&s->prob);
    if (!t) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, t, 0);
    free(t);
}

void agent_tool_write_source(step *s, json_t *args)
{
    char msg[512];
    const int rc = avo_agenttools_ws_write(&s->ws, json_string_value(json_object_get(args, "source")), msg, sizeof msg);
    tool_result(s, msg, rc < 0);
}

void agent_tool_edit_source(step *s, json_t *args)
{
    char msg[512];
    const int rc = avo_agenttools_ws_edit(&s->ws, json_string_value(json_object_get(args, "search")),
                                          json_string_value(json_object_get(args, "replace")), msg, sizeof msg);
    tool_result(s, msg, rc < 0);
}

void agent_tool_read_candidate(step *s, json_t *args)
{
    json_t *c = json_object_get(args, "candidate");
    if (!c) {
        tool_result(s, s->ws.src ? s->ws.src : "(the working copy is empty)", !s->ws.src);
        return;
    }
    char id[32], msg[64];
    snprintf(id, sizeof id, "%lld", (long long)json_integer_value(c));
    snprintf(msg, sizeof msg, "no candidate %s", id);
    answer(s, "SELECT s.body FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $1", 1,
           (const char *const[]){id}, msg);
}

void agent_tool_lineage(step *s, json_t *args)
{
    char job[32], isl[32], lim[32];
    json_t *i = json_object_get(args, "island"), *l = json_object_get(args, "limit");
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%lld", i ? (long long)json_integer_value(i) : (long long)s->island);
    snprintf(lim, sizeof lim, "%lld", l ? (long long)json_integer_value(l) : 20LL);
    answer(s, agent_lineage_sql, 3, (const char *const[]){job, isl, lim}, "no lineage");
}

void agent_tool_search_knowledge(step *s, json_t *args)
{
    char lim[32];
    json_t *l = json_object_get(args, "limit");
    snprintf(lim, sizeof lim, "%lld", l ? (long long)json_integer_value(l) : 8LL);
    answer(s, "SELECT jsonb_pretty(avo_kb_search($1, $2::int))", 2,
           (const char *const[]){json_string_value(json_object_get(args, "query")), lim}, "no hits");
}

void agent_tool_read_knowledge(step *s, json_t *args)
{
    char id[32], msg[128];
    snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(args, "id")));
    snprintf(msg, sizeof msg, "no knowledge-base entry %s (search_knowledge gives the ids)", id);
    answer(s, "SELECT jsonb_pretty(avo_kb_chunk_json($1))", 1, (const char *const[]){id}, msg);
}

void agent_tool_compile(step *s, json_t *args)
{
    (void)args;
    start_compile(s, "compile", 0, on_compiled);
}

void agent_tool_disassemble(step *s, json_t *args)
{
    (void)args;
    start_compile(s, "disassemble", 1, on_disassembled);
}

void agent_tool_diff(step *s, json_t *args)
{
    char from[32], to[32];
    json_t *t = json_object_get(args, "to");
    snprintf(from, sizeof from, "%lld", (long long)json_integer_value(json_object_get(args, "from")));
    snprintf(to, sizeof to, "%lld", t ? (long long)json_integer_value(t) : 0LL);
    if (agent_query(s,
                    "SELECT (SELECT s.body FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $1), "
                    "(SELECT s.body FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $2)",
                    2, (const char *const[]){from, to}, on_diff_sources) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

void agent_tool_give_up(step *s, json_t *args)
{
    char msg[512];
    snprintf(msg, sizeof msg, "gave up: %s", json_string_value(json_object_get(args, "reason")));
    agent_end_step(s, "ended", msg);
}

/* One tool call: its arguments checked against the tool's declaration,
 * then the handler the same table row names. */
static void run_tool(step *s, json_t *call)
{
    const char *name = json_string_value(json_object_get(call, "name"));
    json_t *args = json_object_get(call, "arguments");
    const char *aerr = json_string_value(json_object_get(call, "arguments_error"));
    char err[1024];
    s->call_id = json_string_value(json_object_get(call, "id"));
    if (aerr) {
        tool_errorf(s, "%s: the arguments are not a JSON object (%s); send them again as JSON", name ? name : "?",
                    aerr);
        return;
    }
    if (avo_agenttools_check(name, args, err, sizeof err) < 0) {
        tool_result(s, err, 1);
        return;
    }
    avo_agenttools_fn *run = avo_agenttools_handler(name);
    if (!run) {
        tool_errorf(s, "%s is declared but this avod does not run it; use the other tools", name);
        return;
    }
    run(s, args);
}

void agent_run_next_tool(step *s)
{
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_TOOLS) | AGENT_IN(AGENT_ENDED)))
        return;
    if (s->next_call >= json_array_size(s->calls)) {
        s->nudges = s->empties = 0;
        agent_turn(s);
        return;
    }
    run_tool(s, json_array_get(s->calls, s->next_call++));
}
