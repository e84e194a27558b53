/* The evolution step: from a job snapshot, decide commits, proposals and the job's end (evolve.h). */
#include "evolve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_hash.h"
#include "avo_jobspec.h"
#include "commit.h"
#include "srcdiff.h"
#include "tune.h"

#define MAX_ISLANDS AVO_JOBSPEC_MAX_ISLANDS
/* Consecutive pairing failures against an island's best that have the
 * best re-checked alone (docs/jobs.md, "When the best fails as the
 * against"). */
#define RECHECK_AFTER 3

int avo_evolve_commit_rule(double aggregate, double best, double epsilon)
{
    return isfinite(aggregate) && aggregate > 0 && aggregate >= best * (1.0 - epsilon);
}

typedef struct {
    json_int_t head, best_cand;
    double best;
    int commits, stale, level, migrations, inflight;
    int pair_fails; /* consecutive pairing failures against best_cand */
} island;

/* One step's working state: the snapshot's numbers, the islands as they
 * become, and the decision being built. */
typedef struct {
    const avo_problem *p;
    const char *base_src;  /* the seed's source, knob defines not yet applied */
    const char *base_name; /* its file name, for compiler messages (NULL: the package's) */
    json_t *spec, *snap, *d, *events;
    avo_commit_params cp;
    int nisl, migrate_every, patience, stag_limit;
    island isl[MAX_ISLANDS];
    json_int_t seed_cand, best_cand;
    double best, seed_agg;
    int best_island;
    int commits, stale;
    json_t *rechecking; /* candidates with a recheck queued or unapplied (the snapshot's, and this step's) */
    json_t *retired;    /* candidates retired by this step */
    int best_moved;     /* a retirement moved the job's best */
} step;

