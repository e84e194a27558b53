/* An agent step's life cycle and its one state (agent_internal.h): the
 * state's checks and moves, the setup chain before the first turn (the
 * row, the head, the lineage, the supervisor), the end (its row, its held
 * attempts released, the failure rule) and the step's memory. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "avo_log.h"
#include "pin.h"

/* The failure rule's defaults, for jobs stored before the spec carried
 * them (avo_jobspec.c fills them at submission). */
#define DEFAULT_FAILED_STEPS 3
#define DEFAULT_BACKOFF_S 2
#define DEFAULT_BACKOFF_MAX_S 60

/* ---- the state -------------------------------------------------------------- */

static const char *const state_names[AGENT_NSTATES] = {
    [AGENT_STARTING] = "starting", [AGENT_SUPERVISING] = "supervising",
    [AGENT_TURN] = "turn",         [AGENT_COMPACTING] = "compacting",
    [AGENT_TOOLS] = "tools",       [AGENT_ENDED] = "ended",
};

/* The moves agent_internal.h draws: from each state, the states it may go to. */
static const unsigned moves[AGENT_NSTATES] = {
    [AGENT_STARTING] = AGENT_IN(AGENT_SUPERVISING) | AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_ENDED),
    [AGENT_SUPERVISING] = AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_ENDED),
    [AGENT_TURN] = AGENT_IN(AGENT_TOOLS) | AGENT_IN(AGENT_COMPACTING) | AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_ENDED),
    [AGENT_COMPACTING] = AGENT_IN(AGENT_TOOLS) | AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_ENDED),
    [AGENT_TOOLS] = AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_ENDED),
    [AGENT_ENDED] = 0,
};

const char *agent_state_name(agent_state st)
{
    return st < AGENT_NSTATES ? state_names[st] : "invalid";
}

/* A broken invariant of one step: logged and refused, so the daemon and
 * the other steps go on; a strict build stops at once, where it is seen. */
static void state_bug(step *s, const char *where, const char *what)
{
    avo_err("agent", "job %lld island %d: step %lld: %s: %s (a bug; refused)", s->job, s->island, s->id, where, what);
#ifdef AVO_STRICT_STATES
    abort();
#endif
}

int agent_expect(step *s, unsigned allowed, const char *where)
{
    if (s->state < AGENT_NSTATES && (allowed & AGENT_IN(s->state)))
        return s->state != AGENT_ENDED;
    char what[160];
    snprintf(what, sizeof what, "called in state %s", agent_state_name(s->state));
    state_bug(s, where, what);
    return 0;
}

int agent_arrive(step *s, unsigned allowed, const char *where)
{
    if (agent_settle(s))
        return 0; /* ended (perhaps freed): what came back was recorded by the caller, nothing more */
    return agent_expect(s, allowed, where);
}

int agent_move(step *s, agent_state to, const char *where)
{
    if (s->state < AGENT_NSTATES && to < AGENT_NSTATES && (moves[s->state] & AGENT_IN(to))) {
        s->state = to;
        return 0;
    }
    char what[160];
    snprintf(what, sizeof what, "no move from %s to %s", agent_state_name(s->state), agent_state_name(to));
    state_bug(s, where, what);
    return -EPROTO;
}

/* ---- lifetime ------------------------------------------------------------- */

static void step_free(step *s)
{
    avo_agent *a = s->a;
    avo_list_remove(&s->link);
    if (s->have_prob)
        avo_problem_free(&s->prob);
    free(s->head_src);
    free(s->lineage);
    free(s->directions);
    json_decref(s->sup_conv);
    json_decref(s->cmp_conv);
    avo_agenttools_ws_free(&s->ws);
    json_decref(s->conv);
    json_decref(s->tools);
    json_decref(s->calls);
    memset(s->key, 0, sizeof s->key);
    free(s);
    if (a->stopping && !a->in_stop && avo_list_empty(&a->steps)) {
        free(a->prov);
        free(a->jobs);
        free(a);
    }
}

/* Called whenever something in flight comes back: an ended step goes once
 * nothing refers to it any more. */
int agent_settle(step *s)
{
    s->pending--;
    const int ended = s->state == AGENT_ENDED;
    if (ended && s->pending == 0)
        step_free(s);
    return ended;
}

int agent_query(step *s, const char *sql, int n, const char *const *params, avo_db_cb cb)
{
    s->pending++;
    if (avo_db_query(s->a->db, sql, n, params, cb, s) < 0) {
        s->pending--;
        return -EIO;
    }
    return 0;
}

