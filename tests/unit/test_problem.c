/* avo_problem: the sgemm package loads; every kind of spec error is one line
 * "FILE: FIELD: reason"; knobs, rendering and name resolution. Run from the
 * repository root. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "avo_problem.h"

#define SGEMM "kernels/cpu/sgemm"

static void test_load_sgemm(void **state)
{
    (void)state;
    avo_problem p;
    char err[512] = "";
    int rc = avo_problem_load(&p, SGEMM, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(p.name, "cpu/sgemm");
    assert_string_equal(p.backend, "cpu");
    assert_string_equal(p.entry, "sgemm");
    assert_int_equal(p.nsizes, 3);
    assert_string_equal(p.sizes[2], "K");
    assert_int_equal(p.ntensors, 3);
    assert_int_equal(p.tensors[2].role, AVO_ROLE_OUTPUT);
    assert_int_equal(p.tensors[0].dtype, AVO_DTYPE_F32);
    assert_true(p.tensors[0].scale == 1.0); /* not declared: uniform in [-1, 1) */
    assert_int_equal(p.nconfigs, 4);
    assert_string_equal(p.configs[2].name, "384x320x288");
    assert_int_equal(p.configs[2].size[1], 320);
    assert_string_equal(p.unit, "GFLOP/s");
    assert_true(p.tol[AVO_DTYPE_F32].rel_l2 == 1e-5);
    assert_int_equal(p.nknobs, 5);
    assert_int_equal(p.ncflags, 2);
    assert_int_equal(p.check_input_sets, 2);
    assert_int_equal(p.timing_min_runs, 5);
    int64_t n;
    assert_int_equal(avo_problem_tensor_elems(&p, 2, 0, &n, err, sizeof err), 0);
    assert_int_equal(n, 384 * 288);
    double f;
    assert_int_equal(avo_problem_eval_config(&p, 3, p.flops, &f, err, sizeof err), 0);
    assert_true(f == 2.0 * 512 * 512 * 512);
    avo_problem_free(&p);
}

static void test_fixture_unknown_size(void **state)
{
    (void)state;
    avo_problem p;
    char err[512] = "";
    assert_int_equal(avo_problem_load(&p, "tests/fixtures/problems/unknown_size", err, sizeof err), -EINVAL);
    assert_string_equal(err,
                        "tests/fixtures/problems/unknown_size/problem.json: tensors[1].shape[0]: unknown size 'Q'");
}

/* Write a mutated copy of the sgemm spec into a temp dir and load it. */
typedef void (*mutate_fn)(json_t *j);

static int load_variant(mutate_fn m, char *err, size_t errlen, char *dir)
{
    strcpy(dir, "/tmp/avo-test-problem-XXXXXX");
    assert_non_null(mkdtemp(dir));
    json_t *j = json_load_file(SGEMM "/problem.json", 0, NULL);
    assert_non_null(j);
    m(j);
    char path[512];
    snprintf(path, sizeof path, "%s/problem.json", dir);
    assert_int_equal(json_dump_file(j, path, 0), 0);
    json_decref(j);
    const char *files[] = {"reference.c", "seed.c"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    }
    avo_problem p;
    int rc = avo_problem_load(&p, dir, err, errlen);
    if (rc == 0)
        avo_problem_free(&p);
    return rc;
}

