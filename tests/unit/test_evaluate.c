/* avo_evaluate_candidate end to end: real compiler, real avo-harness in the
 * sandbox, the sgemm problem, and the hostile candidates of tests/hostile/.
 * Run from the repository root; AVO_HARNESS overrides the harness path. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <sys/stat.h>

#include "daemon/worker/compile.h"
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
    avo_evaluate_opts o = {.harness_path = harness,
                           .cache_dir = cache_dir,
                           .scratch_root = "/tmp",
                           .timeout_s = timeout,
                           .rng_seed = 1234,
                           .should_cancel = cancel,
                           .cancel_arg = arg};
    size_t len;
    char *src = slurp(file, &len);
    json_t *r = NULL;
    char err[512] = "";
    int rc = avo_evaluate_candidate(&o, &problem, src, len, &r, err, sizeof err);
    free(src);
    if (rc)
        fail_msg("avo_evaluate_candidate(%s): %d %s", file, rc, err);
    assert_non_null(r);
    return r;
}

static json_t *eval(const char *file, double timeout)
{
    return eval_opts(file, timeout, NULL, NULL);
}

static const char *outcome(json_t *r)
{
    return json_string_value(json_object_get(r, "outcome"));
}
static const char *detail(json_t *r)
{
    return json_string_value(json_object_get(r, "detail"));
}

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
    /* The candidate ran in its own process; the round-trip overhead was
     * calibrated and is small next to the times it is subtracted from. */
    json_t *run = json_object_get(r, "runner");
    assert_true(json_is_true(json_object_get(run, "separate_process")));
    double ov = json_number_value(json_object_get(run, "overhead_s"));
    assert_true(ov > 0 && ov < 1e-3);
    assert_int_equal(json_integer_value(json_object_get(run, "overhead_pings")), 200);
    /* The reference agreed with its float64 twin on the validate sizes. */
    assert_true(json_is_true(json_object_get(r, "reference_validated")));
    assert_non_null(strstr(json_string_value(json_object_get(r, "reference_validation")), "avo_reference_f64"));
    /* Counters: available or not, always with the evidence. */
    json_t *ctr = json_object_get(r, "counters");
    assert_true(json_is_boolean(json_object_get(ctr, "available")));
    if (!json_is_true(json_object_get(ctr, "available")))
        assert_true(json_is_string(json_object_get(ctr, "reason")));
    assert_true(json_is_object(json_object_get(c0, "counters")));
    assert_true(json_is_null(json_object_get(c0, "roofline_fraction")));
    assert_true(json_number_value(json_object_get(c0, "runner_reported_median_s")) > 0);
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
    /* The source's verdict is cached. */
    r = eval("tests/hostile/compile_error.c", 60);
    expect(r, "compile_error", "undeclared_variable");
    assert_true(json_is_true(json_object_get(json_object_get(r, "compile"), "cached")));
    json_decref(r);
}

/* A failure that names the machine is not the source's verdict: not cached
 * (the messages as gcc, ld and nvcc print them). */
static void test_compile_failure_cacheable(void **state)
{
    (void)state;
    assert_true(avo_compile_failure_cacheable("x.c:3:5: error: 'y' undeclared (first use in this function)"));
    assert_true(avo_compile_failure_cacheable(""));
    assert_false(avo_compile_failure_cacheable("/usr/bin/ld: cannot open output file avo-out.so: Read-only file "
                                               "system\ncollect2: error: ld returned 1 exit status"));
    assert_false(avo_compile_failure_cacheable("nvcc fatal   : Could not open output file '/s/src/tmpxft_0001'"));
    assert_false(avo_compile_failure_cacheable("x.c:1: fatal error: error writing to /tmp/cc.s: No space left on "
                                               "device"));
    assert_false(avo_compile_failure_cacheable("cc1: out of memory allocating 65536 bytes"));
}

static void test_segfault(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/segfault.c", 60);
    expect(r, "crash", "SIGSEGV");
    /* The runner died, the checker survived and said so. */
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "runner"), "signal")), "SIGSEGV");
    assert_true(json_is_null(json_object_get(json_object_get(r, "sandbox"), "signal")));
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
    /* Every call has an input set of its own: the first replay is wrong,
     * and a config's timing never ends before checked calls. */
    expect(r, "cheat_suspected", "a fresh input set, checked unannounced");
    assert_unscored(r);
    json_decref(r);
}

/* fd 3 in the old harness was the result pipe; the runner has none, and
 * cannot reach the checker's through /proc either. */
static void test_forges_result(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/forges_result.c", 60);
    expect(r, "wrong_result", "not finite");
    assert_unscored(r);
    json_decref(r);
}

static void test_finds_reference(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/finds_reference.c", 60);
    expect(r, "wrong_result", "sgemm returned 42");
    assert_unscored(r);
    json_decref(r);
}