/* Any state: these queries are bookkeeping, not a move of the step. */
void agent_on_ignored(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    (void)res;
    if (err)
        avo_warn("agent", "job %lld: %s", s->job, err);
    agent_settle(s);
}

void agent_fail_step(step *s, const char *reason)
{
    s->failed = 1;
    agent_end_step(s, "ended", reason);
}

/* ---- start and end ------------------------------------------------------------ */

static void on_released(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    (void)res;
    if (err)
        avo_warn("agent", "job %lld: releasing the step's attempts: %s", s->job, err);
    AGENT_EXPECT(s, AGENT_IN(AGENT_ENDED)); /* only logs: what was in flight is settled in any state */
    avo_agent *a = s->a;
    agent_settle(s);
    if (!a->stopping && a->kick)
        a->kick(a->kick_arg);
}

static void on_timer_closed(uv_handle_t *h)
{
    AGENT_EXPECT((step *)h->data, AGENT_IN(AGENT_ENDED));
    agent_settle(h->data);
}

void agent_end_step(step *s, const char *state, const char *reason)
{
    if (s->state == AGENT_ENDED)
        return;
    if (AGENT_MOVE(s, AGENT_ENDED) < 0)
        return;
    /* Held until the end is recorded: a cancel below may run a callback at
     * once, which must find the step ended but not freed. */
    s->pending++;
    avo_agent *a = s->a;
    avo_info("agent", "job %lld island %d: step %lld %s after %d turns, %d evaluations, %lld tokens: %s", s->job,
             s->island, s->id, state, s->turns, s->evals, s->tokens, reason);
    if (s->call)
        avo_llmcall_cancel(s->call);
    if (s->timer_open) {
        uv_timer_stop(&s->timer);
        s->pending++;
        uv_close((uv_handle_t *)&s->timer, on_timer_closed);
        s->timer_open = 0;
    }
    char sid[32], job[32], isl[16];
    snprintf(sid, sizeof sid, "%lld", s->id);
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    if (!a->stopping) {
        /* the row, and its microbenchmarks nobody waits for any more */
        if (s->id > 0)
            agent_query(s, "SELECT avo_agent_step_end($1, $2, $3)", 3, (const char *const[]){sid, state, reason},
                        agent_on_ignored);
        /* The attempts go to the engine now (sql/025_agent_states.sql). */
        agent_query(s, "SELECT avo_agent_release($1, $2::int)", 2, (const char *const[]){job, isl}, on_released);
        agent_count_failure(s, reason);
    }
    agent_settle(s);
}

/* ---- before the first turn ----------------------------------------------------- */

static const char supervisor_prompt[] =
    "You supervise avo, an evolutionary search in which an LLM agent edits a kernel to make it faster, one step at "
    "a time. The search has stalled. From the trajectory below, give the next step two to five concrete "
    "directions: what to try next, what to stop trying, and why. Plain text, at most 200 words.";

static void on_supervised(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts)
{
    step *s = arg;
    /* the transcript row holds the supervisor's own request, whole */
    /* An answer after the step's end is recorded and nothing more: there is
     * no step to direct. */
    if (!agent_answered(s, s->sup_conv, 0, rc, reply, reason, attempts, AGENT_IN(AGENT_SUPERVISING), __func__))
        return;
    json_decref(s->sup_conv);
    s->sup_conv = NULL;
    const char *text = rc == 0 ? json_string_value(json_object_get(reply->message, "text")) : NULL;
    if (text && *text) {
        s->directions = strdup(text);
        s->tokens += reply->in_tokens + reply->out_tokens;
        char job[32];
        snprintf(job, sizeof job, "%lld", s->job);
        json_t *d = json_pack("{s:I,s:i,s:s}", "step", (json_int_t)s->id, "island", s->island, "directions", text);
        char *dj = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        if (dj)
            agent_query(s, "SELECT avo_event($1, 'agent_supervised', $2::jsonb)", 2, (const char *const[]){job, dj},
                        agent_on_ignored);
        free(dj);
        avo_info("agent", "job %lld island %d: the supervisor intervened before step %lld", s->job, s->island, s->id);
    } else {
        /* the step goes ahead without directions; the reason is in llm_calls */
        avo_warn("agent", "job %lld: the supervisor gave no directions: %s", s->job, rc ? reason : "an empty answer");
    }
    agent_begin(s);
}

/* Should a supervisor review the trajectory before this step? After every
 * supervise_after steps in a row without a commit, every
 * supervise_failures failed evaluations in a row, or when the last step
 * kept evaluating sources already evaluated (a loop of the same edits). */
