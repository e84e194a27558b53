/* avoctl campaign's pure part: the campaign file's checks, the summary
 * (best per problem over the jobs that succeeded, regressions against the
 * previous summary at the tolerance: paired where a compare measured, by
 * the aggregates where not, and why) and its markdown; avoctl compare's
 * reading of a compare object. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/campaign.h"
#include "client/campreval.h"
#include "client/compare.h"

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
        {"{\"name\":\"a\",\"revalidate\":\"yes\",\"jobs\":[{\"problem\":\"p\"}]}", "revalidate: one of"},
        {"{\"name\":\"a\",\"revalidate\":1,\"jobs\":[{\"problem\":\"p\"}]}", "revalidate: one of"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *b = json_loads(bad[i][0], 0, NULL);
        assert_non_null(b);
        assert_int_equal(avoctl_campaign_parse(b, &name, &tol, &jobs, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, bad[i][1]));
        json_decref(b);
    }
}

/* The summary's markdown, to free. */
static char *markdown(const json_t *s)
{
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    assert_non_null(f);
    assert_int_equal(avoctl_campaign_markdown(s, f), 0);
    fclose(f);
    return md;
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
    json_array_append_new(jobs, job(2, "a", "succeeded", 1, 12)); /* the problem's best: job 2 */
    json_array_append_new(jobs, job(3, "b", "succeeded", 1, 9.7));
    json_array_append_new(jobs, job(4, "c", "failed", 1, 99)); /* a failed job never sets a best */
    /* job 3's speedup was measured paired at its end: the summary keeps the interval */
    json_object_set_new(json_array_get(jobs, 2), "speedup_detail",
                        json_pack("{s:f,s:f,s:[f,f],s:f,s:b}", "ratio", 9.5, "low", 9.3, "ci", 9.2, 9.9, "confidence",
                                  0.95, "paired", 1));
    json_t *prev = json_loads("{\"problems\":{\"a\":{\"best\":12.1},\"b\":{\"best\":10},\"c\":{\"best\":1}}}", 0, NULL);
    json_t *s = avoctl_campaign_summary("n", jobs, prev, NULL, 0.02, "t0", "t1");
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
    char *md = markdown(s);
    assert_non_null(strstr(md, "**FAILED**: 1 job(s) failed, 1 problem(s) regressed (tolerance 2.0%)"));
    assert_non_null(strstr(md,
                           "| b | 9.7 | GFLOP/s | 3 | - | 10 | -3.0% | absolute (no paired measurement: the previous "
                           "summary records no candidate for it (written before paired regression checks)) | "
                           "**regressed** |"));
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
    json_t *s2 = avoctl_campaign_summary("n", jobs2, s, NULL, 0.02, "t2", "t3");
    json_t *c2 = json_object_get(json_object_get(s2, "problems"), "c");
    assert_true(json_number_value(json_object_get(c2, "previous")) == 1);
    assert_true(json_is_true(json_object_get(c2, "regressed")));
    /* a and b had no job this time: carried, not regressed */
    assert_false(json_is_true(json_object_get(json_object_get(json_object_get(s2, "problems"), "b"), "regressed")));
    json_decref(s2);
    json_decref(jobs2);
    json_decref(s);
    /* No previous campaign: nothing regresses, each best is new. */
    s = avoctl_campaign_summary("n", jobs, NULL, NULL, 0.02, "t0", "t1");
    assert_int_equal(json_integer_value(json_object_get(s, "regressions")), 0);
    assert_true(json_is_null(json_object_get(json_object_get(json_object_get(s, "problems"), "b"), "previous")));
    json_decref(s);
    json_decref(prev);
    json_decref(jobs);
}

/* A job whose best is candidate cand. */
static json_t *job_c(int id, const char *problem, double best, int cand)
{
    json_t *j = job(id, problem, "succeeded", 1, best);
    json_object_set_new(json_object_get(j, "best"), "candidate", json_integer(cand));
    return j;
}