static double num(json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static json_int_t id_of(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

static void event(step *s, const char *kind, json_t *data)
{
    json_array_append_new(s->events, json_pack("{s:s,s:o}", "kind", kind, "data", data));
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

static json_t *tried_by_id(step *s, json_int_t cand)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(s->snap, "tried"), i, t) if (id_of(t, "candidate") == cand) return t;
    return NULL;
}

/* The source a candidate of this job has: tune candidates are the base
 * source rendered with their knobs, so the parent's text is re-derived
 * rather than shipped in every snapshot. */
static char *render_knobs(step *s, json_t *knobs)
{
    int64_t v[AVO_PROBLEM_MAX_KNOBS];
    char *src = NULL;
    if (!knobs_from_json(s->p, knobs, v) || avo_problem_render(s->p, v, s->base_src, s->base_name, &src) < 0)
        return NULL;
    return src;
}

static int propose(step *s, const int64_t *v, int isl, json_int_t parent, json_t *parents, const char *notes,
                   int is_seed, json_int_t against)
{
    char *src = NULL, *diff = NULL;
    char sha[AVO_SHA256_HEX];
    if (avo_problem_render(s->p, v, s->base_src, s->base_name, &src) < 0)
        return -ENOMEM;
    if (avo_hash_sha256_hex(src, strlen(src), sha) < 0) {
        free(src);
        return -EIO;
    }
    if (parent > 0) {
        json_t *pt = tried_by_id(s, parent);
        char *psrc = pt ? render_knobs(s, json_object_get(pt, "knobs")) : NULL;
        /* One file in two versions, as `git diff` shows it. */
        const char *name = s->base_name ? s->base_name : s->p->seed;
        if (psrc && avo_srcdiff(psrc, name, src, name, &diff) < 0)
            diff = NULL; /* the lineage stays usable without it */
        free(psrc);
    }
    json_t *x = json_pack("{s:s,s:s,s:s,s:o,s:b,s:i,s:o}", "sha256", sha, "source", src, "operator",
                          is_seed ? "seed" : "tune", "knobs", knobs_json(s->p, v), "seed", is_seed, "island", isl,
                          "parents", parents ? parents : json_array());
    free(src);
    if (!x) {
        free(diff);
        return -ENOMEM;
    }
    json_object_set_new(x, "parent", parent > 0 ? json_integer(parent) : json_null());
    /* measured paired against the island's best as it stands after this step's results */
    json_object_set_new(x, "against", against > 0 ? json_integer(against) : json_null());
    if (diff)
        json_object_set_new(x, "diff", json_string(diff));
    if (notes)
        json_object_set_new(x, "notes", json_string(notes));
    free(diff);
    json_array_append_new(json_object_get(s->d, "propose"), x);
    return 0;
}

static void finish(step *s, const char *state, const char *reason)
{
    json_object_set_new(s->d, "finish", json_pack("{s:s,s:s}", "state", state, "reason", reason));
}

static int finishing(step *s)
{
    return json_is_object(json_object_get(s->d, "finish"));
}

static void load_islands(step *s)
{
    size_t i;
    json_t *x;
    /* Before the seed is applied there are no island rows; afterwards every
     * island has one. A job from before islands existed starts them from
     * its best. */
    for (int k = 0; k < s->nisl; k++) {
        s->isl[k] = (island){0};
        s->isl[k].head = s->isl[k].best_cand = s->best_cand;
        s->isl[k].best = s->best;
    }
    json_array_foreach(json_object_get(s->snap, "islands"), i, x)
    {
        int k = (int)num(x, "idx", -1);
        if (k < 0 || k >= s->nisl)
            continue;
        island *is = &s->isl[k];
        is->head = id_of(x, "head");
        is->best_cand = id_of(x, "best_candidate");
        is->best = num(x, "best", 0);
        is->commits = (int)num(x, "commits", 0);
        is->stale = (int)num(x, "stale", 0);
        is->level = (int)num(x, "level", 0);
        is->migrations = (int)num(x, "migrations", 0);
        is->inflight = (int)num(x, "inflight", 0);
        is->pair_fails = (int)num(x, "pair_fails", 0);
    }
    json_t *bt = tried_by_id(s, s->best_cand);
    s->best_island = bt ? (int)num(bt, "island", 0) : 0;
}

static json_t *islands_json(step *s)
{
    json_t *a = json_array();
    for (int k = 0; k < s->nisl; k++) {
        island *is = &s->isl[k];
        json_t *o = json_pack("{s:i,s:f,s:i,s:i,s:i,s:i,s:i}", "idx", k, "best", is->best, "commits", is->commits,
                              "stale", is->stale, "level", is->level, "migrations", is->migrations, "pair_fails",
                              is->pair_fails);
        json_object_set_new(o, "head", is->head > 0 ? json_integer(is->head) : json_null());
        json_object_set_new(o, "best_candidate", is->best_cand > 0 ? json_integer(is->best_cand) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

/* Every migrate_every commits of the job, each island behind the global
 * best adopts it as its head: good material spreads, while islands that
 * lead keep their own line. */
static void migrate(step *s)
{
    for (int k = 0; k < s->nisl; k++) {
        island *is = &s->isl[k];
        if (k == s->best_island || is->best >= s->best)
            continue;
        is->head = is->best_cand = s->best_cand;
        is->best = s->best;
        is->stale = is->level = is->pair_fails = 0;
        is->migrations++;
        event(s, "island_migrated",
              json_pack("{s:i,s:i,s:I,s:f}", "island", k, "from", s->best_island, "candidate", (json_int_t)s->best_cand,
                        "aggregate", s->best));
    }
}

/* The stagnation signal to the operator: `patience` applied evaluations
 * without a commit raise an island's level (tune mutates more, then
 * restarts from random points); a commit resets it. */
static void stagnate(step *s, int k)
{
    island *is = &s->isl[k];
    if (s->patience <= 0 || is->level >= AVO_TUNE_MAX_LEVEL || is->stale < s->patience * (is->level + 1))
        return;
    is->level++;
    event(s, "stagnation",
          json_pack("{s:i,s:i,s:i,s:s}", "island", k, "evaluations_without_commit", is->stale, "level", is->level,
                    "action", is->level == 1 ? "mutation raised" : "island restarted"));
}

static int in_ids(json_t *ids, json_int_t id)
{
    size_t i;
    json_t *x;
    json_array_foreach(ids, i, x) if (json_is_integer(x) && json_integer_value(x) == id) return 1;
    return 0;
}

static int is_retired(step *s, json_int_t cand)
{
    return in_ids(s->retired, cand) || json_is_true(json_object_get(tried_by_id(s, cand), "retired"));
}

/* A pairing against island k's best failed (judged, v.pair_failed): at
 * RECHECK_AFTER in a row, twice as many for each recheck it has passed,
 * the best is queued for an evaluation alone. The failures themselves
 * decide nothing: the candidate can make its own pairing fail; only the
 * best's own result can retire it. The doubling bounds what a best that
 * passes alone and fails only as the against costs its island. */
static void count_pair_failure(step *s, int k, const avo_commit_verdict *v)
{
    island *is = &s->isl[k];
    if (v->against != is->best_cand || is->best_cand <= 0)
        return;
    const int kept = (int)num(tried_by_id(s, is->best_cand), "rechecks_kept", 0);
    const int need = RECHECK_AFTER << (kept < 0 ? 0 : kept > 16 ? 16 : kept);
    if (++is->pair_fails < need || in_ids(s->rechecking, is->best_cand))
        return;
    json_array_append_new(json_object_get(s->d, "recheck"),
                          json_pack("{s:I,s:i}", "candidate", (json_int_t)is->best_cand, "island", k));
    json_array_append_new(s->rechecking, json_integer(is->best_cand));
    event(s, "best_recheck",
          json_pack("{s:I,s:i,s:i,s:s}", "candidate", (json_int_t)is->best_cand, "island", k, "pairing_failures",
                    is->pair_fails, "last_reason", v->reason));
    is->pair_fails = 0;
}

/* The best a retired candidate had been measured against when it was
 * proposed (its search evaluation's against), the first of that line not
 * retired itself; the seed when the line ends. */
static json_int_t predecessor(step *s, json_int_t cand)
{
    for (int hops = 0; hops < 100000; hops++) {
        json_int_t a = id_of(tried_by_id(s, cand), "against");
        if (a <= 0 || a == cand)
            break;
        if (!is_retired(s, a))
            return a;
        cand = a;
    }
    return s->seed_cand;
}

/* The retired candidate's place: every island whose best it was goes back
 * to its predecessor (and its head with it, where that was the retired
 * one too), and the job's best to the best island's. */
static void retire(step *s, json_int_t cand, const char *why)
{
    json_array_append_new(s->retired, json_integer(cand));
    json_t *moved = json_array();
    const json_int_t prev = predecessor(s, cand);
    json_t *pt = tried_by_id(s, prev);
    const double prev_agg = prev == s->seed_cand ? s->seed_agg : num(pt, "aggregate", 0);
    for (int k = 0; k < s->nisl; k++) {
        island *is = &s->isl[k];
        if (is->head == cand)
            is->head = prev;
        if (is->best_cand != cand)
            continue;
        is->best_cand = prev;
        is->best = prev_agg;
        is->pair_fails = 0;
        json_array_append_new(moved, json_integer(k));
    }
    if (s->best_cand == cand) {
        int bk = 0;
        for (int k = 1; k < s->nisl; k++)
            if (s->isl[k].best > s->isl[bk].best)
                bk = k;
        s->best_cand = s->isl[bk].best_cand;
        s->best = s->isl[bk].best;
        s->best_island = bk;
        s->best_moved = 1;
    }
    event(s, "best_retired",
          json_pack("{s:I,s:s,s:I,s:f,s:o,s:I}", "candidate", (json_int_t)cand, "reason", why, "replaced_by",
                    (json_int_t)prev, "aggregate", prev_agg, "islands", moved, "best_candidate",
                    (json_int_t)s->best_cand));
}

/* Still what some island, or the job, stands on. */
static int holds(const step *s, json_int_t cand)
{
    if (s->best_cand == cand)
        return 1;
    for (int k = 0; k < s->nisl; k++)
        if (s->isl[k].best_cand == cand)
            return 1;
    return 0;
}

/* A recheck with no verdict on the best: kept, said why (why NULL: it was
 * ok); again: queued once more. */
static void keep_best(step *s, json_t *r, json_int_t cand, const char *outcome, const char *why, int again)
{
    json_t *e = json_pack("{s:I,s:s,s:O?}", "candidate", cand, "outcome", outcome ? outcome : "unknown", "aggregate",
                          json_object_get(r, "aggregate"));
    if (why)
        json_object_set_new(e, "inconclusive", json_string(why));
    event(s, "best_rechecked", e);
    if (again)
        json_array_append_new(json_object_get(s->d, "recheck"), json_pack("{s:I,s:n}", "candidate", cand, "island"));
}

/* One finished recheck applied. ok keeps the best; so does a recheck the
 * machine failed (state "failed": a lost worker, a package mismatch) and
 * a first crash or timeout (a wedged GPU or a loaded host ends a call that
 * way too, and the worker's canary runs after the result is stored),
 * which is evaluated once more. Any other verdict, or a second crash or
 * timeout, retires it. While the job ends (may_retire 0: its final
 * measurement runs) a failure is recorded on the candidate and moves
 * nothing. The seed failing alone fails the job while the job still
 * stands on it. */
static void apply_recheck(step *s, json_t *r, int may_retire)
{
    json_int_t cand = id_of(r, "candidate");
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    const char *detail = json_string_value(json_object_get(r, "detail"));
    const char *state = json_string_value(json_object_get(r, "state"));
    json_t *entry = json_pack("{s:O?,s:I,s:s}", "eval", json_object_get(r, "eval"), "candidate", cand, "outcome",
                              outcome ? outcome : "unknown");
    json_array_append_new(json_object_get(s->d, "rechecked"), entry);
    if (outcome && !strcmp(outcome, "ok")) {
        keep_best(s, r, cand, outcome, NULL, 0);
        return;
    }
    if (state && strcmp(state, "done") != 0) {
        keep_best(s, r, cand, outcome, detail ? detail : "the evaluation failed", 0);
        return;
    }
    char why[1200];
    const int fault = outcome && (!strcmp(outcome, "crash") || !strcmp(outcome, "timeout"));
    if (fault && may_retire && num(tried_by_id(s, cand), "recheck_faults", 0) < 1) {
        snprintf(why, sizeof why, "%s alone once (%.1000s): evaluated again before it is retired", outcome,
                 detail ? detail : "no detail");
        keep_best(s, r, cand, outcome, why, 1);
        return;
    }
    snprintf(why, sizeof why, "re-checked alone: %s%s%.1100s", outcome ? outcome : "unknown", detail ? ": " : "",
             detail ? detail : "");
    if (is_retired(s, cand))
        return;
    json_object_set_new(entry, "retired", json_string(why));
    if (may_retire && !(cand == s->seed_cand && holds(s, cand))) {
        retire(s, cand, why);
        return;
    }
    /* Recorded, and nothing moves: the search is over, or the job fails. */
    json_array_append_new(s->retired, json_integer(cand));
    event(s, "best_retired",
          json_pack("{s:I,s:s,s:n,s:n,s:[],s:n}", "candidate", (json_int_t)cand, "reason", why, "replaced_by",
                    "aggregate", "islands", "best_candidate"));
    if (may_retire) {
        char reason[1300];
        snprintf(reason, sizeof reason, "the seed failed when %s", why);
        finish(s, "failed", reason);
    }
}

/* The snapshot's finished rechecks applied; their events go before the
 * step's results' (sql/026: "recheck_events"). Returns how many. */
static int apply_rechecks(step *s, int may_retire)
{
    size_t i;
    json_t *r;
    s->events = json_object_get(s->d, "recheck_events");
    json_array_foreach(json_object_get(s->snap, "rechecked"), i, r) apply_recheck(s, r, may_retire);
    s->events = json_object_get(s->d, "events");
    return json_array_size(json_object_get(s->snap, "rechecked")) > 0;
}

/* A result island k does not commit (v: the rule's verdict where it was
 * judged): its stagnation counts, and an event says why. */
static void not_committed(step *s, int k, json_t *f, const avo_commit_verdict *v, json_int_t cand, int ok, int judged)
{
    s->isl[k].stale++;
    s->stale++;
    /* A screened-out result says so whether or not a commit was asked
     * for: it was stopped early, and by how much. */
    json_t *so = ok ? avo_commit_screened_out(json_object_get(f, "paired"), s->cp.confidence, cand, k) : NULL;
    if (so)
        event(s, "screened_out", so);
    else if (judged && v->paired)
        event(s, "not_significant", avo_commit_not_significant(&s->cp, v, cand, k));
    else if (judged && v->pair_failed) {
        event(s, "pairing_failed", avo_commit_pairing_failed(v, cand, k));
        count_pair_failure(s, k, v);
    }
    stagnate(s, k);
}

/* Apply one finished evaluation to the lineage. The events it causes
 * (stagnation, migration) travel inside its consume entry, so they are
 * stored right after its own and a replay of the stream sees them in the
 * order they happened. Returns -1 when it ends the job (a broken seed). */
static int consume(step *s, json_t *f)
{
    json_int_t cand = id_of(f, "candidate");
    const char *outcome = json_string_value(json_object_get(f, "outcome"));
    double agg = num(f, "aggregate", 0);
    int ok = outcome && !strcmp(outcome, "ok");
    int k = (int)num(f, "island", 0), commit, new_best;
    avo_commit_verdict v = {0};
    int judged = 0;
    json_t *top = s->events, *evs = json_array();
    s->events = evs;
    if (k < 0 || k >= s->nisl)
        k = 0;
    if (!ok || !isfinite(agg))
        agg = 0;
    if (cand == s->seed_cand) {
        /* Evolving from a broken start would only mislead: fail at once. */
        if (!ok || !(agg > 0)) {
            const char *detail = json_string_value(json_object_get(f, "detail"));
            char reason[1200];
            snprintf(reason, sizeof reason, "the seed failed its evaluation: %s%s%s", outcome ? outcome : "unknown",
                     detail ? ": " : "", detail ? detail : "");
            finish(s, "failed", reason);
            commit = new_best = 0;
        } else {
            commit = new_best = 1;
            s->seed_agg = agg;
            for (int j = 0; j < s->nisl; j++)
                s->isl[j] = (island){.head = cand, .best_cand = cand, .best = agg};
            s->isl[k].commits = 1;
            s->commits++;
        }
    } else {
        island *is = &s->isl[k];
        /* An agent's attempts are commits only when the agent asked for
         * it (its commit tool); the rule applies to them all the same. */
        const char *op = json_string_value(json_object_get(f, "operator"));
        const int asked = !op || strcmp(op, "agent") != 0 || json_is_true(json_object_get(f, "commit_requested"));
        judged = ok && asked && s->best_cand > 0;
        if (judged)
            avo_commit_judge(&s->cp, json_object_get(f, "paired"), agg, is->best, is->best_cand, &v);
        commit = judged && v.commit;
        /* A result measured paired against the island's best clears its
         * count of pairing failures. */
        if (judged && v.paired && v.against == is->best_cand)
            is->pair_fails = 0;
        /* A paired commit is faster than the version it was measured
         * against, whatever the drift of absolute figures says: when that
         * is the best, the candidate takes its place. */
        const int over_island = v.paired && v.against == is->best_cand;
        new_best = commit && (agg > s->best || (v.paired && v.against == s->best_cand));
        if (commit) {
            is->head = cand;
            if (agg > is->best || over_island) {
                is->best = agg;
                is->best_cand = cand;
                is->pair_fails = 0;
            }
            is->commits++;
            is->stale = is->level = 0;
            s->commits++;
            s->stale = 0;
        } else {
            not_committed(s, k, f, &v, cand, ok, judged);
        }
    }
    /* A screened-out candidate has no full score: its aggregate (the
     * screen's configurations only, kept in its evaluation) must not be
     * compared with full ones (the tune operator's parents, the lineage). */
    const int screened = ok && json_is_true(json_object_get(json_object_get(f, "paired"), "screened_out"));
    if (new_best) {
        s->best = agg;
        s->best_cand = cand;
        s->best_island = k;
    }
    if (commit && cand != s->seed_cand && s->nisl > 1 && s->commits % s->migrate_every == 0)
        migrate(s);
    json_t *c = json_pack("{s:O?,s:I,s:O?,s:i,s:s,s:f,s:b,s:b,s:O?,s:O?,s:o}", "eval", json_object_get(f, "eval"),
                          "candidate", cand, "parent", json_object_get(f, "parent"), "island", k, "outcome",
                          outcome ? outcome : "unknown", "aggregate", agg, "commit", commit, "new_best", new_best,
                          "detail", json_object_get(f, "detail"), "knobs", json_object_get(f, "knobs"), "events", evs);
    s->events = top;
    if (screened)
        json_object_set_new(c, "aggregate", json_null());
    if (judged)
        json_object_set_new(c, "rule", avo_commit_verdict_json(&s->cp, &v));
    if (new_best)
        json_object_set_new(c, "speedup", s->seed_agg > 0 ? json_real(agg / s->seed_agg) : json_null());
    json_array_append_new(json_object_get(s->d, "consume"), c);
    return finishing(s) ? -1 : 0;
}

/* Budgets and goals, checked after the step's results are applied. */
static void check_stop(step *s, int total, int inflight, int budget)
{
    json_t *b = json_object_get(s->spec, "budget");
    double wall = num(b, "wall_seconds", 0), gpu = num(b, "gpu_seconds", 0), energy = num(b, "energy_joules", 0);
    double target = num(s->spec, "target_score", 0);
    double gpu_used = num(s->snap, "gpu_seconds", 0), energy_used = num(s->snap, "energy_j", 0);
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(s->snap, "finished"), i, f)
    {
        gpu_used += num(f, "gpu_s", 0);
        energy_used += num(f, "energy_j", 0);
    }
    const char *name = NULL;
    double used = 0, limit = 0;
    char reason[256];
    if (target > 0 && s->best_cand > 0 && s->best >= target) {
        snprintf(reason, sizeof reason, "target score reached (%.6g >= %.6g)", s->best, target);
        finish(s, "succeeded", reason);
        return;
    }
    if (s->stag_limit > 0 && s->stale >= s->stag_limit) {
        snprintf(reason, sizeof reason, "stagnation limit reached: %d evaluation%s without a commit", s->stale,
                 s->stale == 1 ? "" : "s");
        finish(s, "succeeded", reason);
        return;
    }
    if (wall > 0 && num(s->snap, "elapsed_s", 0) >= wall)
        name = "wall_seconds", used = num(s->snap, "elapsed_s", 0), limit = wall;
    else if (gpu > 0 && gpu_used >= gpu)
        name = "gpu_seconds", used = gpu_used, limit = gpu;
    else if (energy > 0 && energy_used >= energy)
        name = "energy_joules", used = energy_used, limit = energy;
    else if (num(b, "tokens", 0) > 0 && num(s->snap, "tokens", 0) >= num(b, "tokens", 0))
        name = "tokens", used = num(s->snap, "tokens", 0), limit = num(b, "tokens", 0);
    else if (num(b, "cost_usd", 0) > 0 && num(s->snap, "cost_usd", 0) >= num(b, "cost_usd", 0))
        name = "cost_usd", used = num(s->snap, "cost_usd", 0), limit = num(b, "cost_usd", 0);
    else if (total >= budget && inflight == 0)
        name = "evaluations", used = total, limit = budget;
    if (!name)
        return;
    event(s, "budget_reached", json_pack("{s:s,s:f,s:f}", "budget", name, "used", used, "limit", limit));
    snprintf(reason, sizeof reason, "%s budget reached",
             !strcmp(name, "wall_seconds")    ? "wall-time"
             : !strcmp(name, "gpu_seconds")   ? "GPU-seconds"
             : !strcmp(name, "energy_joules") ? "energy"
             : !strcmp(name, "tokens")        ? "token"
             : !strcmp(name, "cost_usd")      ? "cost"
                                              : "evaluation");
    finish(s, "succeeded", reason);
}

/* One tune proposal for island k (its rng advanced), appended to pts as
 * tried but not evaluated, so the next proposal (this island's or the next
 * island's) sees it. 1 proposed, 0 none (the space is exhausted), or a
 * negative int. */
static int propose_one(step *s, int k, uint64_t *rng, avo_tune_point *pts, json_int_t *ids, int *isl_of, int *npts,
                       int left)
{
    island *is = &s->isl[k];
    avo_tune_point out;
    if (avo_tune_propose(s->p, rng, pts, *npts, left, is->level, &out, 1) != 1)
        return 0;
    json_t *parents = json_array();
    for (int m = 0; m < 2; m++)
        if (out.from[m] >= 0 && ids[out.from[m]] > 0)
            json_array_append_new(parents, json_integer(ids[out.from[m]]));
    /* What the operator did, for a person reading the lineage. */
    char notes[160];
    json_int_t a = out.from[0] >= 0 ? ids[out.from[0]] : 0, b = out.from[1] >= 0 ? ids[out.from[1]] : 0;
    if (a > 0 && b > 0)
        snprintf(notes, sizeof notes, "tune: crossover of candidates %lld and %lld, then mutation", (long long)a,
                 (long long)b);
    else if (a > 0)
        snprintf(notes, sizeof notes, "tune: mutation of candidate %lld", (long long)a);
    else
        snprintf(notes, sizeof notes, "tune: random point (restart, or enumeration of a small space)");
    if (is->level > 0)
        snprintf(notes + strlen(notes), sizeof notes - strlen(notes), "; island stagnant, level %d", is->level);
    if (propose(s, out.v, k, is->head, parents, notes, 0, is->best_cand) < 0)
        return -ENOMEM;
    /* Seen by the next island as tried, not as its own. */
    pts[*npts] = out;
    pts[*npts].evaluated = 0;
    pts[*npts].foreign = 0;
    ids[*npts] = 0;
    isl_of[*npts] = k;
    (*npts)++;
    return 1;
}

/* Tune proposals for each island up to its depth in flight
 * (operator_params.inflight, 1 by default: one per idle island), parented
 * on its head. The search sees
 * the island's own points and its head (migrants included); every point of
 * the job counts as tried, so no configuration is evaluated twice. */
static int propose_islands(step *s, int left)
{
    json_t *tried = json_object_get(s->snap, "tried");
    json_t *spec_params = json_object_get(s->spec, "operator_params");
    /* An island's proposals queued or running at once (the spec's
     * operator_params.inflight): above 1 the next is made before the last
     * one's result is in, so a worker compiles it while another is timed. */
    int depth = (int)num(spec_params, "inflight", 1);
    depth = depth < 1 ? 1 : depth > AVO_JOBSPEC_MAX_INFLIGHT ? AVO_JOBSPEC_MAX_INFLIGHT : depth;
    size_t ntried = json_array_size(tried), i, room = ntried + (size_t)s->nisl * (size_t)depth + 1;
    avo_tune_point *pts = calloc(room, sizeof *pts);
    json_int_t *ids = calloc(room, sizeof *ids);
    int *isl_of = calloc(room, sizeof *isl_of);
    int npts = 0, rc = 0;
    if (!pts || !ids || !isl_of) {
        rc = -ENOMEM;
        goto cleanup;
    }
    json_t *t;
    json_array_foreach(tried, i, t)
    {
        if (!knobs_from_json(s->p, json_object_get(t, "knobs"), pts[npts].v))
            continue;
        const char *oc = json_string_value(json_object_get(t, "outcome"));
        pts[npts].evaluated = oc != NULL;
        /* A retired version failed when evaluated again alone: a failure,
         * not a point to search around. */
        const int retired = json_is_true(json_object_get(t, "retired")) || in_ids(s->retired, id_of(t, "candidate"));
        pts[npts].score = oc && !strcmp(oc, "ok") && !retired ? num(t, "aggregate", 0) : 0;
        ids[npts] = id_of(t, "candidate");
        isl_of[npts] = (int)num(t, "island", 0);
        npts++;
    }
    /* Results applied in this very step are not in the snapshot's tried
     * list yet: without them the island would not see its new head. */
    json_t *c;
    json_array_foreach(json_object_get(s->d, "consume"), i, c)
    {
        json_int_t cid = id_of(c, "candidate");
        for (int j = 0; j < npts; j++)
            if (ids[j] == cid) {
                pts[j].evaluated = 1;
                pts[j].score = num(c, "aggregate", 0);
            }
    }
    int total = (int)num(s->snap, "total", 0);
    for (int k = 0; k < s->nisl && left > 0; k++) {
        island *is = &s->isl[k];
        for (int j = 0; j < npts; j++)
            pts[j].foreign = isl_of[j] != k && ids[j] != is->head && ids[j] != is->best_cand;
        /* Deterministic per step and island, so a replayed step proposes
         * the same things. */
        uint64_t rng = (uint64_t)num(spec_params, "seed", 0) ^ ((uint64_t)total * 0x9E3779B97F4A7C15ull) ^
                       (uint64_t)num(s->snap, "id", 0) ^ ((uint64_t)(k + 1) * 0xD1B54A32D192ED03ull);
        for (int made = 0; is->inflight + made < depth && left > 0; made++) {
            if ((rc = propose_one(s, k, &rng, pts, ids, isl_of, &npts, left)) <= 0)
                break;
            left--;
        }
        if (rc < 0)
            goto cleanup;
        rc = 0;
    }
cleanup:
    free(pts);
    free(ids);
    free(isl_of);
    return rc;
}

/* The job's reported speedup from its final evaluation (the best timed
 * paired against the seed): the paired ratio with its interval, or, when
 * that is missing, the unpaired ratio of the search's aggregates with the
 * reason. */
static json_t *final_speedup(step *s, json_t *fe)
{
    const char *st = json_string_value(json_object_get(fe, "state"));
    const char *outcome = json_string_value(json_object_get(fe, "outcome"));
    json_t *pr = json_object_get(fe, "paired");
    json_t *err = json_object_get(pr, "error");
    json_t *ev = json_is_integer(json_object_get(fe, "eval")) ? json_incref(json_object_get(fe, "eval")) : json_null();
    char why[1200];
    if (!fe)
        snprintf(why, sizeof why, "no final evaluation was made");
    else if (st && !strcmp(st, "cancelled"))
        snprintf(why, sizeof why, "the final evaluation was cancelled");
    else if (!outcome || strcmp(outcome, "ok") != 0) {
        const char *detail = json_string_value(json_object_get(fe, "detail"));
        snprintf(why, sizeof why, "the final evaluation failed: %s%s%s", outcome ? outcome : "unknown",
                 detail ? ": " : "", detail ? detail : "");
    } else if (!json_is_object(pr))
        snprintf(why, sizeof why, "the final evaluation has no paired measurement");
    else if (err)
        snprintf(why, sizeof why, "the paired measurement failed: %s",
                 json_is_string(err) ? json_string_value(err) : "no reason given");
    else if (!json_is_number(json_object_get(pr, "ratio")) || !(num(pr, "ratio", 0) > 0))
        snprintf(why, sizeof why, "the paired measurement has no ratio");
    else {
        json_t *o = json_pack("{s:f,s:O?,s:O?,s:f,s:o,s:O?,s:b,s:O?}", "ratio", num(pr, "ratio", 0), "low",
                              json_object_get(pr, "low"), "ci", json_object_get(pr, "ci"), "confidence",
                              num(pr, "confidence", s->cp.confidence), "evaluation", ev, "method",
                              json_object_get(pr, "method"), "paired", 1, "against", json_object_get(pr, "against"));
        return o;
    }
    double seed = num(s->snap, "seed_aggregate", 0), best = num(s->snap, "best_aggregate", 0);
    return json_pack("{s:o,s:b,s:s,s:o}", "ratio", seed > 0 ? json_real(best / seed) : json_null(), "paired", 0,
                     "reason", why, "evaluation", ev);
}

/* While the final measurement runs the job stays running and idle; once
 * it is over (done, failed or cancelled) the job ends as the search had
 * decided, with its reported speedup. Late search results are left
 * unconsumed: the measured best must stay the best. */
static void final_step(step *s, json_t *fing)
{
    json_object_set_new(s->d, "finishing", json_true());
    json_t *fe = json_object_get(s->snap, "final");
    const char *st = json_string_value(json_object_get(fe, "state"));
    if (fe && (!st || !strcmp(st, "queued") || !strcmp(st, "running")))
        return;
    json_t *sp = final_speedup(s, fe);
    event(s, "final_measurement",
          json_pack("{s:s,s:O?,s:O?,s:O?,s:O}", "status", "finished", "evaluation", json_object_get(fe, "eval"),
                    "candidate", json_object_get(fe, "candidate"), "against", json_object_get(fe, "against"), "speedup",
                    sp));
    json_object_set_new(s->d, "speedup", sp);
    const char *state = json_string_value(json_object_get(fing, "state"));
    const char *reason = json_string_value(json_object_get(fing, "reason"));
    finish(s, state ? state : "succeeded", reason ? reason : "");
}

/* A search that succeeded with a best other than the seed does not end
 * yet: its best is measured once more, paired against the seed, and that
 * ratio becomes the job's speedup (final_step). Failed jobs end at once;
 * a seed that stayed the best needs no measurement. */
static void defer_for_final(step *s)
{
    json_t *fin = json_object_get(s->d, "finish");
    const char *state = json_string_value(json_object_get(fin, "state"));
    if (!state || strcmp(state, "succeeded") != 0 || s->best_cand <= 0 || s->seed_cand <= 0)
        return;
    if (s->best_cand == s->seed_cand) {
        json_object_set_new(s->d, "speedup",
                            json_pack("{s:f,s:b,s:s}", "ratio", 1.0, "paired", 0, "note", "no version beat the seed"));
        return;
    }
    json_object_set_new(s->d, "final",
                        json_pack("{s:I,s:I,s:O,s:O}", "candidate", (json_int_t)s->best_cand, "against",
                                  (json_int_t)s->seed_cand, "state", json_object_get(fin, "state"), "reason",
                                  json_object_get(fin, "reason")));
    json_object_set_new(s->d, "finish", json_null());
}

/* The step's numbers from the snapshot and the job's spec. */
static void step_init(step *s, json_t *snap, json_t *d, const avo_problem *p, const char *seed_src)
{
    s->p = p;
    s->snap = snap;
    s->d = d;
    s->events = json_object_get(d, "events");
    s->spec = json_object_get(snap, "spec");
    json_t *sg = json_object_get(s->spec, "stagnation");
    const char *custom = json_string_value(json_object_get(snap, "seed_source"));
    s->base_src = custom ? custom : seed_src;
    s->base_name = custom ? json_string_value(json_object_get(json_object_get(s->spec, "seed"), "file")) : NULL;
    avo_commit_params_from_spec(s->spec, &s->cp);
    s->nisl = (int)num(s->spec, "islands", 1);
    if (s->nisl < 1 || s->nisl > MAX_ISLANDS)
        s->nisl = 1;
    s->migrate_every = (int)num(s->spec, "migrate_every", 4);
    if (s->migrate_every < 1)
        s->migrate_every = 1;
    s->patience = (int)num(sg, "patience", 0);
    s->stag_limit = (int)num(sg, "limit", 0);
    s->seed_cand = id_of(snap, "seed_candidate");
    s->best_cand = id_of(snap, "best_candidate");
    s->best = num(snap, "best_aggregate", 0);
    s->seed_agg = num(snap, "seed_aggregate", 0);
    s->commits = (int)num(snap, "commits", 0);
    s->stale = (int)num(snap, "stale", 0);
}

json_t *avo_evolve_decide(json_t *snap, const avo_problem *p, const char *seed_src, char *err, size_t errlen)
{
    step *s = calloc(1, sizeof *s);
    json_t *d = json_pack("{s:b,s:[],s:[],s:[],s:n,s:[],s:[],s:[]}", "start", 0, "consume", "propose", "events",
                          "finish", "recheck", "rechecked", "recheck_events");
    const char *state = json_string_value(json_object_get(snap, "state"));
    json_t *rc_snap = json_object_get(snap, "rechecking");
    if (s) {
        s->rechecking = json_is_array(rc_snap) ? json_deep_copy(rc_snap) : json_array();
        s->retired = json_array();
    }
    if (!s || !d || !s->rechecking || !s->retired) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!state) {
        snprintf(err, errlen, "snapshot without state");
        goto fail;
    }
    step_init(s, snap, d, p, seed_src);
    int64_t v[AVO_PROBLEM_MAX_KNOBS];

    if (!strcmp(state, "queued")) {
        json_object_set_new(d, "start", json_true());
        avo_problem_start_knobs(p, json_object_get(json_object_get(s->spec, "seed"), "knobs"), v);
        if (propose(s, v, 0, 0, NULL, NULL, 1, 0) < 0) {
            snprintf(err, errlen, "cannot render the seed");
            goto fail;
        }
        goto out;
    }

    size_t i;
    json_t *f;
    /* The search has ended; only its final measurement is awaited (a
     * recheck still coming in is applied without retiring anything: the
     * final measurement says how the best fares). */
    if (json_is_object(json_object_get(snap, "finishing"))) {
        apply_rechecks(s, 0);
        final_step(s, json_object_get(snap, "finishing"));
        goto out;
    }
    load_islands(s);
    int applied = 0;
    /* Rechecks first: a best they retire is no longer the one this step's
     * results are judged against. */
    applied = apply_rechecks(s, 1);
    json_array_foreach(json_object_get(snap, "finished"), i, f)
    {
        if (finishing(s))
            break;
        applied = 1;
        if (consume(s, f) < 0)
            break;
    }
    if (applied) {
        json_object_set_new(d, "islands", islands_json(s));
        json_object_set_new(d, "commits", json_integer(s->commits));
        json_object_set_new(d, "stale", json_integer(s->stale));
    }
    int budget = (int)num(snap, "budget", 1), total = (int)num(snap, "total", 0);
    int inflight = (int)num(snap, "inflight", 0);
    if (!finishing(s))
        check_stop(s, total, inflight, budget);
    if (finishing(s) || s->best_cand <= 0) /* ended, or the seed is still being evaluated */
        goto done;
    /* An agent job's proposals come from its steps (agent.c), not from
     * here; it ends by its budgets. */
    const char *op = json_string_value(json_object_get(snap, "operator"));
    if (op && !strcmp(op, "agent"))
        goto done;
    if (propose_islands(s, budget - total) < 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (json_array_size(json_object_get(d, "propose")) == 0 && inflight == 0)
        finish(s, "succeeded", "search space exhausted");
done:
    if (s->best_moved)
        json_object_set_new(d, "best_candidate", json_integer(s->best_cand));
    defer_for_final(s);
out:
    json_decref(s->rechecking);
    json_decref(s->retired);
    free(s);
    return d;
fail:
    if (s) {
        json_decref(s->rechecking);
        json_decref(s->retired);
    }
    free(s);
    json_decref(d);
    return NULL;
}
