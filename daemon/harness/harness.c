#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensors.h"
#include "timing.h"

/* Why a check failed; decides wrong_result vs cheat_suspected. */
enum { CHECK_OK = 0, CHECK_WRONG, CHECK_INPUTS };

typedef struct {
    const avo_problem *p;
    uint64_t seed;
    int nsets;        /* check sets; set nsets is the fresh one after timing */
    void **refout;    /* [(config * (nsets + 1) + set) * ntensors + tensor] */
    avo_kernel_fn cand;
    double worst_rel_l2, worst_max_abs;   /* of the current config */
} run_ctx;

static void **refslot(run_ctx *r, int config, int set, int tensor)
{
    return &r->refout[((size_t)config * (size_t)(r->nsets + 1) + (size_t)set) * (size_t)r->p->ntensors +
                      (size_t)tensor];
}

/* The candidate gets fresh copies of the pointer and size arrays on every
 * call so that scribbling on them cannot redirect the harness's own checks. */
static int call(avo_kernel_fn fn, const avo_problem *p, int config, avo_tensors *t)
{
    void *ptrs[AVO_PROBLEM_MAX_TENSORS];
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    memcpy(ptrs, t->ptr, sizeof ptrs);
    memcpy(sizes, p->configs[config].size, sizeof sizes);
    return fn(ptrs, sizes);
}

static json_t *jreal(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int run_reference(run_ctx *r, const char *ref_so, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    int rc = 0;
    avo_tensors t = {0};
    void *h = dlopen(ref_so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load reference: %s", dlerror());
        return -ENOENT;
    }
    avo_kernel_fn ref = (avo_kernel_fn)(uintptr_t)dlsym(h, "avo_reference");
    if (!ref) {
        snprintf(err, errlen, "reference %s does not export avo_reference", ref_so);
        rc = -ENOENT;
        goto cleanup;
    }
    for (int c = 0; c < p->nconfigs; c++) {
        if ((rc = avo_tensors_alloc(&t, p, c, err, errlen)))
            goto cleanup;
        for (int s = 0; s <= r->nsets; s++) {
            avo_tensors_fill(&t, p, r->seed, c, s);
            avo_tensors_poison(&t, p);
            int ret = call(ref, p, c, &t);
            if (ret != 0) {
                snprintf(err, errlen, "reference returned %d on config %s", ret, p->configs[c].name);
                rc = -EIO;
                goto cleanup;
            }
            for (int i = 0; i < p->ntensors; i++) {
                if (p->tensors[i].role == AVO_ROLE_INPUT)
                    continue;
                void *copy = malloc(t.bytes[i]);
                if (!copy) {
                    snprintf(err, errlen, "out of memory keeping reference outputs");
                    rc = -ENOMEM;
                    goto cleanup;
                }
                memcpy(copy, t.ptr[i], t.bytes[i]);
                *refslot(r, c, s, i) = copy;
            }
        }
        avo_tensors_free(&t);
    }
cleanup:
    avo_tensors_free(&t);
    /* The reference is unloaded before the candidate is loaded: nothing of it
     * is left in the process for a candidate to call or read. */
    dlclose(h);
    return rc;
}

/* Check one finished candidate call: return code, untouched inputs, outputs
 * against the reference of (config, set). */
static int check_call(run_ctx *r, int config, int set, int ret, const avo_tensors *x, const avo_tensors *pristine,
                      char *why, size_t whylen)
{
    const avo_problem *p = r->p;
    if (ret != 0) {
        snprintf(why, whylen, "%s returned %d", p->entry, ret);
        return CHECK_WRONG;
    }
    int64_t elem;
    int ti = avo_tensors_inputs_changed(x, pristine, p, &elem);
    if (ti >= 0) {
        snprintf(why, whylen, "input %s[%lld] was modified by the candidate", p->tensors[ti].name,
                 (long long)elem);
        return CHECK_INPUTS;
    }
    for (int i = 0; i < p->ntensors; i++) {
        if (p->tensors[i].role == AVO_ROLE_INPUT)
            continue;
        avo_dtype d = p->tensors[i].dtype;
        avo_tolerance tol = p->tol[d];
        avo_check ck;
        avo_tensors_compare(x->ptr[i], *refslot(r, config, set, i), x->elems[i], d, tol, &ck);
        if (ck.rel_l2 > r->worst_rel_l2 || isnan(ck.rel_l2))
            r->worst_rel_l2 = ck.rel_l2;
        if (ck.max_abs > r->worst_max_abs || isnan(ck.max_abs))
            r->worst_max_abs = ck.max_abs;
        if (ck.pass)
            continue;
        if (ck.nonfinite)
            snprintf(why, whylen, "%s[%lld] = %g vs %g: not finite (unwritten or overflowed output)",
                     p->tensors[i].name, (long long)ck.worst, ck.got, ck.want);
        else if (ck.rel_l2 > tol.rel_l2)
            snprintf(why, whylen, "%s[%lld] = %.9g vs %.9g, rel_l2 %.3g > %.3g", p->tensors[i].name,
                     (long long)ck.worst, ck.got, ck.want, ck.rel_l2, tol.rel_l2);
        else
            snprintf(why, whylen, "%s[%lld] = %.9g vs %.9g, max_abs %.3g > %.3g", p->tensors[i].name,
                     (long long)ck.worst, ck.got, ck.want, ck.max_abs, tol.max_abs);
        return CHECK_WRONG;
    }
    return CHECK_OK;
}

/* One checked call on input set `set`: fill, copy, poison, call, check. */
static int checked_call(run_ctx *r, int c, int set, avo_tensors *x, avo_tensors *pristine, char *why, size_t wl)
{
    avo_tensors_fill(pristine, r->p, r->seed, c, set);
    avo_tensors_copy_inputs(x, pristine, r->p);
    avo_tensors_poison(x, r->p);
    int ret = call(r->cand, r->p, c, x);
    return check_call(r, c, set, ret, x, pristine, why, wl);
}

static json_t *config_json(const avo_problem *p, int c, const avo_stats *st, double score, double gflops,
                           double gbps, const run_ctx *r)
{
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:o, s:o, s:{s:o, s:o}}", "name",
                     p->configs[c].name, "score", jreal(score), "median_s", jreal(st->median), "min_s",
                     jreal(st->min), "max_s", jreal(st->max), "stddev_s", jreal(st->stddev), "rse",
                     jreal(st->rse), "runs", st->runs, "gflops", p->flops ? jreal(gflops) : json_null(),
                     "gbps", p->bytes ? jreal(gbps) : json_null(), "check", "rel_l2",
                     jreal(r->worst_rel_l2), "max_abs", jreal(r->worst_max_abs));
}