/* A finished compare of cand against against: ratio with interval [lo, hi]. */
static json_t *measured(int id, int cand, int against, double ratio, double lo, double hi)
{
    return json_pack("{s:i,s:i,s:i,s:s,s:s,s:f,s:{s:f,s:f,s:[f,f],s:f,s:s}}", "id", id, "candidate", cand, "against",
                     against, "state", "done", "outcome", "ok", "confidence", 0.95, "paired", "ratio", ratio, "low",
                     lo + 0.001, "ci", lo, hi, "confidence", 0.95, "method", "bootstrap-percentile");
}

static const char *reason_of(const json_t *s, const char *problem)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(json_object_get(s, "problems"), problem), "comparison"), "reason"));
}

static int regressed(const json_t *s, const char *problem)
{
    return json_is_true(json_object_get(json_object_get(json_object_get(s, "problems"), problem), "regressed"));
}

/* The paired decision: regressed only when the whole interval lies under
 * 1 - tolerance, whatever the aggregates say; the fallbacks say why. */
static void test_paired_decision(void **state)
{
    (void)state;
    json_t *jobs = json_array();
    json_array_append_new(jobs, job_c(1, "a", 12, 101)); /* paired 0.97 [0.96, 0.985]: inside 2% */
    json_array_append_new(jobs, job_c(2, "b", 10, 102)); /* aggregates +11%, paired [0.94, 0.97]: regressed */
    json_array_append_new(jobs, job_c(3, "c", 5, 103));  /* aggregates -50% (a loaded host), paired x1.001 */
    json_array_append_new(jobs, job_c(4, "d", 5, 104));  /* compare crashed: aggregates decide, -50% */
    json_array_append_new(jobs, job_c(5, "e", 10, 105)); /* compare refused */
    json_array_append_new(jobs, job_c(6, "f", 10, 106)); /* compare still queued */
    json_array_append_new(jobs, job_c(7, "g", 10, 107)); /* previous summary of the old format */
    json_array_append_new(jobs, job_c(8, "h", 10, 108)); /* the against failed */
    json_array_append_new(jobs, job_c(9, "n", 10, 109)); /* new problem */
    json_t *prev = json_loads("{\"problems\":{"
                              "\"a\":{\"baseline\":12.1,\"baseline_candidate\":1},"
                              "\"b\":{\"baseline\":9,\"baseline_candidate\":2},"
                              "\"c\":{\"baseline\":10,\"baseline_candidate\":3},"
                              "\"d\":{\"baseline\":10,\"baseline_candidate\":4},"
                              "\"e\":{\"baseline\":10,\"baseline_candidate\":5},"
                              "\"f\":{\"baseline\":10,\"baseline_candidate\":6},"
                              "\"g\":{\"baseline\":10.1},"
                              "\"h\":{\"baseline\":10,\"baseline_candidate\":8},"
                              "\"k\":{\"baseline\":3,\"baseline_candidate\":9}}}",
                              0, NULL);
    assert_non_null(prev);
    /* First pass: which compares are needed (not g: no candidate; not n: new; not k: no job now). */
    json_t *s0 = avoctl_campaign_summary("n", jobs, prev, NULL, 0.02, "t0", "t0");
    json_t *todo = avoctl_campaign_compare_list(s0);
    assert_int_equal(json_array_size(todo), 7);
    char *tj = json_dumps(todo, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(strstr(tj, "{\"against\": 2, \"candidate\": 102, \"problem\": \"b\"}") ||
                    strstr(tj, "{\"against\":2,\"candidate\":102,\"problem\":\"b\"}"));
    assert_null(strstr(tj, "\"g\""));
    free(tj);
    assert_string_equal(reason_of(s0, "a"), "no paired measurement was asked for");

    json_t *cmps = json_object();
    json_object_set_new(cmps, "a", measured(41, 101, 1, 0.97, 0.96, 0.985));
    json_object_set_new(cmps, "b", measured(42, 102, 2, 0.95, 0.94, 0.97));
    json_object_set_new(cmps, "c", measured(43, 103, 3, 1.001, 0.99, 1.01));
    json_object_set_new(
        cmps, "d", json_pack("{s:i,s:s,s:s,s:s}", "id", 44, "state", "done", "outcome", "crash", "detail", "segfault"));
    json_object_set_new(cmps, "e",
                        json_pack("{s:s}", "error", "avod refused the paired compare: against: no candidate 5"));
    json_object_set_new(cmps, "f", json_pack("{s:i,s:s}", "id", 46, "state", "queued"));
    json_object_set_new(cmps, "h",
                        json_pack("{s:i,s:s,s:s,s:{s:s}}", "id", 48, "state", "done", "outcome", "ok", "paired",
                                  "error", "the against does not compile: x"));
    json_t *s = avoctl_campaign_summary("n", jobs, prev, cmps, 0.02, "t0", "t1");
    assert_non_null(s);
    json_t *pa = json_object_get(json_object_get(s, "problems"), "a");
    json_t *ca = json_object_get(pa, "comparison");
    assert_string_equal(json_string_value(json_object_get(ca, "measured")), "paired");
    assert_true(json_number_value(json_object_get(ca, "ratio")) == 0.97);
    assert_true(json_number_value(json_array_get(json_object_get(ca, "ci"), 1)) == 0.985);
    assert_int_equal(json_integer_value(json_object_get(ca, "compare")), 41);
    assert_int_equal(json_integer_value(json_object_get(ca, "against")), 1);
    assert_true(json_number_value(json_object_get(pa, "change")) == 0.97);
    assert_int_equal(json_integer_value(json_object_get(pa, "previous_candidate")), 1);
    assert_int_equal(json_integer_value(json_object_get(pa, "baseline_candidate")), 101);
    assert_false(regressed(s, "a"));
    assert_true(regressed(s, "b"));  /* the aggregates said +11% */
    assert_false(regressed(s, "c")); /* the aggregates said -50% */
    assert_true(regressed(s, "d"));
    assert_non_null(strstr(reason_of(s, "d"), "the candidate's evaluation was crash: segfault"));
    assert_false(regressed(s, "e"));
    assert_string_equal(reason_of(s, "e"), "avod refused the paired compare: against: no candidate 5");
    assert_string_equal(reason_of(s, "f"), "compare 46 was still queued when the campaign stopped waiting");
    assert_non_null(strstr(reason_of(s, "g"), "records no candidate"));
    assert_non_null(strstr(reason_of(s, "h"), "the paired measurement failed: the against does not compile"));
    assert_true(json_is_null(json_object_get(json_object_get(json_object_get(s, "problems"), "n"), "comparison")));
    assert_false(regressed(s, "n"));
    /* k had no job: its baseline and the candidate that scored it carry over */
    json_t *pk = json_object_get(json_object_get(s, "problems"), "k");
    assert_int_equal(json_integer_value(json_object_get(pk, "baseline_candidate")), 9);
    assert_int_equal(json_integer_value(json_object_get(s, "regressions")), 2);
    assert_false(json_is_true(json_object_get(s, "ok")));
    char *md = markdown(s);
    assert_non_null(strstr(md, "| b | 10 | GFLOP/s | 2 | 102 | 9 | -5.0% | measured paired: x0.950, 95% [0.940, 0.970] "
                               "(compare 42: candidate 102 vs 2) | **regressed** |"));
    assert_non_null(strstr(md, "| c | 5 | GFLOP/s | 3 | 103 | 10 | +0.1% | measured paired: x1.001"));
    assert_non_null(strstr(md, "| d | 5 | GFLOP/s | 4 | 104 | 10 | -50.0% | absolute (no paired measurement: the "
                               "candidate's evaluation was crash: segfault) | **regressed** |"));
    assert_non_null(strstr(md, "| n | 10 | GFLOP/s | 9 | 109 | - | new |  |  |"));
    free(md);
    /* At tolerance 0: a, whose interval lies wholly under 1, regresses too. */
    json_t *s3 = avoctl_campaign_summary("n", jobs, prev, cmps, 0, "t0", "t1");
    assert_true(regressed(s3, "a"));
    assert_false(regressed(s3, "c"));
    json_decref(s3);
    json_decref(s);
    json_decref(cmps);
    json_decref(todo);
    json_decref(s0);
    json_decref(prev);
    json_decref(jobs);
}

/* avoctl compare's line for each state of a compare. */
static void test_compare_line(void **state)
{
    (void)state;
    char line[512], why[256];
    avoctl_paired_ratio pr;
    json_t *m = measured(40, 12, 7, 1.023, 1.011, 1.035);
    assert_int_equal(avoctl_compare_read(m, &pr, why, sizeof why), AVOCTL_COMPARE_MEASURED);
    assert_true(pr.ratio == 1.023 && pr.lo == 1.011 && pr.hi == 1.035 && pr.confidence == 0.95);
    avoctl_compare_line(m, line, sizeof line);
    assert_string_equal(line, "candidate 12 vs 7: x1.023, 95% [1.011, 1.035]");
    json_decref(m);
    json_t *q = json_pack("{s:i,s:i,s:i,s:s}", "id", 40, "candidate", 12, "against", 7, "state", "running");
    assert_int_equal(avoctl_compare_read(q, &pr, why, sizeof why), AVOCTL_COMPARE_PENDING);
    avoctl_compare_line(q, line, sizeof line);
    assert_string_equal(line, "candidate 12 vs 7: running (compare 40)");
    json_decref(q);
    json_t *x = json_pack("{s:i,s:i,s:i,s:s}", "id", 40, "candidate", 12, "against", 7, "state", "cancelled");
    avoctl_compare_line(x, line, sizeof line);
    assert_string_equal(line, "candidate 12 vs 7: no paired measurement: compare 40 was cancelled");
    json_decref(x);
    /* a ratio without its interval is no measurement */
    json_t *h = json_pack("{s:i,s:s,s:s,s:{s:f}}", "id", 40, "state", "done", "outcome", "ok", "paired", "ratio", 1.0);
    assert_int_equal(avoctl_compare_read(h, &pr, why, sizeof why), AVOCTL_COMPARE_FAILED);
    assert_string_equal(why, "the paired measurement has no ratio with an interval");
    json_decref(h);
}

/* The campaign's re-validation: the option, which keys count as a change
 * for which target, which workers would claim the work, the plan, the
 * ratios filled in and the markdown. */
static void test_reval(void **state)
{
    (void)state;
    avoctl_campreval_mode m = AVOCTL_REVAL_OFF;
    assert_int_equal(avoctl_campreval_mode_parse("on_toolchain_change", &m), 0);
    assert_int_equal(m, AVOCTL_REVAL_ON_CHANGE);
    assert_int_equal(avoctl_campreval_mode_parse("always", &m), 0);
    assert_int_equal(m, AVOCTL_REVAL_ALWAYS);
    assert_int_equal(avoctl_campreval_mode_parse("On_toolchain_change", &m), -EINVAL);
    assert_int_equal(avoctl_campreval_mode_parse(NULL, &m), -EINVAL);
    const char *name;
    double tol;
    json_t *jobs;
    char err[256], d[512];
    json_t *ok = json_loads("{\"name\":\"a\",\"revalidate\":\"off\",\"jobs\":[{\"problem\":\"p\"}]}", 0, NULL);
    assert_int_equal(avoctl_campaign_parse(ok, &name, &tol, &jobs, err, sizeof err), 0);
    json_decref(ok);

    json_t *old = json_loads("{\"cc\":\"12.2.0\",\"nvcc\":\"13.0.88\",\"driver\":\"580.95.05\",\"gpu\":\"NVIDIA H200\","
                             "\"gpu_uuid\":\"GPU-1\",\"cpu\":\"EPYC\",\"avo\":\"0.1.0\"}",
                             0, NULL);
    json_t *gpu_only = json_deep_copy(old), *cpu_only = json_deep_copy(old), *nvcc = json_deep_copy(old);
    json_object_set_new(gpu_only, "gpu_uuid", json_string("GPU-2")); /* another card: no change */
    json_object_set_new(cpu_only, "cpu", json_string("Xeon"));
    json_object_set_new(nvcc, "nvcc", json_string("13.1.20"));
    json_object_del(nvcc, "driver");
    assert_int_equal(avoctl_campreval_diff(old, gpu_only, "sm_90", d, sizeof d), 0);
    assert_string_equal(d, "");
    assert_int_equal(avoctl_campreval_diff(old, cpu_only, "sm_90", d, sizeof d), 0); /* the host CPU of a GPU job */
    assert_int_equal(avoctl_campreval_diff(old, cpu_only, "cpu", d, sizeof d), 1);
    assert_string_equal(d, "cpu EPYC -> Xeon");
    assert_int_equal(avoctl_campreval_diff(old, nvcc, "sm_90", d, sizeof d), 2);
    assert_string_equal(d, "nvcc 13.0.88 -> 13.1.20, driver 580.95.05 -> (none)");
    assert_int_equal(avoctl_campreval_diff(old, nvcc, "cpu", d, sizeof d), 0); /* nvcc does not build a CPU kernel */

    /* Previous night: sgemm's best 5 (cc 12), softmax's 6 (cc 14), attention's 7
     * unrecorded, gemm's 8 unreadable; tonight the sgemm job is on cpu. */
    json_t *prev = json_loads("{\"problems\":{\"cpu/sgemm\":{\"baseline_candidate\":5},"
                              "\"cpu/softmax\":{\"baseline_candidate\":6},\"attention\":{\"baseline_candidate\":7},"
                              "\"gemm\":{\"baseline_candidate\":8},\"old\":{\"baseline\":1}}}",
                              0, NULL);
    json_t *cands = json_loads("{\"cpu/sgemm\":{\"id\":5,\"job\":1,\"toolchain\":{\"cc\":\"12.2.0\",\"cpu\":\"EPYC\"}},"
                               "\"cpu/softmax\":{\"id\":6,\"job\":2,\"toolchain\":{\"cc\":\"14.1.0\",\"cpu\":\"EPYC\"},"
                               "\"worker\":{\"target\":\"cpu\"}},"
                               "\"attention\":{\"id\":7,\"job\":3,\"toolchain\":\"unrecorded\"},"
                               "\"gemm\":{\"error\":\"avod refused: no candidate 8\"}}",
                               0, NULL);
    json_t *tonight = json_loads("[{\"problem\":\"cpu/sgemm\",\"target\":\"cpu\",\"spec\":{}}]", 0, NULL);
    /* worker 1 is gone (it had cc 12), 2 is draining, 3 is of another
     * target, 4 is live with cc 14, 5 is live without a record */
    json_t *workers = json_loads(
        "[{\"id\":1,\"state\":\"gone\",\"target\":\"cpu\",\"toolchain\":{\"versions\":{\"cc\":\"12.2.0\",\"cpu\":"
        "\"EPYC\"}}},"
        "{\"id\":2,\"state\":\"draining\",\"target\":\"cpu\",\"toolchain\":{\"versions\":{\"cc\":\"9\"}}},"
        "{\"id\":3,\"state\":\"idle\",\"target\":\"sm_90\",\"toolchain\":{\"versions\":{\"cc\":\"9\"}}},"
        "{\"id\":4,\"state\":\"busy\",\"target\":\"cpu\",\"toolchain\":{\"versions\":{\"cc\":\"14.1.0\",\"cpu\":"
        "\"EPYC\"}}},"
        "{\"id\":5,\"state\":\"idle\",\"target\":\"cpu\",\"toolchain\":null}]",
        0, NULL);
    json_t *plan = avoctl_campreval_plan(AVOCTL_REVAL_ON_CHANGE, prev, cands, tonight, workers);
    assert_non_null(plan);
    json_t *pp = json_object_get(plan, "problems");
    assert_int_equal(json_object_size(pp), 4); /* "old" has no candidate */
    json_t *e = json_object_get(pp, "cpu/sgemm");
    assert_string_equal(json_string_value(json_object_get(e, "action")), "revalidate");
    assert_int_equal(json_integer_value(json_object_get(e, "worker")), 4);
    assert_string_equal(json_string_value(json_object_get(e, "changes")), "cc 12.2.0 -> 14.1.0");
    assert_int_equal(json_integer_value(json_object_get(e, "live_workers")), 2);
    e = json_object_get(pp, "cpu/softmax"); /* no job tonight: its worker's target */
    assert_string_equal(json_string_value(json_object_get(e, "action")), "unchanged");
    assert_string_equal(json_string_value(json_object_get(e, "target")), "cpu");
    e = json_object_get(pp, "attention");
    assert_string_equal(json_string_value(json_object_get(e, "action")), "skipped");
    assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "no toolchain record"));
    e = json_object_get(pp, "gemm");
    assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "no candidate 8"));
    assert_int_equal(json_integer_value(json_object_get(plan, "revalidate")), 1);
    assert_int_equal(json_integer_value(json_object_get(plan, "unchanged")), 1);
    assert_int_equal(json_integer_value(json_object_get(plan, "skipped")), 2);
    json_t *todo = avoctl_campreval_todo(plan);
    assert_int_equal(json_array_size(todo), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(todo, 0), "problem")), "cpu/sgemm");
    json_decref(todo);

    json_t *revs = json_loads("{\"cpu/sgemm\":{\"id\":9,\"state\":\"done\",\"unit\":\"GFLOP/s\",\"entries\":[{"
                              "\"candidate\":5,\"outcome\":\"ok\",\"aggregate\":9,\"ratio\":0.9,"
                              "\"toolchain\":{\"cc\":\"14.1.0\"},\"recorded\":{\"aggregate\":10}}]}}",
                              0, NULL);
    assert_int_equal(avoctl_campreval_finish(plan, revs), 0);
    e = json_object_get(pp, "cpu/sgemm");
    assert_true(json_real_value(json_object_get(e, "ratio")) == 0.9);
    assert_int_equal(json_integer_value(json_object_get(e, "revalidation")), 9);
    assert_true(fabs(json_real_value(json_object_get(plan, "geomean_ratio")) - 0.9) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(plan, "measured")), 1);
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    avoctl_campreval_markdown(plan, f);
    fclose(f);
    assert_non_null(strstr(md, "## Re-validation (on_toolchain_change)"));
    assert_non_null(
        strstr(md, "| cpu/sgemm | 5 | 4 | 10 | 9 | x0.9000 | cc 14.1.0 | cc 12.2.0, EPYC | cc 12.2.0 -> 14.1.0 |"));
    assert_non_null(strstr(md, "| attention | 7 | - | - | - | - | not re-validated:"));
    assert_non_null(strstr(md, "Geometric mean of the ratios: x0.9000 over 1"));
    free(md);
    json_decref(plan);

    /* nothing changed anywhere: one line, no table */
    json_object_del(json_object_get(prev, "problems"), "attention");
    json_object_del(json_object_get(prev, "problems"), "gemm");
    json_object_set_new(json_object_get(json_object_get(cands, "cpu/sgemm"), "toolchain"), "cc", json_string("14.1.0"));
    plan = avoctl_campreval_plan(AVOCTL_REVAL_ON_CHANGE, prev, cands, tonight, workers);
    assert_string_equal(json_string_value(json_object_get(plan, "message")),
                        "toolchain unchanged since the previous campaign's bests (2 problems): nothing re-validated");
    todo = avoctl_campreval_todo(plan);
    assert_int_equal(json_array_size(todo), 0);
    json_decref(todo);
    f = open_memstream(&md, &len);
    avoctl_campreval_markdown(plan, f);
    fclose(f);
    assert_null(strstr(md, "| problem |"));
    free(md);
    json_decref(plan);
    /* "always" measures the unchanged ones too */
    plan = avoctl_campreval_plan(AVOCTL_REVAL_ALWAYS, prev, cands, tonight, workers);
    assert_int_equal(json_integer_value(json_object_get(plan, "revalidate")), 2);
    json_decref(plan);
    plan = avoctl_campreval_plan(AVOCTL_REVAL_ON_CHANGE, NULL, cands, tonight, workers);
    assert_string_equal(json_string_value(json_object_get(plan, "message")),
                        "no previous campaign: nothing to re-validate");
    json_decref(plan);
    json_decref(revs);
    json_decref(workers);
    json_decref(tonight);
    json_decref(cands);
    json_decref(prev);
    json_decref(old);
    json_decref(gpu_only);
    json_decref(cpu_only);
    json_decref(nvcc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),        cmocka_unit_test(test_summary), cmocka_unit_test(test_paired_decision),
        cmocka_unit_test(test_compare_line), cmocka_unit_test(test_reval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
