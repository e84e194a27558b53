/* The /v1 API handlers: route dispatch, validation, answers from PostgreSQL, event streams (api.h). */
#include "api.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "avo_hash.h"
#include "avo_jobspec.h"
#include "avo_list.h"
#include "avo_log.h"
#include "avo_problem.h"
#include "avo_routes.h"
#include "avo_paths.h"
#include "avo_version.h"
#include "agent.h"
#include "ident.h"
#include "kb.h"
#include "pin.h"
#include "problems.h"
#include "seedcheck.h"
#include "srcdiff.h"

typedef struct stream stream;

struct avo_api {
    uv_loop_t *loop;
    avo_db *db;
    avo_engine *engine;
    avo_agent *agent;
    const avo_pgwatch *pgwatch;
    const avo_ident *ident; /* main's; replaced on reload */
    char kernels_dir[PATH_MAX];
    char check_cache[PATH_MAX]; /* seed compile checks */
    char worker_bin[PATH_MAX];  /* avo-worker beside avod, which runs them */
    uv_timer_t timer;
    unsigned ticks;
    avo_list streams; /* open event streams (stream) */
};

/* One asynchronous request in flight. */
typedef struct {
    avo_api *api;
    avo_http_req *req;
    int64_t id;
    char not_found[96]; /* message when the query yields NULL ("" = "not found"); a copy: the
                                * caller's buffer is gone by the time the answer comes */
    int status;         /* on success */
    const char *key;    /* request functions: the answer's member replied with 202 */
} call;

