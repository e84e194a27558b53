/* The config table: defaults, file, environment and flags in order of
 * precedence; errors name the setting and where it came from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "avo_config.h"

typedef struct {
    char config[AVO_CFG_STRLEN];
    char name[AVO_CFG_STRLEN];
    long long n;
    double x;
    int flag;
} settings;

static const avo_cfg_row rows[] = {
    {"config", AVO_CFG_STR, offsetof(settings, config), NULL, "TEST_AVO_CONFIG", 1, 0, "file"},
    {"name", AVO_CFG_STR, offsetof(settings, name), "dflt", "TEST_AVO_NAME", 1, 0, "a string"},
    {"n", AVO_CFG_INT, offsetof(settings, n), "5", NULL, 1, 10, "an int in 1..10"},
    {"x", AVO_CFG_DOUBLE, offsetof(settings, x), "0.5", NULL, 1, 0, "a number"},
    {"flag", AVO_CFG_BOOL, offsetof(settings, flag), "false", NULL, 1, 0, "a bool"},
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

static int load(settings *s, int argc, char **argv, char *err, int *nrest)
{
    return avo_config_load(rows, NROWS, s, argc, argv, nrest, err, 512);
}

static void test_defaults(void **state)
{
    (void)state;
    settings s;
    char err[512];
    char *argv[] = {"prog", NULL};
    unsetenv("TEST_AVO_NAME");
    unsetenv("TEST_AVO_CONFIG");
    assert_int_equal(load(&s, 1, argv, err, NULL), 0);
    assert_string_equal(s.name, "dflt");
    assert_int_equal(s.n, 5);
    assert_true(s.x == 0.5);
    assert_int_equal(s.flag, 0);
}

static void test_precedence_file_env_flags(void **state)
{
    (void)state;
    char path[] = "/tmp/avo-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# comment\nname = fromfile\nn = 7\nx = 2.5\n");
    fclose(f);
    settings s;
    char err[512];
    int nrest = 0;
    setenv("TEST_AVO_NAME", "fromenv", 1);
    char *argv[] = {"prog", "--config", path, "pos", "--n=9", "--flag", NULL};
    assert_int_equal(load(&s, 6, argv, err, &nrest), 0);
    assert_string_equal(s.name, "fromenv"); /* env beats file */
    assert_int_equal(s.n, 9);               /* flag beats file */
    assert_true(s.x == 2.5);                /* file beats default */
    assert_int_equal(s.flag, 1);
    assert_int_equal(nrest, 2); /* "prog", "pos" */
    assert_string_equal(argv[1], "pos");
    unsetenv("TEST_AVO_NAME");
    unlink(path);
}

static void test_errors(void **state)
{
    (void)state;
    settings s;
    char err[512];
    char *a1[] = {"prog", "--nope", "1", NULL};
    assert_true(load(&s, 3, a1, err, NULL) < 0);
    assert_non_null(strstr(err, "unknown option '--nope'"));
    char *a2[] = {"prog", "--n", "11", NULL};
    assert_true(load(&s, 3, a2, err, NULL) < 0);
    assert_non_null(strstr(err, "n: 11 is outside"));
    char *a3[] = {"prog", "--x", "abc", NULL};
    assert_true(load(&s, 3, a3, err, NULL) < 0);
    assert_non_null(strstr(err, "x: 'abc' is not a number"));
    char *a4[] = {"prog", "--name", NULL};
    assert_true(load(&s, 2, a4, err, NULL) < 0);
    assert_non_null(strstr(err, "--name needs a value"));

    char path[] = "/tmp/avo-test-config-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "n = 3\nbogus = 1\n");
    fclose(f);
    char *a5[] = {"prog", "--config", path, NULL};
    assert_true(load(&s, 3, a5, err, NULL) < 0);
    assert_non_null(strstr(err, ":2: unknown setting 'bogus'"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_precedence_file_env_flags),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