/* Timed runs of config c on the inputs already in pristine/x (the last
 * check set). Every run is poisoned before and checked after, outside the
 * timed region, so a candidate cannot be fast only when it is not looked at. */
static int time_config(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_flusher *fl,
                       avo_stats *st, char *why, size_t wl)
{
    const avo_problem *p = r->p;
    const int set = r->nsets - 1;
    int cap = 64, n = 0, res = CHECK_OK;
    double *t = malloc((size_t)cap * sizeof *t);
    if (!t)
        return -ENOMEM;
    const double start = avo_now();
    while (1) {
        avo_tensors_copy_inputs(x, pristine, p);
        avo_tensors_poison(x, p);
        avo_flusher_run(fl);
        const double t0 = avo_now();
        int ret = call(r->cand, p, c, x);
        const double t1 = avo_now();
        char sub[400];
        if ((res = check_call(r, c, set, ret, x, pristine, sub, sizeof sub)) != CHECK_OK) {
            snprintf(why, wl, "timed run %d, after passing the checks: %s", n + 1, sub);
            break;
        }
        if (n == cap) {
            double *g = realloc(t, (size_t)(cap *= 2) * sizeof *t);
            if (!g) {
                free(t);
                return -ENOMEM;
            }
            t = g;
        }
        t[n++] = t1 - t0;
        if (n < p->timing_min_runs)
            continue;
        avo_stats_compute(t, n, st); /* reorders t; order does not matter */
        if (st->rse <= p->timing_rse || avo_now() - start >= p->timing_max_seconds || n >= 100000)
            break;
    }
    free(t);
    return res;
}

static json_t *result_json(const avo_problem *p, const char *outcome, const char *detail, double aggregate,
                           json_t *configs, uint64_t seed)
{
    return json_pack("{s:s, s:s, s:o, s:s, s:o, s:I}", "outcome", outcome, "detail", detail, "aggregate",
                     jreal(aggregate), "unit", p->unit, "configs", configs, "rng_seed", (json_int_t)seed);
}

/* Zero every score of a failed evaluation: one failed check anywhere means
 * the candidate is not scored at all. */
static void zero_scores(json_t *configs)
{
    size_t i;
    json_t *c;
    json_array_foreach(configs, i, c) json_object_set_new(c, "score", json_real(0));
}

