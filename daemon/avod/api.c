#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "avo_jobspec.h"
#include "avo_log.h"
#include "avo_problem.h"
#include "avo_routes.h"
#include "avo_version.h"

typedef struct stream stream;

struct avo_api {
    uv_loop_t *loop;
    avo_db *db;
    avo_engine *engine;
    char kernels_dir[1024];
    uv_timer_t timer;
    unsigned ticks;
    stream *streams;
};

/* One asynchronous request in flight. */
typedef struct {
    avo_api *api;
    avo_http_req *req;
    int64_t id;
    const char *not_found;     /* message when the query yields NULL */
    int status;                /* on success */
} call;

struct stream {
    avo_api *api;
    avo_http_req *req;
    stream *prev, *next;
    int64_t job;
    int64_t after;
    int fetching;
    int waiting;               /* caught up; woken by NOTIFY or the timer */
    int closed;                /* request finished */
};

static call *call_new(avo_api *a, avo_http_req *req, int64_t id)
{
    call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->api = a;
    c->req = req;
    c->id = id;
    c->status = 200;
    avo_http_ref(req);
    return c;
}

static void call_free(call *c)
{
    avo_http_unref(c->req);
    free(c);
}

static void reply_db_error(avo_api *a, avo_http_req *req, const char *err)
{
    if (!avo_db_is_up(a->db))
        avo_http_reply_error(req, 503, "unavailable", "database unavailable: %s; retry shortly", err);
    else
        avo_http_reply_error(req, 500, "internal", "database error: %s", err);
}

/* Most routes answer with one JSON value computed by PostgreSQL. */
static void on_json_row(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    if (avo_http_gone(c->req))
        goto done;
    if (err) {
        reply_db_error(c->api, c->req, err);
        goto done;
    }
    if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0)) {
        avo_http_reply_error(c->req, 404, "not_found", "%s", c->not_found ? c->not_found : "not found");
        goto done;
    }
    json_error_t je;
    json_t *j = json_loads(PQgetvalue(res, 0, 0), JSON_DECODE_ANY, &je);
    if (!j)
        avo_http_reply_error(c->req, 500, "internal", "bad JSON from the database: %s", je.text);
    else
        avo_http_reply_json(c->req, c->status, j);
done:
    call_free(c);
}

static void query_json(avo_api *a, avo_http_req *req, int64_t id, const char *sql, int n,
                       const char *const *params, const char *not_found, int status)
{
    call *c = call_new(a, req, id);
    if (!c) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    c->not_found = not_found;
    c->status = status;
    int rc = avo_db_query(a->db, sql, n, params, on_json_row, c);
    if (rc < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        call_free(c);
    }
}