struct stream {
    avo_api *api;
    avo_http_req *req;
    avo_list link;        /* on avo_api.streams */
    int64_t job;          /* 0: every job the principal may read (GET /v1/events) */
    avo_principal who;    /* for job 0: whose read access filters it */
    int follow;           /* for job 0: 0 ends the stream once caught up */
    int detail;           /* ?detail=true: "detail" events (no id) when the job's detail changes */
    char detail_key[512]; /* the last one sent, its seconds left out */
    unsigned detail_tick; /* api ticks when something was last written */
    int64_t after;
    int fetching;
    int waiting; /* caught up; woken by NOTIFY or the timer */
    int closed;  /* request finished */
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

static void principal_of(const avo_api *a, const avo_http_req *req, avo_principal *out)
{
    avo_ident_resolve(a->ident, avo_http_peer(req), out);
}

/* 403 with a stable code ("forbidden"), the rule's stable name in "rule"
 * (owner_team_or_admin, read_access) and a message naming it. */
static void reply_forbidden(avo_http_req *req, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply_forbidden(avo_http_req *req, const char *rule, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    avo_http_reply_json(req, 403,
                        json_pack("{s:{s:s,s:s,s:s}}", "error", "code", "forbidden", "message", msg, "rule", rule));
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
        avo_http_reply_error(c->req, 404, "not_found", "%s", c->not_found[0] ? c->not_found : "not found");
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

static void query_json(avo_api *a, avo_http_req *req, int64_t id, const char *sql, int n, const char *const *params,
                       const char *not_found, int status)
{
    call *c = call_new(a, req, id);
    if (!c) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    snprintf(c->not_found, sizeof c->not_found, "%s", not_found ? not_found : "");
    c->status = status;
    int rc = avo_db_query(a->db, sql, n, params, on_json_row, c);
    if (rc < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        call_free(c);
    }
}

/* GET /metrics: the exposition text is computed by avo_metrics()
 * (sql/008_metrics.sql) in one snapshot. */
static void on_metrics(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    if (!avo_http_gone(c->req)) {
        if (err || PQntuples(res) != 1)
            avo_http_reply_text(c->req, 503, "text/plain; charset=utf-8",
                                "# avod cannot read its database now; avo_up would be 0\n");
        else
            avo_http_reply_text(c->req, 200, "text/plain; version=0.0.4; charset=utf-8", PQgetvalue(res, 0, 0));
    }
    call_free(c);
}

static void h_metrics(avo_api *a, avo_http_req *req)
{
    call *c = call_new(a, req, 0);
    if (!c) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    if (avo_db_query(a->db, "SELECT avo_metrics()", 0, NULL, on_metrics, c) < 0) {
        avo_http_reply_text(req, 503, "text/plain; charset=utf-8", "# avod cannot read its database now\n");
        call_free(c);
    }
}

/* ---- submission ---- */

/* A submission in flight: a transfer seed is looked up in the database
 * before the spec can be checked against its problem. */
typedef struct {
    avo_api *api;
    avo_http_req *req;
    avo_jobspec s;
    json_t *norm;
    json_t *pin;       /* the package as the job pins it (pin.h) */
    avo_principal who; /* its owner-to-be */
} submission;

static void submission_free(submission *sub)
{
    avo_http_unref(sub->req);
    avo_jobspec_clear(&sub->s);
    json_decref(sub->norm);
    json_decref(sub->pin);
    free(sub);
}

/* Problems whose candidates can seed each other: the same entry point over
 * the same tensors (name, dtype, role, rank). Sizes, configurations and
 * knobs may differ: that is what a transfer is for (MHA -> GQA). */
static int problems_compatible(const avo_problem *from, const avo_problem *to, char *why, size_t whylen)
{
    if (strcmp(from->backend, to->backend) != 0) {
        snprintf(why, whylen, "a %s problem cannot seed a %s problem", from->backend, to->backend);
        return 0;
    }
    if (strcmp(from->entry, to->entry) != 0) {
        snprintf(why, whylen, "its entry point is '%s', this problem's is '%s'", from->entry, to->entry);
        return 0;
    }
    if (from->ntensors != to->ntensors) {
        snprintf(why, whylen, "it takes %d tensors, this problem %d", from->ntensors, to->ntensors);
        return 0;
    }
    for (int i = 0; i < to->ntensors; i++) {
        const avo_tensor_spec *a = &from->tensors[i], *b = &to->tensors[i];
        if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->role != b->role || a->rank != b->rank) {
            snprintf(why, whylen, "tensor %d is '%s' (%s, rank %d) there and '%s' (%s, rank %d) here", i + 1, a->name,
                     avo_problem_dtype_name(a->dtype), a->rank, b->name, avo_problem_dtype_name(b->dtype), b->rank);
            return 0;
        }
    }
    return 1;
}

/* One start value: `name` must be a knob of p and `value` one of its
 * values. Returns 0 or -22 with the field and the reason in err. */
static int check_knob(const avo_problem *p, const char *name, json_t *value, char *err, size_t errlen)
{
    int i = 0;
    while (i < p->nknobs && strcmp(p->knobs[i].name, name) != 0)
        i++;
    if (i == p->nknobs) {
        char list[512] = "";
        for (int j = 0; j < p->nknobs; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", p->knobs[j].name);
        snprintf(err, errlen, "seed.knobs.%s: unknown knob of problem '%s' (knobs: %s)", name, p->name, list);
        return -EINVAL;
    }
    for (int j = 0; j < p->knobs[i].nvalues; j++)
        if (json_is_integer(value) && p->knobs[i].values[j] == json_integer_value(value))
            return 0;
    char vals[512] = "";
    for (int j = 0; j < p->knobs[i].nvalues; j++)
        snprintf(vals + strlen(vals), sizeof vals - strlen(vals), "%s%lld", j ? ", " : "",
                 (long long)p->knobs[i].values[j]);
    if (json_is_integer(value))
        snprintf(err, errlen, "seed.knobs.%s: %lld is not one of the knob's values (allowed: %s)", name,
                 (long long)json_integer_value(value), vals);
    else
        snprintf(err, errlen, "seed.knobs.%s: must be an integer (allowed: %s)", name, vals);
    return -EINVAL;
}

/* Start knob values: each known and allowed, and together with the
 * defaults of the others they must satisfy the constraints. */
static int check_seed_knobs(const avo_problem *p, json_t *knobs, char *err, size_t errlen)
{
    int64_t v[AVO_PROBLEM_MAX_KNOBS];
    const char *k;
    json_t *x;
    int rc;
    json_object_foreach(knobs, k, x)
    {
        if ((rc = check_knob(p, k, x, err, errlen)) < 0)
            return rc;
    }
    avo_problem_start_knobs(p, knobs, v);
    if (avo_problem_knobs_allowed(p, v) != 1) {
        int c = avo_problem_constraint_failed(p, v);
        snprintf(err, errlen, "seed.knobs: these values break the constraint '%s' of problem '%s'",
                 c >= 0 ? p->constraints[c] : "?", p->name);
        return -EINVAL;
    }
    return 0;
}

static void submit_insert(submission *sub)
{
    avo_api *a = sub->api;
    avo_jobspec *s = &sub->s;
    if (s->rng_seed == 0) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            r = (uint32_t)uv_hrtime();
        json_object_set_new(json_object_get(sub->norm, "operator_params"), "seed",
                            json_integer((json_int_t)(r % 2147483647u) + 1));
    }
    /* 15 digits: 0.95 is stored as 0.95, not as its binary neighbour */
    char *spec = json_dumps(sub->norm, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    char prio[16], budget[16];
    snprintf(prio, sizeof prio, "%d", s->priority);
    snprintf(budget, sizeof budget, "%d", s->evaluations);
    /* The job's secret input seed (sql/014_job_seed.sql): its evaluations'
     * warm-up sets. Stored with the job, handed to workers by avo_claim,
     * never in anything the API, events or the agent show. */
    uint64_t input_seed = 0;
    if (getrandom(&input_seed, sizeof input_seed, 0) != sizeof input_seed)
        input_seed = 0;
    input_seed &= INT64_MAX;
    char iseed[24];
    snprintf(iseed, sizeof iseed, "%llu", (unsigned long long)input_seed);
    char *pin = json_dumps(sub->pin, JSON_COMPACT);
    const char *params[] = {spec, s->problem,    s->op,          s->target,
                            prio, budget,        s->seed_source, input_seed ? iseed : NULL,
                            pin,  sub->who.name, sub->who.team};
    if (!spec || !pin)
        avo_http_reply_error(sub->req, 500, "internal", "out of memory");
    else
        query_json(a, sub->req, 0,
                   /* a job pinned to a toolchain no live worker has is
                    * accepted (one may come) with a warning beside it */
                   "SELECT avo_job_submit($1::jsonb, $2, $3, $4, $5::int, $6::int, $7, $8::bigint, $9::jsonb, "
                   "$10, $11) || avo_toolchain_warnings($1::jsonb, $4)",
                   11, params, NULL, 201);
    explicit_bzero(iseed, sizeof iseed);
    free(pin);
    free(spec);
    avo_engine_kick(a->engine);
    submission_free(sub);
}

static void on_seed_checked(void *arg, int compiled, const char *detail, const char *log, const json_t *disasm)
{
    submission *sub = arg;
    (void)disasm;
    if (avo_http_gone(sub->req)) {
        submission_free(sub);
        return;
    }
    if (compiled == 0) {
        /* The first error in the message; the whole log (capped by the
         * worker) beside it for a reader who wants the context. */
        char msg[1200], what[64];
        const char *file = json_string_value(json_object_get(json_object_get(sub->norm, "seed"), "file"));
        snprintf(what, sizeof what, "candidate %lld", (long long)sub->s.seed_candidate);
        const int policy = !strncmp(detail, AVO_SEEDCHECK_POLICY, strlen(AVO_SEEDCHECK_POLICY));
        snprintf(msg, sizeof msg, "seed: %s %s: %s", file ? file : what,
                 policy ? "breaks the candidate policy" : "does not compile",
                 policy ? detail + strlen(AVO_SEEDCHECK_POLICY) : detail);
        avo_http_reply_json(sub->req, 400,
                            json_pack("{s:{s:s,s:s,s:s}}", "error", "code", "bad_request", "message", msg, "log", log));
        submission_free(sub);
        return;
    }
    if (compiled < 0)
        avo_warn("api", "seed of a %s job not compile-checked: %s; its first evaluation will tell", sub->s.problem,
                 detail);
    submit_insert(sub);
}

/* from_*: the transfer candidate, when the seed is one. */
/* The job's problem, loaded now (not failing hours later), its named seed
 * and the pin of what the job will run, whatever the disk holds later.
 * On failure the reply is sent and *p needs no free. */
static int submit_load_problem(submission *sub, avo_problem *p)
{
    avo_jobspec *s = &sub->s;
    char dir[PATH_MAX], err[1024];
    if (avo_problem_resolve(sub->api->kernels_dir, s->problem, dir, sizeof dir, err, sizeof err) < 0 ||
        avo_problem_load(p, dir, err, sizeof err) < 0) {
        avo_http_reply_error(sub->req, 400, "bad_request", "problem '%s': %s", s->problem, err);
        return -EINVAL;
    }
    if (avo_problem_use_seed(p, s->seed_name, err, sizeof err) < 0) {
        avo_http_reply_error(sub->req, 400, "bad_request", "seed.name: %s", err);
        avo_problem_free(p);
        return -EINVAL;
    }
    if (!(sub->pin = avo_pin_make(p, err, sizeof err))) {
        avo_http_reply_error(sub->req, 400, "bad_request", "problem '%s': %s", s->problem, err);
        avo_problem_free(p);
        return -EINVAL;
    }
    return 0;
}

/* Where it runs follows from the problem: cpu problems on CPU workers,
 * cuda ones on GPU workers of one architecture (sm_90 unless asked); and
 * what runs it (the operator, its provider) must fit the problem. */
static int submit_check_placement(submission *sub, const avo_problem *p)
{
    avo_jobspec *s = &sub->s;
    avo_http_req *req = sub->req;
    const int cuda = strcmp(p->backend, "cuda") == 0;
    if (!s->target[0])
        snprintf(s->target, sizeof s->target, "%s", cuda ? "sm_90" : "cpu");
    if (cuda != (strncmp(s->target, "sm_", 3) == 0)) {
        avo_http_reply_error(req, 400, "bad_request", "target: problem '%s' is a %s problem; '%s' is %s", s->problem,
                             p->backend, s->target, cuda ? "not a GPU architecture (sm_XY)" : "not cpu");
        return -EINVAL;
    }
    json_object_set_new(sub->norm, "target", json_string(s->target));
    avo_jobspec_commit_resolve(s, sub->norm, cuda);
    if (s->gpu[0] && !cuda) {
        avo_http_reply_error(req, 400, "bad_request",
                             "gpu: problem '%s' runs on the CPU; a GPU model applies to "
                             "cuda problems",
                             s->problem);
        return -EINVAL;
    }
    if (!strcmp(s->op, "agent")) {
        char why[1200];
        if (avo_agent_provider_check(sub->api->agent, s->agent_provider, why, sizeof why) < 0) {
            avo_http_reply_error(req, 400, "bad_request", "agent.provider: %s", why);
            return -EINVAL;
        }
    }
    if (p->nknobs == 0 && !strcmp(s->op, "tune")) {
        avo_http_reply_error(req, 400, "bad_request", "operator: problem '%s' declares no knobs to tune", s->problem);
        return -EINVAL;
    }
    return 0;
}

/* A seed candidate of another problem: that problem must load and be
 * compatible with this one. */
static int submit_check_other_problem(submission *sub, const avo_problem *p, const char *from_problem)
{
    char fdir[PATH_MAX], err[1024], why[512];
    avo_problem from;
    if (avo_problem_resolve(sub->api->kernels_dir, from_problem, fdir, sizeof fdir, err, sizeof err) < 0 ||
        avo_problem_load(&from, fdir, err, sizeof err) < 0) {
        avo_http_reply_error(sub->req, 400, "bad_request", "seed.candidate: its problem '%s' cannot be loaded: %s",
                             from_problem, err);
        return -EINVAL;
    }
    int ok = problems_compatible(&from, p, why, sizeof why);
    if (!ok)
        avo_http_reply_error(sub->req, 400, "bad_request",
                             "seed.candidate: candidate %lld is from problem '%s', which is not compatible "
                             "with '%s': %s",
                             (long long)sub->s.seed_candidate, from_problem, sub->s.problem, why);
    avo_problem_free(&from);
    return ok ? 0 : -EINVAL;
}

/* seed.candidate: the candidate's source becomes the seed, and its knob
 * values where they fit. */
static int submit_take_candidate(submission *sub, const avo_problem *p, const char *from_problem, const char *from_src,
                                 json_t *from_knobs)
{
    avo_jobspec *s = &sub->s;
    char err[1024];
    if (strcmp(from_problem, s->problem) != 0 && submit_check_other_problem(sub, p, from_problem) < 0)
        return -EINVAL;
    free(s->seed_source);
    if (!(s->seed_source = strdup(avo_problem_unrender(from_src)))) {
        avo_http_reply_error(sub->req, 500, "internal", "out of memory");
        return -ENOMEM;
    }
    /* Start from the candidate's own knob values where they fit: the
     * knobs this problem has too, with values it allows, as long as
     * together they keep its constraints. */
    if (!s->seed_knobs && json_is_object(from_knobs)) {
        json_t *fit = json_object();
        const char *k;
        json_t *x;
        /* each alone: known and allowed; the constraints hold only
         * for the set (ORDER=1 is what permits UNROLL=8) */
        json_object_foreach(from_knobs, k, x)
        {
            if (check_knob(p, k, x, err, sizeof err) == 0)
                json_object_set(fit, k, x);
        }
        if (json_object_size(fit) && check_seed_knobs(p, fit, err, sizeof err) == 0)
            s->seed_knobs = fit;
        else
            json_decref(fit);
    }
    return 0;
}

/* The seed's knobs checked and, with its source's hash, written into the
 * normalized spec. */
static int submit_record_seed(submission *sub, const avo_problem *p)
{
    avo_jobspec *s = &sub->s;
    char err[1024];
    if (s->seed_knobs) {
        if (check_seed_knobs(p, s->seed_knobs, err, sizeof err) < 0) {
            avo_http_reply_error(sub->req, 400, "bad_request", "%s", err);
            return -EINVAL;
        }
        json_t *sd = json_object_get(sub->norm, "seed");
        if (!sd)
            json_object_set_new(sub->norm, "seed", sd = json_object());
        json_object_set(sd, "knobs", s->seed_knobs);
    }
    if (s->seed_source) {
        char sha[AVO_SHA256_HEX];
        if (avo_hash_sha256_hex(s->seed_source, strlen(s->seed_source), sha) < 0) {
            avo_http_reply_error(sub->req, 500, "internal", "cannot hash the seed");
            return -EIO;
        }
        json_object_set_new(json_object_get(sub->norm, "seed"), "sha256", json_string(sha));
    }
    return 0;
}

/* A seed source is compiled as the job's first candidate will be (the
 * knob defines of its start values, numbered as its own file) before the
 * job is stored. 1: on_seed_checked owns sub now; 0: not checked. */
static int submit_start_seed_check(submission *sub, const avo_problem *p)
{
    avo_api *a = sub->api;
    avo_jobspec *s = &sub->s;
    if (!s->seed_source)
        return 0;
    int64_t v[AVO_PROBLEM_MAX_KNOBS];
    char *rendered = NULL;
    avo_problem_start_knobs(p, s->seed_knobs, v);
    const char *name = json_string_value(json_object_get(json_object_get(sub->norm, "seed"), "file"));
    if (avo_problem_render(p, v, s->seed_source, name ? name : "seed", &rendered) == 0 && a->worker_bin[0] &&
        avo_seedcheck_start(a->loop, a->worker_bin, a->check_cache, p->dir, s->target, rendered, 0, on_seed_checked,
                            sub) == 0) {
        free(rendered);
        return 1;
    }
    free(rendered);
    avo_warn("api", "seed of a %s job not compile-checked (cannot start avo-worker); its first evaluation will tell",
             s->problem);
    return 0;
}

static void submit_finish(submission *sub, const char *from_problem, const char *from_src, json_t *from_knobs)
{
    avo_problem p;
    if (submit_load_problem(sub, &p) < 0) {
        submission_free(sub);
        return;
    }
    if (submit_check_placement(sub, &p) == 0 &&
        (!from_src || submit_take_candidate(sub, &p, from_problem, from_src, from_knobs) == 0) &&
        submit_record_seed(sub, &p) == 0) {
        if (!submit_start_seed_check(sub, &p))
            submit_insert(sub);
        sub = NULL;
    }
    avo_problem_free(&p);
    if (sub)
        submission_free(sub);
}

static void on_seed_candidate(void *arg, PGresult *res, const char *err)
{
    submission *sub = arg;
    if (avo_http_gone(sub->req)) {
        submission_free(sub);
        return;
    }
    if (err) {
        reply_db_error(sub->api, sub->req, err);
        submission_free(sub);
        return;
    }
    if (PQntuples(res) != 1) {
        avo_http_reply_error(sub->req, 400, "bad_request", "seed.candidate: no candidate %lld",
                             (long long)sub->s.seed_candidate);
        submission_free(sub);
        return;
    }
    /* A fork reads the candidate: under read-access = team only what one may read. */
    char rule[512];
    if (!avo_ident_may_read(sub->api->ident, &sub->who, PQgetisnull(res, 0, 4) ? NULL : PQgetvalue(res, 0, 4),
                            PQgetisnull(res, 0, 5) ? NULL : PQgetvalue(res, 0, 5), rule, sizeof rule)) {
        reply_forbidden(sub->req, "read_access", "seed.candidate: candidate %lld: %s", (long long)sub->s.seed_candidate,
                        rule);
        submission_free(sub);
        return;
    }
    json_t *knobs = PQgetisnull(res, 0, 2) ? NULL : json_loads(PQgetvalue(res, 0, 2), 0, NULL);
    /* A candidate grown from one of the package's named seeds keeps that
     * seed's knob space in the new job unless the spec names another. */
    if (!sub->s.seed_name[0] && !PQgetisnull(res, 0, 3) && !strcmp(PQgetvalue(res, 0, 0), sub->s.problem)) {
        snprintf(sub->s.seed_name, sizeof sub->s.seed_name, "%s", PQgetvalue(res, 0, 3));
        json_t *sd = json_object_get(sub->norm, "seed");
        if (sd)
            json_object_set_new(sd, "name", json_string(sub->s.seed_name));
    }
    submit_finish(sub, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), knobs);
    json_decref(knobs);
}

static void h_submit(avo_api *a, avo_http_req *req)
{
    size_t len;
    const char *body = avo_http_body(req, &len);
    json_error_t je;
    char err[1024];
    json_t *in = json_loadb(body, len, 0, &je);
    if (!in) {
        avo_http_reply_error(req, 400, "bad_request", "job spec is not valid JSON (line %d, column %d): %s", je.line,
                             je.column, je.text);
        return;
    }
    submission *sub = calloc(1, sizeof *sub);
    if (!sub) {
        json_decref(in);
        avo_http_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    sub->api = a;
    sub->req = req;
    avo_http_ref(req);
    principal_of(a, req, &sub->who);
    int rc = avo_jobspec_parse(in, &sub->s, &sub->norm, err, sizeof err);
    json_decref(in);
    if (rc < 0) {
        avo_http_reply_error(req, 400, "bad_request", "job spec: %s", err);
        submission_free(sub);
        return;
    }
    if (sub->s.seed_candidate <= 0) {
        submit_finish(sub, NULL, NULL, NULL);
        return;
    }
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)sub->s.seed_candidate);
    const char *params[] = {id};
    if (avo_db_query(a->db,
                     "SELECT j.problem, s.body, c.knobs, j.spec->'seed'->>'name', j.owner, j.team FROM candidates c "
                     "JOIN jobs j ON j.id = c.job_id "
                     "JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $1",
                     1, params, on_seed_candidate, sub) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        submission_free(sub);
    }
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

static void stream_release(stream *s)
{
    if (s->closed && !s->fetching) {
        avo_http_unref(s->req);
        free(s);
    }
}

/* A fetch's answer came: 1 when there is nothing to send (the client went,
 * or the query failed and the timer retries). */
static int stream_settle(stream *s, const char *err)
{
    s->fetching = 0;
    if (s->closed || avo_http_gone(s->req)) {
        stream_release(s);
        return 1;
    }
    if (err) {
        s->waiting = 1;
        return 1;
    }
    return 0;
}

/* One stored event as "id, event, data" and a blank line. */
static int stream_send(stream *s, int64_t id, const char *kind, const char *data)
{
    size_t len = strlen(data) + strlen(kind) + 64;
    char *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    int m = snprintf(buf, len, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, kind, data);
    avo_http_stream_write(s->req, buf, (size_t)m);
    free(buf);
    return 0;
}

static void stream_pull(avo_http_req *req);
static void stream_on_close(avo_http_req *req);

/* A stream of the request, owned by it (closed with it), on the api's
 * list; the caller sets what it streams, then stream_begin. */
static stream *stream_new(avo_api *a, avo_http_req *req)
{
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    s->api = a;
    s->req = req;
    return s;
}

static void stream_begin(stream *s)
{
    avo_api *a = s->api;
    avo_http_ref(s->req);
    avo_http_set_data(s->req, s, stream_on_close);
    avo_list_push(&a->streams, &s->link);
    avo_http_stream_start(s->req, "text/event-stream", stream_pull);
}

static void stream_on_close(avo_http_req *req)
{
    stream *s = avo_http_data(req);
    avo_list_remove(&s->link);
    s->closed = 1;
    stream_release(s);
}

/* A "detail" event (no id: a resume never replays it) when the job's
 * detail (sql/023_why.sql) changed other than in its seconds, or when the
 * stream has been silent for about 30 s, so a watcher is never left
 * without a word while a job waits. */
static void stream_detail(stream *s, const char *detail)
{
    char key[sizeof s->detail_key];
    size_t k = 0;
    for (const char *p = detail; *p && k + 1 < sizeof key; p++) {
        /* "41 s" and "(turn 3, 12 s)": the seconds do not make a change */
        if (isdigit((unsigned char)*p)) {
            const char *q = p;
            while (isdigit((unsigned char)*q))
                q++;
            if (q[0] == ' ' && q[1] == 's' && (q[2] == 0 || q[2] == ')' || q[2] == ' ' || q[2] == ',')) {
                p = q;
                continue;
            }
        }
        key[k++] = *p;
    }
    key[k] = 0;
    if (!strcmp(key, s->detail_key) && s->api->ticks - s->detail_tick < 15)
        return;
    json_t *o = json_pack("{s:s,s:I,s:{s:s}}", "kind", "detail", "job", (json_int_t)s->job, "data", "detail", detail);
    char *data = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!data)
        return;
    size_t len = strlen(data) + 32;
    char *buf = malloc(len);
    if (buf) {
        int m = snprintf(buf, len, "event: detail\ndata: %s\n\n", data);
        avo_http_stream_write(s->req, buf, (size_t)m);
        snprintf(s->detail_key, sizeof s->detail_key, "%s", key);
        s->detail_tick = s->api->ticks;
    }
    free(buf);
    free(data);
}

static void on_events(void *arg, PGresult *res, const char *err)
{
    stream *s = arg;
    if (stream_settle(s, err))
        return;
    int n = PQntuples(res), wrote = 0, finished = 0;
    const char *state = n ? PQgetvalue(res, 0, 0) : "";
    for (int i = 0; i < n; i++) {
        if (PQgetisnull(res, i, 1))
            continue;
        int64_t id = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        const char *kind = PQgetvalue(res, i, 2);
        if (stream_send(s, id, kind, PQgetvalue(res, i, 3)) < 0)
            break;
        s->after = id;
        wrote = 1;
        if (!strcmp(kind, "job_finished"))
            finished = 1;
    }
    int active = !strcmp(state, "queued") || !strcmp(state, "running");
    if (wrote)
        s->detail_tick = s->api->ticks;
    if (s->detail && active && !finished && n && !PQgetisnull(res, 0, 4))
        stream_detail(s, PQgetvalue(res, 0, 4));
    if (finished || (!wrote && !active)) {
        avo_http_stream_end(s->req);
        return;
    }
    if (n == 200)
        stream_fetch(s); /* more stored events to replay */
    else if (!wrote)
        s->waiting = 1;
}

/* GET /v1/events: the stored events after s->after of every job, those
 * the principal may not read skipped (ident.h's rule, read now, so a
 * reload's read-access applies to open streams too). */
static void on_all_events(void *arg, PGresult *res, const char *err)
{
    stream *s = arg;
    if (stream_settle(s, err))
        return;
    int n = PQntuples(res);
    char rule[512];
    for (int i = 0; i < n; i++) {
        int64_t id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        const char *kind = PQgetvalue(res, i, 1), *data = PQgetvalue(res, i, 2);
        const char *owner = PQgetisnull(res, i, 3) ? NULL : PQgetvalue(res, i, 3);
        const char *team = PQgetisnull(res, i, 4) ? NULL : PQgetvalue(res, i, 4);
        s->after = id;
        if (avo_ident_may_read(s->api->ident, &s->who, owner, team, rule, sizeof rule) &&
            stream_send(s, id, kind, data) < 0)
            break;
    }
    if (n == 200)
        stream_fetch(s); /* more stored events to replay */
    else if (!s->follow)
        avo_http_stream_end(s->req);
    else
        s->waiting = 1;
}

static void stream_fetch(stream *s)
{
    if (s->fetching || s->closed)
        return;
    /* one job: its state (the stream ends with it), its events, its detail;
     * all jobs (0): every event with its job's owner and team, filtered by
     * on_all_events */
    char job[32], after[32];
    snprintf(job, sizeof job, "%lld", (long long)s->job);
    snprintf(after, sizeof after, "%lld", (long long)s->after);
    const char *params[] = {job, after, s->detail ? "true" : "false"};
    const char *sql = s->job
                          ? "SELECT j.state, e.id, e.kind, jsonb_build_object('id', e.id, 'job', e.job_id, "
                            "'kind', e.kind, 'at', e.created_at, 'data', e.data)::text, "
                            "CASE WHEN $3::bool THEN avo_job_detail(j.id) END "
                            "FROM jobs j LEFT JOIN LATERAL (SELECT * FROM events WHERE job_id = j.id AND id > $2 "
                            "ORDER BY id LIMIT 200) e ON true WHERE j.id = $1 ORDER BY e.id"
                          : "SELECT e.id, e.kind, jsonb_build_object('id', e.id, 'job', e.job_id, 'kind', e.kind, "
                            "'at', e.created_at, 'data', e.data)::text, j.owner, j.team "
                            "FROM events e LEFT JOIN jobs j ON j.id = e.job_id WHERE e.id > $1 ORDER BY e.id LIMIT 200";
    s->waiting = 0;
    if (avo_db_query(s->api->db, sql, s->job ? 3 : 1, s->job ? params : params + 1, s->job ? on_events : on_all_events,
                     s) == 0)
        s->fetching = 1;
    else
        s->waiting = 1;
}

static void stream_pull(avo_http_req *req)
{
    stream *s = avo_http_data(req);
    stream_fetch(s);
}

/* ?after=N, else the Last-Event-ID header: 1 with *v, 0 when neither is
 * given, -1 when it is not an event id (answered 400). */
static int query_after(avo_http_req *req, long long *v)
{
    const char *after = avo_http_query(req, "after");
    if (!after)
        after = avo_http_header(req, "Last-Event-ID");
    if (!after)
        return 0;
    char *end;
    errno = 0;
    *v = strtoll(after, &end, 10);
    if (errno || *end || *v < 0) {
        avo_http_reply_error(req, 400, "bad_request", "after: '%s' is not a non-negative event id", after);
        return -1;
    }
    return 1;
}

/* The stream's first answer came: for one job (c->id) its state, for all
 * jobs (GET /v1/events: from ?after=N, or the last N events, ?last=N,
 * those one may not read counted too so fewer may come, or from now) the
 * id to start after; ?follow=false ends it once the stored ones are sent. */
static void on_stream_start(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    avo_api *a = c->api;
    long long after = 0;
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
    stream *s = stream_new(a, c->req);
    if (!s)
        goto done;
    s->job = c->id;
    if (c->id) {
        const char *dq = avo_http_query(c->req, "detail");
        (void)query_after(c->req, &after); /* checked by h_events */
        s->detail = dq && (!strcmp(dq, "true") || !strcmp(dq, "1"));
        s->detail_tick = a->ticks;
    } else {
        const char *f = avo_http_query(c->req, "follow");
        after = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        s->follow = !(f && (!strcmp(f, "false") || !strcmp(f, "0")));
        principal_of(a, c->req, &s->who);
    }
    s->after = after;
    stream_begin(s);
done:
    call_free(c);
}

static void h_events(avo_api *a, avo_http_req *req, int64_t id)
{
    long long v;
    if (query_after(req, &v) < 0)
        return;
    call *c = call_new(a, req, id);
    char idb[32];
    snprintf(idb, sizeof idb, "%lld", (long long)id);
    const char *params[] = {idb};
    if (!c || avo_db_query(a->db, "SELECT state FROM jobs WHERE id = $1", 1, params, on_stream_start, c) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        if (c)
            call_free(c);
    }
}

static int query_int(avo_http_req *req, const char *key, long dflt, long max, char *out, size_t outlen);

static void h_all_events(avo_api *a, avo_http_req *req)
{
    char ab[32], lb[16];
    const char *f = avo_http_query(req, "follow");
    if (f && strcmp(f, "true") && strcmp(f, "1") && strcmp(f, "false") && strcmp(f, "0")) {
        avo_http_reply_error(req, 400, "bad_request", "follow: '%s' is not true or false", f);
        return;
    }
    long long v;
    const int after = query_after(req, &v);
    if (after < 0 || query_int(req, "last", 0, 10000, lb, sizeof lb) < 0)
        return;
    ab[0] = 0;
    if (after) {
        if (lb[0]) {
            avo_http_reply_error(req, 400, "bad_request", "after and last: give one of them");
            return;
        }
        snprintf(ab, sizeof ab, "%lld", v);
    }
    call *c = call_new(a, req, 0);
    const char *params[] = {ab[0] ? ab : NULL, lb[0] ? lb : NULL};
    if (!c || avo_db_query(a->db,
                           "SELECT COALESCE($1::bigint, CASE WHEN $2::int IS NULL "
                           "THEN (SELECT COALESCE(max(id), 0) FROM events) "
                           "ELSE (SELECT COALESCE(min(id) - 1, 0) FROM (SELECT id FROM events "
                           "ORDER BY id DESC LIMIT $2::int) l) END)",
                           2, params, on_stream_start, c) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        if (c)
            call_free(c);
    }
}

void avo_api_job_event(avo_api *a, int64_t job)
{
    avo_list_each (node, &a->streams) {
        stream *s = avo_list_entry(node, stream, link);
        if ((s->job == job || s->job == 0) && s->waiting)
            stream_fetch(s);
    }
}

static void on_timer(uv_timer_t *t)
{
    avo_api *a = t->data;
    a->ticks++;
    /* Polling fallback for lost notifications, and a comment line now and
     * then so dead clients are noticed. */
    avo_list_each (node, &a->streams) {
        stream *s = avo_list_entry(node, stream, link);
        if (!s->waiting)
            continue;
        if (a->ticks % 8 == 0)
            avo_http_stream_write(s->req, ": keepalive\n\n", 13);
        else
            stream_fetch(s);
    }
}

/* ---- diffs ---- */

static void on_diff_sources(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    char *diff = NULL;
    if (avo_http_gone(c->req))
        goto done;
    if (err) {
        reply_db_error(c->api, c->req, err);
        goto done;
    }
    if (PQntuples(res) != 1) {
        avo_http_reply_error(c->req, 404, "not_found", "no candidate %lld", (long long)c->id);
        goto done;
    }
    if (PQgetisnull(res, 0, 2)) {
        avo_http_reply_error(c->req, 404, "not_found", "no candidate %s to compare with", avo_http_query(c->req, "to"));
        goto done;
    }
    if (PQgetisnull(res, 0, 0)) {
        avo_http_reply_error(c->req, 400, "bad_request", "candidate %lld has no parent (a seed); pass to=ID",
                             (long long)c->id);
        goto done;
    }
    char na[64], nb[64];
    snprintf(na, sizeof na, "candidate-%s", PQgetvalue(res, 0, 0));
    snprintf(nb, sizeof nb, "candidate-%s", PQgetvalue(res, 0, 2));
    if (avo_srcdiff(PQgetvalue(res, 0, 1), na, PQgetvalue(res, 0, 3), nb, &diff) < 0) {
        avo_http_reply_error(c->req, 500, "internal", "the diff could not be computed");
        goto done;
    }
    avo_http_reply_json(c->req, 200,
                        json_pack("{s:I,s:I,s:s}", "from", (json_int_t)strtoll(PQgetvalue(res, 0, 0), NULL, 10), "to",
                                  (json_int_t)strtoll(PQgetvalue(res, 0, 2), NULL, 10), "diff", diff));
done:
    free(diff);
    call_free(c);
}

/* From candidate `id` to ?to=B; without it, from its parent to it (the
 * lineage step that made it). */
static void h_diff(avo_api *a, avo_http_req *req, int64_t id)
{
    const char *to = avo_http_query(req, "to");
    char idb[32], tob[32] = "";
    if (to) {
        char *end;
        errno = 0;
        long long v = strtoll(to, &end, 10);
        if (errno || *end || v <= 0) {
            avo_http_reply_error(req, 400, "bad_request", "to: '%s' is not a candidate id", to);
            return;
        }
        snprintf(tob, sizeof tob, "%lld", v);
    }
    snprintf(idb, sizeof idb, "%lld", (long long)id);
    const char *params[] = {idb, to ? tob : NULL};
    call *c = call_new(a, req, id);
    /* Columns: from id, from source, to id, to source. No row: no
     * candidate `id`; no from-side: a seed asked for its parent. */
    if (!c ||
        avo_db_query(a->db,
                     "SELECT f.id, fs.body, t.id, ts.body FROM candidates x "
                     "LEFT JOIN candidates f ON f.id = CASE WHEN $2::bigint IS NULL THEN x.parent_id ELSE x.id END "
                     "LEFT JOIN sources fs ON fs.sha256 = f.sha256 "
                     "LEFT JOIN candidates t ON t.id = COALESCE($2::bigint, x.id) "
                     "LEFT JOIN sources ts ON ts.sha256 = t.sha256 WHERE x.id = $1",
                     2, params, on_diff_sources, c) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        if (c)
            call_free(c);
    }
}

/* ---- profiles (sql/011_profiles.sql) ---- */

/* POST /v1/candidates/{id}/profile {"config": NAME?}: the candidate is
 * looked up first (404), then the configuration checked against its
 * problem's (400 listing the valid ones), then the task queued (202 with
 * the profile; one already queued or running for the same configuration
 * is returned instead). */
typedef struct {
    avo_api *api;
    avo_http_req *req;
    char id[32];
    char config[128]; /* longer than any configuration name (avo_config_spec: 64) */
    int has_config;
} profile_req;

static void profile_req_free(profile_req *pr)
{
    avo_http_unref(pr->req);
    free(pr);
}

/* GET /v1/jobs/{id}/problem/diff: the job's pinned package against the
 * package on disk now (pin.h). */
static void on_job_pin(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    json_t *pin = NULL, *out = NULL;
    char why[1024];
    if (avo_http_gone(c->req))
        goto done;
    if (err) {
        reply_db_error(c->api, c->req, err);
        goto done;
    }
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        avo_http_reply_error(c->req, 404, "not_found", "no job %lld", (long long)c->id);
        goto done;
    }
    pin = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
    if (!json_is_string(json_object_get(pin, "hash"))) {
        avo_http_reply_error(c->req, 409, "conflict",
                             "job %lld was submitted before jobs pinned their problem package (sql/016): it has no "
                             "pinned version to compare with",
                             (long long)c->id);
        goto done;
    }
    if (!(out = avo_pin_diff(c->api->kernels_dir, pin, why, sizeof why))) {
        avo_http_reply_error(c->req, 500, "internal", "job %lld: %s", (long long)c->id, why);
        goto done;
    }
    avo_http_reply_json(c->req, 200, out);
done:
    json_decref(pin);
    call_free(c);
}

