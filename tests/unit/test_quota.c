/* Unit tests for daemon/avod/quota.c: quota lines into the JSON avod stores
 * (units, '*' and '-', every key), and the refusals that name the line and
 * the rule (unknown team or key, negative or fractional limits, a share of
 * 0, a key twice, a line without limits, a team twice in a file). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/avod/quota.h"

static avo_ident *teams(void)
{
    avo_ident *id = NULL;
    char err[256];
    assert_int_equal(avo_ident_new(&id, "ml,infra", "", "all", err, sizeof err), 0);
    return id;
}

static void test_line_values(void **state)
{
    (void)state;
    avo_ident *id = teams();
    json_t *o = NULL;
    char err[512];
    assert_int_equal(avo_quota_parse_line("ml jobs=2 evals-in-flight=4 gpu-seconds-day=1.5h gpu-seconds-week=2d "
                                          "share=3",
                                          id, "L1", &o, err, sizeof err),
                     0);
    assert_string_equal(json_string_value(json_object_get(o, "team")), "ml");
    assert_int_equal(json_integer_value(json_object_get(o, "jobs")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "evals_in_flight")), 4);
    assert_true(json_real_value(json_object_get(o, "gpu_s_day")) == 5400);
    assert_true(json_real_value(json_object_get(o, "gpu_s_week")) == 172800);
    assert_true(json_real_value(json_object_get(o, "share")) == 3);
    json_decref(o);
    assert_int_equal(avo_quota_parse_line("*\tgpu-seconds-day=90m", id, "L2", &o, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(o, "team")), "*");
    assert_true(json_real_value(json_object_get(o, "gpu_s_day")) == 5400);
    assert_null(json_object_get(o, "jobs"));
    json_decref(o);
    /* '-' is the group of jobs without a team, stored as '' */
    assert_int_equal(avo_quota_parse_line("- jobs=0", id, "L3", &o, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(o, "team")), "");
    assert_int_equal(json_integer_value(json_object_get(o, "jobs")), 0);
    json_decref(o);
    avo_ident_free(id);
}

static void refused(const avo_ident *id, const char *line, const char *want)
{
    json_t *o = NULL;
    char err[512] = "";
    assert_int_equal(avo_quota_parse_line(line, id, "quotas F line 7", &o, err, sizeof err), -22);
    assert_null(o);
    if (!strstr(err, want))
        fail_msg("'%s': got '%s', want '%s'", line, err, want);
}

static void test_line_refusals(void **state)
{
    (void)state;
    avo_ident *id = teams();
    refused(id, "mll jobs=1", "quotas F line 7: unknown team 'mll' (avod's teams: ml, infra)");
    refused(id, "ml jobs=-1", "quotas F line 7: jobs=-1: a limit is a whole number >= 0");
    refused(id, "ml jobs=1.5", "jobs=1.5: a limit is a whole number >= 0");
    refused(id, "ml evals-in-flight=x", "evals-in-flight=x: a limit is a whole number");
    refused(id, "ml gpu-seconds-day=-3", "gpu-seconds-day=-3: seconds >= 0");
    refused(id, "ml gpu-seconds-week=3w", "gpu-seconds-week=3w: seconds >= 0, optionally with a unit s, m, h or d");
    refused(id, "ml share=0", "share=0: a share is a number > 0");
    refused(id, "ml gpu-hours=2",
            "unknown key 'gpu-hours' (keys: jobs, evals-in-flight, gpu-seconds-day, "
            "gpu-seconds-week, share)");
    refused(id, "ml jobs", "'jobs' is not key=value");
    refused(id, "ml jobs=", "'jobs=' is not key=value");
    refused(id, "ml jobs=1 jobs=2", "jobs given twice");
    refused(id, "infra", "team 'infra' has no key=value");
    avo_ident_free(id);
}

static char *write_file(const char *text)
{
    char *path = strdup("/tmp/avo-test-quota.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_file(void **state)
{
    (void)state;
    avo_ident *id = teams();
    json_t *all = NULL;
    char err[512] = "";
    char *p = write_file("# quotas\n\nml jobs=2   # two at a time\n  infra gpu-seconds-day=1h\n* share=1\n");
    assert_int_equal(avo_quota_load(p, id, &all, err, sizeof err), 0);
    assert_int_equal(json_array_size(all), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(all, 1), "team")), "infra");
    json_decref(all);
    unlink(p);
    free(p);
    p = write_file("ml jobs=2\n# again\nml jobs=3\n");
    all = NULL;
    assert_int_equal(avo_quota_load(p, id, &all, err, sizeof err), -22);
    assert_null(all);
    assert_non_null(strstr(err, "line 3: team 'ml' has a line already"));
    assert_non_null(strstr(err, p));
    unlink(p);
    free(p);
    assert_int_equal(avo_quota_load("/nonexistent/quotas", id, &all, err, sizeof err), -2);
    assert_non_null(strstr(err, "quotas /nonexistent/quotas: No such file"));
    assert_int_equal(avo_quota_load("", id, &all, err, sizeof err), 0);
    assert_int_equal(json_array_size(all), 0);
    json_decref(all);
    avo_ident_free(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_values),
        cmocka_unit_test(test_line_refusals),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
