/* `avo-worker check`: a problem package's reference, baseline and seeds
 * compiled at the knob settings its constraints allow, and each seed
 * evaluated once, through the worker's own compile and evaluation code
 * (check.h). */
#include "check.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <jansson.h>

#include "avo_file.h"
#include "avo_paths.h"
#include "avo_problem.h"
#include "devices.h"
#include "evaluate.h"

typedef struct {
    int as_json;
    int failed, passed, skipped;
    json_t *steps; /* --json: every step */
} report;

/* One step: "ok", "FAIL", "skip" or "note", what was done, and its detail. */
static void step(report *r, const char *status, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void step(report *r, const char *status, const char *what, const char *fmt, ...)
{
    char detail[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    r->failed += !strcmp(status, "FAIL");
    r->passed += !strcmp(status, "ok");
    r->skipped += !strcmp(status, "skip");
    if (r->as_json)
        json_array_append_new(r->steps, json_pack("{s:s,s:s,s:s}", "status", status, "step", what, "detail", detail));
    else {
        printf("%-5s %-9s %s\n", status, what, detail);
        fflush(stdout);
    }
}

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64*: a sample that its seed repeats, nothing more */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static void point_values(const avo_problem *p, uint64_t idx, int64_t *v)
{
    for (int i = 0; i < p->nknobs; i++) {
        v[i] = p->knobs[i].values[idx % (uint64_t)p->knobs[i].nvalues];
        idx /= (uint64_t)p->knobs[i].nvalues;
    }
}

static int same_point(const avo_problem *p, const int64_t *a, const int64_t *b)
{
    return memcmp(a, b, (size_t)p->nknobs * sizeof *a) == 0;
}

static void knobs_text(const avo_problem *p, const int64_t *v, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < p->nknobs && n < outlen; i++)
        n += (size_t)snprintf(out + n, outlen - n, "%s%s=%lld", i ? " " : "", p->knobs[i].name, (long long)v[i]);
}

/* The knob settings to compile: the defaults first, then every other
 * allowed point, or a random sample of max - 1 of them when there are more
 * (max 0: all). *pts (caller frees) holds n settings of p->nknobs values. */
static int choose_points(const avo_problem *p, long max, uint64_t seed, report *r, int64_t **pts, long *n)
{
    double space = 1;
    int64_t dflt[AVO_PROBLEM_MAX_KNOBS], v[AVO_PROBLEM_MAX_KNOBS];
    const int k = p->nknobs;
    for (int i = 0; i < k; i++) {
        space *= p->knobs[i].nvalues;
        dflt[i] = p->knobs[i].dflt;
    }
    *n = 0;
    *pts = NULL;
    if (k == 0) {
        step(r, "note", "knobs", "%s: no knobs: one build", p->seed);
        return 0;
    }
    uint64_t *allowed = NULL;
    long nallowed = 0, cap = 0;
    int enumerated = space <= AVO_CHECK_ENUM_MAX;
    if (enumerated) {
        for (uint64_t idx = 0; idx < (uint64_t)space; idx++) {
            point_values(p, idx, v);
            if (avo_problem_knobs_allowed(p, v) != 1 || same_point(p, v, dflt))
                continue;
            if (nallowed == cap) {
                cap = cap ? cap * 2 : 256;
                uint64_t *m = realloc(allowed, (size_t)cap * sizeof *m);
                if (!m) {
                    free(allowed);
                    return -ENOMEM;
                }
                allowed = m;
            }
            allowed[nallowed++] = idx;
        }
    }
    /* --max-builds 0 asks for all, which only a counted space can give. */
    if (max == 0 && !enumerated)
        max = AVO_CHECK_DEFAULT_BUILDS;
    const long want = enumerated && (max == 0 || nallowed + 1 <= max) ? nallowed + 1 : max;
    int64_t *out = calloc((size_t)(want > 0 ? want : 1), (size_t)k * sizeof *out);
    if (!out) {
        free(allowed);
        return -ENOMEM;
    }
    memcpy(out, dflt, (size_t)k * sizeof *out);
    long m = 1;
    uint64_t s = seed;
    if (enumerated && nallowed + 1 <= want) {
        for (long i = 0; i < nallowed; i++)
            point_values(p, allowed[i], out + (size_t)m++ * (size_t)k);
        step(r, "note", "knobs", "%s: %.0f settings, %ld allowed by the constraints: compiling all of them", p->seed,
             space, nallowed + 1);
    } else if (enumerated) {
        /* A partial Fisher-Yates shuffle: want - 1 distinct points. */
        for (long i = 0; i < want - 1; i++) {
            long j = i + (long)(next_rand(&s) % (uint64_t)(nallowed - i));
            uint64_t t = allowed[i];
            allowed[i] = allowed[j];
            allowed[j] = t;
            point_values(p, allowed[i], out + (size_t)m++ * (size_t)k);
        }
        step(r, "note", "knobs",
             "%s: %.0f settings, %ld allowed by the constraints: compiling the defaults and a random sample of %ld "
             "(--sample-seed %llu repeats it; --max-builds 0 compiles all %ld)",
             p->seed, space, nallowed + 1, want - 1, (unsigned long long)seed, nallowed + 1);
    } else {
        /* Too many to count: random draws, each kept when allowed and new. */
        for (long tries = 0; m < want && tries < want * 1000; tries++) {
            for (int i = 0; i < k; i++)
                v[i] = p->knobs[i].values[next_rand(&s) % (uint64_t)p->knobs[i].nvalues];
            int dup = avo_problem_knobs_allowed(p, v) != 1;
            for (long j = 0; !dup && j < m; j++)
                dup = same_point(p, v, out + (size_t)j * (size_t)k);
            if (!dup)
                memcpy(out + (size_t)m++ * (size_t)k, v, (size_t)k * sizeof *v);
        }
        step(r, "note", "knobs",
             "%s: %.3g settings, too many to count against the constraints: compiling the defaults and a random "
             "sample of %ld allowed ones (--sample-seed %llu repeats it)",
             p->seed, space, m - 1, (unsigned long long)seed);
    }
    free(allowed);
    *pts = out;
    *n = m;
    return 0;
}

/* The knob values that failed in every build that had them, when others
 * built: the settings a tune job would burn evaluations on. */
static void knob_verdicts(report *r, const avo_problem *p, const int64_t *pts, const char *ok, long n)
{
    long nok = 0;
    for (long i = 0; i < n; i++)
        nok += ok[i];
    if (nok == 0 || nok == n)
        return;
    for (int kn = 0; kn < p->nknobs; kn++) {
        for (int j = 0; j < p->knobs[kn].nvalues; j++) {
            const int64_t val = p->knobs[kn].values[j];
            long with = 0, good = 0;
            for (long i = 0; i < n; i++) {
                if (pts[(size_t)i * (size_t)p->nknobs + (size_t)kn] == val) {
                    with++;
                    good += ok[i];
                }
            }
            if (with && !good)
                step(r, "FAIL", "knob",
                     "%s: %s=%lld fails in every build that has it (%ld of %ld); drop the value or "
                     "add a constraint that excludes it",
                     p->seed, p->knobs[kn].name, (long long)val, with, with);
        }
    }
}

static int compile_step(report *r, const avo_evaluate_opts *base, const avo_problem *p, const char *file, int trusted,
                        const char *src, size_t len, const char *label)
{
    avo_evaluate_opts o = *base;
    json_t *res = NULL;
    char err[1024];
    o.trusted = trusted;
    o.src_name = file;
    if (avo_evaluate_compile_only(&o, p, src, len, &res, err, sizeof err) < 0) {
        step(r, "FAIL", "compile", "%s%s%s: could not be compiled here: %s", file, *label ? " " : "", label, err);
        return 0;
    }
    const char *outcome = json_string_value(json_object_get(res, "outcome"));
    const int ok = outcome && !strcmp(outcome, "ok");
    if (ok)
        step(r, "ok", "compile", "%s%s%s", file, *label ? " " : "", label);
    else
        step(r, "FAIL", "compile", "%s%s%s: %s: %s", file, *label ? " " : "", label, outcome ? outcome : "?",
             json_string_value(json_object_get(res, "detail")) ?: "");
    json_decref(res);
    return ok;
}

static int compile_file(report *r, const avo_evaluate_opts *o, const avo_problem *p, const char *file, int trusted)
{
    char path[PATH_MAX];
    size_t len = 0;
    if (avo_paths_join(path, sizeof path, p->dir, file) < 0) {
        step(r, "FAIL", "compile", "%s: path too long under %s", file, p->dir);
        return 0;
    }
    char *src = avo_file_read(path, &len);
    if (!src) {
        step(r, "FAIL", "compile", "%s: cannot read %s: %s", file, path, strerror(errno));
        return 0;
    }
    int ok = compile_step(r, o, p, file, trusted, src, len, "");
    free(src);
    return ok;
}

/* One seed: every chosen knob setting compiled, then one evaluation at
 * its defaults (skipped, and said so, where there is no GPU to run it). */
static void check_seed(report *r, const avo_evaluate_opts *o, const avo_problem *p, long max, uint64_t sample_seed,
                       const char *no_gpu)
{
    char path[PATH_MAX];
    size_t len = 0;
    int64_t *pts = NULL;
    long n = 0;
    char *ok = NULL, *src = NULL, *rendered = NULL;
    if (avo_paths_join(path, sizeof path, p->dir, p->seed) < 0) {
        step(r, "FAIL", "compile", "%s: path too long under %s", p->seed, p->dir);
        return;
    }
    if (!(src = avo_file_read(path, &len))) {
        step(r, "FAIL", "compile", "%s: cannot read %s: %s", p->seed, path, strerror(errno));
        return;
    }
    if (choose_points(p, max, sample_seed, r, &pts, &n) < 0) {
        step(r, "FAIL", "knobs", "%s: out of memory", p->seed);
        goto done;
    }
    if (n == 0) {
        /* No knobs: the file as it is. */
        if (!compile_step(r, o, p, p->seed, 0, src, len, ""))
            goto done;
    } else {
        if (!(ok = calloc((size_t)n, 1)))
            goto done;
        for (long i = 0; i < n; i++) {
            char label[1024], *out = NULL;
            knobs_text(p, pts + (size_t)i * (size_t)p->nknobs, label, sizeof label);
            if (i == 0)
                strncat(label, " (defaults)", sizeof label - strlen(label) - 1);
            if (avo_problem_render(p, pts + (size_t)i * (size_t)p->nknobs, src, p->seed, &out) < 0) {
                step(r, "FAIL", "compile", "%s %s: out of memory", p->seed, label);
                continue;
            }
            ok[i] = (char)compile_step(r, o, p, p->seed, 0, out, strlen(out), label);
            free(out);
        }
        knob_verdicts(r, p, pts, ok, n);
        if (!ok[0])
            goto done; /* the defaults do not build: nothing to evaluate */
    }
    if (no_gpu) {
        step(r, "skip", "evaluate", "%s: compiled, but not evaluated: %s", p->seed, no_gpu);
        goto done;
    }
    int64_t dflt[AVO_PROBLEM_MAX_KNOBS];
    for (int i = 0; i < p->nknobs; i++)
        dflt[i] = p->knobs[i].dflt;
    if (avo_problem_render(p, dflt, src, p->seed, &rendered) < 0) {
        step(r, "FAIL", "evaluate", "%s: out of memory", p->seed);
        goto done;
    }
    json_t *res = NULL;
    char err[1024];
    if (avo_evaluate_candidate(o, p, rendered, strlen(rendered), &res, err, sizeof err) < 0) {
        step(r, "FAIL", "evaluate", "%s (defaults): could not be evaluated: %s", p->seed, err);
        goto done;
    }
    const char *outcome = json_string_value(json_object_get(res, "outcome"));
    if (outcome && !strcmp(outcome, "ok"))
        step(r, "ok", "evaluate", "%s (defaults): %.4g %s aggregate over %zu configurations", p->seed,
             json_number_value(json_object_get(res, "aggregate")), p->unit,
             json_array_size(json_object_get(res, "configs")));
    else
        step(r, "FAIL", "evaluate", "%s (defaults): %s: %s", p->seed, outcome ? outcome : "?",
             json_string_value(json_object_get(res, "detail")) ?: "");
    json_decref(res);
done:
    free(rendered);
    free(ok);
    free(pts);
    free(src);
}

/* Why a CUDA package cannot be evaluated here, or NULL when a GPU is
 * there (into buf). */
static const char *gpu_missing(int index, char *buf, size_t len)
{
    json_t *devs = avo_devices_probe(), *d;
    size_t i;
    const char *why = "NVML lists no GPU";
    int found = 0;
    json_array_foreach(devs, i, d)
    {
        const char *kind = json_string_value(json_object_get(d, "kind"));
        if (kind && !strcmp(kind, "gpu") && json_integer_value(json_object_get(d, "index")) == index)
            found = 1;
        if (kind && !strcmp(kind, "gpu-probe") && json_is_string(json_object_get(d, "reason")))
            why = json_string_value(json_object_get(d, "reason"));
    }
    if (!found)
        snprintf(buf, len, "no GPU on this host (%s); run it on a GPU host to evaluate", why);
    json_decref(devs);
    return found ? NULL : buf;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: avo-worker check <problem-dir> [--max-builds N] [--sample-seed S] [--gpu-arch sm_XY]\n"
            "                        [--no-eval] [--timeout SECONDS] [--cache DIR] [--harness PATH] [--json]\n");
    return 2;
}