static void h_job_pin(avo_api *a, avo_http_req *req, int64_t id)
{
    char idb[32];
    snprintf(idb, sizeof idb, "%lld", (long long)id);
    const char *params[] = {idb};
    call *c = call_new(a, req, id);
    if (!c || avo_db_query(a->db, "SELECT avo_job_pin($1)", 1, params, on_job_pin, c) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        if (c)
            call_free(c);
    }
}

static void on_profile_candidate(void *arg, PGresult *res, const char *err)
{
    profile_req *pr = arg;
    if (avo_http_gone(pr->req))
        goto done;
    if (err) {
        reply_db_error(pr->api, pr->req, err);
        goto done;
    }
    if (PQntuples(res) != 1) {
        avo_http_reply_error(pr->req, 404, "not_found", "no candidate %s", pr->id);
        goto done;
    }
    if (pr->has_config) {
        char dir[PATH_MAX], why[900];
        avo_problem p;
        if (avo_problem_resolve(pr->api->kernels_dir, PQgetvalue(res, 0, 0), dir, sizeof dir, why, sizeof why) < 0 ||
            avo_problem_load(&p, dir, why, sizeof why) < 0) {
            avo_http_reply_error(pr->req, 500, "internal", "candidate %s's problem cannot be read: %s", pr->id, why);
            goto done;
        }
        int c = avo_problem_config_index(&p, pr->config, why, sizeof why);
        avo_problem_free(&p);
        if (c < 0) {
            avo_http_reply_error(pr->req, 400, "bad_request", "config: %s", why);
            goto done;
        }
    }
    const char *params[] = {pr->id, pr->has_config ? pr->config : NULL};
    query_json(pr->api, pr->req, 0, "SELECT avo_profile_json(avo_profile_request($1, $2, 'user'))", 2, params, NULL,
               202);
done:
    profile_req_free(pr);
}

