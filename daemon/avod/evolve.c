#include "evolve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_hash.h"
#include "tune.h"

int avo_commit_rule(double aggregate, double best, double epsilon)
{
    return isfinite(aggregate) && aggregate > 0 && aggregate >= best * (1.0 - epsilon);
}

static double num(json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static json_t *knobs_json(const avo_problem *p, const int64_t *v)
{
    json_t *o = json_object();
    for (int i = 0; i < p->nknobs; i++)
        json_object_set_new(o, p->knobs[i].name, json_integer(v[i]));
    return o;
}

/* Read {"BM":64,...} back into spec order; 0 when a knob is missing. */
static int knobs_from_json(const avo_problem *p, json_t *o, int64_t *v)
{
    if (!json_is_object(o))
        return 0;
    for (int i = 0; i < p->nknobs; i++) {
        json_t *x = json_object_get(o, p->knobs[i].name);
        if (!json_is_integer(x))
            return 0;
        v[i] = json_integer_value(x);
    }
    return 1;
}

static int propose(json_t *list, const avo_problem *p, const int64_t *v, const char *seed_src,
                   json_int_t parent, int is_seed)
{
    char *src = NULL;
    char sha[AVO_SHA256_HEX];
    if (avo_problem_render(p, v, seed_src, &src) < 0)
        return -12;
    if (avo_sha256_hex(src, strlen(src), sha) < 0) {
        free(src);
        return -5;
    }
    json_t *x = json_pack("{s:s,s:s,s:s,s:o,s:b}", "sha256", sha, "source", src, "operator",
                          is_seed ? "seed" : "tune", "knobs", knobs_json(p, v), "seed", is_seed);
    free(src);
    if (!x)
        return -12;
    json_object_set_new(x, "parent", parent > 0 ? json_integer(parent) : json_null());
    json_array_append_new(list, x);
    return 0;
}

json_t *avo_evolve_decide(json_t *snap, const avo_problem *p, const char *seed_src, char *err,
                          size_t errlen)
{
    json_t *d = json_pack("{s:b,s:[],s:[],s:n}", "start", 0, "consume", "propose", "finish");
    json_t *consume = json_object_get(d, "consume"), *props = json_object_get(d, "propose");
    json_t *spec = json_object_get(snap, "spec");
    const char *state = json_string_value(json_object_get(snap, "state"));
    double epsilon = num(spec, "epsilon", 0);
    int islands = (int)num(spec, "islands", 1);
    double wall = num(json_object_get(spec, "budget"), "wall_seconds", 0);
    int budget = (int)num(snap, "budget", 1);
    int total = (int)num(snap, "total", 0), inflight = (int)num(snap, "inflight", 0);
    json_int_t seed_cand = json_integer_value(json_object_get(snap, "seed_candidate"));
    json_int_t best_cand = json_integer_value(json_object_get(snap, "best_candidate"));
    double best = num(snap, "best_aggregate", 0);
    double seed_agg = num(snap, "seed_aggregate", 0);
    int64_t v[AVO_PROBLEM_MAX_KNOBS];

    if (!state) {
        snprintf(err, errlen, "snapshot without state");
        json_decref(d);
        return NULL;
    }
    if (!strcmp(state, "queued")) {
        json_object_set_new(d, "start", json_true());
        for (int i = 0; i < p->nknobs; i++)
            v[i] = p->knobs[i].dflt;
        if (propose(props, p, v, seed_src, 0, 1) < 0) {
            snprintf(err, errlen, "cannot render the seed");
            json_decref(d);
            return NULL;
        }
        return d;
    }

    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(snap, "finished"), i, f) {
        json_int_t cand = json_integer_value(json_object_get(f, "candidate"));
        const char *outcome = json_string_value(json_object_get(f, "outcome"));
        double agg = num(f, "aggregate", 0);
        int ok = outcome && !strcmp(outcome, "ok");
        int commit, new_best;
        if (!ok)
            agg = 0;
        if (cand == seed_cand) {
            /* Evolving from a broken start would only mislead: fail at once. */
            if (!ok || !(agg > 0)) {
                const char *detail = json_string_value(json_object_get(f, "detail"));
                char reason[1200];
                snprintf(reason, sizeof reason, "the seed failed its evaluation: %s%s%s",
                         outcome ? outcome : "unknown", detail ? ": " : "", detail ? detail : "");
                json_object_set_new(d, "finish", json_pack("{s:s,s:s}", "state", "failed", "reason", reason));
                commit = new_best = 0;
            } else {
                commit = new_best = 1;
                seed_agg = agg;
            }
        } else {
            commit = ok && best_cand > 0 && avo_commit_rule(agg, best, epsilon);
            new_best = commit && agg > best;
        }
        json_t *c = json_pack("{s:O?,s:I,s:O?,s:s,s:f,s:b,s:b,s:O?,s:O?}", "eval", json_object_get(f, "eval"),
                              "candidate", cand, "parent", json_object_get(f, "parent"), "outcome",
                              outcome ? outcome : "unknown", "aggregate", agg, "commit", commit,
                              "new_best", new_best, "detail", json_object_get(f, "detail"), "knobs",
                              json_object_get(f, "knobs"));
        if (new_best) {
            best = agg;
            best_cand = cand;
            json_object_set_new(c, "speedup", seed_agg > 0 ? json_real(agg / seed_agg) : json_null());
        }
        json_array_append_new(consume, c);
        if (json_is_object(json_object_get(d, "finish")))
            return d;
    }

    /* Budgets. */
    const char *stop = NULL;
    if (wall > 0 && num(snap, "elapsed_s", 0) >= wall)
        stop = "wall-time budget reached";
    else if (total >= budget && inflight == 0)
        stop = "evaluation budget reached";
    if (stop) {
        json_object_set_new(d, "finish", json_pack("{s:s,s:s}", "state", "succeeded", "reason", stop));
        return d;
    }
    if (best_cand <= 0)
        return d;               /* the seed is still being evaluated */

    int want = islands - inflight;
    if (want > budget - total)
        want = budget - total;
    if (want <= 0)
        return d;

    json_t *tried = json_object_get(snap, "tried");
    size_t ntried = json_array_size(tried);
    avo_tune_point *pts = calloc(ntried + 1, sizeof *pts), *out = calloc((size_t)want, sizeof *out);
    int npts = 0;
    if (!pts || !out) {
        free(pts);
        free(out);
        json_decref(d);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    json_t *t;
    json_array_foreach(tried, i, t) {
        if (!knobs_from_json(p, json_object_get(t, "knobs"), pts[npts].v))
            continue;
        const char *oc = json_string_value(json_object_get(t, "outcome"));
        pts[npts].evaluated = oc != NULL;
        pts[npts].score = oc && !strcmp(oc, "ok") ? num(t, "aggregate", 0) : 0;
        npts++;
    }
    /* Deterministic per step, so a replayed step proposes the same things. */
    uint64_t rng = (uint64_t)num(spec ? json_object_get(spec, "operator_params") : NULL, "seed", 0) ^
                   ((uint64_t)total * 0x9E3779B97F4A7C15ull) ^ (uint64_t)num(snap, "id", 0);
    int n = avo_tune_propose(p, &rng, pts, npts, budget - total, out, want);
    for (int k = 0; k < n; k++)
        propose(props, p, out[k].v, seed_src, best_cand, 0);
    if (n == 0 && inflight == 0) {
        json_object_set_new(d, "finish",
                            json_pack("{s:s,s:s}", "state", "succeeded", "reason", "search space exhausted"));
    }
    free(pts);
    free(out);
    return d;
}