static void on_supervise_check(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_STARTING)))
        return;
    if (err || PQntuples(res) != 1) {
        agent_begin(s);
        return;
    }
    long barren = atol(PQgetvalue(res, 0, 0)), failed = atol(PQgetvalue(res, 0, 1)),
         repeats = atol(PQgetvalue(res, 0, 2));
    char why[200] = "";
    if (barren > 0 && barren % s->supervise_after == 0)
        snprintf(why, sizeof why, "%ld steps in a row ended without a commit", barren);
    else if (failed > 0 && failed % s->supervise_failures == 0)
        snprintf(why, sizeof why, "the last %ld evaluations failed", failed);
    else if (repeats >= 2)
        snprintf(why, sizeof why, "the last step evaluated %ld sources that had been evaluated before", repeats);
    if (!why[0]) {
        agent_begin(s);
        return;
    }
    char *user = NULL;
    if (asprintf(&user,
                 "Problem %s. Why you are called: %s.\n\nRecent steps (newest first):\n%s\n\nLineage "
                 "(newest first):\n%s",
                 s->prob.name, why, PQgetvalue(res, 0, 3), s->lineage ? s->lineage : "{}") < 0 ||
        !(s->sup_conv = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "text", supervisor_prompt, "role", "user",
                                  "text", user))) {
        free(user);
        agent_begin(s);
        return;
    }
    free(user);
    char e[400];
    if (AGENT_MOVE(s, AGENT_SUPERVISING) < 0)
        return;
    if (agent_call_provider(s, s->sup_conv, NULL, on_supervised, e, sizeof e) < 0)
        agent_begin(s);
}

static void on_first_lineage(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_STARTING)))
        return;
    s->lineage = strdup(!err && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) ? PQgetvalue(res, 0, 0) : "{}");
    char job[32], sid[32];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(sid, sizeof sid, "%lld", s->id);
    if (agent_query(
            s,
            "SELECT (SELECT count(*) FROM agent_steps WHERE job_id = $1 AND id < $2 AND state <> 'committed' "
            "AND id > COALESCE((SELECT max(id) FROM agent_steps WHERE job_id = $1 AND state = 'committed'), 0)), "
            "(SELECT count(*) FROM candidates WHERE job_id = $1 AND operator = 'agent' AND outcome IS NOT NULL "
            "AND outcome <> 'ok' AND id > COALESCE((SELECT max(id) FROM candidates WHERE job_id = $1 "
            "AND operator = 'agent' AND outcome = 'ok'), 0)), "
            "COALESCE((SELECT repeats FROM agent_steps WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT 1), 0), "
            "COALESCE((SELECT jsonb_pretty(jsonb_agg(jsonb_build_object('step', id, 'state', state, 'reason', "
            "reason, 'evaluations', evaluations) ORDER BY id DESC)) FROM (SELECT * FROM agent_steps "
            "WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT 6) x), '[]')",
            2, (const char *const[]){job, sid}, on_supervise_check) < 0)
        agent_begin(s);
}

static void on_head(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_STARTING)))
        return;
    if (err || PQntuples(res) != 1) {
        agent_end_step(s, "ended", err ? err : "the island's head could not be read");
        return;
    }
    s->head_src = strdup(PQgetvalue(res, 0, 0));
    char msg[128];
    if (!s->head_src || avo_agenttools_ws_write(&s->ws, s->head_src, msg, sizeof msg) < 0) {
        agent_end_step(s, "ended", "out of memory");
        return;
    }
    s->ws.version = 0;
    snprintf(s->head_score, sizeof s->head_score, "%s", PQgetvalue(res, 0, 1));
    char job[32], isl[16];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    if (agent_query(s, agent_lineage_sql, 3, (const char *const[]){job, isl, "10"}, on_first_lineage) < 0)
        agent_end_step(s, "ended", "the database is unavailable");
}

static void on_inserted(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (!AGENT_ARRIVE(s, AGENT_IN(AGENT_STARTING)))
        return;
    if (err || PQntuples(res) != 1) {
        agent_end_step(s, "ended", err ? err : "the step could not be recorded");
        return;
    }
    s->id = atoll(PQgetvalue(res, 0, 0));
    if (s->setup_error[0]) {
        agent_fail_step(s, s->setup_error);
        return;
    }
    char head[32];
    snprintf(head, sizeof head, "%lld", s->head);
    agent_query(s,
                "SELECT s.body, COALESCE(c.aggregate, 0) FROM candidates c JOIN sources s ON s.sha256 = c.sha256 "
                "WHERE c.id = $1",
                1, (const char *const[]){head}, on_head);
}