static void h_profile(avo_api *a, avo_http_req *req, int64_t id)
{
    size_t len;
    const char *body = avo_http_body(req, &len);
    json_error_t je;
    json_t *in = len ? json_loadb(body, len, 0, &je) : json_object();
    const char *key;
    json_t *v;
    profile_req *pr = NULL;
    if (!json_is_object(in)) {
        avo_http_reply_error(req, 400, "bad_request", "expected a JSON object {\"config\": NAME} or no body%s%s",
                             in ? "" : ": ", in ? "" : je.text);
        goto done;
    }
    json_object_foreach(in, key, v)
    {
        if (strcmp(key, "config") != 0) {
            avo_http_reply_error(req, 400, "bad_request", "%s: unknown field (a profile takes only config)", key);
            goto done;
        }
    }
    v = json_object_get(in, "config");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || !json_string_length(v) || json_string_length(v) >= sizeof pr->config)) {
        avo_http_reply_error(req, 400, "bad_request", "config: a configuration name, a non-empty string");
        goto done;
    }
    if (!(pr = calloc(1, sizeof *pr))) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        goto done;
    }
    pr->api = a;
    pr->req = req;
    avo_http_ref(req);
    snprintf(pr->id, sizeof pr->id, "%lld", (long long)id);
    if ((pr->has_config = json_is_string(v)))
        snprintf(pr->config, sizeof pr->config, "%s", json_string_value(v));
    const char *params[] = {pr->id};
    if (avo_db_query(a->db, "SELECT j.problem FROM candidates c JOIN jobs j ON j.id = c.job_id WHERE c.id = $1", 1,
                     params, on_profile_candidate, pr) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        profile_req_free(pr);
    }