static void h_submit(avo_api *a, avo_http_req *req)
{
    size_t len;
    const char *body = avo_http_body(req, &len);
    json_error_t je;
    char err[1024];
    json_t *in = json_loadb(body, len, 0, &je);
    if (!in) {
        avo_http_reply_error(req, 400, "bad_request", "job spec is not valid JSON (line %d, column %d): %s",
                             je.line, je.column, je.text);
        return;
    }
    avo_jobspec s;
    json_t *norm = NULL;
    int rc = avo_jobspec_parse(in, &s, &norm, err, sizeof err);
    json_decref(in);
    if (rc < 0) {
        avo_http_reply_error(req, 400, "bad_request", "job spec: %s", err);
        return;
    }
    /* The problem must exist and be valid now, not fail hours later. */
    char dir[2048];
    avo_problem p;
    if (avo_problem_resolve(a->kernels_dir, s.problem, dir, sizeof dir, err, sizeof err) < 0 ||
        avo_problem_load(&p, dir, err, sizeof err) < 0) {
        avo_http_reply_error(req, 400, "bad_request", "problem '%s': %s", s.problem, err);
        json_decref(norm);
        return;
    }
    /* Where it runs follows from the problem: cpu problems on CPU workers,
     * cuda ones on GPU workers of one architecture (sm_90 unless asked). */
    const int cuda = strcmp(p.backend, "cuda") == 0;
    if (!s.target[0])
        snprintf(s.target, sizeof s.target, "%s", cuda ? "sm_90" : "cpu");
    if (cuda != (strncmp(s.target, "sm_", 3) == 0)) {
        avo_http_reply_error(req, 400, "bad_request", "target: problem '%s' is a %s problem; '%s' is %s", s.problem,
                             p.backend, s.target, cuda ? "not a GPU architecture (sm_XY)" : "not cpu");
        avo_problem_free(&p);
        json_decref(norm);
        return;
    }
    json_object_set_new(norm, "target", json_string(s.target));
    if (p.nknobs == 0 && !strcmp(s.op, "tune")) {
        avo_http_reply_error(req, 400, "bad_request", "operator: problem '%s' declares no knobs to tune",
                             s.problem);
        avo_problem_free(&p);
        json_decref(norm);
        return;
    }
    avo_problem_free(&p);
    if (s.rng_seed == 0) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            r = (uint32_t)uv_hrtime();
        json_object_set_new(json_object_get(norm, "operator_params"), "seed",
                            json_integer((json_int_t)(r % 2147483647u) + 1));
    }
    char *spec = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(norm);
    char prio[16], budget[16];
    snprintf(prio, sizeof prio, "%d", s.priority);
    snprintf(budget, sizeof budget, "%d", s.evaluations);
    const char *params[] = {spec, s.problem, s.op, s.target, prio, budget};
    query_json(a, req, 0, "SELECT avo_job_submit($1::jsonb, $2, $3, $4, $5::int, $6::int)", 6, params,
               NULL, 201);
    free(spec);
    avo_engine_kick(a->engine);
}

static void on_cancelled(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    if (avo_http_gone(c->req)) {
        call_free(c);
        return;
    }
    if (err) {
        reply_db_error(c->api, c->req, err);
        call_free(c);
        return;
    }
    const char *st = PQgetvalue(res, 0, 0);
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)c->id);
    if (!strcmp(st, "not_found"))
        avo_http_reply_error(c->req, 404, "not_found", "no job %s", id);
    else if (!strcmp(st, "finished"))
        avo_http_reply_error(c->req, 409, "conflict", "job %s has already finished", id);
    else {
        const char *params[] = {id};
        query_json(c->api, c->req, c->id, "SELECT avo_job_json($1)", 1, params, "job vanished", 200);
        avo_info("api", "job %s cancelled", id);
    }
    call_free(c);
}

/* ---- event streams ---- */

static void stream_fetch(stream *s);