/* The command line of avo-worker check, parsed. */
typedef struct {
    const char *dir;
    long max;
    uint64_t sample_seed;
    int no_eval;
    avo_evaluate_opts o;
    char cache[PATH_MAX], harness[PATH_MAX];
} check_args;

/* The options whose value is a number to check. Returns 1 when `a` is one
 * (*i moved past its value), 0 when it is not, -1 when its value is bad (said
 * on stderr). */
static int check_number_option(check_args *c, const char *a, const char *v, int *i)
{
    char *end = NULL;
    if (!v)
        return 0;
    if (!strcmp(a, "--max-builds")) {
        c->max = strtol(v, &end, 10);
        if (*end || end == v || c->max < 0 || c->max > 100000) {
            fprintf(stderr, "avo-worker check: --max-builds wants an integer in [0, 100000] (0: all), got '%s'\n", v);
            return -1;
        }
    } else if (!strcmp(a, "--sample-seed")) {
        errno = 0;
        c->sample_seed = strtoull(v, &end, 10);
        if (*end || end == v || errno || !c->sample_seed) {
            fprintf(stderr, "avo-worker check: --sample-seed wants a positive integer, got '%s'\n", v);
            return -1;
        }
    } else if (!strcmp(a, "--timeout")) {
        c->o.timeout_s = strtod(v, &end);
        if (*end || end == v || !(c->o.timeout_s > 0)) {
            fprintf(stderr, "avo-worker check: --timeout wants seconds > 0, got '%s'\n", v);
            return -1;
        }
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* Returns 0, or the exit status when the command line is wrong. */
static int check_parse_args(int argc, char **argv, check_args *c, report *r)
{
    int i = argc > 0 && !strcmp(argv[0], "check") ? 1 : argc > 1 && !strcmp(argv[1], "check") ? 2 : 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **value = NULL;
        int got = 0;
        if (!strcmp(a, "--json"))
            r->as_json = 1;
        else if (!strcmp(a, "--no-eval"))
            c->no_eval = 1;
        else if ((got = check_number_option(c, a, v, &i)) < 0)
            return 2;
        else if (got)
            continue;
        else if (!strcmp(a, "--gpu-arch") && v)
            value = &c->o.gpu_arch;
        else if (!strcmp(a, "--cache") && v)
            value = &c->o.cache_dir;
        else if (!strcmp(a, "--harness") && v)
            value = &c->o.harness_path;
        else if (a[0] == '-' || c->dir) {
            fprintf(stderr, "avo-worker check: unexpected argument '%s'\n", a);
            return usage();
        } else
            c->dir = a;
        if (value) {
            *value = v;
            i++;
        }
    }
    return c->dir ? 0 : usage();
}

/* The defaults of what was not given. Returns 0, or 2 (said on stderr). */
static int check_defaults(check_args *c)
{
    avo_evaluate_opts *o = &c->o;
    if (!c->sample_seed && (getrandom(&c->sample_seed, sizeof c->sample_seed, 0) != (ssize_t)sizeof c->sample_seed ||
                            !(c->sample_seed &= INT64_MAX)))
        c->sample_seed = 0x9e3779b97f4a7c15ULL;
    if (!o->cache_dir) {
        if (avo_evaluate_default_cache(c->cache, sizeof c->cache)) {
            fprintf(stderr, "avo-worker check: no cache directory (set AVO_HOME or HOME, or pass --cache)\n");
            return 2;
        }
        o->cache_dir = c->cache;
    }
    if (!o->harness_path && !avo_evaluate_default_harness(c->harness, sizeof c->harness))
        o->harness_path = c->harness;
    const char *tmp = getenv("TMPDIR");
    o->scratch_root = tmp && *tmp ? tmp : "/tmp";
    const int gi = avo_devices_visible_index(getenv("CUDA_VISIBLE_DEVICES"));
    o->gpu_index = gi < 0 ? 0 : gi;
    return 0;
}

/* Every step on the package: load, compile the reference and the baseline,
 * then each seed. */
static void check_package(check_args *c, report *r)
{
    avo_evaluate_opts *o = &c->o;
    const char *dir = c->dir;
    char err[1024], nogpu[600];
    avo_problem p;
    char pj[PATH_MAX];
    if (avo_paths_join(pj, sizeof pj, dir, "problem.json") < 0) {
        step(r, "FAIL", "load", "%s: path too long", dir);
        return;
    }
    if (access(pj, F_OK) != 0) {
        step(r, "FAIL", "load",
             "%s is not a problem package: %s: %s (`avoctl problem new DIR --target cpu|cuda` "
             "scaffolds one)",
             dir, pj, strerror(errno));
        return;
    }
    if (avo_problem_load(&p, dir, err, sizeof err) < 0) {
        step(r, "FAIL", "load", "%s", err);
        return;
    }
    step(r, "ok", "load", "%s/problem.json: %s, %s, %d knob%s, %d configuration%s", dir, p.name, p.backend, p.nknobs,
         p.nknobs == 1 ? "" : "s", p.nconfigs, p.nconfigs == 1 ? "" : "s");
    const int cuda = !strcmp(p.backend, "cuda");
    const char *no_gpu = NULL;
    if (c->no_eval) {
        no_gpu = "--no-eval";
    } else if (cuda && (no_gpu = gpu_missing(o->gpu_index, nogpu, sizeof nogpu)) && !o->gpu_arch) {
        o->gpu_arch = AVO_CHECK_DEFAULT_ARCH;
        step(r, "note", "target", "no GPU here: compiling for %s (--gpu-arch sm_XY for another)", o->gpu_arch);
    }
    compile_file(r, o, &p, p.reference, 1);
    if (p.baseline[0])
        compile_file(r, o, &p, p.baseline, 1);
    check_seed(r, o, &p, c->max, c->sample_seed, no_gpu);
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(p.json, "seeds"), key, v)
    {
        avo_problem q;
        (void)v;
        if (avo_problem_load(&q, dir, err, sizeof err) < 0 || avo_problem_use_seed(&q, key, err, sizeof err) < 0) {
            step(r, "FAIL", "load", "seed %s: %s", key, err);
            continue;
        }
        check_seed(r, o, &q, c->max, c->sample_seed, no_gpu);
        avo_problem_free(&q);
    }
    avo_problem_free(&p);
}

/* Print the summary (and, as JSON, the steps). Returns the exit status. */
static int check_summary(report *r, int no_eval)
{
    if (r->as_json) {
        json_t *out = json_pack("{s:b,s:i,s:i,s:i,s:o}", "ok", !r->failed, "passed", r->passed, "failed", r->failed,
                                "skipped", r->skipped, "steps", r->steps);
        json_dumpf(out, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(out);
    } else {
        printf("check: %d passed, %d failed%s%s\n", r->passed, r->failed, r->skipped ? ", seeds not evaluated: " : "",
               r->skipped ? (no_eval ? "--no-eval" : "no GPU here (compile steps only)") : "");
        json_decref(r->steps);
    }
    return r->failed ? 1 : 0;
}

int avo_check_cli(int argc, char **argv)
{
    check_args c = {.max = AVO_CHECK_DEFAULT_BUILDS};
    report r = {0};
    int rc = check_parse_args(argc, argv, &c, &r);
    if (rc == 0)
        rc = check_defaults(&c);
    if (rc)
        return rc;
    r.steps = json_array();
    check_package(&c, &r);
    return check_summary(&r, c.no_eval);
}