done:
    json_decref(in);
}

/* ---- paired comparisons ---- */

/* A request function's answer (avo_compare_request, avo_revalidate_request):
 * {KEY: ...} replied 202, with c->key naming it, or the refusal it names
 * ({"status", "code", "message"}). */
static void on_request_answer(void *arg, PGresult *res, const char *err)
{
    call *c = arg;
    json_t *j = NULL;
    if (avo_http_gone(c->req))
        goto done;
    if (err) {
        reply_db_error(c->api, c->req, err);
        goto done;
    }
    json_error_t je;
    if (PQntuples(res) != 1 || !(j = json_loads(PQgetvalue(res, 0, 0), 0, &je))) {
        avo_http_reply_error(c->req, 500, "internal", "bad answer from the %s request function", c->key);
        goto done;
    }
    const char *code = json_string_value(json_object_get(j, "code"));
    if (code) {
        avo_http_reply_error(c->req, (int)json_integer_value(json_object_get(j, "status")), code, "%s",
                             json_string_value(json_object_get(j, "message")));
        goto done;
    }
    avo_http_reply_json(c->req, 202, json_incref(json_object_get(j, c->key)));
done:
    json_decref(j);
    call_free(c);
}

/* A positive integer field (a candidate id) as decimal text; -1 after
 * replying 400 naming it. */
static int id_field(avo_http_req *req, const json_t *in, const char *key, char *out, size_t outlen)
{
    const json_t *v = json_object_get(in, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        avo_http_reply_error(req, 400, "bad_request", "%s: a candidate id, a positive integer%s", key,
                             v ? "" : " (missing)");
        return -1;
    }
    snprintf(out, outlen, "%lld", (long long)json_integer_value(v));
    return 0;
}

/* POST /v1/compare {"candidate": A, "against": B, "confidence"?: C}: A timed
 * paired against B by a worker, as a queued evaluation of its own (purpose
 * 'compare', sql/015_compare.sql); 202 with the compare. The checks that
 * need the database (both exist, one problem, one target) are
 * avo_compare_request's. */
static void h_compare(avo_api *a, avo_http_req *req)
{
    size_t len;
    const char *body = avo_http_body(req, &len);
    json_error_t je;
    json_t *in = json_loadb(body, len, 0, &je);
    const char *key;
    json_t *v;
    char cand[32], against[32], conf[32];
    if (!json_is_object(in)) {
        avo_http_reply_error(req, 400, "bad_request",
                             "expected a JSON object {\"candidate\": ID, \"against\": ID, \"confidence\": C}%s%s",
                             in ? "" : ": ", in ? "" : je.text);
        goto done;
    }
    json_object_foreach(in, key, v)
    {
        if (strcmp(key, "candidate") && strcmp(key, "against") && strcmp(key, "confidence")) {
            avo_http_reply_error(req, 400, "bad_request", "%s: unknown field (candidate, against, confidence)", key);
            goto done;
        }
    }
    if (id_field(req, in, "candidate", cand, sizeof cand) < 0 ||
        id_field(req, in, "against", against, sizeof against) < 0)
        goto done;
    v = json_object_get(in, "confidence");
    const double c = v ? json_number_value(v) : 0.95;
    if (v && (!json_is_number(v) || !(c > 0 && c < 1))) {
        avo_http_reply_error(req, 400, "bad_request", "confidence: a number in (0, 1), e.g. 0.95");
        goto done;
    }
    snprintf(conf, sizeof conf, "%.17g", c);
    call *cl = call_new(a, req, 0);
    const char *params[] = {cand, against, conf};
    if (cl)
        cl->key = "compare";
    if (!cl) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
    } else if (avo_db_query(a->db, "SELECT avo_compare_request($1, $2, $3::float8)", 3, params, on_request_answer, cl) <
               0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        call_free(cl);
    }
done:
    json_decref(in);
}

/* ---- re-validation (issue 21, point 3; sql/018_toolchain.sql) ---- */

/* POST /v1/revalidate {"job": J} or {"candidate": C}, with "on_worker": W
 * or "on_gpu": "H200" / "GPU-uuid" at most: the committed versions (or the
 * one candidate) queued again as evaluations of purpose 'revalidate'; 202
 * with the re-validation. What needs the database (the job, the candidate
 * and its recorded result, the worker) is avo_revalidate_request's. */
