/* The toolchain constraint parser (proto/avo_toolchain.c): canonical forms,
 * bad input refused naming the field, and the version read from tool
 * banners; the client's toolchain label. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "avo_jobspec.h"
#include "avo_toolchain.h"
#include "client/toolchain.h"

static void constraint_forms(void **state)
{
    (void)state;
    static const char *const good[][2] = {
        {"13.0", "13.0"}, {">=580", ">=580"}, {"<13.1", "<13.1"},        {" <= 12.4.1 ", "<=12.4.1"},
        {"=13", "13"},    {"==13.0", "13.0"}, {"> 1.2.3.4", ">1.2.3.4"}, {"0", "0"},
    };
    char out[80];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(avo_toolchain_constraint_parse(good[i][0], out, sizeof out), 0);
        assert_string_equal(out, good[i][1]);
    }
    static const char *const bad[] = {"",     ">=",        "13.",   ".13",        "13..0", "13.x",     "v13", "~13",
                                      "13 0", "1.2.3.4.5", "=>580", "1234567890", ">>1",   "13.0-rc1", "!=13"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(avo_toolchain_constraint_parse(bad[i], out, sizeof out), -22);
}

static int parse(const char *text, json_t **out, char *err, size_t errlen)
{
    json_error_t je;
    json_t *in = json_loads(text, 0, &je);
    assert_non_null(in);
    int rc = avo_toolchain_parse(in, out, err, errlen);
    json_decref(in);
    return rc;
}

static void object_parse(void **state)
{
    (void)state;
    json_t *out = NULL;
    char err[512];
    assert_int_equal(
        parse("{\"nvcc\": \" 13.0\", \"driver\": [\">=580\", \"< 590\"], \"gpu\": \"H200\", \"avo\": \"0.1\"}", &out,
              err, sizeof err),
        0);
    char *s = json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s, "{\"avo\":\"0.1\",\"driver\":[\">=580\",\"<590\"],\"gpu\":\"H200\",\"nvcc\":\"13.0\"}");
    free(s);
    json_decref(out);

    static const char *const bad[][2] = {
        {"{\"nvcc\": \"13.x\"}", "toolchain.nvcc: malformed version constraint '13.x'"},
        {"{\"compiler\": \"13.0\"}", "toolchain.compiler: unknown key"},
        {"{\"driver\": 580}", "toolchain.driver: must be a string"},
        {"{\"driver\": []}", "toolchain.driver: an array of 1 to 4"},
        {"{\"driver\": [\">=580\", \"5x\"]}", "toolchain.driver: malformed version constraint '5x'"},
        {"{\"gpu\": \"  \"}", "toolchain.gpu: must be a model name"},
        {"{\"gpu\": [\"H200\"]}", "toolchain.gpu: must be a string"},
        {"[\"nvcc\"]", "toolchain: must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = NULL;
        assert_int_equal(parse(bad[i][0], &out, err, sizeof err), -22);
        assert_null(out);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: got '%s', expected '%s'", bad[i][0], err, bad[i][1]);
    }
}

static void jobspec_field(void **state)
{
    (void)state;
    avo_jobspec s;
    json_t *norm = NULL;
    char err[512];
    json_error_t je;
    json_t *in = json_loads("{\"problem\": \"cpu/sgemm\", \"toolchain\": {\"cc\": \">= 12\"}}", 0, &je);
    assert_int_equal(avo_jobspec_parse(in, &s, &norm, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(norm, "toolchain"), "cc")), ">=12");
    avo_jobspec_clear(&s);
    json_decref(norm);
    json_decref(in);
    in = json_loads("{\"problem\": \"cpu/sgemm\", \"toolchain\": {\"cuda\": \"13\"}}", 0, &je);
    assert_true(avo_jobspec_parse(in, &s, NULL, err, sizeof err) < 0);
    assert_non_null(strstr(err, "toolchain.cuda: unknown key"));
    avo_jobspec_clear(&s);
    json_decref(in);
}

static void banner_versions(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"cc (Debian 12.2.0-14+deb12u1) 12.2.0", "12.2.0"},
        {"Cuda compilation tools, release 13.0, V13.0.88", "13.0.88"},
        {"Debian clang version 14.0.6", "14.0.6"},
        {"gcc (GCC) 13.2.1 20230801 (Red Hat 13.2.1-3)", "13.2.1"},
        {"tool 7", "7"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(avo_toolchain_banner_version(cases[i][0], out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    assert_int_equal(avo_toolchain_banner_version("no version here", out, sizeof out), -2);
    assert_string_equal(out, "");
}

static void label(void **state)
{
    (void)state;
    char buf[256];
    json_error_t je;
    json_t *v = json_loads("{\"cc\":\"12.2.0\",\"nvcc\":\"13.0.88\",\"driver\":\"580.95.05\",\"cuda_driver\":\"13.0\","
                           "\"cuda_runtime\":\"13.0\",\"gpu\":\"NVIDIA H200\",\"cpu\":\"Xeon\",\"avo\":\"0.1.0\"}",
                           0, &je);
    avoctl_toolchain_label(v, buf, sizeof buf);
    assert_string_equal(buf, "cc 12.2.0, nvcc 13.0.88, driver 580.95.05, cuda 13.0/13.0, NVIDIA H200, avo 0.1.0");
    json_decref(v);
    v = json_string("unrecorded");
    avoctl_toolchain_label(v, buf, sizeof buf);
    assert_string_equal(buf, "unrecorded");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(constraint_forms), cmocka_unit_test(object_parse), cmocka_unit_test(jobspec_field),
        cmocka_unit_test(banner_versions),  cmocka_unit_test(label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
