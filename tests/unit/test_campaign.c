/* avoctl campaign's pure part: the campaign file's checks, the summary
 * (best per problem over the jobs that succeeded, regressions against the
 * previous summary at the tolerance) and its markdown. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/campaign.h"

static void test_parse(void **state)
{
    (void)state;
    const char *name;
    double tol;
    json_t *jobs;
    char err[256];
    json_t *d = json_loads("{\"name\":\"nightly-1\",\"jobs\":[{\"problem\":\"cpu/sgemm\"}]}", 0, NULL);
    assert_int_equal(avoctl_campaign_parse(d, &name, &tol, &jobs, err, sizeof err), 0);
    assert_string_equal(name, "nightly-1");
    assert_true(tol == 0.02);
    assert_int_equal(json_array_size(jobs), 1);
    json_decref(d);
    const char *bad[][2] = {
        {"[]", "a campaign is a JSON object"},
        {"{\"name\":\"a/b\",\"jobs\":[{\"problem\":\"p\"}]}", "name: 1 to 64 letters"},
        {"{\"name\":\"a\",\"jobs\":[]}", "jobs: a non-empty array"},
        {"{\"name\":\"a\",\"jobs\":[{\"problem\":\"p\"},3]}", "jobs[1]: a job spec object"},
        {"{\"name\":\"a\",\"tolerance\":1.5,\"jobs\":[{\"problem\":\"p\"}]}", "tolerance: a fraction in [0, 1)"},
        {"{\"name\":\"a\",\"jobz\":1,\"jobs\":[{\"problem\":\"p\"}]}", "jobz: unknown field"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *b = json_loads(bad[i][0], 0, NULL);
        assert_non_null(b);
        assert_int_equal(avoctl_campaign_parse(b, &name, &tol, &jobs, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, bad[i][1]));
        json_decref(b);
    }
}

static json_t *job(int id, const char *problem, const char *state, double seed, double best)
{
    return json_pack("{s:i,s:s,s:s,s:s,s:s,s:{s:f},s:{s:f},s:f}", "id", id, "problem", problem, "state", state,
                     "reason", "r", "unit", "GFLOP/s", "seed", "aggregate", seed, "best", "aggregate", best, "speedup",
                     best / seed);
}

static void test_summary(void **state)
{
    (void)state;
    json_t *jobs = json_array();
    json_array_append_new(jobs, job(1, "a", "succeeded", 1, 10));
    json_array_append_new(jobs, job(2, "a", "succeeded", 1, 12));   /* the problem's best: job 2 */
    json_array_append_new(jobs, job(3, "b", "succeeded", 1, 9.7));
    json_array_append_new(jobs, job(4, "c", "failed", 1, 99));      /* a failed job never sets a best */
    /* job 3's speedup was measured paired at its end: the summary keeps the interval */
    json_object_set_new(json_array_get(jobs, 2), "speedup_detail",
                        json_pack("{s:f,s:f,s:[f,f],s:f,s:b}", "ratio", 9.5, "low", 9.3, "ci", 9.2, 9.9, "confidence",
                                  0.95, "paired", 1));
    json_t *prev = json_loads("{\"problems\":{\"a\":{\"best\":12.1},\"b\":{\"best\":10},\"c\":{\"best\":1}}}", 0, NULL);
    json_t *s = avoctl_campaign_summary("n", jobs, prev, 0.02, "t0", "t1");
    assert_non_null(s);
    json_t *p = json_object_get(s, "problems");
    assert_true(json_real_value(json_object_get(json_object_get(p, "a"), "best")) == 12);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "a"), "job")), 2);
    /* a: 12 vs 12.1 is -0.8%, inside 2%; b: 9.7 vs 10 is -3%, a regression */
    assert_false(json_is_true(json_object_get(json_object_get(p, "a"), "regressed")));
    assert_true(json_is_true(json_object_get(json_object_get(p, "b"), "regressed")));
    /* c: no successful job now; its baseline (the previous best) is kept */
    json_t *c = json_object_get(p, "c");
    assert_true(json_is_null(json_object_get(c, "best")));
    assert_true(json_number_value(json_object_get(c, "baseline")) == 1);
    assert_false(json_is_true(json_object_get(c, "regressed")));
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 1);
    assert_int_equal(json_integer_value(json_object_get(s, "regressions")), 1);
    assert_false(json_is_true(json_object_get(s, "ok")));
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    assert_int_equal(avoctl_campaign_markdown(s, f), 0);
    fclose(f);
    assert_non_null(strstr(md, "**FAILED**: 1 job(s) failed, 1 problem(s) regressed (tolerance 2.0%)"));
    assert_non_null(strstr(md, "| b | 9.7 | GFLOP/s | 3 | 10 | -3.0% | **regressed** |"));
    assert_non_null(strstr(md, "| 4 | c | failed |"));
    assert_non_null(strstr(md, "| 3 | b | succeeded | 1 | 9.7 | x9.50 [9.200, 9.900] (95% interval, paired) | r |"));
    assert_non_null(strstr(md, "| 2 | a | succeeded | 1 | 12 | x12.00 | r |"));
    assert_true(json_real_value(json_object_get(
                    json_object_get(json_array_get(json_object_get(s, "jobs"), 2), "speedup_detail"), "low")) == 9.3);
    assert_non_null(strstr(md, "| c | - |"));
    assert_non_null(strstr(md, "no successful job (baseline kept)"));
    free(md);
    /* The night after: c succeeds at 0.5, compared with the kept baseline 1. */
    json_t *jobs2 = json_array();
    json_array_append_new(jobs2, job(5, "c", "succeeded", 0.4, 0.5));
    json_t *s2 = avoctl_campaign_summary("n", jobs2, s, 0.02, "t2", "t3");
    json_t *c2 = json_object_get(json_object_get(s2, "problems"), "c");
    assert_true(json_number_value(json_object_get(c2, "previous")) == 1);
    assert_true(json_is_true(json_object_get(c2, "regressed")));
    /* a and b had no job this time: carried, not regressed */
    assert_false(json_is_true(json_object_get(json_object_get(json_object_get(s2, "problems"), "b"), "regressed")));
    json_decref(s2);
    json_decref(jobs2);
    json_decref(s);
    /* No previous campaign: nothing regresses, each best is new. */
    s = avoctl_campaign_summary("n", jobs, NULL, 0.02, "t0", "t1");
    assert_int_equal(json_integer_value(json_object_get(s, "regressions")), 0);
    assert_true(json_is_null(json_object_get(json_object_get(json_object_get(s, "problems"), "b"), "previous")));
    json_decref(s);
    json_decref(prev);
    json_decref(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