static void h_revalidate(avo_api *a, avo_http_req *req)
{
    size_t len;
    const char *body = avo_http_body(req, &len);
    json_error_t je;
    json_t *in = json_loadb(body, len, 0, &je);
    const char *key, *why = "user";
    json_t *v;
    char job[32] = "", cand[32] = "", worker[32] = "", gpu[128] = "";
    if (!json_is_object(in)) {
        avo_http_reply_error(req, 400, "bad_request",
                             "expected a JSON object {\"job\": ID} or {\"candidate\": ID}, with \"on_worker\" or "
                             "\"on_gpu\"%s%s",
                             in ? "" : ": ", in ? "" : je.text);
        goto done;
    }
    json_object_foreach(in, key, v)
    {
        const int id = !strcmp(key, "job") || !strcmp(key, "candidate") || !strcmp(key, "on_worker");
        if (id) {
            if (!json_is_integer(v) || json_integer_value(v) < 1) {
                avo_http_reply_error(req, 400, "bad_request", "%s: a positive integer id", key);
                goto done;
            }
            snprintf(!strcmp(key, "job")         ? job
                     : !strcmp(key, "candidate") ? cand
                                                 : worker,
                     32, "%lld", (long long)json_integer_value(v));
        } else if (!strcmp(key, "on_gpu")) {
            if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) >= sizeof gpu) {
                avo_http_reply_error(req, 400, "bad_request",
                                     "on_gpu: a GPU model (\"H200\") or UUID (\"GPU-...\"), 1 to 127 characters");
                goto done;
            }
            snprintf(gpu, sizeof gpu, "%s", json_string_value(v));
        } else if (!strcmp(key, "why")) {
            if (!json_is_string(v) ||
                (strcmp(json_string_value(v), "user") && strcmp(json_string_value(v), "campaign"))) {
                avo_http_reply_error(req, 400, "bad_request", "why: \"user\" or \"campaign\"");
                goto done;
            }
            why = json_string_value(v);
        } else {
            avo_http_reply_error(req, 400, "bad_request", "%s: unknown field (job, candidate, on_worker, on_gpu, why)",
                                 key);
            goto done;
        }
    }
    if (!job[0] == !cand[0]) {
        avo_http_reply_error(req, 400, "bad_request", "job, candidate: give exactly one of them");
        goto done;
    }
    if (worker[0] && gpu[0]) {
        avo_http_reply_error(req, 400, "bad_request", "on_worker, on_gpu: give at most one of them");
        goto done;
    }
    call *cl = call_new(a, req, 0);
    const char *params[] = {job[0] ? job : NULL, cand[0] ? cand : NULL, worker[0] ? worker : NULL, gpu[0] ? gpu : NULL,
                            why};
    if (cl)
        cl->key = "revalidation";
    if (!cl) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
    } else if (avo_db_query(a->db, "SELECT avo_revalidate_request($1::bigint, $2::bigint, $3::bigint, $4, $5)", 5,
                            params, on_request_answer, cl) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        call_free(cl);
    }
done:
    json_decref(in);
}

/* ---- knowledge base ---- */

/* {"name": "tma.md", "text": "..."}: cut into chunks here, stored in one
 * statement (the same text twice is stored once). */
static void h_kb_add(avo_api *a, avo_http_req *req)
{
    size_t len;
    const char *body = avo_http_body(req, &len);
    json_error_t je;
    json_t *in = json_loadb(body, len, 0, &je), *chunks = NULL;
    char err[512], sha[AVO_SHA256_HEX], bytes[32];
    char *cj = NULL;
    if (!in || !json_is_object(in)) {
        avo_http_reply_error(req, 400, "bad_request", "expected a JSON object {\"name\": ..., \"text\": ...}%s%s",
                             in ? "" : ": ", in ? "" : je.text);
        goto done;
    }
    const char *name = json_string_value(json_object_get(in, "name"));
    json_t *text = json_object_get(in, "text");
    if (!name || !*name || strlen(name) > 255) {
        avo_http_reply_error(req, 400, "bad_request", "name: a non-empty string of at most 255 characters");
        goto done;
    }
    if (!json_is_string(text)) {
        avo_http_reply_error(req, 400, "bad_request", "text: the document's text, a string");
        goto done;
    }
    if (avo_kb_chunk(name, json_string_value(text), json_string_length(text), &chunks, err, sizeof err) < 0) {
        avo_http_reply_error(req, 400, "bad_request", "%s", err);
        goto done;
    }
    if (avo_hash_sha256_hex(json_string_value(text), json_string_length(text), sha) < 0 ||
        !(cj = json_dumps(chunks, JSON_COMPACT))) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        goto done;
    }
    snprintf(bytes, sizeof bytes, "%zu", json_string_length(text));
    const char *params[] = {name, sha, avo_kb_kind(name), bytes, cj};
    query_json(a, req, 0, "SELECT avo_kb_add($1, $2, $3, $4::int, $5::jsonb)", 5, params, NULL, 200);
done:
    free(cj);
    json_decref(chunks);
    json_decref(in);
}

/* ?KEY=N, a positive integer up to max: out gets its decimal text, or
 * dflt's when absent (dflt 0: out stays "", the parameter is NULL). 0, or
 * -1 after replying 400. */
static int query_int(avo_http_req *req, const char *key, long dflt, long max, char *out, size_t outlen)
{
    const char *v = avo_http_query(req, key);
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : dflt;
    if (v && (*end || n < 1 || n > max)) {
        avo_http_reply_error(req, 400, "bad_request", "%s: '%s' is not in 1..%ld", key, v, max);
        return -1;
    }
    if (n > 0)
        snprintf(out, outlen, "%ld", n);
    else if (outlen)
        out[0] = 0;
    return 0;
}

static void h_kb_search(avo_api *a, avo_http_req *req)
{
    const char *q = avo_http_query(req, "q");
    char lb[16];
    if (!q || !*q || strlen(q) > 512) {
        avo_http_reply_error(req, 400, "bad_request", "q: the words to search for (1 to 512 characters)");
        return;
    }
    if (query_int(req, "limit", AVO_KB_SEARCH_LIMIT_DEFAULT, AVO_KB_SEARCH_LIMIT_MAX, lb, sizeof lb) < 0)
        return;
    const char *params[] = {q, lb};
    query_json(a, req, 0, "SELECT avo_kb_search($1, $2::int)", 2, params, NULL, 200);
}

void avo_api_set_agent(avo_api *a, avo_agent *agent)
{
    a->agent = agent;
}

void avo_api_set_pgwatch(avo_api *a, const avo_pgwatch *w)
{
    a->pgwatch = w;
}

void avo_api_set_ident(avo_api *a, const avo_ident *ident)
{
    a->ident = ident;
}

/* ---- permissions ---- */

/* What a route does to the job it names: nothing (0), reads it (1),
 * changes it (2); candidate routes name the candidate's job. */
/* What a guarded route's id names, for the owner lookup and the messages. */
enum { BY_JOB, BY_CANDIDATE, BY_PROFILE, BY_COMPARE, BY_REVALIDATION };
static const struct {
    const char *noun;
    const char *sql; /* $1: the id -> owner, team */
} guard_by[] = {
    [BY_JOB] = {"job", "SELECT owner, team FROM jobs WHERE id = $1"},
    [BY_CANDIDATE] = {"candidate", "SELECT j.owner, j.team FROM candidates c JOIN jobs j ON j.id = c.job_id "
                                   "WHERE c.id = $1"},
    [BY_PROFILE] = {"profile", "SELECT j.owner, j.team FROM profiles p JOIN jobs j ON j.id = p.job_id WHERE p.id = $1"},
    [BY_COMPARE] = {"compare", "SELECT j.owner, j.team FROM evaluations e JOIN jobs j ON j.id = e.job_id "
                               "WHERE e.id = $1 AND e.purpose = 'compare'"},
    [BY_REVALIDATION] = {"revalidation", "SELECT j.owner, j.team FROM revalidations r JOIN jobs j ON j.id = r.job_id "
                                         "WHERE r.id = $1"},
};

static int route_access(int route, int *by)
{
    *by = BY_JOB;
    switch (route) {
    case AVO_ROUTE_JOB_CANCEL:
        return 2;
    case AVO_ROUTE_CANDIDATE_PROFILE:
        *by = BY_CANDIDATE;
        return 2;
    case AVO_ROUTE_PROFILE:
        *by = BY_PROFILE;
        return 1;
    case AVO_ROUTE_COMPARE_GET:
        *by = BY_COMPARE;
        return 1;
    case AVO_ROUTE_REVALIDATION:
        *by = BY_REVALIDATION;
        return 1;
    case AVO_ROUTE_JOB_GET:
    case AVO_ROUTE_JOB_BEST:
    case AVO_ROUTE_JOB_EVENTS:
    case AVO_ROUTE_JOB_LINEAGE:
    case AVO_ROUTE_JOB_REPORT:
    case AVO_ROUTE_JOB_PROBLEM_DIFF:
    case AVO_ROUTE_JOB_TRANSCRIPT:
        return 1;
    case AVO_ROUTE_CANDIDATE:
    case AVO_ROUTE_CANDIDATE_DIFF:
        *by = BY_CANDIDATE;
        return 1;
    default:
        return 0;
    }
}

static void dispatch(avo_api *a, avo_http_req *req, int route, int64_t id, const avo_principal *who, const char *rule);

typedef struct {
    avo_api *api;
    avo_http_req *req;
    int route;
    int64_t id;
    int by;
} guard;

