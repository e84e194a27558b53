/* The evolution engine's loop: per active job, snapshot, decide (evolve.c), apply (engine.h). */
#include "engine.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "avo_file.h"
#include "avo_hash.h"
#include "avo_log.h"
#include "avo_paths.h"
#include "evolve.h"
#include "pin.h"

/* A problem as a job pinned it (sql/016_pinned_problem.sql), keyed by
 * "PACKAGE-HASH/SEED-NAME": what the key names never changes, so an entry
 * never goes stale, whatever the disk holds now. A job from before the pin
 * (no hash) gets an entry of its own for one decision, read from disk. */
typedef struct {
    char key[AVO_SHA256_HEX + 72];
    avo_problem prob;
    char *seed_src;
    char *problem_json; /* the pinned text (the agent loads it too); NULL: read from disk */
} pinned_problem;

/* Pinned problems kept; the oldest goes first. */
#define PIN_CACHE_MAX 16

struct avo_engine {
    uv_loop_t *loop;
    avo_db *db;
    char kernels_dir[PATH_MAX];
    uv_timer_t tick;
    uv_timer_t soon;
    unsigned interval_ms;
    int busy;
    int again;
    int consumed; /* the step being applied consumes results */
    int stopping;
    json_t *jobs; /* ids for the pass in progress */
    size_t next;
    json_int_t current;
    pinned_problem cache[PIN_CACHE_MAX];
    int ncache;
    int cache_next;   /* the slot to reuse when full */
    avo_agent *agent; /* runs agent jobs' steps; NULL: none */
    int closed;       /* timers closed so far (two to free) */
};

static void pass_next(avo_engine *e);
static void engine_free_if_done(avo_engine *e);

static void pinned_free(pinned_problem *c)
{
    avo_problem_free(&c->prob);
    free(c->seed_src);
    free(c->problem_json);
    memset(c, 0, sizeof *c);
}

/* Load one job's problem into c: from its pinned texts when it has them,
 * else (a job from before the pin) from disk as it is now. */
static int pinned_load(avo_engine *e, pinned_problem *c, const char *name, const char *seed_name,
                       const char *problem_json, const char *seed_text, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    memset(c, 0, sizeof *c);
    if (avo_problem_resolve(e->kernels_dir, name, dir, sizeof dir, err, errlen) < 0)
        return -EINVAL;
    if (problem_json) {
        if (avo_pin_load(&c->prob, dir, problem_json, seed_name, err, errlen) < 0)
            return -EINVAL;
        if (!(c->seed_src = strdup(seed_text)) || !(c->problem_json = strdup(problem_json))) {
            snprintf(err, errlen, "out of memory");
            pinned_free(c);
            return -ENOMEM;
        }
        return 0;
    }
    if (avo_problem_load(&c->prob, dir, err, errlen) < 0)
        return -EINVAL;
    if (avo_problem_use_seed(&c->prob, seed_name, err, errlen) < 0) {
        avo_problem_free(&c->prob);
        return -EINVAL;
    }
    char path[PATH_MAX];
    if (avo_paths_join(path, sizeof path, c->prob.dir, c->prob.seed) < 0) {
        snprintf(err, errlen, "seed path too long: %.200s.../%s", c->prob.dir, c->prob.seed);
        avo_problem_free(&c->prob);
        return -ENAMETOOLONG;
    }
    if (!(c->seed_src = avo_file_read(path, NULL))) {
        snprintf(err, errlen, "%.900s: cannot read the seed", path);
        avo_problem_free(&c->prob);
        return -EIO;
    }
    return 0;
}

static pinned_problem *cache_find(avo_engine *e, const char *key)
{
    for (int i = 0; i < e->ncache; i++)
        if (!strcmp(e->cache[i].key, key))
            return &e->cache[i];
    return NULL;
}

/* The cached keys as a JSON array (the snapshot query leaves the pinned
 * texts out for these); NULL when out of memory. */
static char *cache_keys(const avo_engine *e)
{
    json_t *keys = json_array();
    for (int i = 0; keys && i < e->ncache; i++)
        json_array_append_new(keys, json_string(e->cache[i].key));
    char *text = keys ? json_dumps(keys, JSON_COMPACT) : NULL;
    json_decref(keys);
    return text;
}

static pinned_problem *cache_slot(avo_engine *e)
{
    if (e->ncache < PIN_CACHE_MAX)
        return &e->cache[e->ncache++];
    pinned_problem *c = &e->cache[e->cache_next];
    e->cache_next = (e->cache_next + 1) % PIN_CACHE_MAX;
    pinned_free(c);
    return c;
}

/* Callers return at once: a stopped engine may be freed here. */
static void pass_done(avo_engine *e)
{
    json_decref(e->jobs);
    e->jobs = NULL;
    e->busy = 0;
    if (e->stopping) {
        engine_free_if_done(e);
        return;
    }
    if (e->again) {
        e->again = 0;
        avo_engine_kick(e);
    }
}

