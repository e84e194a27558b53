/* The `tune` operator: proposes untried knob configurations of a problem (tune.h). */
#include "tune.h"

#include <stdlib.h>
#include <string.h>

#define SPACE_CAP (1ull << 40)
#define ENUM_LIMIT 4096
#define TOP_DIV                                                                                                        \
    8 /* parents come from the best eighth of the evaluated points */ /* enumerate spaces up to this many points */

uint64_t avo_tune_rand(uint64_t *s)
{
    /* splitmix64: tiny, good enough for search decisions, reproducible. */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int rand_below(uint64_t *s, int n)
{
    return n <= 1 ? 0 : (int)(avo_tune_rand(s) % (uint64_t)n);
}

static double rand_unit(uint64_t *s)
{
    return (double)(avo_tune_rand(s) >> 11) / 9007199254740992.0;
}

uint64_t avo_tune_space_size(const avo_problem *p)
{
    uint64_t n = 1;
    for (int i = 0; i < p->nknobs; i++) {
        n *= (uint64_t)p->knobs[i].nvalues;
        if (n > SPACE_CAP)
            return SPACE_CAP;
    }
    return n;
}

static int same(const avo_problem *p, const int64_t *a, const int64_t *b)
{
    return memcmp(a, b, (size_t)p->nknobs * sizeof *a) == 0;
}

static int seen(const avo_problem *p, const int64_t *v, const avo_tune_point *tried, int ntried,
                const avo_tune_point *out, int nout)
{
    for (int i = 0; i < ntried; i++)
        if (same(p, v, tried[i].v))
            return 1;
    for (int i = 0; i < nout; i++)
        if (same(p, v, out[i].v))
            return 1;
    return 0;
}

static int index_of(const avo_knob_spec *k, int64_t v)
{
    for (int i = 0; i < k->nvalues; i++)
        if (k->values[i] == v)
            return i;
    return -1;
}

static void decode(const avo_problem *p, uint64_t idx, int64_t *v)
{
    for (int i = 0; i < p->nknobs; i++) {
        uint64_t nv = (uint64_t)p->knobs[i].nvalues;
        v[i] = p->knobs[i].values[idx % nv];
        idx /= nv;
    }
}

static void random_point(const avo_problem *p, uint64_t *rng, int64_t *v)
{
    for (int i = 0; i < p->nknobs; i++)
        v[i] = p->knobs[i].values[rand_below(rng, p->knobs[i].nvalues)];
}

/* Tournament selection of size two within the best eighth of the evaluated
 * points (at least the best two; pool sorted best first). A tournament of
 * three over the whole pool lost its pressure as the pool grew, and on the
 * measured sgemm landscape was no better than random sampling; drawing
 * uniformly from the best sixteenth reached 0.30 of random's evaluations,
 * this 0.19 (bench/tune_efficiency.c, docs/benchmarks.md). */
static const avo_tune_point *select_parent(const avo_tune_point *const *pool, int npool, uint64_t *rng)
{
    int top = npool / TOP_DIV;
    if (top < 2)
        top = npool < 2 ? npool : 2;
    int a = rand_below(rng, top), b = rand_below(rng, top);
    return pool[a < b ? a : b];
}

static int by_score_desc(const void *a, const void *b)
{
    double x = (*(const avo_tune_point *const *)a)->score, y = (*(const avo_tune_point *const *)b)->score;
    return (x < y) - (x > y);
}

static void mutate(const avo_problem *p, uint64_t *rng, int64_t *v, int level)
{
    int changed = 0;
    /* A stagnant island mutates more knobs at a time. */
    double rate = p->nknobs ? (1.0 + level) / p->nknobs : 1.0;
    while (!changed) {
        for (int i = 0; i < p->nknobs; i++) {
            const avo_knob_spec *k = &p->knobs[i];
            if (k->nvalues < 2 || rand_unit(rng) >= rate)
                continue;
            int cur = index_of(k, v[i]), ni;
            /* Mostly a step to a neighbouring value: knob values are usually
             * ordered, and good settings cluster. */
            if (cur >= 0 && rand_unit(rng) < 0.7) {
                ni = cur + (rand_below(rng, 2) ? 1 : -1);
                if (ni < 0)
                    ni = 1;
                if (ni >= k->nvalues)
                    ni = k->nvalues - 2;
            } else {
                ni = rand_below(rng, k->nvalues);
            }
            if (k->values[ni] != v[i]) {
                v[i] = k->values[ni];
                changed = 1;
            }
        }
        if (p->nknobs == 0)
            break;
    }
}

static void emit(avo_tune_point *o, const int64_t *v, int a, int b)
{
    memset(o, 0, sizeof *o);
    memcpy(o->v, v, sizeof o->v);
    o->from[0] = a;
    o->from[1] = b;
}

int avo_tune_propose(const avo_problem *p, uint64_t *rng, const avo_tune_point *tried, int ntried, int budget_left,
                     int level, avo_tune_point *out, int n)
{
    int nout = 0;
    if (level > AVO_TUNE_MAX_LEVEL)
        level = AVO_TUNE_MAX_LEVEL;
    const double restart = level == 0 ? 0.1 : level == 1 ? 0.25 : 0.6;
    if (n <= 0 || p->nknobs == 0)
        return 0;
    uint64_t space = avo_tune_space_size(p);
    int64_t v[AVO_PROBLEM_MAX_KNOBS];

    if (space <= ENUM_LIMIT) {
        /* Count what is left; if it all fits in the budget, enumerate. */
        uint64_t left = 0;
        for (uint64_t i = 0; i < space; i++) {
            decode(p, i, v);
            if (avo_problem_knobs_allowed(p, v) == 1 && !seen(p, v, tried, ntried, NULL, 0))
                left++;
        }
        if (left == 0)
            return 0;
        if (left <= (uint64_t)budget_left) {
            for (uint64_t i = 0; i < space && nout < n; i++) {
                decode(p, i, v);
                if (avo_problem_knobs_allowed(p, v) == 1 && !seen(p, v, tried, ntried, out, nout))
                    emit(&out[nout++], v, -1, -1);
            }
            return nout;
        }
    }

    const avo_tune_point **pool = malloc((size_t)(ntried + 1) * sizeof *pool);
    int npool = 0;
    if (!pool)
        return 0;
    for (int i = 0; i < ntried; i++)
        if (tried[i].evaluated && tried[i].score > 0 && !tried[i].foreign)
            pool[npool++] = &tried[i];
    qsort(pool, (size_t)npool, sizeof *pool, by_score_desc);

    while (nout < n) {
        int found = 0, from_a = -1, from_b = -1;
        for (int attempt = 0; attempt < 400 && !found; attempt++) {
            from_a = from_b = -1;
            if (npool == 0 || rand_unit(rng) < restart) {
                random_point(p, rng, v); /* restart: keeps exploring */
            } else {
                const avo_tune_point *a = select_parent(pool, npool, rng);
                from_a = (int)(a - tried);
                memcpy(v, a->v, sizeof v);
                if (npool > 1 && rand_unit(rng) < 0.4) {
                    const avo_tune_point *b = select_parent(pool, npool, rng);
                    if (b != a)
                        from_b = (int)(b - tried);
                    for (int i = 0; i < p->nknobs; i++)
                        if (rand_below(rng, 2))
                            v[i] = b->v[i];
                }
                mutate(p, rng, v, level);
            }
            if (avo_problem_knobs_allowed(p, v) == 1 && !seen(p, v, tried, ntried, out, nout))
                found = 1;
        }
        if (!found && space <= ENUM_LIMIT) {
            /* Nearly exhausted: take any untried configuration. */
            uint64_t start = avo_tune_rand(rng) % space;
            from_a = from_b = -1;
            for (uint64_t i = 0; i < space && !found; i++) {
                decode(p, (start + i) % space, v);
                if (avo_problem_knobs_allowed(p, v) == 1 && !seen(p, v, tried, ntried, out, nout))
                    found = 1;
            }
        }
        if (!found)
            break;
        emit(&out[nout++], v, from_a, from_b);
    }
    free(pool);
    return nout;
}