/* A frozen clock_gettime in the candidate changes nothing: the times are
 * the checker's, and every config it completes sleeps 3 ms per call. */
static void test_patches_clock(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/patches_clock.c", 60);
    expect(r, "wrong_result", "config 512, call 0 (checked before timing): sgemm returned 1");
    assert_unscored(r);
    assert_int_equal(json_array_size(json_object_get(r, "configs")), 3);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "configs"), i, c)
        assert_true(json_number_value(json_object_get(c, "median_s")) >= 0.003);
    json_decref(r);
}

static void test_forges_reply(void **state)
{
    (void)state;
    json_t *r = eval("tests/hostile/forges_reply.c", 60);
    expect(r, "cheat_suspected", "protocol pipe");
    assert_unscored(r);
    json_decref(r);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A reference 0.1% off its own float64 twin is an infrastructure error:
 * crash, detail "reference invalid: ...", and no score for the candidate. */
static void test_reference_invalid(void **state)
{
    (void)state;
    char dir[] = "/tmp/avo-test-badref-XXXXXX", path[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "cp kernels/cpu/sgemm/problem.json kernels/cpu/sgemm/seed.c %s/", dir);
    assert_int_equal(system(path), 0);
    snprintf(path, sizeof path, "%s/reference.c", dir);
    write_text(path,
               "#include <stdint.h>\n"
               "static void mm(void *const *t, const int64_t *s, double f, int dbl) {\n"
               "  int64_t M = s[0], N = s[1], K = s[2];\n"
               "  for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < N; j++) {\n"
               "    double a = 0;\n"
               "    for (int64_t k = 0; k < K; k++) a += dbl ? ((double *)t[0])[i*K+k] * ((double *)t[1])[k*N+j]\n"
               "      : (double)((float *)t[0])[i*K+k] * ((float *)t[1])[k*N+j];\n"
               "    if (dbl) ((double *)t[2])[i*N+j] = a; else ((float *)t[2])[i*N+j] = (float)(a * f);\n"
               "  }\n}\n"
               "int avo_reference(void *const *t, const int64_t *s) { mm(t, s, 1.001, 0); return 0; }\n"
               "int avo_reference_f64(void *const *t, const int64_t *s) { mm(t, s, 1, 1); return 0; }\n");
    avo_problem bad;
    assert_int_equal(avo_problem_load(&bad, dir, err, sizeof err), 0);
    avo_evaluate_opts o = {
        .harness_path = harness, .cache_dir = cache_dir, .scratch_root = "/tmp", .timeout_s = 60, .rng_seed = 99};
    size_t len;
    char *src = slurp("kernels/cpu/sgemm/seed.c", &len);
    json_t *r = NULL;
    assert_int_equal(avo_evaluate_candidate(&o, &bad, src, len, &r, err, sizeof err), 0);
    free(src);
    expect(r, "crash", NULL);
    if (strncmp(detail(r), "reference invalid: ", 19) != 0 || !strstr(detail(r), "avo_reference_f64"))
        fail_msg("detail: %s", detail(r));
    assert_unscored(r);
    json_decref(r);
    avo_problem_free(&bad);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    assert_int_equal(system(path), 0);
}

/* "roofline" declared: every config reports max(gflops / X, gbps / Y). */
static void test_roofline(void **state)
{
    (void)state;
    char dir[] = "/tmp/avo-test-roof-XXXXXX", cmd[160], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cp kernels/cpu/sgemm/* %s/", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/problem.json", dir);
    json_t *j = json_load_file(cmd, 0, NULL);
    assert_non_null(j);
    json_object_set_new(j, "roofline", json_pack("{s:f, s:f}", "gflops", 100.0, "gbps", 1e-3));
    assert_int_equal(json_dump_file(j, cmd, 0), 0);
    json_decref(j);
    avo_problem rp;
    assert_int_equal(avo_problem_load(&rp, dir, err, sizeof err), 0);
    avo_evaluate_opts o = {
        .harness_path = harness, .cache_dir = cache_dir, .scratch_root = "/tmp", .timeout_s = 60, .rng_seed = 7};
    size_t len;
    char *src = slurp("kernels/cpu/sgemm/seed.c", &len);
    json_t *r = NULL;
    assert_int_equal(avo_evaluate_candidate(&o, &rp, src, len, &r, err, sizeof err), 0);
    free(src);
    expect(r, "ok", NULL);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "configs"), i, c)
    {
        double gf = json_number_value(json_object_get(c, "gflops")), gb = json_number_value(json_object_get(c, "gbps"));
        double want = gf / 100.0 > gb / 1e-3 ? gf / 100.0 : gb / 1e-3;
        double got = json_number_value(json_object_get(c, "roofline_fraction"));
        assert_true(fabs(got - want) <= 1e-9 * want);
    }
    json_decref(r);
    avo_problem_free(&rp);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The agent's microbenchmarks (issue 18): compiled and run confined. A
 * program that pulls a root-only host file into its object with .incbin is
 * a compile error (the compiler runs as nobody) and nothing of the file
 * comes back; a program that leaves 100 session leaders behind leaves
 * nothing once it has returned (its PID namespace). Needs a root worker
 * (microbenchmarks are refused otherwise: checked too). */
static json_t *program(const char *src)
{
    avo_evaluate_opts o = {.harness_path = harness, .cache_dir = cache_dir, .scratch_root = "/tmp", .timeout_s = 60};
    json_t *r = NULL;
    char err[512] = "";
    int rc = avo_evaluate_program(&o, "c", src, strlen(src), &r, err, sizeof err);
    if (rc)
        fail_msg("avo_evaluate_program: %d %s", rc, err);
    assert_non_null(r);
    return r;
}

static void test_program_reads_no_host_file(void **state)
{
    (void)state;
    /* Outside /tmp (which the sandbox replaces): readable to root, not to
     * nobody; the defence tested is the compiler's uid. */
    char secret[PATH_MAX], token[64];
    if (!getcwd(secret, sizeof secret - 40))
        fail_msg("getcwd");
    strcat(secret, "/build/avo-test-secret-XXXXXX");
    int fd = mkstemp(secret);
    assert_true(fd >= 0);
    snprintf(token, sizeof token, "avo-secret-%d-%ld", (int)getpid(), (long)time(NULL));
    assert_int_equal(write(fd, token, strlen(token)), (ssize_t)strlen(token));
    close(fd);
    chmod(secret, 0600);
    char src[1024];
    snprintf(src, sizeof src,
             "#include <stdio.h>\n"
             "__asm__(\".section .rodata\\n.global blob\\nblob: .incbin \\\"%s\\\"\\n.byte 0\\n.text\");\n"
             "extern const char blob[];\n"
             "int main(void) { puts(blob); return 0; }\n",
             secret);
    json_t *r = program(src);
    char *text = json_dumps(r, 0);
    unlink(secret);
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    if (geteuid() != 0) {
        assert_true(strcmp(outcome, "refused") == 0 || strcmp(outcome, "compile_error") == 0);
    } else {
        if (strcmp(outcome, "compile_error") != 0)
            fail_msg("outcome %s, wanted compile_error: %s", outcome, text);
    }
    if (strstr(text, token))
        fail_msg("the secret came back: %s", text);
    free(text);
    json_decref(r);
}

static int nobody_processes_named(const char *name)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "pgrep -x %s | wc -l", name);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1)
        n = -1;
    if (f)
        pclose(f);
    return n;
}

