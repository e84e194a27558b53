/* The agent operator's public face (agent.h): starting and stopping it,
 * starting steps for the engine, pruning and stopping them with their
 * jobs, the providers, and the per-job ledger (budgets held and spent, the
 * failure rule's streak) that every island's steps share. A step itself
 * lives in agentstep.c (life cycle and state), agentturn.c (the
 * conversation) and agentexec.c (the tools). */
#include "agent.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "avo_log.h"
#include "avo_paths.h"

/* ---- the job's ledger and failure rule ---------------------------------------- */

job_state *agent_job_find(avo_agent *a, long long job, int create)
{
    for (int i = 0; i < a->njobs; i++)
        if (a->jobs[i].job == job)
            return &a->jobs[i];
    if (!create)
        return NULL;
    job_state *n = realloc(a->jobs, (size_t)(a->njobs + 1) * sizeof *n);
    if (!n)
        return NULL;
    a->jobs = n;
    memset(&n[a->njobs], 0, sizeof *n);
    n[a->njobs].job = job;
    return &n[a->njobs++];
}

/* The snapshot's totals are those recorded; this avod's own count may be
 * ahead of a snapshot read before its last answers were stored. */
static void job_sync(job_state *js, json_t *snap)
{
    json_t *b = json_object_get(json_object_get(snap, "spec"), "budget");
    const long long t = json_integer_value(json_object_get(snap, "tokens"));
    const double c = json_number_value(json_object_get(snap, "cost_usd"));
    if (t > js->spent_tokens)
        js->spent_tokens = t;
    if (c > js->spent_cost)
        js->spent_cost = c;
    js->budget_tokens = json_number_value(json_object_get(b, "tokens"));
    js->budget_cost = json_number_value(json_object_get(b, "cost_usd"));
}

void agent_finish_job(step *s, const char *state, const char *reason, json_t *events)
{
    char job[32];
    snprintf(job, sizeof job, "%lld", s->job);
    json_t *d = json_pack("{s:{s:s,s:s},s:o}", "finish", "state", state, "reason", reason, "events",
                          events ? events : json_array());
    char *dj = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (dj)
        agent_query(s, "SELECT avo_job_apply($1, $2::jsonb)", 2, (const char *const[]){job, dj}, agent_on_ignored);
    free(dj);
}

/* A step that failed adds to the job's streak: the next step waits
 * backoff_s, doubled for each further failure up to backoff_max_s, and
 * failed_steps in a row fail the job. Any other end clears the streak. */
void agent_count_failure(step *s, const char *reason)
{
    job_state *js = agent_job_find(s->a, s->job, 1);
    if (!js)
        return;
    if (!s->failed) {
        js->failed = 0;
        return;
    }
    if (++js->failed >= s->failed_steps) {
        char why[900];
        snprintf(why, sizeof why, "agent: %d steps in a row failed (provider errors or unusable answers); the last: %s",
                 js->failed, reason);
        agent_finish_job(s, "failed", why, NULL);
        js->failed = 0;
        return;
    }
    double wait = ldexp(s->backoff_s, js->failed - 1);
    if (wait > s->backoff_max_s)
        wait = s->backoff_max_s;
    js->not_before = uv_now(s->a->loop) + (uint64_t)(wait * 1000);
    avo_warn("agent", "job %lld: %d failed step%s in a row (of %d allowed); the next starts in %.0f s", s->job,
             js->failed, js->failed == 1 ? "" : "s", s->failed_steps, wait);
}

/* The request in flight is answered (or not): what it held goes back, what
 * it used is spent. */
void agent_release_hold(step *s, const avo_llm_reply *reply)
{
    job_state *js = agent_job_find(s->a, s->job, 0);
    if (js) {
        js->held_tokens -= s->held_tokens;
        js->held_cost -= s->held_cost;
        if (reply) {
            js->spent_tokens += reply->in_tokens + reply->out_tokens;
            js->spent_cost += reply->cost_usd;
        }
    }
    s->held_tokens = 0;
    s->held_cost = 0;
}

static int results_waiting(json_t *snap)
{
    return json_array_size(json_object_get(snap, "finished")) > 0;
}

void avo_agent_ensure(avo_agent *a, json_t *snap, const char *problem_json)
{
    if (!a || a->stopping)
        return;
    const long long job = json_integer_value(json_object_get(snap, "id"));
    const char *state = json_string_value(json_object_get(snap, "state"));
    json_t *islands = json_object_get(snap, "islands");
    if (!state || strcmp(state, "running") != 0 || json_integer_value(json_object_get(snap, "best_candidate")) <= 0 ||
        json_integer_value(json_object_get(snap, "total")) >= json_integer_value(json_object_get(snap, "budget")))
        return;
    job_state *js = agent_job_find(a, job, 1);
    if (js)
        job_sync(js, snap);
    if (js && uv_now(a->loop) < js->not_before)
        return; /* backing off after failed steps; a later pass starts the next */
    size_t i;
    json_t *isl;
    json_array_foreach(islands, i, isl)
    {
        const int k = (int)json_integer_value(json_object_get(isl, "idx"));
        int busy = 0;
        for (step *s = a->steps; s; s = s->next)
            busy |= s->job == job && s->island == k;
        if (busy || json_integer_value(json_object_get(isl, "head")) <= 0 || results_waiting(snap))
            continue;
        if (agent_step_start(a, snap, problem_json, job, k, json_integer_value(json_object_get(isl, "head"))) < 0)
            return;
    }
}