static void expect_error(mutate_fn m, const char *want)
{
    char err[512] = "", dir[64], prefix[128];
    int rc = load_variant(m, err, sizeof err, dir);
    if (rc == 0)
        fail_msg("variant loaded, wanted error '%s'", want);
    snprintf(prefix, sizeof prefix, "%s/problem.json: ", dir);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || strcmp(err + strlen(prefix), want) != 0)
        fail_msg("got '%s', wanted '%s%s'", err, prefix, want);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void m_unknown_top(json_t *j)
{
    json_object_set_new(j, "tolerence", json_object());
}
static void m_no_entry(json_t *j)
{
    json_object_del(j, "entry");
}
static void m_bad_dtype(json_t *j)
{
    json_object_set_new(json_array_get(json_object_get(j, "tensors"), 0), "dtype", json_string("f8"));
}
static void m_bad_role(json_t *j)
{
    json_object_set_new(json_array_get(json_object_get(j, "tensors"), 2), "role", json_string("input"));
}
static void m_config_unknown_size(json_t *j)
{
    json_t *c = json_array_get(json_object_get(j, "configs"), 1);
    json_object_set_new(json_object_get(c, "sizes"), "Z", json_integer(3));
}
static void m_config_missing_size(json_t *j)
{
    json_t *c = json_array_get(json_object_get(j, "configs"), 0);
    json_object_del(json_object_get(c, "sizes"), "K");
}
static void m_knob_default(json_t *j)
{
    json_object_set_new(json_array_get(json_object_get(j, "knobs"), 1), "default", json_integer(48));
}
static void m_constraint(json_t *j)
{
    json_array_append_new(json_object_get(j, "constraints"), json_string("BM < 64"));
}
static void m_constraint_name(json_t *j)
{
    json_array_append_new(json_object_get(j, "constraints"), json_string("BX < 64"));
}
static void m_metric(json_t *j)
{
    json_object_set_new(j, "score_metric", json_string("time"));
}
static void m_flops(json_t *j)
{
    json_object_set_new(j, "flops", json_string("2 * M * N * (K - 512)"));
}
static void m_tol_key(json_t *j)
{
    json_object_set_new(json_object_get(json_object_get(j, "tolerance"), "f32"), "rel", json_real(1));
}
static void m_reference_escape(json_t *j)
{
    json_object_set_new(j, "reference", json_string("../x.c"));
}
static void m_timing(json_t *j)
{
    json_object_set_new(json_object_get(j, "timing"), "min_runs", json_integer(0));
}
/* K, the job's warm-up sets per configuration (docs/evaluation.md, "Input sets"). */
static void m_input_sets_zero(json_t *j)
{
    json_object_set_new(j, "check", json_pack("{s:i}", "input_sets", 0));
}
static void m_input_sets_type(json_t *j)
{
    json_object_set_new(j, "check", json_pack("{s:s}", "input_sets", "2"));
}
static void m_tensor_key(json_t *j)
{
    json_object_set_new(json_array_get(json_object_get(j, "tensors"), 0), "layout", json_string("row"));
}

static void m_scale_output(json_t *j)
{
    json_object_set_new(json_array_get(json_object_get(j, "tensors"), 2), "scale", json_real(2));
}
static void m_scale_zero(json_t *j)
{
    json_object_set_new(json_array_get(json_object_get(j, "tensors"), 0), "scale", json_real(0));
}

static void m_validate_size(json_t *j)
{
    json_object_del(json_object_get(json_object_get(j, "validate"), "sizes"), "K");
}
static void m_validate_key(json_t *j)
{
    json_object_set_new(json_object_get(j, "validate"), "configs", json_array());
}
static void m_roofline_empty(json_t *j)
{
    json_object_set_new(j, "roofline", json_object());
}
static void m_roofline_neg(json_t *j)
{
    json_object_set_new(j, "roofline", json_pack("{s:f}", "gflops", -1.0));
}
static void m_roofline_key(json_t *j)
{
    json_object_set_new(j, "roofline", json_pack("{s:f}", "tflops", 1.0));
}
static void m_roofline_nobytes(json_t *j)
{
    json_object_del(j, "bytes");
    json_object_set_new(j, "roofline", json_pack("{s:f}", "gbps", 10.0));
}

static void m_counters_unknown(json_t *j)
{
    json_object_set_new(j, "counters", json_pack("{s:[s,s]}", "configs", "256", "1024"));
}
static void m_counters_twice(json_t *j)
{
    json_object_set_new(j, "counters", json_pack("{s:[s,s]}", "configs", "256", "256"));
}
static void m_counters_empty(json_t *j)
{
    json_object_set_new(j, "counters", json_pack("{s:[]}", "configs"));
}
static void m_counters_key(json_t *j)
{
    json_object_set_new(j, "counters", json_pack("{s:[]}", "metrics"));
}
static void m_counters_type(json_t *j)
{
    json_object_set_new(j, "counters", json_pack("{s:[i]}", "configs", 1));
}
static void m_counters_array(json_t *j)
{
    json_object_set_new(j, "counters", json_pack("[s]", "256"));
}

/* A configuration by name, and the error that lists the valid ones (the
 * profile route, the agent's profile tool and avo-harness --config). */
static void test_config_index(void **state)
{
    (void)state;
    avo_problem p;
    char err[512] = "";
    assert_int_equal(avo_problem_load(&p, SGEMM, err, sizeof err), 0);
    assert_int_equal(avo_problem_config_index(&p, "128", err, sizeof err), 0);
    assert_int_equal(avo_problem_config_index(&p, "512", err, sizeof err), 3);
    assert_int_equal(avo_problem_config_index(&p, "51", err, sizeof err), -ENOENT);
    assert_string_equal(err, "problem cpu/sgemm has no configuration '51' (it has: 128, 256, 384x320x288, 512)");
    avo_problem_free(&p);
}