static void test_program_leaves_nothing(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("# not root: microbenchmarks are refused here\n");
        return;
    }
    const char *src = "#include <sys/prctl.h>\n#include <unistd.h>\n"
                      "int main(void) {\n"
                      "  for (int i = 0; i < 100; i++) if (fork() == 0) { setsid();\n"
                      "    prctl(PR_SET_NAME, \"avo-test-left\"); sleep(120); _exit(0); }\n"
                      "  return 0; }\n";
    json_t *r = program(src);
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    if (strcmp(outcome, "ran") != 0) {
        char *text = json_dumps(r, 0);
        fail_msg("outcome %s: %s", outcome, text);
    }
    int left = -1;
    for (int i = 0; i < 50 && (left = nobody_processes_named("avo-test-left")) != 0; i++)
        usleep(100000);
    if (left != 0)
        system("pkill -9 -x avo-test-left");
    assert_int_equal(left, 0);
    json_decref(r);
}

/* Paired measurement (docs/evaluation.md): the against precompiled with
 * the candidate is a cache hit, and the result's paired names the against
 * by its id, whether measured or not. */
static void test_paired_against(void **state)
{
    (void)state;
    size_t len;
    char *src = slurp("kernels/cpu/sgemm/seed.c", &len);
    /* A source no other test compiled: a miss unless precompiled. */
    char *against = malloc(len + 64);
    const int alen = snprintf(against, len + 64, "/* the against of test_paired_against */\n%s", src);
    avo_evaluate_opts o = {.harness_path = harness,
                           .cache_dir = cache_dir,
                           .scratch_root = "/tmp",
                           .timeout_s = 120,
                           .rng_seed = 99,
                           .against_src = against,
                           .against_len = (size_t)alen,
                           .against_id = 17,
                           .confidence = 0.9};
    char err[512] = "";
    assert_int_equal(avo_evaluate_precompile(&o, &problem, src, len, NULL, err, sizeof err), 0);
    json_t *r = NULL;
    if (avo_evaluate_candidate(&o, &problem, src, len, &r, err, sizeof err))
        fail_msg("avo_evaluate_candidate: %s", err);
    expect(r, "ok", NULL);
    json_t *pj = json_object_get(r, "paired");
    assert_true(json_is_true(json_object_get(json_object_get(json_object_get(r, "phases"), "cache_hits"), "against")));
    assert_int_equal(json_integer_value(json_object_get(pj, "against")), 17);
    assert_true(json_number_value(json_object_get(pj, "confidence")) == 0.9);
    assert_true(json_number_value(json_object_get(pj, "ratio")) > 0);
    assert_int_equal(json_array_size(json_object_get(pj, "configs")), problem.nconfigs);
    json_decref(r);
    /* One that does not compile: the candidate's result stands. */
    o.against_src = "int sgemm(void) { return }";
    o.against_len = strlen(o.against_src);
    r = NULL;
    if (avo_evaluate_candidate(&o, &problem, src, len, &r, err, sizeof err))
        fail_msg("avo_evaluate_candidate: %s", err);
    expect(r, "ok", NULL);
    pj = json_object_get(r, "paired");
    assert_int_equal(json_integer_value(json_object_get(pj, "against")), 17);
    assert_non_null(strstr(json_string_value(json_object_get(pj, "error")), "does not compile"));
    json_decref(r);
    free(against);
    free(src);
}