static void on_applied(void *arg, PGresult *res, const char *err)
{
    avo_engine *e = arg;
    (void)res;
    if (err)
        avo_warn("engine", "job %lld: step not applied: %s", (long long)e->current, err);
    /* Completions NOTIFY only while none of the job's results is waiting
     * (sql/003_queue.sql): one that arrived while this step was decided
     * sent none, so look again now rather than at the next tick. */
    else if (e->consumed)
        e->again = 1;
    pass_next(e);
}

static void apply(avo_engine *e, json_t *decision)
{
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)e->current);
    char *text = json_dumps(decision, JSON_COMPACT);
    const char *params[] = {id, text};
    e->consumed = json_array_size(json_object_get(decision, "consume")) > 0 ||
                  json_array_size(json_object_get(decision, "rechecked")) > 0;
    int rc = text ? avo_db_query(e->db, "SELECT avo_job_apply($1, $2::jsonb)", 2, params, on_applied, e) : -12;
    free(text);
    if (rc < 0)
        pass_done(e);
}

static void on_snapshot(void *arg, PGresult *res, const char *err)
{
    avo_engine *e = arg;
    if (e->stopping) {
        /* decide nothing: the agent it would start steps on may be gone */
        pass_done(e);
        return;
    }
    if (err || !res || PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        if (err)
            avo_warn("engine", "job %lld: snapshot failed: %s", (long long)e->current, err);
        pass_next(e);
        return;
    }
    json_error_t jerr;
    json_t *snap = json_loads(PQgetvalue(res, 0, 0), 0, &jerr);
    const char *pname = json_string_value(json_object_get(snap, "problem"));
    char msg[1024] = "";
    json_t *d = NULL;
    const char *sname = json_string_value(
        json_object_get(json_object_get(json_object_get(snap, "spec"), "seed"), "name"));
    /* Columns 1-3: the pin's key, and its texts unless the key is cached. */
    const char *key = PQgetisnull(res, 0, 1) ? NULL : PQgetvalue(res, 0, 1);
    pinned_problem *cp = key ? cache_find(e, key) : NULL, fresh;
    int have_fresh = 0; /* a job from before the pin: fresh is its own */
    if (!pname) {
        snprintf(msg, sizeof msg, "no problem in the snapshot");
    } else if (key && !cp) {
        if (PQgetisnull(res, 0, 2) || PQgetisnull(res, 0, 3)) {
            snprintf(msg, sizeof msg, "the pinned package %s is neither cached nor in the job", key);
        } else {
            if (pinned_load(e, &fresh, pname, sname, PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3), msg, sizeof msg) ==
                0) {
                cp = cache_slot(e);
                *cp = fresh; /* moved: the slot owns it now */
                snprintf(cp->key, sizeof cp->key, "%s", key);
            }
        }
    } else if (!key && pinned_load(e, &fresh, pname, sname, NULL, NULL, msg, sizeof msg) == 0) {
        cp = &fresh;
        have_fresh = 1;
    }
    if (!cp) {
        /* The problem package vanished or broke after submission. */
        char reason[1200];
        snprintf(reason, sizeof reason, "problem '%s' cannot be loaded: %s", pname ? pname : "?", msg);
        d = json_pack("{s:b,s:{s:s,s:s}}", "start", 0, "finish", "state", "failed", "reason", reason);
    } else {
        d = avo_evolve_decide(snap, &cp->prob, cp->seed_src, msg, sizeof msg);
        if (!d)
            avo_warn("engine", "job %lld: no decision: %s", (long long)e->current, msg);
    }
    json_t *fin = d ? json_object_get(d, "finish") : NULL;
    json_t *final = d ? json_object_get(d, "final") : NULL;
    if (json_is_object(fin))
        avo_info("engine", "job %lld finishing: %s (%s)", (long long)e->current,
                 json_string_value(json_object_get(fin, "state")), json_string_value(json_object_get(fin, "reason")));
    if (json_is_object(final))
        avo_info("engine", "job %lld: search over (%s); measuring candidate %lld against the seed",
                 (long long)e->current, json_string_value(json_object_get(final, "reason")),
                 (long long)json_integer_value(json_object_get(final, "candidate")));
    /* from the end of the search until the final measurement is in */
    const int ending = json_is_object(fin) || json_is_object(final) || json_is_true(json_object_get(d, "finishing"));
    /* An agent job's proposals come from its steps, which run beside the
     * engine; they start from what this snapshot shows. */
    const char *op = json_string_value(json_object_get(snap, "operator"));
    if (e->agent && op && !strcmp(op, "agent")) {
        if (ending)
            avo_agent_stop_job(e->agent, (long long)e->current);
        else if (d)
            avo_agent_ensure(e->agent, snap, cp->problem_json);
    }
    if (have_fresh)
        pinned_free(&fresh);
    json_decref(snap);
    if (!d) {
        pass_next(e);
        return;
    }
    int trivial = json_array_size(json_object_get(d, "consume")) == 0 &&
                  json_array_size(json_object_get(d, "propose")) == 0 &&
                  json_array_size(json_object_get(d, "rechecked")) == 0 && !json_is_object(fin) &&
                  !json_is_object(final) && !json_is_true(json_object_get(d, "start"));
    if (trivial) {
        json_decref(d);
        pass_next(e);
        return;
    }
    apply(e, d);
    json_decref(d);
}