/* counters.configs: which configurations the counters pass profiles. */
static void test_counters_configs(void **state)
{
    (void)state;
    avo_problem p;
    char err[512], dir[64];
    assert_int_equal(avo_problem_load(&p, SGEMM, err, sizeof err), 0);
    for (int i = 0; i < p.nconfigs; i++)
        assert_int_equal(p.configs[i].profile, 1); /* default: every config */
    avo_problem_free(&p);

    strcpy(dir, "/tmp/avo-test-counters-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cp " SGEMM "/* %s/", dir);
    assert_int_equal(system(cmd), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/problem.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    assert_non_null(j);
    json_object_set_new(j, "counters", json_object()); /* no list: every config */
    assert_int_equal(json_dump_file(j, path, 0), 0);
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    for (int i = 0; i < p.nconfigs; i++)
        assert_int_equal(p.configs[i].profile, 1);
    avo_problem_free(&p);
    json_object_set_new(j, "counters", json_pack("{s:[s,s]}", "configs", "512", "256"));
    assert_int_equal(json_dump_file(j, path, 0), 0);
    json_decref(j);
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    for (int i = 0; i < p.nconfigs; i++)
        assert_int_equal(p.configs[i].profile,
                         strcmp(p.configs[i].name, "512") == 0 || strcmp(p.configs[i].name, "256") == 0);
    avo_problem_free(&p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);

    expect_error(m_counters_unknown, "counters.configs[1]: no configuration is named '1024'");
    expect_error(m_counters_twice, "counters.configs[1]: '256' is listed twice");
    expect_error(m_counters_empty, "counters.configs: must be a non-empty array of configuration names");
    expect_error(m_counters_key, "counters: unknown field 'metrics'");
    expect_error(m_counters_type, "counters.configs[0]: must be a configuration name");
    expect_error(m_counters_array, "counters: must be an object");
}

/* screen: the configurations a paired evaluation times first, and their
 * pair count (docs/evaluation.md, "Screening"). sgemm's timing.min_runs is
 * 5, so the floor is the 10 pairs an interval needs. */
static void m_screen_ok(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s,s],s:i}", "configs", "512", "128", "runs", 40));
}
static void m_screen_unknown(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s,s],s:i}", "configs", "256", "1024", "runs", 40));
}
static void m_screen_twice(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s,s],s:i}", "configs", "256", "256", "runs", 40));
}
static void m_screen_empty(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[],s:i}", "configs", "runs", 40));
}
static void m_screen_no_configs(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:i}", "runs", 40));
}
static void m_screen_no_runs(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s]}", "configs", "256"));
}
static void m_screen_few_runs(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s],s:i}", "configs", "256", "runs", 9));
}
static void m_screen_min_runs(json_t *j)
{
    /* timing.min_runs 25 raises the floor */
    json_object_set_new(j, "timing", json_pack("{s:i}", "min_runs", 25));
    json_object_set_new(j, "screen", json_pack("{s:[s],s:i}", "configs", "256", "runs", 24));
}
static void m_screen_many_runs(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s],s:i}", "configs", "256", "runs", 10001));
}
static void m_screen_real_runs(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s],s:f}", "configs", "256", "runs", 20.5));
}
static void m_screen_key(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s],s:i,s:f}", "configs", "256", "runs", 20, "confidence", 0.9));
}
static void m_screen_type(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("[s]", "256"));
}
/* screen.check_sizes: the sizes the configs outside the screen are
 * checked at before it, each named one capped. */