/* compile_only (the worker's early end of a claimed-ahead evaluation):
 * a source that compiles gives no result (the harness is left for its
 * turn), one that does not gives its compile_error result, and
 * avo_evaluate_precompile says beforehand which will end early. */
static void test_compile_only(void **state)
{
    (void)state;
    size_t len;
    char *src = slurp("kernels/cpu/sgemm/seed.c", &len);
    const char *bad = "int sgemm(void) { return } /* test_compile_only */";
    avo_evaluate_opts o = {.harness_path = harness, .cache_dir = cache_dir, .scratch_root = "/tmp", .timeout_s = 120};
    char err[512] = "";
    int early = -1;
    assert_int_equal(avo_evaluate_precompile(&o, &problem, src, len, &early, err, sizeof err), 0);
    assert_int_equal(early, 0);
    assert_int_equal(avo_evaluate_precompile(&o, &problem, bad, strlen(bad), &early, err, sizeof err), 0);
    assert_int_equal(early, 1);
    o.compile_only = 1;
    json_t *r = NULL;
    if (avo_evaluate_candidate(&o, &problem, src, len, &r, err, sizeof err))
        fail_msg("avo_evaluate_candidate: %s", err);
    assert_null(r);
    if (avo_evaluate_candidate(&o, &problem, bad, strlen(bad), &r, err, sizeof err))
        fail_msg("avo_evaluate_candidate: %s", err);
    assert_non_null(r);
    expect(r, "compile_error", NULL);
    assert_non_null(json_object_get(r, "phases"));
    json_decref(r);
    /* Nothing compiles in that mode: a source the cache does not know is
     * an error (the worker leaves such a claim for its turn), no result. */
    const char *fresh = "int sgemm(void) { return } /* test_compile_only, never precompiled */";
    r = NULL;
    assert_true(avo_evaluate_candidate(&o, &problem, fresh, strlen(fresh), &r, err, sizeof err) < 0);
    assert_null(r);
    assert_non_null(strstr(err, "not in the compile cache"));
    free(src);
}

static void test_missing_harness(void **state)
{
    (void)state;
    avo_evaluate_opts o = {.harness_path = "/nonexistent/avo-harness", .cache_dir = cache_dir};
    json_t *r = NULL;
    char err[512];
    assert_true(avo_evaluate_candidate(&o, &problem, "int x;", 6, &r, err, sizeof err) < 0);
    assert_null(r);
    assert_non_null(strstr(err, "harness not found"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_ok),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_compile_failure_cacheable),
        cmocka_unit_test(test_segfault),
        cmocka_unit_test(test_infinite_loop),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_slightly_wrong),
        cmocka_unit_test(test_modifies_inputs),
        cmocka_unit_test(test_unwritten),
        cmocka_unit_test(test_caches_output),
        cmocka_unit_test(test_missing_harness),
        cmocka_unit_test(test_forges_result),
        cmocka_unit_test(test_finds_reference),
        cmocka_unit_test(test_patches_clock),
        cmocka_unit_test(test_forges_reply),
        cmocka_unit_test(test_reference_invalid),
        cmocka_unit_test(test_roofline),
        cmocka_unit_test(test_program_reads_no_host_file),
        cmocka_unit_test(test_program_leaves_nothing),
        cmocka_unit_test(test_paired_against),
        cmocka_unit_test(test_compile_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
