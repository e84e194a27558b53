/* Unit tests for daemon/avod/problems.c: the listing of a kernels root
 * (the shipped kernels/), a package described, and "did you mean" for a
 * name none has. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/problems.h"

static void test_distance(void **state)
{
    (void)state;
    assert_int_equal(avo_problems_distance("cpu/sgemm", "cpu/sgemm"), 0);
    assert_int_equal(avo_problems_distance("cpu/sgem", "cpu/sgemm"), 1);
    assert_int_equal(avo_problems_distance("gemm_bf61", "gemm_bf16"), 2);
    assert_int_equal(avo_problems_distance("", "abc"), 3);
}

static void test_list(void **state)
{
    (void)state;
    json_t *l = avo_problems_list("kernels");
    assert_non_null(l);
    json_t *rows = json_object_get(l, "problems");
    assert_true(json_array_size(rows) >= 3);
    /* sorted by name, each with its summary */
    int seen = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (i)
            assert_true(strcmp(json_string_value(json_object_get(json_array_get(rows, i - 1), "name")),
                               json_string_value(json_object_get(r, "name"))) < 0);
        if (!strcmp(json_string_value(json_object_get(r, "name")), "cpu/sgemm")) {
            seen = 1;
            assert_int_equal(json_integer_value(json_object_get(r, "knobs")), 5);
            assert_string_equal(json_string_value(json_object_get(r, "backend")), "cpu");
        }
    }
    assert_true(seen);
    json_decref(l);
    /* a root that does not exist lists nothing */
    l = avo_problems_list("/nonexistent/kernels");
    assert_int_equal(json_array_size(json_object_get(l, "problems")), 0);
    json_decref(l);
}

static void test_get(void **state)
{
    (void)state;
    json_t *o = NULL;
    char err[1024];
    assert_int_equal(avo_problems_get("kernels", "cpu/sgemm", &o, err, sizeof err), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(o, "knob_space"), 0), "allowed")), 875);
    json_decref(o);
    assert_int_equal(avo_problems_get("kernels", "sgemm", &o, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "did you mean 'cpu/sgemm'?"));
    assert_int_equal(avo_problems_get("kernels", "cpu/softmx", &o, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "did you mean 'cpu/softmax'?"));
    assert_int_equal(avo_problems_get("kernels", "qqqqqqqq", &o, err, sizeof err), -ENOENT);
    assert_null(strstr(err, "did you mean"));
    assert_int_equal(avo_problems_get("kernels", "../etc", &o, err, sizeof err), -EINVAL);
    assert_null(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_get),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