static void m_check_sizes_ok(json_t *j)
{
    json_object_set_new(
        j, "screen",
        json_pack("{s:[s],s:i,s:{s:i,s:i}}", "configs", "512", "runs", 40, "check_sizes", "M", 200, "K", 300));
}
static void m_check_sizes_unknown(json_t *j)
{
    json_object_set_new(j, "screen",
                        json_pack("{s:[s],s:i,s:{s:i}}", "configs", "512", "runs", 40, "check_sizes", "Z", 8));
}
static void m_check_sizes_zero(json_t *j)
{
    json_object_set_new(j, "screen",
                        json_pack("{s:[s],s:i,s:{s:i}}", "configs", "512", "runs", 40, "check_sizes", "M", 0));
}
static void m_check_sizes_real(json_t *j)
{
    json_object_set_new(j, "screen",
                        json_pack("{s:[s],s:i,s:{s:f}}", "configs", "512", "runs", 40, "check_sizes", "M", 64.5));
}
static void m_check_sizes_empty(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s],s:i,s:{}}", "configs", "512", "runs", 40, "check_sizes"));
}
static void m_check_sizes_type(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[s],s:i,s:[i]}", "configs", "512", "runs", 40, "check_sizes", 64));
}
static void m_screen_name_type(json_t *j)
{
    json_object_set_new(j, "screen", json_pack("{s:[i],s:i}", "configs", 256, "runs", 20));
}

/* check.rows: the row-subset check of timed calls (docs/evaluation.md,
 * "Row-subset checks"). sgemm as a cuda problem: its output C [M, N]. */
static void as_cuda(json_t *j, json_t *rows)
{
    json_object_set_new(j, "backend", json_string("cuda"));
    json_object_del(j, "cflags");
    json_object_set_new(j, "check", json_pack("{s:o}", "rows", rows));
}
static void m_rows_ok(json_t *j)
{
    as_cuda(j, json_pack("{s:[s],s:i}", "dims", "M", "sample", 64));
}
static void m_rows_cpu(json_t *j)
{
    json_object_set_new(j, "check", json_pack("{s:{s:[s],s:i}}", "rows", "dims", "M", "sample", 64));
}
static void m_rows_not_leading(json_t *j)
{
    as_cuda(j, json_pack("{s:[s],s:i}", "dims", "N", "sample", 64));
}
static void m_rows_too_deep(json_t *j)
{
    as_cuda(j, json_pack("{s:[s,s,s],s:i}", "dims", "M", "N", "K", "sample", 64));
}
static void m_rows_no_dims(json_t *j)
{
    as_cuda(j, json_pack("{s:i}", "sample", 64));
}
static void m_rows_dim_type(json_t *j)
{
    as_cuda(j, json_pack("{s:[i],s:i}", "dims", 1, "sample", 64));
}
static void m_rows_no_sample(json_t *j)
{
    as_cuda(j, json_pack("{s:[s]}", "dims", "M"));
}
static void m_rows_sample_zero(json_t *j)
{
    as_cuda(j, json_pack("{s:[s],s:i}", "dims", "M", "sample", 0));
}
static void m_rows_key(json_t *j)
{
    as_cuda(j, json_pack("{s:[s],s:i,s:i}", "dims", "M", "sample", 64, "rate", 1));
}
static void m_rows_inout(json_t *j)
{
    as_cuda(j, json_pack("{s:[s],s:i}", "dims", "M", "sample", 64));
    json_object_set_new(json_array_get(json_object_get(j, "tensors"), 2), "role", json_string("inout"));
}

static void test_check_rows(void **state)
{
    (void)state;
    avo_problem p;
    char err[512], dir[64];
    int64_t rows = 0, per[AVO_PROBLEM_MAX_TENSORS];
    assert_int_equal(avo_problem_load(&p, SGEMM, err, sizeof err), 0);
    assert_int_equal(p.check_rows_dims, 0); /* not declared: whole checks */
    assert_int_equal(avo_problem_rows_at(&p, p.configs[0].size, &rows, per, err, sizeof err), -EINVAL);
    avo_problem_free(&p);
    if (load_variant(m_rows_ok, err, sizeof err, dir))
        fail_msg("%s", err);
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    assert_int_equal(p.check_rows_dims, 1);
    assert_int_equal(p.check_rows_sample, 64);
    /* config 384x320x288: M = 384 rows of N = 320 elements of C */
    assert_int_equal(avo_problem_rows_at(&p, p.configs[2].size, &rows, per, err, sizeof err), 0);
    assert_int_equal(rows, 384);
    assert_int_equal(per[0], 0);
    assert_int_equal(per[2], 320);
    avo_problem_free(&p);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    /* attention: a row is one query row of one head, O's D elements and one LSE */
    assert_int_equal(avo_problem_load(&p, "kernels/attention", err, sizeof err), 0);
    assert_int_equal(p.check_rows_dims, 3);
    assert_int_equal(avo_problem_rows_at(&p, p.configs[0].size, &rows, per, err, sizeof err), 0);
    assert_int_equal(rows, 32 * 16 * 1024);
    assert_int_equal(per[3], 128);
    assert_int_equal(per[4], 1);
    avo_problem_free(&p);

    expect_error(m_rows_cpu, "check.rows: row-subset checks are for cuda problems (a cpu reference is checked whole)");
    expect_error(m_rows_not_leading, "check.rows.dims: output C's shape does not start with them (shape[0] is 'M', "
                                     "not 'N')");
    expect_error(m_rows_too_deep, "check.rows.dims: output C's shape does not start with them (shape[2] is "
                                  "'(none)', not 'K')");
    expect_error(m_rows_no_dims, "check.rows.dims: missing");
    expect_error(m_rows_dim_type, "check.rows.dims: entry 0 must be a string (a shape entry)");
    expect_error(m_rows_no_sample, "check.rows.sample: missing (the rows a timed call's check compares)");
    expect_error(m_rows_sample_zero, "check.rows.sample: must be an integer in [1, 1048576]");
    expect_error(m_rows_key, "check.rows: unknown field 'rate'");
    expect_error(m_rows_inout, "check.rows: tensor C is input and output; row-subset checks need outputs only");
}

