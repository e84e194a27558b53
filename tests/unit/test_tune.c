/* The tune operator: constraints respected, nothing proposed twice, small
 * spaces enumerated, larger spaces searched far better than blind sampling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/tune.h"

static void knob(avo_problem *p, const char *name, int n, const int64_t *vals)
{
    avo_knob_spec *k = &p->knobs[p->nknobs++];
    memset(k, 0, sizeof *k);
    strcpy(k->name, name);
    k->nvalues = n;
    memcpy(k->values, vals, (size_t)n * sizeof *vals);
    k->dflt = vals[0];
}

static void make_space(avo_problem *p, int constrained)
{
    static const int64_t tiles[] = {8, 16, 32, 64, 128, 256};
    static const int64_t unroll[] = {1, 2, 4, 8};
    static const int64_t order[] = {0, 1, 2};
    memset(p, 0, sizeof *p);
    knob(p, "BM", 6, tiles);
    knob(p, "BN", 6, tiles);
    knob(p, "BK", 6, tiles);
    knob(p, "UNROLL", 4, unroll);
    knob(p, "ORDER", 3, order);
    if (constrained) {
        p->constraints[0] = "BM * BN <= 8192";
        p->nconstraints = 1;
    }
}

/* A synthetic landscape with one optimum and structure a search can follow. */
static double landscape(const int64_t *v)
{
    double s = 100.0;
    s -= 3.0 * abs((int)__builtin_ctzll((unsigned long long)v[0]) - 5);
    s -= 3.0 * abs((int)__builtin_ctzll((unsigned long long)v[1]) - 4);
    s -= 2.0 * abs((int)__builtin_ctzll((unsigned long long)v[2]) - 3);
    s -= 4.0 * abs((int)__builtin_ctzll((unsigned long long)v[3]) - 2);
    s -= v[4] == 1 ? 0 : 25;
    return s;
}

static void test_respects_constraints_and_never_repeats(void **state)
{
    (void)state;
    avo_problem p;
    make_space(&p, 1);
    avo_tune_point *tried = calloc(400, sizeof *tried);
    int n = 0;
    uint64_t rng = 42;
    while (n < 300) {
        avo_tune_point out[4];
        int got = avo_tune_propose(&p, &rng, tried, n, 1000000, 0, out, 4);
        assert_true(got > 0);
        for (int i = 0; i < got; i++) {
            assert_int_equal(avo_problem_knobs_allowed(&p, out[i].v), 1);
            assert_true(out[i].v[0] * out[i].v[1] <= 8192);
            for (int j = 0; j < n; j++)
                assert_false(memcmp(out[i].v, tried[j].v, sizeof out[i].v) == 0);
            tried[n] = out[i];
            tried[n].evaluated = 1;
            tried[n].score = landscape(out[i].v);
            n++;
        }
    }
    free(tried);
}

static void test_small_space_is_enumerated_then_exhausted(void **state)
{
    (void)state;
    avo_problem p;
    static const int64_t a[] = {1, 2, 3}, b[] = {10, 20};
    memset(&p, 0, sizeof p);
    knob(&p, "A", 3, a);
    knob(&p, "B", 2, b);
    avo_tune_point tried[8] = {0}, out[8] = {0};
    uint64_t rng = 1;
    int got = avo_tune_propose(&p, &rng, tried, 0, 100, 0, out, 8);
    assert_int_equal(got, 6);
    for (int i = 0; i < 6; i++)
        tried[i] = out[i];
    assert_int_equal(avo_tune_propose(&p, &rng, tried, 6, 100, 0, out, 8), 0);
}

/* Evaluations until a point within 2% of the optimum is found. */
static int evals_to_optimum(int use_tune, uint64_t seed)
{
    avo_problem p;
    make_space(&p, 0);
    double best_possible = 100.0;
    avo_tune_point *tried = calloc(2600, sizeof *tried);
    int n = 0;
    uint64_t rng = seed;
    if (!tried)
        return -1;
    tried[n].v[0] = 8, tried[n].v[1] = 8, tried[n].v[2] = 8, tried[n].v[3] = 1, tried[n].v[4] = 0;
    tried[n].evaluated = 1;
    tried[n].score = landscape(tried[n].v);
    n++;
    while (n < 2592) {
        avo_tune_point out;
        if (use_tune) {
            if (avo_tune_propose(&p, &rng, tried, n, 30, 0, &out, 1) != 1)
                break;
        } else {
            /* uniform random sampling without repeats */
            int again;
            do {
                for (int k = 0; k < p.nknobs; k++)
                    out.v[k] = p.knobs[k].values[avo_tune_rand(&rng) % (uint64_t)p.knobs[k].nvalues];
                again = 0;
                for (int j = 0; j < n; j++)
                    if (!memcmp(out.v, tried[j].v, sizeof out.v))
                        again = 1;
            } while (again);
        }
        out.evaluated = 1;
        out.score = landscape(out.v);
        tried[n++] = out;
        if (out.score >= best_possible * 0.98)
            break;
    }
    free(tried);
    return n;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void test_search_beats_random_sampling(void **state)
{
    (void)state;
    int t[11], r[11];
    for (int s = 0; s < 11; s++) {
        t[s] = evals_to_optimum(1, 1000 + (uint64_t)s);
        r[s] = evals_to_optimum(0, 1000 + (uint64_t)s);
    }
    qsort(t, 11, sizeof *t, cmp_int);
    qsort(r, 11, sizeof *r, cmp_int);
    print_message("# median evaluations to within 2%%: tune %d, random %d\n", t[5], r[5]);
    assert_true(t[5] * 2 < r[5]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_respects_constraints_and_never_repeats),
        cmocka_unit_test(test_small_space_is_enumerated_then_exhausted),
        cmocka_unit_test(test_search_beats_random_sampling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