/* The job's owner and team are here: apply the rule, then serve. */
static void on_guard(void *arg, PGresult *res, const char *err)
{
    guard *g = arg;
    avo_principal who;
    char rule[512];
    int by;
    if (avo_http_gone(g->req))
        goto done;
    if (err) {
        reply_db_error(g->api, g->req, err);
        goto done;
    }
    if (PQntuples(res) != 1) {
        avo_http_reply_error(g->req, 404, "not_found", "no %s %lld", guard_by[g->by].noun, (long long)g->id);
        goto done;
    }
    const char *owner = PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
    const char *team = PQgetisnull(res, 0, 1) ? NULL : PQgetvalue(res, 0, 1);
    principal_of(g->api, g->req, &who);
    if (route_access(g->route, &by) == 2) {
        if (!avo_ident_may_change(&who, owner, team, rule, sizeof rule)) {
            reply_forbidden(g->req, "owner_team_or_admin", "%s %lld: %s", guard_by[g->by].noun, (long long)g->id, rule);
            goto done;
        }
    } else if (!avo_ident_may_read(g->api->ident, &who, owner, team, rule, sizeof rule)) {
        reply_forbidden(g->req, "read_access", "%s %lld: %s", guard_by[g->by].noun, (long long)g->id, rule);
        goto done;
    }
    dispatch(g->api, g->req, g->route, g->id, &who, rule);
done:
    avo_http_unref(g->req);
    free(g);
}

/* Routes on one job that need its owner first: every change, and reads
 * when read-access = team. Returns 1 when the guard answers. */
static int guarded(avo_api *a, avo_http_req *req, int route, int64_t id)
{
    int by;
    int access = route_access(route, &by);
    if (access == 0 || (access == 1 && avo_ident_read_all(a->ident)))
        return 0;
    guard *g = calloc(1, sizeof *g);
    char idb[32];
    snprintf(idb, sizeof idb, "%lld", (long long)id);
    const char *params[] = {idb};
    if (!g) {
        avo_http_reply_error(req, 500, "internal", "out of memory");
        return 1;
    }
    *g = (guard){a, req, route, id, by};
    avo_http_ref(req);
    if (avo_db_query(a->db, guard_by[by].sql, 1, params, on_guard, g) < 0) {
        avo_http_reply_error(req, 503, "unavailable", "database unavailable; retry shortly");
        avo_http_unref(req);
        free(g);
    }
    return 1;
}

void avo_api_handle(void *arg, avo_http_req *req)
{
    avo_api *a = arg;
    int64_t id = 0;
    int route = avo_routes_match(avo_http_method(req), avo_http_path(req), &id);
    avo_principal who;
    avo_debug("api", "%s %s", avo_http_method(req), avo_http_path(req));
    if (route >= 0 && guarded(a, req, route, id))
        return;
    principal_of(a, req, &who);
    dispatch(a, req, route, id, &who, NULL);
}

/* One request as dispatch hands it to its route's handler. */
typedef struct {
    avo_api *a;
    avo_http_req *req;
    int64_t id;
    const avo_principal *who;
    const char *rule; /* what allowed a guarded route (ident.h), NULL for the others */
} route_call;

/* Routes that answer the one row of `sql` on the path's id; 404 "no NOUN ID". */
static void reply_by_id(const route_call *rc, const char *sql, const char *noun)
{
    char idb[32], nf[64];
    snprintf(idb, sizeof idb, "%lld", (long long)rc->id);
    snprintf(nf, sizeof nf, "no %s %lld", noun, (long long)rc->id);
    const char *p1[] = {idb};
    query_json(rc->a, rc->req, rc->id, sql, 1, p1, nf, 200);
}

static void r_whoami(const route_call *rc)
{
    const avo_principal *who = rc->who;
    avo_http_reply_json(rc->req, 200,
                        json_pack("{s:s,s:s?,s:b,s:s,s:s}", "name", who->name, "team", who->team[0] ? who->team : NULL,
                                  "admin", who->admin, "via", who->via, "read_access",
                                  avo_ident_read_all(rc->a->ident) ? "all" : "team"));
}

static void r_health(const route_call *rc)
{
    /* Degraded: avod runs but cannot do all its work, and says why. */
    const int up = avo_db_is_up(rc->a->db);
    const char *why = avo_pgwatch_problem(rc->a->pgwatch);
    if (!why && !up)
        why = "no connection to the database; reconnecting";
    json_t *body = json_pack("{s:b,s:s,s:s,s:s}", "ok", up, "status", why ? "degraded" : "ok", "version", AVO_VERSION,
                             "db", up ? "up" : "down");
    if (body && why)
        json_object_set_new(body, "reason", json_string(why));
    avo_http_reply_json(rc->req, up ? 200 : 503, body);
}

static void r_job_submit(const route_call *rc)
{
    h_submit(rc->a, rc->req);
}

/* label=KEY=VALUE (jobs whose labels include it) as the jsonb `label` the
 * list query takes. Returns -1 when it has answered 400. */
static int job_list_label(avo_http_req *req, const char *lq, char *label, size_t labellen)
{
    const char *eq = strchr(lq, '=');
    char key[AVO_JOBSPEC_LABEL_KEY_MAX + 2];
    snprintf(key, sizeof key, "%.*s", eq ? (int)(eq - lq) : 0, lq);
    if (!eq || (size_t)(eq - lq) >= sizeof key || !avo_jobspec_label_key_ok(key)) {
        avo_http_reply_error(req, 400, "bad_request",
                             "label: '%.100s' is not KEY=VALUE with a label key "
                             "(a-z 0-9 . _ / -)",
                             lq);
        return -1;
    }
    json_t *l = json_pack("{s:s}", key, eq + 1);
    char *t = l ? json_dumps(l, JSON_COMPACT) : NULL;
    json_decref(l);
    if (!t || strlen(t) >= labellen) {
        free(t);
        avo_http_reply_error(req, 400, "bad_request", "label: too long");
        return -1;
    }
    snprintf(label, labellen, "%s", t);
    free(t);
    return 0;
}

/* The list's filters, checked: ?state=, ?mine=, ?owner=, ?team=, ?label=.
 * Returns -1 when it has answered 400. */
static int job_list_filters(avo_http_req *req, const avo_principal *who, char *mine, size_t minelen, char *label,
                            size_t labellen)
{
    const char *state = avo_http_query(req, "state");
    const char *owner = avo_http_query(req, "owner"), *team = avo_http_query(req, "team");
    const char *lq = avo_http_query(req, "label"), *mq = avo_http_query(req, "mine");
    if (state && strcmp(state, "queued") && strcmp(state, "running") && strcmp(state, "succeeded") &&
        strcmp(state, "failed") && strcmp(state, "cancelled")) {
        avo_http_reply_error(req, 400, "bad_request",
                             "state: '%s' is not one of queued, running, succeeded, failed, cancelled", state);
        return -1;
    }
    if (mq && strcmp(mq, "true") && strcmp(mq, "1") && strcmp(mq, "false") && strcmp(mq, "0")) {
        avo_http_reply_error(req, 400, "bad_request", "mine: '%s' is not true or false", mq);
        return -1;
    }
    if (mq && (!strcmp(mq, "true") || !strcmp(mq, "1")))
        snprintf(mine, minelen, "%s", who->name);
    if ((owner && !*owner) || (team && !*team)) {
        avo_http_reply_error(req, 400, "bad_request", "%s: empty", owner && !*owner ? "owner" : "team");
        return -1;
    }
    return lq ? job_list_label(req, lq, label, labellen) : 0;
}

static void r_job_list(const route_call *rc)
{
    /* Newest first, a page at a time: ?before=ID continues where the
     * last page ended (its "next_before"); ?state= filters. */
    avo_http_req *req = rc->req;
    const avo_principal *who = rc->who;
    char lb[16], bb[32], mine[AVO_PRINCIPAL_MAX + 1] = "", label[512] = "";
    if (query_int(req, "limit", AVO_JOB_LIST_LIMIT_DEFAULT, AVO_JOB_LIST_LIMIT_MAX, lb, sizeof lb) < 0 ||
        query_int(req, "before", 0, 9007199254740991L, bb, sizeof bb) < 0)
        return;
    if (job_list_filters(req, who, mine, sizeof mine, label, sizeof label) < 0)
        return;
    /* read-access = team: one's own, one's team's, those without owner; admins all */
    const int all = avo_ident_read_all(rc->a->ident) || who->admin;
    const char *pl[] = {lb,
                        bb[0] ? bb : NULL,
                        avo_http_query(req, "state"),
                        mine[0] ? mine : avo_http_query(req, "owner"),
                        avo_http_query(req, "team"),
                        label[0] ? label : NULL,
                        all ? "true" : "false",
                        who->name,
                        who->team};
    query_json(rc->a, req, 0,
               "WITH page AS (SELECT id FROM jobs WHERE ($2::bigint IS NULL OR id < $2) "
               "AND ($3::text IS NULL OR state = $3) AND ($4::text IS NULL OR owner = $4) "
               "AND ($5::text IS NULL OR team = $5) AND ($6::jsonb IS NULL OR labels @> $6::jsonb) "
               "AND ($7::bool OR owner IS NULL OR owner = $8 OR (team = NULLIF($9, ''))) "
               "ORDER BY id DESC LIMIT $1::int + 1) "
               "SELECT jsonb_build_object('jobs', COALESCE((SELECT jsonb_agg(avo_job_json(id) ORDER BY id DESC) "
               "FROM (SELECT id FROM page ORDER BY id DESC LIMIT $1::int) p), '[]'), "
               "'next_before', CASE WHEN (SELECT count(*) FROM page) > $1::int "
               "THEN (SELECT min(id) FROM (SELECT id FROM page ORDER BY id DESC LIMIT $1::int) p) END)",
               9, pl, NULL, 200);
}