static void test_screen(void **state)
{
    (void)state;
    avo_problem p;
    char err[512], dir[64];
    assert_int_equal(avo_problem_load(&p, SGEMM, err, sizeof err), 0);
    assert_int_equal(p.screen_runs, 0); /* not declared: no screen */
    for (int i = 0; i < p.nconfigs; i++)
        assert_int_equal(p.configs[i].screen, 0);
    avo_problem_free(&p);
    if (load_variant(m_screen_ok, err, sizeof err, dir))
        fail_msg("%s", err);
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    assert_int_equal(p.screen_runs, 40);
    for (int i = 0; i < p.nconfigs; i++)
        assert_int_equal(p.configs[i].screen,
                         strcmp(p.configs[i].name, "512") == 0 || strcmp(p.configs[i].name, "128") == 0);
    assert_int_equal(p.configs[3].profile, 1); /* counters.configs untouched */
    avo_problem_free(&p);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);

    expect_error(m_screen_unknown, "screen.configs[1]: no configuration is named '1024'");
    expect_error(m_screen_twice, "screen.configs[1]: '256' is listed twice");
    expect_error(m_screen_empty, "screen.configs: must be a non-empty array of configuration names");
    expect_error(m_screen_no_configs, "screen.configs: missing (the configurations the screen times)");
    expect_error(m_screen_no_runs, "screen.runs: missing (the pairs each screen configuration gets)");
    expect_error(m_screen_few_runs, "screen.runs: must be an integer in [10, 10000] (at least timing.min_runs and "
                                    "the 10 pairs an interval needs)");
    expect_error(m_screen_min_runs, "screen.runs: must be an integer in [25, 10000] (at least timing.min_runs and "
                                    "the 10 pairs an interval needs)");
    expect_error(m_screen_many_runs, "screen.runs: must be an integer in [10, 10000] (at least timing.min_runs and "
                                     "the 10 pairs an interval needs)");
    expect_error(m_screen_real_runs, "screen.runs: must be an integer in [10, 10000] (at least timing.min_runs and "
                                     "the 10 pairs an interval needs)");
    expect_error(m_screen_key, "screen: unknown field 'confidence'");
    expect_error(m_screen_type, "screen: must be an object");
    expect_error(m_screen_name_type, "screen.configs[0]: must be a configuration name");

    /* check_sizes: caps on the configs outside the screen, none on it */
    if (load_variant(m_check_sizes_ok, err, sizeof err, dir))
        fail_msg("%s", err);
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    for (int i = 0; i < p.nconfigs; i++) {
        const avo_config_spec *cs = &p.configs[i];
        if (cs->screen) {
            assert_string_equal(cs->name, "512");
            assert_int_equal(cs->has_check_size, 0);
            continue;
        }
        for (int s = 0; s < p.nsizes; s++) {
            const int64_t cap = s == 0 ? 200 : s == 2 ? 300 : INT64_MAX;
            assert_int_equal(cs->check_size[s], cs->size[s] < cap ? cs->size[s] : cap);
        }
        /* 128 and 256 are under both caps: checked as they are */
        assert_int_equal(cs->has_check_size, cs->size[0] > 200 || cs->size[2] > 300);
    }
    assert_int_equal(p.configs[2].has_check_size, 1); /* 384x320x288: M 384 -> 200 */
    assert_int_equal(p.configs[2].check_size[0], 200);
    assert_int_equal(p.configs[2].check_size[1], 320);
    assert_int_equal(p.configs[2].check_size[2], 288);
    avo_problem_free(&p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    expect_error(m_check_sizes_unknown, "screen.check_sizes.Z: unknown size 'Z'");
    expect_error(m_check_sizes_zero, "screen.check_sizes.M: must be a positive integer (the most this size is when "
                                     "checked before the screen)");
    expect_error(m_check_sizes_real, "screen.check_sizes.M: must be a positive integer (the most this size is when "
                                     "checked before the screen)");
    expect_error(m_check_sizes_empty, "screen.check_sizes: must be a non-empty object {\"SIZE\": cap}");
    expect_error(m_check_sizes_type, "screen.check_sizes: must be a non-empty object {\"SIZE\": cap}");
}