static void setup(step *s, json_t *snap, const char *problem_json)
{
    avo_agent *a = s->a;
    json_t *spec = json_object_get(snap, "spec"), *ag = json_object_get(spec, "agent");
    const char *pname = json_string_value(json_object_get(ag, "provider"));
    const char *problem = json_string_value(json_object_get(snap, "problem"));
    const char *seed_name = json_string_value(json_object_get(json_object_get(spec, "seed"), "name"));
    char dir[PATH_MAX], err[512];
    s->max_turns = (int)json_integer_value(json_object_get(ag, "max_turns"));
    s->max_tokens = json_integer_value(json_object_get(ag, "step_tokens"));
    if (s->max_turns <= 0)
        s->max_turns = 40;
    if (s->max_tokens <= 0)
        s->max_tokens = 500000;
    s->supervise_after = (int)json_integer_value(json_object_get(ag, "supervise_after"));
    s->supervise_failures = (int)json_integer_value(json_object_get(ag, "supervise_failures"));
    if (s->supervise_after <= 0)
        s->supervise_after = 3;
    if (s->supervise_failures <= 0)
        s->supervise_failures = 4;
    json_t *v;
    s->failed_steps = (v = json_object_get(ag, "failed_steps")) ? (int)json_integer_value(v) : DEFAULT_FAILED_STEPS;
    s->backoff_s = (v = json_object_get(ag, "backoff_s")) ? (int)json_integer_value(v) : DEFAULT_BACKOFF_S;
    s->backoff_max_s = (v = json_object_get(ag, "backoff_max_s")) ? (int)json_integer_value(v) : DEFAULT_BACKOFF_MAX_S;
    if (s->failed_steps <= 0)
        s->failed_steps = DEFAULT_FAILED_STEPS;
    avo_commit_params_from_spec(spec, &s->cp);
    snprintf(s->target, sizeof s->target, "%s",
             json_string_value(json_object_get(snap, "target")) ? json_string_value(json_object_get(snap, "target"))
                                                                : "cpu");
    for (int i = 0; i < a->nprov; i++)
        if (pname && !strcmp(a->prov[i].name, pname)) {
            s->pvc = a->prov[i];
            s->pv = &s->pvc;
        }
    if (!s->pv) {
        snprintf(s->setup_error, sizeof s->setup_error, "no provider '%s' is configured in avod", pname ? pname : "");
        return;
    }
    if (avo_llm_load_key(s->pv, s->key, sizeof s->key, err, sizeof err) < 0) {
        snprintf(s->setup_error, sizeof s->setup_error, "provider %s: %s", s->pv->name, err);
        return;
    }
    if (!problem || avo_problem_resolve(a->kernels_dir, problem, dir, sizeof dir, err, sizeof err) < 0 ||
        (problem_json ? avo_pin_load(&s->prob, dir, problem_json, seed_name, err, sizeof err)
                      : avo_problem_load(&s->prob, dir, err, sizeof err)) < 0) {
        snprintf(s->setup_error, sizeof s->setup_error, "problem '%s': %s", problem ? problem : "?", err);
        return;
    }
    s->have_prob = 1;
    if (!problem_json && avo_problem_use_seed(&s->prob, seed_name, err, sizeof err) < 0) {
        snprintf(s->setup_error, sizeof s->setup_error, "%s", err);
        return;
    }
    if (!(s->conv = json_array()) || !(s->tools = avo_agenttools_schema()))
        snprintf(s->setup_error, sizeof s->setup_error, "out of memory");
}

/* Results of the job the engine has not applied yet: the last step's
 * commit may be among them, and the next step must start from the head
 * that commit makes (the engine's next pass, right after it applies them,
 * comes back here). Any island's, not only the step's own: a commit on
 * one island can migrate its best into another's head. */

int agent_step_start(avo_agent *a, json_t *snap, const char *problem_json, long long job, int island, long long head)
{
    step *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->a = a;
    s->job = job;
    s->island = island;
    s->head = head;
    s->state = AGENT_STARTING;
    s->timer.data = s;
    uv_timer_init(a->loop, &s->timer);
    s->timer_open = 1;
    avo_list_push(&a->steps, &s->link);
    setup(s, snap, problem_json);
    char jb[32], kb[16];
    snprintf(jb, sizeof jb, "%lld", job);
    snprintf(kb, sizeof kb, "%d", island);
    if (agent_query(s, "SELECT avo_agent_step_start($1, $2::int)", 2, (const char *const[]){jb, kb}, on_inserted) < 0)
        agent_end_step(s, "ended", "the database is unavailable");
    else
        avo_info("agent", "job %lld island %d: step starts from candidate %lld", job, island, head);
    return 0;
}