void avo_agent_stop_job(avo_agent *a, long long job)
{
    if (!a)
        return;
    for (step *s = a->steps, *n; s; s = n) {
        n = s->next;
        if (s->job == job && s->state != AGENT_ENDED)
            agent_end_step(s, "ended", "the job ended");
    }
}

void avo_agent_prune(avo_agent *a, json_t *active)
{
    if (!a || !json_is_array(active))
        return;
    for (step *s = a->steps, *n; s; s = n) {
        n = s->next;
        int live = 0;
        size_t i;
        json_t *v;
        json_array_foreach(active, i, v) live |= json_integer_value(v) == s->job;
        if (!live && s->state != AGENT_ENDED)
            agent_end_step(s, "ended", "the job is no longer running");
    }
    /* the ledgers of ended jobs go once no step of theirs is left */
    for (int k = a->njobs - 1; k >= 0; k--) {
        int keep = 0;
        size_t i;
        json_t *v;
        json_array_foreach(active, i, v) keep |= json_integer_value(v) == a->jobs[k].job;
        for (step *s = a->steps; s && !keep; s = s->next)
            keep = s->job == a->jobs[k].job;
        if (!keep)
            a->jobs[k] = a->jobs[--a->njobs];
    }
}

int avo_agent_provider_check(const avo_agent *a, const char *name, char *err, size_t errlen)
{
    char names[512], why[600];
    size_t n = 0;
    names[0] = 0;
    for (int i = 0; a && i < a->nprov; i++) {
        if (name && !strcmp(a->prov[i].name, name)) {
            if (avo_llm_key_check(&a->prov[i], why, sizeof why) == 0)
                return 0;
            snprintf(err, errlen, "provider '%s' cannot be used: %s", name, why);
            return -EACCES;
        }
        if (n < sizeof names)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", a->prov[i].name);
    }
    snprintf(err, errlen, "no provider '%s' is configured in avod (%s%s)", name ? name : "",
             names[0] ? "configured: " : "start avod with --providers FILE; docs/agent.md", names);
    return -ENOENT;
}

static void on_cleared(void *arg, PGresult *res, const char *err)
{
    (void)arg;
    (void)res;
    if (err)
        avo_warn("agent", "clearing steps of a previous avod: %s", err);
}

int avo_agent_set_providers(avo_agent *a, const avo_llm_provider *providers, int nproviders)
{
    avo_llm_provider *copy = NULL;
    if (nproviders > 0 && !(copy = calloc((size_t)nproviders, sizeof *copy)))
        return -ENOMEM;
    if (nproviders > 0)
        memcpy(copy, providers, (size_t)nproviders * sizeof *copy);
    free(a->prov);
    a->prov = copy;
    a->nprov = nproviders > 0 ? nproviders : 0;
    return 0;
}

int avo_agent_start(avo_agent **out, uv_loop_t *loop, avo_db *db, const char *kernels_dir, const char *home,
                    const avo_llm_provider *providers, int nproviders, void (*kick)(void *), void *kick_arg)
{
    avo_agent *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->db = db;
    a->kick = kick;
    a->kick_arg = kick_arg;
    snprintf(a->kernels_dir, sizeof a->kernels_dir, "%s", kernels_dir);
    avo_paths_compile_check(home, a->compile_cache, sizeof a->compile_cache, a->worker_bin, sizeof a->worker_bin);
    if (nproviders > 0) {
        if (!(a->prov = calloc((size_t)nproviders, sizeof *a->prov))) {
            free(a);
            return -ENOMEM;
        }
        memcpy(a->prov, providers, (size_t)nproviders * sizeof *a->prov);
        a->nprov = nproviders;
    }
    int rc = avo_llmhttp_open(&a->http, loop);
    if (rc < 0) {
        free(a->prov);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

int avo_agent_db_up(avo_agent *a)
{
    /* Only the first connection of this process: a reconnect finds steps
     * still alive here, whose rows must stay running. */
    if (a->recovered)
        return 0;
    /* Steps do not survive a restart (their conversation lived here): what
     * was running is recorded as interrupted and its attempts go to the
     * engine; new steps start from the islands' heads. Queued before the
     * engine's first pass on the same connection, so they run first. */
    int rc = avo_db_query(a->db, "SELECT avo_agent_recover()", 0, NULL, on_cleared, NULL);
    if (rc < 0) {
        avo_warn("agent", "cannot record the steps a restart interrupted: %s", strerror(-rc));
        return rc;
    }
    a->recovered = 1;
    return 0;
}

void avo_agent_stop(avo_agent *a)
{
    if (!a)
        return;
    a->stopping = 1;
    /* Ending a step or closing the transport runs callbacks that may free
     * the last step; the agent itself is freed here then, or by the last
     * step's close later, never both. */
    a->in_stop = 1;
    for (step *s = a->steps, *n; s; s = n) {
        n = s->next;
        agent_end_step(s, "interrupted", "avod is stopping");
    }
    avo_llmhttp_close(a->http);
    a->in_stop = 0;
    if (!a->steps) {
        free(a->prov);
        free(a->jobs);
        free(a);
    }
}
