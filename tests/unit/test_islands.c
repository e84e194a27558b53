/* avoctl watch's island lines: counts, best, speedup over the seed, the
 * sparkline of the best over time, the terminal width, the summary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/islands.h"

static void feed(avoctl_islands *v, const char *json)
{
    json_t *e = json_loads(json, 0, NULL);
    assert_non_null(e);
    avoctl_islands_event(v, e);
    json_decref(e);
}

static char *render(const avoctl_islands *v, size_t width, int summary)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (summary)
        avoctl_islands_summary(v, f);
    else
        avoctl_islands_print(v, width, f);
    fclose(f);
    return buf;
}

static void test_lines(void **state)
{
    (void)state;
    avoctl_islands v;
    avoctl_islands_init(&v, 2, 10, "GFLOP/s");
    feed(&v, "{\"kind\":\"candidate_evaluated\",\"data\":{\"island\":0,\"outcome\":\"ok\",\"aggregate\":2}}");
    feed(&v, "{\"kind\":\"committed\",\"data\":{\"island\":0,\"parent\":null,\"aggregate\":2,\"candidate\":1}}");
    feed(&v, "{\"kind\":\"candidate_evaluated\",\"data\":{\"island\":1,\"outcome\":\"wrong_result\"}}");
    feed(&v, "{\"kind\":\"candidate_evaluated\",\"data\":{\"island\":0,\"outcome\":\"ok\",\"aggregate\":4}}");
    feed(&v, "{\"kind\":\"committed\",\"data\":{\"island\":0,\"parent\":1,\"aggregate\":4,\"candidate\":3}}");
    feed(&v, "{\"kind\":\"island_migrated\",\"data\":{\"island\":1,\"from\":0,\"aggregate\":4,\"candidate\":3}}");
    char *out = render(&v, 0, 0);
    assert_non_null(strstr(out, "island 0     2 evals (job 3/10)  best 4 GFLOP/s"));
    assert_non_null(strstr(out, "x2.00"));
    assert_non_null(strstr(out, "▁█")); /* 2 then 4: lowest and highest bar */
    assert_non_null(strstr(out, "island 1     1 eval "));
    assert_non_null(strstr(out, "(1 failed)"));
    free(out);
    /* A retired best (sql/026): both islands back at its predecessor's 2.5. */
    avoctl_islands r = v;
    feed(&r, "{\"kind\":\"best_retired\",\"data\":{\"candidate\":3,\"replaced_by\":1,\"aggregate\":2.5,"
             "\"islands\":[0,1],\"best_candidate\":1}}");
    out = render(&r, 0, 0);
    assert_non_null(strstr(out, "island 0     2 evals (job 3/10)  best 2.5 GFLOP/s"));
    assert_non_null(strstr(out, "island 1     1 eval  (job 3/10)  best 2.5 GFLOP/s"));
    free(out);
    /* Cut to the width, a bar counting as one column. */
    out = render(&v, 30, 0);
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
        assert_true(strlen(line) <= 30 * 3);
    free(out);
    feed(&v, "{\"kind\":\"job_finished\",\"data\":{\"state\":\"succeeded\",\"reason\":\"evaluation budget reached\","
             "\"seed\":{\"aggregate\":2},\"speedup\":2}}");
    out = render(&v, 0, 1);
    assert_string_equal(out,
                        "job succeeded: evaluation budget reached; best 4 GFLOP/s vs seed 2 GFLOP/s (x2.00) after 3 "
                        "evaluations on 2 islands\n");
    free(out);
}

static void test_history_window(void **state)
{
    (void)state;
    avoctl_islands v;
    avoctl_islands_init(&v, 1, 0, "GB/s");
    char ev[200];
    for (int i = 1; i <= AVOCTL_SPARK + 10; i++) {
        snprintf(ev, sizeof ev, "{\"kind\":\"committed\",\"data\":{\"island\":0,\"parent\":%d,\"aggregate\":%d}}", i,
                 i);
        feed(&v, ev);
    }
    assert_int_equal(v.isl[0].nhistory, AVOCTL_SPARK);
    assert_true(v.isl[0].history[0] == 11 && v.isl[0].best == AVOCTL_SPARK + 10);
    /* an island number out of range is ignored, not written out of bounds */
    feed(&v, "{\"kind\":\"committed\",\"data\":{\"island\":100000,\"aggregate\":1}}");
    assert_int_equal(v.nislands, 1);
}

static char *job_summary(const char *json)
{
    char *buf = NULL;
    size_t len = 0;
    json_t *job = json_loads(json, 0, NULL);
    assert_non_null(job);
    FILE *f = open_memstream(&buf, &len);
    avoctl_islands_job_summary(job, f);
    fclose(f);
    json_decref(job);
    return buf;
}

/* watch's last line comes from the job (GET /v1/jobs/{id}), not from the
 * events it happened to see: after `watch --after N` those are a tail. */
static void test_job_summary(void **state)
{
    (void)state;
    char *out = job_summary(
        "{\"state\":\"succeeded\",\"reason\":\"evaluation budget reached\",\"unit\":\"GFLOP/s\","
        "\"evaluations\":{\"done\":8},\"islands\":[{\"idx\":0}],\"seed\":{\"candidate\":1,"
        "\"aggregate\":2,\"outcome\":\"ok\"},\"best\":{\"candidate\":5,\"aggregate\":5},\"speedup\":2.5}");
    assert_string_equal(out,
                        "job succeeded: evaluation budget reached; best 5 GFLOP/s vs seed 2 GFLOP/s (x2.50) after 8 "
                        "evaluations on 1 island\n");
    free(out);
    /* one evaluation, a failed seed: no "seed 0", no "best 0  after" */
    out = job_summary(
        "{\"state\":\"failed\",\"reason\":\"the seed failed\",\"evaluations\":{\"done\":1},"
        "\"spec\":{\"islands\":2},\"seed\":{\"candidate\":1,\"aggregate\":0,\"outcome\":\"compile_error\"},"
        "\"best\":null,\"speedup\":null}");
    assert_string_equal(out,
                        "job failed: the seed failed; seed failed (compile_error); no valid evaluation yet after 1 "
                        "evaluation on 2 islands\n");
    free(out);
    out = job_summary("{\"state\":\"running\",\"evaluations\":{\"done\":0},\"islands\":[]}");
    assert_string_equal(out, "job running: -; no valid evaluation yet after 0 evaluations on 1 island\n");
    free(out);
}

/* The live view's clock line: elapsed and an ETA from the rate so far. */
static void test_clock_line(void **state)
{
    (void)state;
    avoctl_islands v;
    avoctl_islands_init(&v, 1, 10, "GB/s");
    feed(&v, "{\"kind\":\"candidate_evaluated\",\"data\":{\"island\":0,\"outcome\":\"ok\",\"aggregate\":2}}");
    feed(&v, "{\"kind\":\"candidate_evaluated\",\"data\":{\"island\":0,\"outcome\":\"ok\",\"aggregate\":2}}");
    char *out = render(&v, 0, 0);
    assert_null(strstr(out, "elapsed"));
    free(out);
    v.elapsed = 20;
    out = render(&v, 0, 0);
    assert_non_null(strstr(out, "\nelapsed 20 s, ETA 1 min 20 s\n"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_job_summary),
        cmocka_unit_test(test_clock_line),
        cmocka_unit_test(test_history_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