static void pass_next(avo_engine *e)
{
    if (e->stopping || !e->jobs || e->next >= json_array_size(e->jobs)) {
        pass_done(e);
        return;
    }
    e->current = json_integer_value(json_array_get(e->jobs, e->next++));
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)e->current);
    char *keys = cache_keys(e);
    const char *params[] = {id, keys};
    /* The job's pinned texts come only when its key is not cached. */
    int rc = keys ? avo_db_query(e->db,
                                 "WITH k AS (SELECT j.problem_hash || '/' || COALESCE(j.spec->'seed'->>'name', '') "
                                 "AS key, j.problem_json, j.seed_text FROM jobs j WHERE j.id = $1) "
                                 "SELECT avo_job_snapshot($1), k.key, "
                                 "CASE WHEN $2::jsonb ? k.key THEN NULL ELSE k.problem_json END, "
                                 "CASE WHEN $2::jsonb ? k.key THEN NULL ELSE k.seed_text END FROM k",
                                 2, params, on_snapshot, e)
                  : -12;
    free(keys);
    if (rc < 0)
        pass_done(e);
}

static void on_jobs(void *arg, PGresult *res, const char *err)
{
    avo_engine *e = arg;
    if (e->stopping || err || !res || PQntuples(res) != 1) {
        if (err)
            avo_debug("engine", "listing active jobs failed: %s", err);
        pass_done(e);
        return;
    }
    e->jobs = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
    e->next = 0;
    /* steps of jobs that ended another way (cancelled) stop too */
    avo_agent_prune(e->agent, e->jobs);
    pass_next(e);
}

static void pass_start(avo_engine *e)
{
    if (e->stopping)
        return;
    if (e->busy) {
        e->again = 1;
        return;
    }
    if (!avo_db_is_up(e->db))
        return;
    e->busy = 1;
    /* queued jobs only as far as their team's job quota has room (sql/022) */
    if (avo_db_query(e->db, "SELECT avo_engine_jobs()", 0, NULL, on_jobs, e) < 0)
        e->busy = 0;
}

static void on_tick(uv_timer_t *t)
{
    pass_start(t->data);
}

void avo_engine_set_agent(avo_engine *e, avo_agent *a)
{
    e->agent = a;
}

void avo_engine_kick(avo_engine *e)
{
    if (e->stopping)
        return;
    if (e->busy) {
        e->again = 1;
        return;
    }
    /* A few ms of debounce folds a burst of notifications into one pass. */
    uv_timer_start(&e->soon, on_tick, 5, 0);
}

int avo_engine_start(avo_engine **out, uv_loop_t *loop, avo_db *db, const char *kernels_dir, unsigned interval_ms)
{
    avo_engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->loop = loop;
    e->db = db;
    e->interval_ms = interval_ms ? interval_ms : 1000;
    snprintf(e->kernels_dir, sizeof e->kernels_dir, "%s", kernels_dir);
    uv_timer_init(loop, &e->tick);
    uv_timer_init(loop, &e->soon);
    e->tick.data = e->soon.data = e;
    uv_timer_start(&e->tick, on_tick, e->interval_ms, e->interval_ms);
    *out = e;
    return 0;
}

/* Freed once both timers are closed (libuv runs close callbacks in no
 * promised order) and no query of a pass is in flight: its callback still
 * comes, from the connection's answer or its close, and needs the engine. */
static void engine_free_if_done(avo_engine *e)
{
    if (e->closed < 2 || e->busy)
        return;
    for (int i = 0; i < e->ncache; i++)
        pinned_free(&e->cache[i]);
    json_decref(e->jobs);
    free(e);
}

static void engine_closed(uv_handle_t *h)
{
    avo_engine *e = h->data;
    e->closed++;
    engine_free_if_done(e);
}

void avo_engine_stop(avo_engine *e)
{
    if (!e)
        return;
    e->stopping = 1;
    uv_timer_stop(&e->tick);
    uv_timer_stop(&e->soon);
    uv_close((uv_handle_t *)&e->tick, engine_closed);
    uv_close((uv_handle_t *)&e->soon, engine_closed);
}