int avo_harness_run(const avo_problem *p, const char *cand_so, const char *ref_so, uint64_t seed,
                    json_t **result, char *err, size_t errlen)
{
    int rc = 0;
    run_ctx r = {.p = p, .seed = seed, .nsets = p->check_input_sets};
    avo_tensors x = {0}, pristine = {0};
    avo_flusher fl = {0};
    void *h = NULL;
    json_t *configs = json_array();
    const char *outcome = "ok";
    char detail[1024] = "";
    double logsum = 0;

    *result = NULL;
    size_t nslots = (size_t)p->nconfigs * (size_t)(r.nsets + 1) * (size_t)p->ntensors;
    r.refout = calloc(nslots, sizeof *r.refout);
    if (!r.refout || !configs) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    if ((rc = run_reference(&r, ref_so, err, errlen)))
        goto cleanup;

    h = dlopen(cand_so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        outcome = "compile_error";
        snprintf(detail, sizeof detail, "cannot load the candidate: %s", dlerror());
        goto done;
    }
    r.cand = (avo_kernel_fn)(uintptr_t)dlsym(h, p->entry);
    if (!r.cand) {
        outcome = "compile_error";
        snprintf(detail, sizeof detail, "the candidate does not export '%s'", p->entry);
        goto done;
    }
    if ((rc = avo_flusher_init(&fl))) {
        snprintf(err, errlen, "cannot allocate the cache-flush buffer");
        goto cleanup;
    }

    for (int c = 0; c < p->nconfigs; c++) {
        char why[600];
        int res = CHECK_OK;
        r.worst_rel_l2 = r.worst_max_abs = 0;
        if ((rc = avo_tensors_alloc(&x, p, c, err, errlen)) || (rc = avo_tensors_alloc(&pristine, p, c, err, errlen)))
            goto cleanup;
        for (int s = 0; s < r.nsets && res == CHECK_OK; s++) {
            res = checked_call(&r, c, s, &x, &pristine, why, sizeof why);
            if (res != CHECK_OK)
                snprintf(detail, sizeof detail, "config %s, input set %d: %s", p->configs[c].name, s, why);
        }
        if (res != CHECK_OK) {
            outcome = res == CHECK_INPUTS ? "cheat_suspected" : "wrong_result";
            goto done;
        }
        avo_stats st;
        res = time_config(&r, c, &x, &pristine, &fl, &st, why, sizeof why);
        if (res < 0) {
            rc = res;
            snprintf(err, errlen, "out of memory timing");
            goto cleanup;
        }
        if (res != CHECK_OK) {
            outcome = "cheat_suspected";
            snprintf(detail, sizeof detail, "config %s: %s", p->configs[c].name, why);
            goto done;
        }
        /* A fresh input set after timing: a candidate that caches its output
         * across calls passes the checks above and fails here. */
        res = checked_call(&r, c, r.nsets, &x, &pristine, why, sizeof why);
        if (res != CHECK_OK) {
            outcome = "cheat_suspected";
            snprintf(detail, sizeof detail,
                     "config %s: correct before timing, wrong on a fresh input set after it "
                     "(output cached across calls?): %s",
                     p->configs[c].name, why);
            goto done;
        }
        double flops = 0, bytes = 0;
        if (p->flops)
            avo_problem_eval_config(p, c, p->flops, &flops, NULL, 0);
        if (p->bytes)
            avo_problem_eval_config(p, c, p->bytes, &bytes, NULL, 0);
        double gflops = flops / st.median * 1e-9, gbps = bytes / st.median * 1e-9;
        double score = strcmp(p->score_metric, "flops") == 0 ? gflops : gbps;
        if (!(score > 0) || !isfinite(score)) {
            outcome = "wrong_result";
            snprintf(detail, sizeof detail, "config %s: median time %g s gives no finite score",
                     p->configs[c].name, st.median);
            goto done;
        }
        logsum += log(score);
        json_array_append_new(configs, config_json(p, c, &st, score, gflops, gbps, &r));
        avo_tensors_free(&x);
        avo_tensors_free(&pristine);
    }
    snprintf(detail, sizeof detail, "%d configs, %d input sets each plus one after timing: all within tolerance",
             p->nconfigs, r.nsets);

done:
    if (strcmp(outcome, "ok") != 0)
        zero_scores(configs);
    *result = result_json(p, outcome, detail, strcmp(outcome, "ok") == 0 ? exp(logsum / p->nconfigs) : 0.0,
                          configs, seed);
    configs = NULL;
    if (!*result) {
        snprintf(err, errlen, "cannot build the result object");
        rc = -ENOMEM;
    }

cleanup:
    json_decref(configs);
    avo_tensors_free(&x);
    avo_tensors_free(&pristine);
    avo_flusher_free(&fl);
    if (r.refout) {
        for (size_t i = 0; i < nslots; i++)
            free(r.refout[i]);
        free(r.refout);
    }
    /* The candidate is never unloaded: main() leaves with _exit() after the
     * result is written, so no candidate destructor runs at all. */
    (void)h;
    return rc;
}
