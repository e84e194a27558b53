/* avo_expr: precedence, operators, variables, and every error path. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "avo_expr.h"

static const char *const names[] = {"M", "N", "K", "BM", "BN"};
static const double values[] = {256, 128, 64, 32, 16};
static const avo_expr_env env = {5, names, values};

static double ok(const char *e)
{
    double v = -12345;
    char err[128];
    int rc = avo_expr_eval(e, &env, &v, err, sizeof err);
    if (rc)
        fail_msg("'%s' failed: %s", e, err);
    return v;
}

static void test_arithmetic(void **state)
{
    (void)state;
    assert_true(ok("1 + 2 * 3") == 7);
    assert_true(ok("(1 + 2) * 3") == 9);
    assert_true(ok("10 - 4 - 3") == 3); /* left associative */
    assert_true(ok("7 / 2") == 3.5);    /* real division, documented */
    assert_true(ok("10 % 4") == 2);
    assert_true(ok("-3 + 5") == 2);
    assert_true(ok("--3") == 3);
    assert_true(ok("1e3 + .5") == 1000.5);
    assert_true(ok("  2*M*N*K ") == 2.0 * 256 * 128 * 64);
    assert_true(ok("4 * (M * K + K * N + M * N)") == 4.0 * (256 * 64 + 64 * 128 + 256 * 128));
}

static void test_logic(void **state)
{
    (void)state;
    assert_true(ok("1 < 2") == 1);
    assert_true(ok("2 <= 2 && 3 >= 4") == 0);
    assert_true(ok("1 > 2 || 3 != 4") == 1);
    assert_true(ok("!0") == 1);
    assert_true(ok("!BM") == 0);
    assert_true(ok("BM * BN <= 512") == 1);
    assert_true(ok("BM * BN < 512") == 0);
    assert_true(ok("M == 256 && N == 128") == 1);
    assert_true(ok("1 + 1 == 2") == 1);  /* + binds tighter than == */
    assert_true(ok("0 || 0 && 1") == 0); /* && binds tighter than || */
}

static void expect_err(const char *e, int code, const char *msg)
{
    double v = 0;
    char err[128] = "";
    int rc = avo_expr_eval(e, &env, &v, err, sizeof err);
    if (rc != code)
        fail_msg("'%s': rc %d, wanted %d (%s)", e, rc, code, err);
    if (!strstr(err, msg))
        fail_msg("'%s': message '%s' lacks '%s'", e, err, msg);
}

static void test_errors(void **state)
{
    (void)state;
    expect_err("Q + 1", -ENOENT, "unknown name 'Q' at column 1");
    expect_err("M + Q", -ENOENT, "unknown name 'Q' at column 5");
    expect_err("1 +", -EINVAL, "unexpected end of expression");
    expect_err("1 2", -EINVAL, "unexpected '2' at column 3");
    expect_err("(1 + 2", -EINVAL, "expected ')'");
    expect_err("4 / (2 - 2)", -EDOM, "division by zero");
    expect_err("4 % 0", -EDOM, "division by zero");
    expect_err("1 $ 2", -EINVAL, "unexpected '$'");
    expect_err("", -EINVAL, "unexpected end");
    char deep[400];
    memset(deep, '(', 200);
    strcpy(deep + 200, "1");
    memset(deep + 201, ')', 100); /* unbalanced on purpose: the depth cap hits first */
    deep[301] = 0;
    expect_err(deep, -E2BIG, "nested too deeply");
    /* No env at all: every name is unknown, and NULL err is allowed. */
    double v;
    assert_int_equal(avo_expr_eval("M", NULL, &v, NULL, 0), -ENOENT);
    assert_int_equal(avo_expr_eval(NULL, NULL, &v, NULL, 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arithmetic),
        cmocka_unit_test(test_logic),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