static void stream_unlink(stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else if (s->api->streams == s)
        s->api->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void stream_release(stream *s)
{
    if (s->closed && !s->fetching) {
        avo_http_unref(s->req);
        free(s);
    }
}

static void stream_on_close(avo_http_req *req)
{
    stream *s = avo_http_data(req);
    stream_unlink(s);
    s->closed = 1;
    stream_release(s);
}

static void on_events(void *arg, PGresult *res, const char *err)
{
    stream *s = arg;
    s->fetching = 0;
    if (s->closed || avo_http_gone(s->req)) {
        stream_release(s);
        return;
    }
    if (err) {
        s->waiting = 1;         /* the timer retries */
        return;
    }
    int n = PQntuples(res), wrote = 0, finished = 0;
    const char *state = n ? PQgetvalue(res, 0, 0) : "";
    for (int i = 0; i < n; i++) {
        if (PQgetisnull(res, i, 1))
            continue;
        int64_t id = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        const char *kind = PQgetvalue(res, i, 2);
        const char *data = PQgetvalue(res, i, 3);
        size_t len = strlen(data) + strlen(kind) + 64;
        char *buf = malloc(len);
        if (!buf)
            break;
        int m = snprintf(buf, len, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, kind, data);
        avo_http_stream_write(s->req, buf, (size_t)m);
        free(buf);
        s->after = id;
        wrote = 1;
        if (!strcmp(kind, "job_finished"))
            finished = 1;
    }
    int active = !strcmp(state, "queued") || !strcmp(state, "running");
    if (finished || (!wrote && !active)) {
        avo_http_stream_end(s->req);
        return;
    }
    if (n == 200)
        stream_fetch(s);        /* more stored events to replay */
    else if (!wrote)
        s->waiting = 1;
}

static void stream_fetch(stream *s)
{
    if (s->fetching || s->closed)
        return;
    char job[32], after[32];
    snprintf(job, sizeof job, "%lld", (long long)s->job);
    snprintf(after, sizeof after, "%lld", (long long)s->after);
    const char *params[] = {job, after};
    s->waiting = 0;
    if (avo_db_query(s->api->db,
                     "SELECT j.state, e.id, e.kind, jsonb_build_object('id', e.id, 'job', e.job_id, "
                     "'kind', e.kind, 'at', e.created_at, 'data', e.data)::text "
                     "FROM jobs j LEFT JOIN LATERAL (SELECT * FROM events WHERE job_id = j.id AND id > $2 "
                     "ORDER BY id LIMIT 200) e ON true WHERE j.id = $1 ORDER BY e.id",
                     2, params, on_events, s) == 0)
        s->fetching = 1;
    else
        s->waiting = 1;
}

static void stream_pull(avo_http_req *req)
{
    stream *s = avo_http_data(req);
    stream_fetch(s);
}

static void on_stream_job(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    avo_api *a = c->api;
    if (avo_http_gone(c->req))
        goto done;
    if (err) {
        reply_db_error(a, c->req, err);
        goto done;
    }
    if (PQntuples(res) != 1) {
        avo_http_reply_error(c->req, 404, "not_found", "no job %lld", (long long)c->id);
        goto done;
    }
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        avo_http_reply_error(c->req, 500, "internal", "out of memory");
        goto done;
    }
    s->api = a;
    s->req = c->req;
    s->job = c->id;
    const char *after = avo_http_query(c->req, "after");
    if (!after)
        after = avo_http_header(c->req, "Last-Event-ID");
    s->after = after ? strtoll(after, NULL, 10) : 0;
    avo_http_ref(c->req);
    avo_http_set_data(c->req, s, stream_on_close);
    s->next = a->streams;
    if (a->streams)
        a->streams->prev = s;
    a->streams = s;
    avo_http_stream_start(c->req, "text/event-stream", stream_pull);
done:
    call_free(c);
}

static void h_events(avo_api *a, avo_http_req *req, int64_t id)
{
    const char *after = avo_http_query(req, "after");
    if (after) {
        char *end;
        errno = 0;
        long long v = strtoll(after, &end, 10);
        if (errno || *end || v < 0) {
            avo_http_reply_error(req, 400, "bad_request", "after: '%s' is not a non-negative event id", after);
            return;
        }
    }
    call *c = call_new(a, req, id);
    char idb[32];
    snprintf(idb, sizeof idb, "%lld", (long long)id);
    const char *params[] = {idb};
    if (!c || avo_db_query(a->db, "SELECT state FROM jobs WHERE id = $1", 1, params, on_stream_job, c) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        if (c)
            call_free(c);
    }
}

void avo_api_job_event(avo_api *a, int64_t job)
{
    for (stream *s = a->streams; s; s = s->next)
        if (s->job == job && s->waiting)
            stream_fetch(s);
}

static void on_timer(uv_timer_t *t)
{
    avo_api *a = t->data;
    a->ticks++;
    /* Polling fallback for lost notifications, and a comment line now and
     * then so dead clients are noticed. */
    for (stream *s = a->streams; s; s = s->next) {
        if (!s->waiting)
            continue;
        if (a->ticks % 8 == 0)
            avo_http_stream_write(s->req, ": keepalive\n\n", 13);
        else
            stream_fetch(s);
    }
}

