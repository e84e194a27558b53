/* The evolution step: AVO's commit rule, a broken seed failing the job at
 * once, budgets finishing it, and proposals parented on the lineage head. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/evolve.h"

static avo_problem prob;

static int setup(void **state)
{
    (void)state;
    char err[512];
    int rc = avo_problem_load(&prob, "kernels/cpu/sgemm", err, sizeof err);
    if (rc < 0)
        print_error("%s\n", err);
    return rc < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    avo_problem_free(&prob);
    return 0;
}

static json_t *snap(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        print_error("bad test JSON: %s\n", e.text);
    return j;
}

static json_t *decide(const char *text)
{
    char err[256];
    json_t *s = snap(text);
    json_t *d = avo_evolve_decide(s, &prob, "int sgemm(void);\n", err, sizeof err);
    json_decref(s);
    assert_non_null(d);
    return d;
}

static void test_commit_rule(void **state)
{
    (void)state;
    assert_true(avo_commit_rule(10.0, 10.0, 0.0));       /* ties commit (>=) */
    assert_false(avo_commit_rule(9.99, 10.0, 0.0));
    assert_true(avo_commit_rule(9.8, 10.0, 0.03));       /* within epsilon */
    assert_false(avo_commit_rule(9.6, 10.0, 0.03));
    assert_false(avo_commit_rule(0.0, 0.0, 0.0));         /* a zero score never commits */
    assert_false(avo_commit_rule(0.0 / 0.0, 1.0, 0.0));   /* NaN never commits */
}

static void test_queued_job_starts_with_the_seed(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"queued\",\"spec\":{},\"budget\":5,\"total\":0,\"inflight\":0}");
    assert_true(json_is_true(json_object_get(d, "start")));
    json_t *p = json_object_get(d, "propose");
    assert_int_equal(json_array_size(p), 1);
    json_t *seed = json_array_get(p, 0);
    assert_true(json_is_true(json_object_get(seed, "seed")));
    /* the seed carries the spec's default knob values */
    for (int i = 0; i < prob.nknobs; i++)
        assert_int_equal(json_integer_value(json_object_get(json_object_get(seed, "knobs"), prob.knobs[i].name)),
                         prob.knobs[i].dflt);
    assert_int_equal(strlen(json_string_value(json_object_get(seed, "sha256"))), 64);
    json_decref(d);
}

static void test_broken_seed_fails_the_job_with_evidence(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":5,\"total\":1,\"inflight\":0,"
                       "\"seed_candidate\":7,\"finished\":[{\"eval\":3,\"candidate\":7,\"outcome\":\"wrong_result\","
                       "\"aggregate\":0,\"detail\":\"C[3] off by 2\"}],\"tried\":[]}");
    json_t *fin = json_object_get(d, "finish");
    assert_string_equal(json_string_value(json_object_get(fin, "state")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(fin, "reason")), "C[3] off by 2"));
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
}

static void test_commit_and_new_best(void **state)
{
    (void)state;
    json_t *d = decide(
        "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":2,\"epsilon\":0},\"budget\":10,\"total\":4,"
        "\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":2,\"best_aggregate\":10,\"seed_aggregate\":5,"
        "\"finished\":[{\"eval\":3,\"candidate\":3,\"parent\":2,\"outcome\":\"ok\",\"aggregate\":9},"
        "{\"eval\":4,\"candidate\":4,\"parent\":2,\"outcome\":\"ok\",\"aggregate\":12},"
        "{\"eval\":5,\"candidate\":5,\"parent\":2,\"outcome\":\"timeout\",\"aggregate\":50}],\"tried\":[]}");
    json_t *c = json_object_get(d, "consume");
    assert_int_equal(json_array_size(c), 3);
    assert_false(json_is_true(json_object_get(json_array_get(c, 0), "commit")));  /* 9 < 10 */
    assert_true(json_is_true(json_object_get(json_array_get(c, 1), "commit")));   /* 12 >= 10 */
    assert_true(json_is_true(json_object_get(json_array_get(c, 1), "new_best")));
    assert_true(json_real_value(json_object_get(json_array_get(c, 1), "speedup")) > 2.39);
    /* a failed outcome scores zero whatever it claimed */
    assert_false(json_is_true(json_object_get(json_array_get(c, 2), "commit")));
    assert_true(json_real_value(json_object_get(json_array_get(c, 2), "aggregate")) == 0.0);
    /* two islands, nothing in flight: two proposals, parented on the new head */
    json_t *p = json_object_get(d, "propose");
    assert_int_equal(json_array_size(p), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(p, 0), "parent")), 4);
    json_decref(d);
}

static void test_budget_finishes_when_nothing_is_in_flight(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":3,\"total\":3,\"inflight\":1,"
                       "\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_true(json_is_null(json_object_get(d, "finish")));
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":3,\"total\":3,\"inflight\":0,"
               "\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "reason")),
                        "evaluation budget reached");
    json_decref(d);
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{\"budget\":{\"wall_seconds\":60}},\"budget\":30,"
               "\"total\":3,\"inflight\":1,\"elapsed_s\":61,\"seed_candidate\":1,\"best_candidate\":1,"
               "\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "reason")),
                        "wall-time budget reached");
    json_decref(d);
}

static void test_same_snapshot_same_decision(void **state)
{
    (void)state;
    const char *s = "{\"id\":9,\"state\":\"running\",\"spec\":{\"islands\":3,\"operator_params\":{\"seed\":77}},"
                    "\"budget\":30,\"total\":1,\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":1,"
                    "\"best_aggregate\":5,\"finished\":[],\"tried\":[]}";
    json_t *a = decide(s), *b = decide(s);
    assert_true(json_equal(a, b));   /* a replayed step after a crash proposes the same candidates */
    json_decref(a);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_rule),
        cmocka_unit_test(test_queued_job_starts_with_the_seed),
        cmocka_unit_test(test_broken_seed_fails_the_job_with_evidence),
        cmocka_unit_test(test_commit_and_new_best),
        cmocka_unit_test(test_budget_finishes_when_nothing_is_in_flight),
        cmocka_unit_test(test_same_snapshot_same_decision),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
