/* avo_eval_candidate end to end: real compiler, real avo-harness in the
 * sandbox, the sgemm problem, and the hostile candidates of tests/hostile/.
 * Run from the repository root; AVO_HARNESS overrides the harness path. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "daemon/worker/evaluate.h"

static avo_problem problem;
static char cache_dir[64] = "/tmp/avo-test-cache-XXXXXX";
static const char *harness;

static int setup(void **state)
{
    (void)state;
    char err[512];
    if (avo_problem_load(&problem, "kernels/cpu/sgemm", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    harness = getenv("AVO_HARNESS") ? getenv("AVO_HARNESS") : "build/bin/avo-harness";
    return mkdtemp(cache_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    avo_problem_free(&problem);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

static json_t *eval_opts(const char *file, double timeout, int (*cancel)(void *), void *arg)
{
    avo_eval_opts o = {.harness_path = harness, .cache_dir = cache_dir, .scratch_root = "/tmp",
                       .timeout_s = timeout, .rng_seed = 1234, .should_cancel = cancel, .cancel_arg = arg};
    size_t len;
    char *src = slurp(file, &len);
    json_t *r = NULL;
    char err[512] = "";
    int rc = avo_eval_candidate(&o, &problem, src, len, &r, err, sizeof err);
    free(src);
    if (rc)
        fail_msg("avo_eval_candidate(%s): %d %s", file, rc, err);
    assert_non_null(r);
    return r;
}

static json_t *eval(const char *file, double timeout)
{
    return eval_opts(file, timeout, NULL, NULL);
}

static const char *outcome(json_t *r) { return json_string_value(json_object_get(r, "outcome")); }
static const char *detail(json_t *r) { return json_string_value(json_object_get(r, "detail")); }

/* Every failed outcome carries no score at all. */
static void assert_unscored(json_t *r)
{
    assert_true(json_number_value(json_object_get(r, "aggregate")) == 0);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "configs"), i, c)
        assert_true(json_number_value(json_object_get(c, "score")) == 0);
}

static void expect(json_t *r, const char *want, const char *in_detail)
{
    if (strcmp(outcome(r), want) != 0 || (in_detail && !strstr(detail(r), in_detail)))
        fail_msg("outcome %s (%s), wanted %s with '%s'", outcome(r), detail(r), want, in_detail ? in_detail : "");
}

static void test_seed_ok(void **state)
{
    (void)state;
    json_t *r = eval("kernels/cpu/sgemm/seed.c", 60);
    expect(r, "ok", NULL);
    assert_true(json_number_value(json_object_get(r, "aggregate")) > 0);
    assert_string_equal(json_string_value(json_object_get(r, "unit")), "GFLOP/s");
    assert_int_equal(json_integer_value(json_object_get(r, "rng_seed")), 1234);
    json_t *cf = json_object_get(r, "configs");
    assert_int_equal(json_array_size(cf), 4);
    json_t *c0 = json_array_get(cf, 0);
    assert_string_equal(json_string_value(json_object_get(c0, "name")), "128");
    assert_true(json_number_value(json_object_get(c0, "score")) > 0);
    assert_true(json_integer_value(json_object_get(c0, "runs")) >= problem.timing_min_runs);
    assert_true(json_number_value(json_object_get(json_object_get(c0, "check"), "rel_l2")) < 1e-5);
    json_t *sb = json_object_get(r, "sandbox");
    assert_int_equal(json_integer_value(json_object_get(sb, "exit")), 0);
    assert_true(json_is_null(json_object_get(sb, "signal")));
    assert_true(json_is_boolean(json_object_get(sb, "netns")));
    json_decref(r);

    /* The same source again: served from the compile cache. */
    r = eval("kernels/cpu/sgemm/seed.c", 60);
    expect(r, "ok", NULL);
    assert_true(json_is_true(json_object_get(json_object_get(r, "compile"), "cached")));
    json_decref(r);
}

static void test_compile_error(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/compile_error.c", 60);
    expect(r, "compile_error", "undeclared_variable");
    assert_unscored(r);
    const char *log = json_string_value(json_object_get(json_object_get(r, "compile"), "log"));
    assert_non_null(strstr(log, "error"));
    assert_true(strlen(log) <= 8192 + 128);
    json_decref(r);
}

static void test_segfault(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/segfault.c", 60);
    expect(r, "crash", "SIGSEGV");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "sandbox"), "signal")), "SIGSEGV");
    assert_unscored(r);
    json_decref(r);
}

static void test_infinite_loop(void **state)
{
    (void)state;
    time_t t0 = time(NULL);
    json_t *r = eval("tests/hostile/infinite_loop.c", 2);
    expect(r, "timeout", "wall-clock");
    assert_true(time(NULL) - t0 < 10);
    assert_unscored(r);
    json_decref(r);
}

static int cancel_after(void *arg)
{
    return time(NULL) >= *(time_t *)arg;
}

static void test_cancel(void **state)
{
    (void)state;
    time_t when = time(NULL) + 1;
    json_t *r = eval_opts("tests/hostile/infinite_loop.c", 60, cancel_after, &when);
    expect(r, "cancelled", NULL);
    assert_true(time(NULL) - when < 5);
    json_decref(r);
}

static void test_slightly_wrong(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/slightly_wrong.c", 60);
    expect(r, "wrong_result", "rel_l2");
    assert_unscored(r);
    json_decref(r);
}

static void test_modifies_inputs(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/modifies_inputs.c", 60);
    expect(r, "cheat_suspected", "input A[0] was modified");
    assert_unscored(r);
    json_decref(r);
}

static void test_unwritten(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/unwritten.c", 60);
    expect(r, "wrong_result", "not finite");
    assert_unscored(r);
    json_decref(r);
}

static void test_caches_output(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/caches_output.c", 60);
    expect(r, "cheat_suspected", "fresh input set after");
    assert_unscored(r);
    json_decref(r);
}

static void test_missing_harness(void **state)
{
    (void)state;
    avo_eval_opts o = {.harness_path = "/nonexistent/avo-harness", .cache_dir = cache_dir};
    json_t *r = NULL;
    char err[512];
    assert_true(avo_eval_candidate(&o, &problem, "int x;", 6, &r, err, sizeof err) < 0);
    assert_null(r);
    assert_non_null(strstr(err, "harness not found"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_ok),         cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_segfault),        cmocka_unit_test(test_infinite_loop),
        cmocka_unit_test(test_cancel),          cmocka_unit_test(test_slightly_wrong),
        cmocka_unit_test(test_modifies_inputs), cmocka_unit_test(test_unwritten),
        cmocka_unit_test(test_caches_output),   cmocka_unit_test(test_missing_harness),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