static void r_job_get(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_job_json($1)", "job");
}

static void r_job_cancel(const route_call *rc)
{
    char idb[32];
    snprintf(idb, sizeof idb, "%lld", (long long)rc->id);
    call *c = call_new(rc->a, rc->req, rc->id);
    const char *pc[] = {idb, rc->who->name, rc->who->team, rc->rule ? rc->rule : "owner"};
    if (!c || avo_db_query(rc->a->db, "SELECT avo_job_cancel_as($1, $2, $3, $4)", 4, pc, on_cancelled, c) < 0) {
        avo_http_reply_error(rc->req, 503, "unavailable", "database unavailable; retry shortly");
        if (c)
            call_free(c);
    }
}

static void r_job_best(const route_call *rc)
{
    reply_by_id(rc,
                "SELECT jsonb_build_object('job', j.id, 'state', j.state, "
                "'best', avo_candidate_json(j.best_candidate, true), "
                "'seed', avo_candidate_json(j.seed_candidate, true)) FROM jobs j WHERE j.id = $1",
                "job");
}

static void r_job_events(const route_call *rc)
{
    h_events(rc->a, rc->req, rc->id);
}

static void r_events(const route_call *rc)
{
    h_all_events(rc->a, rc->req);
}

static void r_job_lineage(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_job_lineage($1)", "job");
}

static void r_job_transcript(const route_call *rc)
{
    char idb[32], nf[64], nb[16];
    if (query_int(rc->req, "step", 0, 1000000, nb, sizeof nb) < 0)
        return;
    snprintf(idb, sizeof idb, "%lld", (long long)rc->id);
    snprintf(nf, sizeof nf, "no job %lld", (long long)rc->id);
    const char *pt[] = {idb, nb[0] ? nb : NULL};
    query_json(rc->a, rc->req, rc->id, "SELECT avo_job_transcript($1, $2::int)", 2, pt, nf, 200);
}

static void r_job_problem_diff(const route_call *rc)
{
    h_job_pin(rc->a, rc->req, rc->id);
}

static void r_job_report(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_job_report($1)", "job");
}

static void r_candidate(const route_call *rc)
{
    /* With its latest profile (sql/011_profiles.sql), if any. */
    reply_by_id(rc, "SELECT avo_candidate_json($1, true) || jsonb_build_object('profile', avo_candidate_profile($1))",
                "candidate");
}

static void r_candidate_profile(const route_call *rc)
{
    h_profile(rc->a, rc->req, rc->id);
}

static void r_profile(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_profile_json($1)", "profile");
}

static void r_candidate_diff(const route_call *rc)
{
    h_diff(rc->a, rc->req, rc->id);
}

static void r_compare(const route_call *rc)
{
    h_compare(rc->a, rc->req);
}

static void r_compare_get(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_compare_json($1)", "compare");
}

static void r_revalidate(const route_call *rc)
{
    h_revalidate(rc->a, rc->req);
}

static void r_revalidation(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_revalidation_json($1)", "revalidation");
}

static void r_metrics(const route_call *rc)
{
    h_metrics(rc->a, rc->req);
}

static void r_problems(const route_call *rc)
{
    json_t *list = avo_problems_list(rc->a->kernels_dir);
    if (list)
        avo_http_reply_json(rc->req, 200, list);
    else
        avo_http_reply_error(rc->req, 500, "internal", "out of memory listing %s", rc->a->kernels_dir);
}

static void r_problem(const route_call *rc)
{
    /* The name is the rest of the path (it holds slashes). */
    char err[1024], name[1024];
    json_t *o = NULL;
    /* one trailing slash is tolerated, as the route table does */
    snprintf(name, sizeof name, "%s", avo_http_path(rc->req) + strlen("/v1/problems/"));
    if (*name && name[strlen(name) - 1] == '/')
        name[strlen(name) - 1] = 0;
    int got = avo_problems_get(rc->a->kernels_dir, name, &o, err, sizeof err);
    if (got == 0)
        avo_http_reply_json(rc->req, 200, o);
    else
        avo_http_reply_error(rc->req,
                             got == -ENOENT   ? 404
                             : got == -ENOMEM ? 500
                                              : 400,
                             got == -ENOENT   ? "not_found"
                             : got == -ENOMEM ? "internal"
                                              : "bad_request",
                             "%s", err);
}

static void r_workers(const route_call *rc)
{
    query_json(rc->a, rc->req, 0,
               "SELECT jsonb_build_object('workers', COALESCE(jsonb_agg(to_jsonb(w) || "
               "jsonb_build_object('current', avo_worker_current(w.id)) ORDER BY w.id), "
               "'[]')) FROM workers w WHERE w.state <> 'gone' OR w.last_seen > now() - interval '1 hour'",
               0, NULL, NULL, 200);
}

static void r_teams(const route_call *rc)
{
    query_json(rc->a, rc->req, 0, "SELECT avo_teams_json()", 0, NULL, NULL, 200);
}

static void r_kb_add(const route_call *rc)
{
    h_kb_add(rc->a, rc->req);
}

static void r_kb_list(const route_call *rc)
{
    query_json(rc->a, rc->req, 0, "SELECT avo_kb_list()", 0, NULL, NULL, 200);
}

static void r_kb_search(const route_call *rc)
{
    h_kb_search(rc->a, rc->req);
}

static void r_kb_chunk(const route_call *rc)
{
    reply_by_id(rc, "SELECT avo_kb_chunk_json($1)", "knowledge-base chunk");
}

/* Route -> handler; a route missing here answers 500 "has no handler". */
static void (*const route_handlers[AVO_ROUTE_COUNT])(const route_call *) = {
    [AVO_ROUTE_HEALTH] = r_health,
    [AVO_ROUTE_WHOAMI] = r_whoami,
    [AVO_ROUTE_JOB_SUBMIT] = r_job_submit,
    [AVO_ROUTE_JOB_LIST] = r_job_list,
    [AVO_ROUTE_JOB_GET] = r_job_get,
    [AVO_ROUTE_JOB_CANCEL] = r_job_cancel,
    [AVO_ROUTE_JOB_BEST] = r_job_best,
    [AVO_ROUTE_JOB_EVENTS] = r_job_events,
    [AVO_ROUTE_JOB_LINEAGE] = r_job_lineage,
    [AVO_ROUTE_JOB_REPORT] = r_job_report,
    [AVO_ROUTE_JOB_PROBLEM_DIFF] = r_job_problem_diff,
    [AVO_ROUTE_JOB_TRANSCRIPT] = r_job_transcript,
    [AVO_ROUTE_CANDIDATE] = r_candidate,
    [AVO_ROUTE_CANDIDATE_DIFF] = r_candidate_diff,
    [AVO_ROUTE_CANDIDATE_PROFILE] = r_candidate_profile,
    [AVO_ROUTE_PROFILE] = r_profile,
    [AVO_ROUTE_COMPARE] = r_compare,
    [AVO_ROUTE_COMPARE_GET] = r_compare_get,
    [AVO_ROUTE_REVALIDATE] = r_revalidate,
    [AVO_ROUTE_REVALIDATION] = r_revalidation,
    [AVO_ROUTE_PROBLEMS] = r_problems,
    [AVO_ROUTE_PROBLEM] = r_problem,
    [AVO_ROUTE_WORKERS] = r_workers,
    [AVO_ROUTE_EVENTS] = r_events,
    [AVO_ROUTE_TEAMS] = r_teams,
    [AVO_ROUTE_KB_ADD] = r_kb_add,
    [AVO_ROUTE_KB_LIST] = r_kb_list,
    [AVO_ROUTE_KB_SEARCH] = r_kb_search,
    [AVO_ROUTE_KB_CHUNK] = r_kb_chunk,
    [AVO_ROUTE_METRICS] = r_metrics,
};

/* rule: what allowed a guarded route (ident.h), NULL for the others. */
static void dispatch(avo_api *a, avo_http_req *req, int route, int64_t id, const avo_principal *who, const char *rule)
{
    const char *method = avo_http_method(req), *path = avo_http_path(req);
    if (route == -404) {
        avo_http_reply_error(req, 404, "no_route", "no route %s %s (proto/openapi.yaml lists them)", method, path);
    } else if (route == -405) {
        char allow[64];
        avo_routes_allow(path, allow, sizeof allow);
        avo_http_reply_error(req, 405, "method_not_allowed", "%s is not allowed on %s (it takes %s)", method, path,
                             allow);
        avo_http_reply_header(req, "Allow", allow);
    } else if (route >= 0 && route < AVO_ROUTE_COUNT && route_handlers[route]) {
        const route_call rc = {a, req, id, who, rule};
        route_handlers[route](&rc);
    } else {
        avo_http_reply_error(req, 500, "internal", "route %d has no handler", route);
    }
}

int avo_api_start(avo_api **out, uv_loop_t *loop, avo_db *db, avo_engine *engine, const char *kernels_dir,
                  const char *home)
{
    avo_api *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->db = db;
    a->engine = engine;
    avo_list_init(&a->streams);
    snprintf(a->kernels_dir, sizeof a->kernels_dir, "%s", kernels_dir);
    avo_paths_compile_check(home, a->check_cache, sizeof a->check_cache, a->worker_bin, sizeof a->worker_bin);
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
    avo_list_each (node, &a->streams) {
        avo_http_stream_end(avo_list_entry(node, stream, link)->req);
    }
    avo_seedcheck_stop_all();
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, api_closed);
}