void avo_api_handle(void *arg, avo_http_req *req)
{
    avo_api *a = arg;
    const char *method = avo_http_method(req), *path = avo_http_path(req);
    int64_t id = 0;
    int route = avo_route_match(method, path, &id);
    char idb[32];
    snprintf(idb, sizeof idb, "%lld", (long long)id);
    const char *p1[] = {idb};
    char nf[64];
    snprintf(nf, sizeof nf, "no job %lld", (long long)id);
    avo_debug("api", "%s %s", method, path);

    switch (route) {
    case -404:
        avo_http_reply_error(req, 404, "not_found", "no route %s %s (see avoctl help api)", method, path);
        return;
    case -405:
        avo_http_reply_error(req, 405, "bad_request", "%s is not allowed on %s", method, path);
        return;
    case AVO_ROUTE_HEALTH:
        avo_http_reply_json(req, avo_db_is_up(a->db) ? 200 : 503,
                            json_pack("{s:b,s:s,s:s}", "ok", avo_db_is_up(a->db), "version", AVO_VERSION,
                                      "db", avo_db_is_up(a->db) ? "up" : "down"));
        return;
    case AVO_ROUTE_JOB_SUBMIT:
        h_submit(a, req);
        return;
    case AVO_ROUTE_JOB_LIST: {
        const char *l = avo_http_query(req, "limit");
        char *end = NULL;
        long limit = l ? strtol(l, &end, 10) : 50;
        if (l && (*end || limit < 1 || limit > 1000)) {
            avo_http_reply_error(req, 400, "bad_request", "limit: '%s' is not in 1..1000", l);
            return;
        }
        char lb[16];
        snprintf(lb, sizeof lb, "%ld", limit);
        const char *pl[] = {lb};
        query_json(a, req, 0,
                   "SELECT jsonb_build_object('jobs', COALESCE(jsonb_agg(avo_job_json(id) ORDER BY id DESC), "
                   "'[]')) FROM (SELECT id FROM jobs ORDER BY id DESC LIMIT $1) s",
                   1, pl, NULL, 200);
        return;
    }
    case AVO_ROUTE_JOB_GET:
        query_json(a, req, id, "SELECT avo_job_json($1)", 1, p1, nf, 200);
        return;
    case AVO_ROUTE_JOB_CANCEL: {
        call *c = call_new(a, req, id);
        if (!c || avo_db_query(a->db, "SELECT avo_job_cancel($1)", 1, p1, on_cancelled, c) < 0) {
            avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
            if (c)
                call_free(c);
        }
        return;
    }
    case AVO_ROUTE_JOB_BEST:
        query_json(a, req, id,
                   "SELECT jsonb_build_object('job', j.id, 'state', j.state, "
                   "'best', avo_candidate_json(j.best_candidate, true), "
                   "'seed', avo_candidate_json(j.seed_candidate, true)) FROM jobs j WHERE j.id = $1",
                   1, p1, nf, 200);
        return;
    case AVO_ROUTE_JOB_EVENTS:
        h_events(a, req, id);
        return;
    case AVO_ROUTE_WORKERS:
        query_json(a, req, 0,
                   "SELECT jsonb_build_object('workers', COALESCE(jsonb_agg(to_jsonb(w) ORDER BY w.id), "
                   "'[]')) FROM workers w WHERE w.state <> 'gone' OR w.last_seen > now() - interval '1 hour'",
                   0, NULL, NULL, 200);
        return;
    default:
        avo_http_reply_error(req, 500, "internal", "route %d has no handler", route);
    }
}

int avo_api_init(avo_api **out, uv_loop_t *loop, avo_db *db, avo_engine *engine, const char *kernels_dir)
{
    avo_api *a = calloc(1, sizeof *a);
    if (!a)
        return -12;
    a->loop = loop;
    a->db = db;
    a->engine = engine;
    snprintf(a->kernels_dir, sizeof a->kernels_dir, "%s", kernels_dir);
    uv_timer_init(loop, &a->timer);
    a->timer.data = a;
    uv_timer_start(&a->timer, on_timer, 2000, 2000);
    *out = a;
    return 0;
}

static void api_closed(uv_handle_t *h)
{
    free(h->data);
}

void avo_api_stop(avo_api *a)
{
    if (!a)
        return;
    for (stream *s = a->streams; s; s = s->next)
        avo_http_stream_end(s->req);
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, api_closed);
}