static void test_validate_roofline(void **state)
{
    (void)state;
    avo_problem p;
    char err[512];
    assert_int_equal(avo_problem_load(&p, SGEMM, err, sizeof err), 0);
    assert_int_equal(p.has_validate, 1);
    assert_int_equal(p.validate_size[2], 65);
    int64_t n;
    assert_int_equal(avo_problem_tensor_elems_at(&p, p.validate_size, 2, &n, err, sizeof err), 0);
    assert_int_equal(n, 33 * 17);
    assert_true(p.roofline_gflops == 0 && p.roofline_gbps == 0);
    avo_problem_free(&p);
    expect_error(m_validate_size, "validate.sizes.K: missing");
    expect_error(m_validate_key, "validate: unknown field 'configs'");
    expect_error(m_roofline_empty, "roofline: needs \"gflops\" or \"gbps\"");
    expect_error(m_roofline_neg, "roofline.gflops: must be a number > 0");
    expect_error(m_roofline_key, "roofline: unknown field 'tflops'");
    expect_error(m_roofline_nobytes, "roofline.gbps: needs a \"bytes\" formula");
}

static void test_spec_errors(void **state)
{
    (void)state;
    expect_error(m_unknown_top, "tolerence: unknown field 'tolerence'");
    expect_error(m_no_entry, "entry: missing");
    expect_error(m_bad_dtype, "tensors[0].dtype: unknown dtype 'f8' (f32, f64, f16, bf16, i32)");
    expect_error(m_bad_role, "tensors: no tensor has role output or inout");
    expect_error(m_config_unknown_size, "configs[1].sizes.Z: unknown size 'Z'");
    expect_error(m_config_missing_size, "configs[0].sizes.K: missing");
    expect_error(m_knob_default, "knobs[1].default: 48 is not one of the values (allowed: 16, 32, 64, 128, 256)");
    expect_error(m_constraint, "constraints[3]: the knob defaults violate 'BM < 64'");
    expect_error(m_constraint_name, "constraints[3]: unknown knob 'BX'");
    expect_error(m_metric, "score_metric: unknown metric 'time' (flops, bytes)");
    expect_error(m_flops, "flops: evaluates to -1.25829e+07 for config '128' (must be > 0)");
    expect_error(m_tol_key, "tolerance.f32: unknown field 'rel'");
    expect_error(m_reference_escape, "reference: '../x.c' must be a file name inside the problem directory");
    expect_error(m_timing, "timing.min_runs: must be an integer in [1, 100000]");
    expect_error(m_input_sets_zero, "check.input_sets: must be an integer in [1, 64]");
    expect_error(m_input_sets_type, "check.input_sets: must be an integer in [1, 64]");
    expect_error(m_tensor_key, "tensors[0]: unknown field 'layout'");
    expect_error(m_scale_output, "tensors[2].scale: applies to inputs (an output is poisoned, not filled)");
    expect_error(m_scale_zero, "tensors[0].scale: must be a number in (0, 65504]");
}

static void test_bad_json(void **state)
{
    (void)state;
    char dir[] = "/tmp/avo-test-json-XXXXXX", path[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/problem.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"backend\": \"cpu\",\n \"entry\": }\n", f);
    fclose(f);
    avo_problem p;
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "/problem.json: json: "));
    assert_non_null(strstr(err, "line 2"));
    unlink(path);
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "problem.json: problem: cannot read"));
    rmdir(dir);
}

static void test_knobs_and_render(void **state)
{
    (void)state;
    avo_problem p;
    char err[512];
    assert_int_equal(avo_problem_load(&p, SGEMM, err, sizeof err), 0);
    /* ORDER BM BN BK UNROLL */
    int64_t dflt[] = {0, 256, 256, 256, 1};
    int64_t good[] = {1, 64, 128, 64, 8};
    int64_t not_listed[] = {0, 48, 256, 256, 1};
    int64_t too_big[] = {0, 256, 256, 256, 8}; /* ORDER 0 needs UNROLL <= 4 */
    assert_int_equal(avo_problem_knobs_allowed(&p, dflt), 1);
    assert_int_equal(avo_problem_knobs_allowed(&p, good), 1);
    assert_int_equal(avo_problem_knobs_allowed(&p, not_listed), 0);
    assert_int_equal(avo_problem_knobs_allowed(&p, too_big), 0);
    char *out = NULL;
    assert_int_equal(avo_problem_render(&p, good, "int x;\n", NULL, &out), 0);
    assert_string_equal(out, "/* avo knobs */\n#define ORDER 1\n#define BM 64\n#define BN 128\n#define BK 64\n"
                             "#define UNROLL 8\n#line 1 \"seed.c\"\nint x;\n");
    /* a rendered source seeds another job: without its header, as it was */
    assert_string_equal(avo_problem_unrender(out), "int x;\n");
    assert_string_equal(avo_problem_unrender("int y;\n"), "int y;\n");
    free(out);
    json_t *start = json_pack("{s:i,s:i}", "UNROLL", 8, "ORDER", 1);
    int64_t v[AVO_PROBLEM_MAX_KNOBS];
    avo_problem_start_knobs(&p, start, v);
    assert_int_equal(v[0], 1);       /* ORDER from the object */
    assert_int_equal(v[1], dflt[1]); /* BM: its default */
    assert_int_equal(v[4], 8);       /* UNROLL from the object */
    json_decref(start);
    avo_problem_free(&p);
}

/* "seeds": further named seeds, each with its own knob space. */
static json_t *named_seed(int dflt, const char *constraint)
{
    return json_pack("{s:s,s:[{s:s,s:[i,i],s:i}],s:[s]}", "file", "seed.c", "knobs", "name", "TILE", "values", 8, 16,
                     "default", dflt, "constraints", constraint);
}
static void m_seeds_ok(json_t *j)
{
    json_object_set_new(j, "seeds", json_pack("{s:o}", "fast", named_seed(16, "TILE >= 8")));
}
static void m_seeds_default(json_t *j)
{
    json_object_set_new(j, "seeds", json_pack("{s:o}", "fast", named_seed(32, "TILE >= 8")));
}
static void m_seeds_constraint(json_t *j)
{
    json_object_set_new(j, "seeds", json_pack("{s:o}", "fast", named_seed(16, "TILE > 16")));
}
static void m_seeds_key(json_t *j)
{
    json_t *sd = named_seed(16, "TILE >= 8");
    json_object_set_new(sd, "tile", json_integer(1));
    json_object_set_new(j, "seeds", json_pack("{s:o}", "fast", sd));
}
static void m_seeds_file(json_t *j)
{
    json_t *sd = named_seed(16, "TILE >= 8");
    json_object_set_new(sd, "file", json_string("nope.c"));
    json_object_set_new(j, "seeds", json_pack("{s:o}", "fast", sd));
}
static void m_seeds_name(json_t *j)
{
    json_object_set_new(j, "seeds", json_pack("{s:o}", "a-b", named_seed(16, "TILE >= 8")));
}
static void m_seeds_empty(json_t *j)
{
    json_object_set_new(j, "seeds", json_object());
}

static void test_named_seeds(void **state)
{
    (void)state;
    char err[512] = "", dir[64], cmd[128];
    assert_int_equal(load_variant(m_seeds_ok, err, sizeof err, dir), 0);
    avo_problem p;
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    assert_int_equal(p.nknobs, 5); /* the default seed's knob space */
    assert_string_equal(p.seed_name, "");
    assert_int_equal(avo_problem_use_seed(&p, "", err, sizeof err), 0);
    assert_int_equal(p.nknobs, 5);
    assert_int_equal(avo_problem_use_seed(&p, "slow", err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "has no seed named 'slow' (its named seeds: fast)"));
    assert_int_equal(avo_problem_use_seed(&p, "fast", err, sizeof err), 0);
    assert_string_equal(p.seed_name, "fast");
    assert_int_equal(p.nknobs, 1);
    assert_string_equal(p.knobs[0].name, "TILE");
    assert_int_equal(p.nconstraints, 1);
    int64_t v[] = {8};
    assert_int_equal(avo_problem_knobs_allowed(&p, v), 1);
    avo_problem_free(&p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);

    expect_error(m_seeds_default, "seeds.fast.knobs[0].default: 32 is not one of the values (allowed: 8, 16)");
    expect_error(m_seeds_constraint, "seeds.fast.constraints[0]: the knob defaults violate 'TILE > 16'");
    expect_error(m_seeds_key, "seeds.fast.tile: unknown field 'tile'");
    expect_error(m_seeds_name, "seeds: 'a-b' is not a seed name (an identifier of at most 63 characters)");
    expect_error(m_seeds_empty, "seeds: must be an object of named seeds, like {\"sm90\": {\"file\": ...}}");
    /* the file check names the field; the rest of the message is the OS's */
    char dir2[64];
    assert_int_equal(load_variant(m_seeds_file, err, sizeof err, dir2), -EINVAL);
    assert_non_null(strstr(err, "/problem.json: seeds.fast.file: cannot read "));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir2);
    assert_int_equal(system(cmd), 0);

    /* the shipped gemm_bf16 package: its Hopper seed */
    assert_int_equal(avo_problem_load(&p, "kernels/gemm_bf16", err, sizeof err), 0);
    assert_string_equal(p.seed, "seed.cu");
    assert_int_equal(avo_problem_use_seed(&p, "sm90", err, sizeof err), 0);
    assert_string_equal(p.seed, "seed_sm90.cu");
    assert_int_equal(p.nknobs, 5);
    /* BM BN CONSUMERS STAGES GROUPM: 256 x 256 with two consumers needs 256 accumulators each */
    int64_t fits[] = {128, 256, 2, 4, 8}, too_many_regs[] = {256, 256, 2, 2, 8}, too_much_smem[] = {128, 256, 2, 5, 8};
    assert_int_equal(avo_problem_knobs_allowed(&p, fits), 1);
    assert_int_equal(avo_problem_knobs_allowed(&p, too_many_regs), 0);
    assert_int_equal(avo_problem_knobs_allowed(&p, too_much_smem), 0);
    avo_problem_free(&p);
}

static void test_resolve(void **state)
{
    (void)state;
    char out[512], err[256];
    assert_int_equal(avo_problem_resolve("kernels", "cpu/sgemm", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "kernels/cpu/sgemm");
    assert_int_equal(avo_problem_resolve("kernels", "../kernels/cpu/sgemm", out, sizeof out, err, sizeof err), -EINVAL);
    assert_int_equal(avo_problem_resolve("kernels", "cpu/../cpu/sgemm", out, sizeof out, err, sizeof err), -EINVAL);
    assert_int_equal(avo_problem_resolve("kernels", "/etc", out, sizeof out, err, sizeof err), -EINVAL);
    assert_int_equal(avo_problem_resolve("kernels", "cpu//sgemm", out, sizeof out, err, sizeof err), -EINVAL);
    assert_int_equal(avo_problem_resolve("kernels", "cpu/nope", out, sizeof out, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "unknown problem 'cpu/nope'"));
}

/* A directory name near PATH_MAX: the path of its problem.json does not
 * fit, and that is the error, not a load of a truncated path. */
static void test_long_paths(void **state)
{
    (void)state;
    char dir[PATH_MAX], out[PATH_MAX], err[512];
    memset(dir, 'd', sizeof dir - 6);
    dir[0] = '/';
    dir[sizeof dir - 6] = 0; /* dir + "/problem.json" is over PATH_MAX */
    avo_problem p;
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), -ENAMETOOLONG);
    assert_non_null(strstr(err, "path too long"));
    assert_non_null(strstr(err, "/problem.json"));
    /* resolve: the package directory fits, its problem.json does not */
    dir[sizeof dir - 12] = 0;
    assert_int_equal(avo_problem_resolve(dir, "cpu/x", out, sizeof out, err, sizeof err), -ENAMETOOLONG);
    assert_non_null(strstr(err, "path too long"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_sgemm),        cmocka_unit_test(test_fixture_unknown_size),
        cmocka_unit_test(test_spec_errors),       cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_knobs_and_render),  cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_validate_roofline), cmocka_unit_test(test_named_seeds),
        cmocka_unit_test(test_counters_configs),  cmocka_unit_test(test_screen),
        cmocka_unit_test(test_check_rows),        cmocka_unit_test(test_config_index),
        cmocka_unit_test(test_long_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
