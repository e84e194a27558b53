#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "counters.h"
#include "gpu.h"
#include "runner.h"
#include "tensors.h"
#include "timing.h"

/* Empty round trips measured before any timing; their minimum is subtracted
 * from every timed round trip. */
#define PINGS 200
/* Largest problem validated against float64 without "validate" sizes. */
#define VALIDATE_MAX_ELEMS (1 << 22)

/* Why a check failed; decides the outcome. */
enum { CHECK_OK = 0, CHECK_WRONG, CHECK_INPUTS, CHECK_CRASH, CHECK_TIMEOUT, CHECK_FORGED, CHECK_FAULT };

/* CUDA timed runs copy outputs back for checking on the first run and every
 * CHECK_EVERY-th after it (copies of large tensors dominate otherwise); the
 * fresh input set after timing is always checked. */
#define CHECK_EVERY 8
/* Samples taken while the SM clock ran under this fraction of its maximum
 * (thermal or power throttling, a neighbour) are discarded and counted. */
#define MIN_CLOCK_FRACTION 0.75
/* Calls of the protocol around no call before each config's timed runs. */
#define CALIBRATION_CALLS 32
/* A timed run's tail (its stream's end -> the end mark after the
 * device-wide synchronisation) up to this percentile of the calibration's
 * tails, plus TAIL_SLACK of the call's own time (the host's latency grows
 * with the call's length), is the host's and left out of the sample; beyond
 * it, it is counted (work left on other streams). */
#define TAIL_ALLOW_PERCENTILE 90
#define TAIL_SLACK 0.01
/* Caps on what a calibration may set (it runs in the candidate's process,
 * which could disturb it): the overhead subtracted (H200: about 2 us gated;
 * ungated it holds the host's launch gap, 8-19 us) and the tail allowance
 * (6-10 us). They bound what a candidate gains by skewing them. */
#define OVERHEAD_MAX_GATED 5e-6
#define OVERHEAD_MAX_UNGATED 25e-6
#define TAIL_ALLOW_MAX 15e-6
/* Room at the end of the shared region for a counters report. */
#define PROFILE_AREA (256u << 10)
/* A measurement this far above the declared roofline is impossible. */
#define ROOFLINE_SLACK 1.05

/* CUDA: the timing protocol around no call, calibrated in the runner about
 * to be timed (the host's latency differs from one process to the next)
 * before each config's timed runs. */
typedef struct {
    double stream_min, stream_median;  /* start -> stream end of an empty call; the minimum is subtracted */
    double tail_median, tail_allow;    /* stream end -> end mark; the allowance is left out of every sample */
    int ungated;                       /* timed calls start without the gate (gpu.h) */
    char ungated_why[200];
} gpu_timing;

typedef struct {
    const avo_problem *p;
    uint64_t seed;
    int nsets;        /* check sets; set nsets is the fresh one after timing */
    void **refout;    /* [(config * (nsets + 1) + set) * ntensors + tensor] */
    avo_runner run;   /* the candidate's process */
    int shm_fd;       /* the tensors the runner sees: memfd, mapped shared */
    unsigned char *shm;
    size_t shm_bytes;
    double deadline;  /* absolute, avo_now() */
    double overhead, overhead_median;    /* empty round trip: min (subtracted), median */
    avo_counters ctr;
    int ctr_open;
    int ref_validated;
    char ref_note[512];
    double worst_rel_l2, worst_max_abs;   /* of the current config */
    int cuda;                             /* backend "cuda": tensors mirrored on the GPU */
    avo_gpu *gpu;                         /* the checker's own context, for the reference only */
    unsigned max_mhz;                     /* the GPU's maximum SM clock (0 = unknown) */
    json_t *gpu_info;
    const char *base_so;                  /* the vendor baseline, or NULL */
    avo_runner base;                      /* its own runner, started on first use */
    int base_state;                       /* 0 not started, 1 running, -1 failed */
    char base_err[400];
    gpu_timing tm;                        /* CUDA: the runner timed now (candidate or baseline) */
    gpu_timing base_tm;                   /* the other one's, while the candidate's is in tm */
    unsigned char *area;                  /* the checker's own tensors (reference, pristine inputs), */
    size_t area_bytes;                    /* sized for the largest config and reused by every one */
    int area_pinned;                      /* page-locked while the reference runs on it */
    char ref_copies[240];                 /* CUDA: how the reference's copies ran */
} run_ctx;

/* AVO_HARNESS_TRACE=1 (a run of the harness by hand; the worker's sandbox
 * passes no such variable): each step's wall time on stderr, to find where
 * an evaluation's phases go. */
static void trace(const char *fmt, ...)
{
    static int on = -1;
    static double last;
    if (on < 0) {
        const char *v = getenv("AVO_HARNESS_TRACE");
        on = v && *v && strcmp(v, "0") != 0;
        last = avo_now();
    }
    if (!on)
        return;
    const double t = avo_now();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "trace %8.3f s  ", t - last);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    last = t;
}

static void **refslot(run_ctx *r, int config, int set, int tensor)
{
    return &r->refout[((size_t)config * (size_t)(r->nsets + 1) + (size_t)set) * (size_t)r->p->ntensors +
                      (size_t)tensor];
}

/* The reference (trusted, in this process) gets fresh copies of the
 * pointer and size arrays on every call, like the candidate in the runner.
 * A CUDA reference runs on the checker's own context: tensors copied to the
 * device, the kernel, everything copied back. */
static int call_host(avo_kernel_fn fn, const int64_t *size, avo_tensors *t);

static int call_ref(run_ctx *r, avo_kernel_fn fn, const int64_t *size, avo_tensors *t)
{
    if (!r->cuda)
        return call_host(fn, size, t);
    int ret = 0;
    avo_gpu_times times;
    char err[400];
    int rc = avo_gpu_run(r->gpu, (avo_gpu_fn)(uintptr_t)fn, t->ptr, t->bytes, t->n, size,
                         AVO_GPU_COPY_IN | AVO_GPU_COPY_OUT, 0, &ret, &times, err, sizeof err);
    if (rc)
        fprintf(stderr, "avo-harness: reference on the GPU: %s\n", err);
    return rc ? (ret ? ret : -1) : 0;
}

static int call_host(avo_kernel_fn fn, const int64_t *size, avo_tensors *t)
{
    void *ptrs[AVO_PROBLEM_MAX_TENSORS];
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    memcpy(ptrs, t->ptr, sizeof ptrs);
    memcpy(sizes, size, sizeof sizes);
    return fn(ptrs, sizes);
}

/* One candidate call in the runner on the tensors of x (which live in the
 * shared region). Returns CHECK_OK with the candidate's return value in *ret
 * and the checker's own round-trip time, a CHECK_ code for a runner that
 * died, hung or forged answers, or a negative int (the checker's failure). */
static int cand_call_flags(run_ctx *r, int c, const avo_tensors *x, unsigned flags, int *ret, double *rt,
                           avo_gpu_times *claimed, char *why, size_t wl)
{
    uint64_t offs[AVO_PROBLEM_MAX_TENSORS], bytes[AVO_PROBLEM_MAX_TENSORS];
    unsigned outputs = 0;
    for (int i = 0; i < x->n; i++) {
        offs[i] = (uint64_t)((unsigned char *)x->ptr[i] - r->shm);
        bytes[i] = x->bytes[i];
        if (r->p->tensors[i].role == AVO_ROLE_OUTPUT)
            outputs |= 1u << i;
    }
    int rc = avo_runner_call(&r->run, r->p->configs[c].size, r->p->nsizes, offs, bytes, x->n, flags, outputs,
                             r->deadline, ret, rt, claimed, why, wl);
    switch (rc) {
    case AVO_RUNNER_OK: return CHECK_OK;
    case AVO_RUNNER_DIED: return CHECK_CRASH;
    case AVO_RUNNER_TIMEOUT: return CHECK_TIMEOUT;
    case AVO_RUNNER_PROTOCOL: return CHECK_FORGED;
    case AVO_RUNNER_FAULT: return CHECK_FAULT;
    default: return rc < 0 ? rc : -EIO;
    }
}

/* A checking call: on a GPU every tensor goes to the device and back. */
static int cand_call(run_ctx *r, int c, const avo_tensors *x, int *ret, double *rt, double *claimed, char *why,
                     size_t wl)
{
    avo_gpu_times t;
    int res = cand_call_flags(r, c, x, AVO_GPU_COPY_IN | AVO_GPU_COPY_OUT, ret, rt, &t, why, wl);
    *claimed = t.seconds;
    return res;
}

/* What a CUDA runner claims for a call, against what the checker saw: the
 * event time within the checker's own round trip rt (with 0.1 ms for clock
 * granularity), the tail within the event time. CHECK_FORGED otherwise. */
static int check_claim(const avo_gpu_times *ev, double rt, char *why, size_t wl)
{
    if (!(ev->seconds > 0) || ev->seconds > rt + 1e-4) {
        snprintf(why, wl, "the runner reported %.6g s for a call that took %.6g s end to end", ev->seconds, rt);
        return CHECK_FORGED;
    }
    if (!(ev->tail_s >= 0 && ev->tail_s <= ev->seconds)) {
        snprintf(why, wl, "the runner reported a tail of %.6g s in a call of %.6g s", ev->tail_s, ev->seconds);
        return CHECK_FORGED;
    }
    return CHECK_OK;
}

/* How timed calls started: "gated" (the stream held until the call had
 * queued its work) or "ungated" with the reason. */
static json_t *timing_start_json(const char *ungated_why)
{
    return ungated_why[0] ? json_pack("{s:s,s:s}", "mode", "ungated", "reason", ungated_why)
                          : json_pack("{s:s}", "mode", "gated");
}

static int cmp_double(const void *a, const void *b);
static int calibrate_cuda(run_ctx *r, int c, const avo_tensors *x, unsigned flags, char *why, size_t wl);
static int go_ungated(run_ctx *r, int c, const avo_tensors *x, unsigned flags, const char *why_ungated, char *why,
                      size_t wl);

static json_t *jreal(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Run the reference and its float64 twin on one small size vector (the
 * spec's "validate" sizes, else the smallest config when small enough) and
 * require the reference within its tolerance of the twin. Returns 0 (with
 * r->ref_validated and the reason in r->ref_note), AVO_HARNESS_EREFERENCE
 * when they disagree, or a negative int. */
static int validate_reference(run_ctx *r, void *h, avo_kernel_fn ref, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    avo_kernel_fn f64 = (avo_kernel_fn)(uintptr_t)dlsym(h, "avo_reference_f64");
    if (!f64) {
        snprintf(r->ref_note, sizeof r->ref_note, "the reference exports no avo_reference_f64");
        return 0;
    }
    const int64_t *size = p->validate_size;
    char where[160];
    if (p->has_validate) {
        snprintf(where, sizeof where, "validate sizes");
    } else {
        int best = -1;
        double best_elems = 0;
        for (int c = 0; c < p->nconfigs; c++) {
            double e = 0;
            for (int i = 0; i < p->ntensors; i++) {
                int64_t n = 0;
                avo_problem_tensor_elems(p, c, i, &n, NULL, 0);
                e += (double)n;
            }
            if (best < 0 || e < best_elems)
                best = c, best_elems = e;
        }
        if (best_elems > VALIDATE_MAX_ELEMS) {
            snprintf(r->ref_note, sizeof r->ref_note,
                     "no \"validate\" sizes and the smallest config has %.0f elements (> %d)", best_elems,
                     VALIDATE_MAX_ELEMS);
            return 0;
        }
        size = p->configs[best].size;
        snprintf(where, sizeof where, "config %s (no \"validate\" sizes)", p->configs[best].name);
    }
    avo_tensors t = {0}, d = {0};
    int rc;
    if ((rc = avo_tensors_alloc_at(&t, p, size, -1, err, errlen)) ||
        (rc = avo_tensors_alloc_at(&d, p, size, AVO_DTYPE_F64, err, errlen)))
        goto cleanup;
    /* A stream no check set uses (config index nconfigs). */
    avo_tensors_fill(&t, p, r->seed, p->nconfigs, 0);
    avo_tensors_poison(&t, p);
    for (int i = 0; i < p->ntensors; i++) {
        if (p->tensors[i].role == AVO_ROLE_OUTPUT) {
            for (int64_t e = 0; e < d.elems[i]; e++)
                ((double *)d.ptr[i])[e] = NAN;
        } else {
            avo_tensors_to_f64(t.ptr[i], p->tensors[i].dtype, t.elems[i], d.ptr[i]);
        }
    }
    /* A CUDA package's twin runs on the device too (float64 tensors). */
    int r1 = call_ref(r, ref, size, &t), r2 = call_ref(r, f64, size, &d);
    if (r1 || r2) {
        snprintf(err, errlen, "reference invalid: on %s avo_reference returned %d, avo_reference_f64 %d", where, r1,
                 r2);
        rc = AVO_HARNESS_EREFERENCE;
        goto cleanup;
    }
    for (int i = 0; i < p->ntensors; i++) {
        if (p->tensors[i].role == AVO_ROLE_INPUT)
            continue;
        avo_check ck;
        avo_tolerance tol = p->tol[p->tensors[i].dtype];
        avo_tensors_compare_f64(t.ptr[i], p->tensors[i].dtype, d.ptr[i], t.elems[i], tol, &ck);
        if (!ck.pass) {
            snprintf(err, errlen,
                     "reference invalid: on %s the reference disagrees with avo_reference_f64: %s[%lld] = %.9g vs "
                     "%.9g, rel_l2 %.3g (bound %.3g), max_abs %.3g (bound %.3g)",
                     where, p->tensors[i].name, (long long)ck.worst, ck.got, ck.want, ck.rel_l2, tol.rel_l2,
                     ck.max_abs, tol.max_abs);
            rc = AVO_HARNESS_EREFERENCE;
            goto cleanup;
        }
    }
    r->ref_validated = 1;
    snprintf(r->ref_note, sizeof r->ref_note, "within tolerance of avo_reference_f64 on %s", where);
cleanup:
    avo_tensors_free(&t);
    avo_tensors_free(&d);
    return rc;
}

/* The reference's tensors live in the checker's area, page-locked while it
 * runs (as the runner's region is): its copies are most of the reference
 * phase. Pageable copies when pinning fails; ref_copies says which. */
static void pin_area(run_ctx *r)
{
    if (r->cuda)
        r->area_pinned = avo_gpu_pin(r->gpu, r->area, r->area_bytes, r->ref_copies, sizeof r->ref_copies) == 0;
}

static void unpin_area(run_ctx *r)
{
    if (r->area_pinned)
        avo_gpu_unpin(r->gpu, r->area);
    r->area_pinned = 0;
}

static int run_reference(run_ctx *r, const char *ref_so, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    int rc = 0;
    avo_tensors t = {0};
    void *h = dlopen(ref_so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "reference invalid: cannot load it: %s", dlerror());
        return AVO_HARNESS_EREFERENCE;
    }
    avo_kernel_fn ref = (avo_kernel_fn)(uintptr_t)dlsym(h, "avo_reference");
    if (!ref) {
        snprintf(err, errlen, "reference invalid: %s does not export avo_reference", ref_so);
        rc = AVO_HARNESS_EREFERENCE;
        goto cleanup;
    }
    if (r->cuda) {
        if ((rc = avo_gpu_open(&r->gpu, err, errlen))) {
            rc = rc == -ENOTSUP ? -ENOTSUP : -ENODEV;
            goto cleanup;
        }
        char name[256];
        int ma, mi, sms, l2;
        avo_gpu_describe(r->gpu, name, sizeof name, &ma, &mi, &sms, &l2, &r->max_mhz);
        r->gpu_info = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "name", name, "cc_major", ma, "cc_minor", mi, "sms",
                                sms, "l2_bytes", l2, "max_sm_mhz", (int)r->max_mhz);
    }
    if ((rc = validate_reference(r, h, ref, err, errlen)))
        goto cleanup;
    pin_area(r);
    trace("reference: pin %zu bytes (%s)", r->area_bytes, r->ref_copies);
    for (int c = 0; c < p->nconfigs; c++) {
        if ((rc = avo_tensors_place(&t, p, c, r->area, r->area_bytes, err, errlen)))
            goto cleanup;
        for (int s = 0; s <= r->nsets; s++) {
            avo_tensors_fill(&t, p, r->seed, c, s);
            avo_tensors_poison(&t, p);
            trace("reference %s set %d: fill", p->configs[c].name, s);
            int ret = call_ref(r, ref, p->configs[c].size, &t);
            trace("reference %s set %d: copies and kernel", p->configs[c].name, s);
            if (ret != 0) {
                snprintf(err, errlen, "reference invalid: it returned %d on config %s", ret, p->configs[c].name);
                rc = AVO_HARNESS_EREFERENCE;
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
            trace("reference %s set %d: keep the outputs", p->configs[c].name, s);
        }
    }
cleanup:
    unpin_area(r);
    /* The checker's device memory goes before the candidate's context comes. */
    avo_gpu_close(r->gpu);
    r->gpu = NULL;
    /* Unloaded before the runner starts; the runner is a fresh exec that
     * never loads it at all. */
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
    int tg = avo_tensors_guard_broken(x, &elem);
    if (tg >= 0) {
        snprintf(why, whylen, "wrote past the end of %s (byte %lld after its last element)", p->tensors[tg].name,
                 (long long)elem);
        return CHECK_INPUTS;
    }
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
    trace("check %s set %d: fill", r->p->configs[c].name, set);
    avo_tensors_copy_inputs(x, pristine, r->p);
    avo_tensors_poison(x, r->p);
    trace("check %s set %d: copy and poison", r->p->configs[c].name, set);
    int ret = 0;
    double rt, claimed;
    int res = cand_call(r, c, x, &ret, &rt, &claimed, why, wl);
    trace("check %s set %d: call", r->p->configs[c].name, set);
    if (res != CHECK_OK)
        return res;
    res = check_call(r, c, set, ret, x, pristine, why, wl);
    trace("check %s set %d: compare", r->p->configs[c].name, set);
    return res;
}

static json_t *config_json(const avo_problem *p, int c, const avo_stats *st, double score, double gflops,
                           double gbps, double claimed, json_t *counters, const run_ctx *r)
{
    json_t *roof = json_null();
    if (p->roofline_gflops > 0 || p->roofline_gbps > 0) {
        double f = 0;
        if (p->roofline_gflops > 0 && p->flops)
            f = fmax(f, gflops / p->roofline_gflops);
        if (p->roofline_gbps > 0 && p->bytes)
            f = fmax(f, gbps / p->roofline_gbps);
        roof = jreal(f);
    }
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:o, s:o, s:{s:o, s:o}, s:o, s:o, s:o}", "name",
                     p->configs[c].name, "score", jreal(score), "median_s", jreal(st->median), "min_s",
                     jreal(st->min), "max_s", jreal(st->max), "stddev_s", jreal(st->stddev), "rse",
                     jreal(st->rse), "runs", st->runs, "gflops", p->flops ? jreal(gflops) : json_null(),
                     "gbps", p->bytes ? jreal(gbps) : json_null(), "check", "rel_l2",
                     jreal(r->worst_rel_l2), "max_abs", jreal(r->worst_max_abs), "runner_reported_median_s",
                     jreal(claimed), "roofline_fraction", roof, "counters", counters ? counters : json_null());
}

/* Timed runs of config c on the inputs already in pristine/x (the last
 * check set). Every run is poisoned before and checked after, outside the
 * timed region, so a candidate cannot be fast only when it is not looked at.
 * A sample is the checker's own round trip minus the calibrated empty round
 * trip: what the runner says about time is recorded, never used. */
static int time_config(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_flusher *fl,
                       avo_stats *st, double *claimed_median, json_t **counters, char *why, size_t wl)
{
    const avo_problem *p = r->p;
    const int set = r->nsets - 1;
    int cap = 64, n = 0, res = CHECK_OK;
    double *t = malloc((size_t)cap * sizeof *t), *cl = malloc((size_t)cap * sizeof *cl);
    if (!t || !cl) {
        free(t);
        free(cl);
        return -ENOMEM;
    }
    avo_counter_values cv;
    if (r->ctr_open)
        avo_counters_start(&r->ctr);
    const double start = avo_now();
    while (1) {
        avo_tensors_copy_inputs(x, pristine, p);
        avo_tensors_poison(x, p);
        /* The runner may still be frozen from the last call: let it go back
         * to waiting for a command before the flush, so waking it up is not
         * inside the timed round trip. */
        avo_runner_resume(&r->run);
        avo_flusher_run(fl);
        int ret = 0;
        double rt = 0, claimed = 0;
        char sub[400];
        res = cand_call(r, c, x, &ret, &rt, &claimed, sub, sizeof sub);
        if (res == CHECK_OK)
            res = check_call(r, c, set, ret, x, pristine, sub, sizeof sub);
        if (res != CHECK_OK) {
            if (res > 0)
                snprintf(why, wl, "timed run %d, after passing the checks: %s", n + 1, sub);
            break;
        }
        if (n == cap) {
            cap *= 2;
            double *g = realloc(t, (size_t)cap * sizeof *t), *h = g ? realloc(cl, (size_t)cap * sizeof *cl) : NULL;
            if (g)
                t = g;
            if (h)
                cl = h;
            if (!g || !h) {
                res = -ENOMEM;
                break;
            }
        }
        cl[n] = claimed;
        t[n++] = fmax(rt - r->overhead, 1e-9);
        if (n < p->timing_min_runs)
            continue;
        avo_stats_compute(t, n, st); /* reorders t; order does not matter */
        if (st->rse <= p->timing_rse || avo_now() - start >= p->timing_max_seconds || n >= 100000)
            break;
    }
    if (r->ctr_open) {
        avo_counters_stop(&r->ctr, &cv);
        if (res == CHECK_OK)
            *counters = avo_counters_values_json(&r->ctr, &cv, n);
    }
    if (res == CHECK_OK) {
        avo_stats cs;
        avo_stats_compute(cl, n, &cs);
        *claimed_median = cs.median;
    }
    free(t);
    free(cl);
    return res;
}

/* After a checked call copied every tensor back: outputs poisoned again,
 * inout tensors (which now hold results) restored from the pristine set. */
static void restore_after_check(run_ctx *r, avo_tensors *x, const avo_tensors *pristine)
{
    avo_tensors_poison(x, r->p);
    for (int i = 0; i < r->p->ntensors; i++)
        if (r->p->tensors[i].role == AVO_ROLE_INOUT)
            memcpy(x->ptr[i], pristine->ptr[i], x->bytes[i]);
}

/* *a resized to n doubles; 0, or -ENOMEM with *a untouched. */
static int grow(double **a, int n)
{
    double *g = realloc(*a, (size_t)n * sizeof *g);
    if (!g)
        return -ENOMEM;
    *a = g;
    return 0;
}

/* Timed runs of config c on a GPU. Every run gets its inputs copied to the
 * device again, alternating between two input sets (the last check set,
 * already in x, and set 0, placed right after it in the shared region), so a
 * candidate that remembers its last inputs and replays the output does not
 * see the same inputs twice in a row; the runner fills the outputs with NaN
 * on the device and flushes L2 first. A sample is the CUDA-event time from
 * the start mark to the end of the call's own stream, less the calibrated
 * time of that protocol around no call, plus the part of the tail (stream
 * end -> the end mark after a device-wide synchronisation) beyond the
 * calibrated host latency, which is work the call left on other streams
 * (avo_gpu_sample). The runner reports the times, so the checker bounds them
 * by its own round trip (a claim longer than the whole call is forged) and
 * checks the outputs of the first runs and every CHECK_EVERY-th.
 * Samples taken under MIN_CLOCK_FRACTION of the maximum SM clock are
 * discarded and counted. *events (when asked for) says what the protocol
 * measured: the calibration, the timed runs' median tail, and how many were
 * charged for a tail beyond the allowance. */
static int time_config_cuda(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_stats *st,
                            double *rt_median, int *discarded, json_t **clock, json_t **events, char *why, size_t wl)
{
    unsigned clk_min = 0, clk_max = 0;
    const avo_problem *p = r->p;
    const int sets[2] = {r->nsets - 1, 0};
    const unsigned steps = AVO_GPU_FLUSH | AVO_GPU_COPY_INPUTS | AVO_GPU_POISON;
    avo_tensors xs1 = {0}, pr1 = {0};
    avo_tensors *xs[2] = {x, &xs1}, *pr[2] = {pristine, &pr1};
    int cap = 64, n = 0, res = CHECK_OK, iter = 0, charged = 0;
    double charged_max = 0;
    double *t = malloc((size_t)cap * sizeof *t), *rts = malloc((size_t)cap * sizeof *rts),
           *tails = malloc((size_t)cap * sizeof *tails);
    char err[300];
    if (!t || !rts || !tails)
        goto oom;
    /* The second set lives after the first in the shared region. With one
     * check set both are set 0: the same bytes, so x serves for both (the
     * candidate sees device buffers only, never where the copies came
     * from). */
    if (sets[0] == sets[1]) {
        xs[1] = x;
        pr[1] = pristine;
    } else {
        size_t off = 0;
        for (int i = 0; i < x->n; i++) {
            size_t end = (size_t)((unsigned char *)x->ptr[i] - r->shm) + x->bytes[i] + x->guard[i];
            if (end > off)
                off = end;
        }
        off = (off + 63) / 64 * 64;
        if (avo_tensors_place(&xs1, p, c, r->shm + off, r->shm_bytes - PROFILE_AREA - off, err, sizeof err) ||
            avo_tensors_alloc(&pr1, p, c, err, sizeof err))
            goto oom;
        avo_tensors_fill(&pr1, p, r->seed, c, sets[1]);
        avo_tensors_copy_inputs(&xs1, &pr1, p);
        avo_tensors_poison(&xs1, p);
    }
    /* x holds the last checked call: its inputs equal pristine's (checked),
     * its outputs and inout tensors are the candidate's results, which must
     * not survive into a timed run. */
    restore_after_check(r, x, pristine);
    trace("timing %s: second input set", p->configs[c].name);
    if ((res = calibrate_cuda(r, c, x, steps, why, wl)) != CHECK_OK)
        goto out;
    trace("timing %s: calibrated", p->configs[c].name);
    *discarded = 0;
    const double start = avo_now();
    for (;; iter++) {
        const int k = iter & 1;
        const int check = iter < 2 || iter % CHECK_EVERY == 0;
        unsigned flags = steps | (r->tm.ungated ? 0 : AVO_GPU_GATED);
        if (check)
            flags |= AVO_GPU_COPY_OUT;
        int ret = 0;
        double rt = 0;
        avo_gpu_times ev;
        char sub[400];
        res = cand_call_flags(r, c, xs[k], flags, &ret, &rt, &ev, sub, sizeof sub);
        const unsigned mhz = ev.sm_mhz;
        if (res == CHECK_OK && (check || ret != 0))
            res = check_call(r, c, sets[k], ret, xs[k], pr[k], sub, sizeof sub);
        trace("timing %s run %d%s", p->configs[c].name, iter, check ? " (checked)" : "");
        if (res == CHECK_OK)
            res = check_claim(&ev, rt, sub, sizeof sub);
        if (check && res == CHECK_OK)
            restore_after_check(r, xs[k], pr[k]);   /* copied-back results are not the next run's inputs */
        if (res != CHECK_OK) {
            if (res > 0)
                snprintf(why, wl, "timed run %d, after passing the checks: %s", iter + 1, sub);
            break;
        }
        if (ev.notes & AVO_GPU_NOTE_GATE_TIMEOUT) {
            /* The sample holds the gate's time limit: drop it and time
             * the rest of the evaluation from an ungated start. */
            if ((res = go_ungated(r, c, x, steps, "the entry point waits on its own work before returning", sub,
                                  sizeof sub)) != CHECK_OK) {
                if (res > 0)
                    snprintf(why, wl, "recalibrating without the gate: %s", sub);
                break;
            }
            continue;
        }
        if ((ev.notes & AVO_GPU_NOTE_UNGATED) && !r->tm.ungated)
            snprintf(r->tm.ungated_why, sizeof r->tm.ungated_why, "the gate could not be set up in the runner");
        if (mhz) {
            clk_min = clk_min && clk_min < mhz ? clk_min : mhz;
            clk_max = clk_max > mhz ? clk_max : mhz;
        }
        if (r->max_mhz && mhz && mhz < MIN_CLOCK_FRACTION * r->max_mhz) {
            (*discarded)++;
        } else {
            if (n == cap) {
                cap *= 2;
                if (grow(&t, cap) || grow(&rts, cap) || grow(&tails, cap)) {
                    res = -ENOMEM;
                    break;
                }
            }
            rts[n] = rt;
            tails[n] = ev.tail_s;
            double excess;
            t[n++] = avo_gpu_sample(ev.seconds, ev.tail_s, r->tm.stream_min, r->tm.tail_allow, TAIL_SLACK, &excess);
            if (excess > 0) {
                charged++;
                charged_max = fmax(charged_max, excess);
            }
        }
        const int enough = n >= p->timing_min_runs;
        if (enough)
            avo_stats_compute(t, n, st);
        if ((enough && st->rse <= p->timing_rse) || avo_now() - start >= p->timing_max_seconds || n >= 100000)
            break;
    }
    if (res == CHECK_OK && n == 0) {
        snprintf(why, wl, "every timed run ran under %.0f%% of the maximum SM clock (%u MHz): no usable sample",
                 MIN_CLOCK_FRACTION * 100, r->max_mhz);
        res = -EAGAIN;
    }
    if (res == CHECK_OK) {
        avo_stats_compute(t, n, st);
        avo_stats rs;
        avo_stats_compute(rts, n, &rs);
        *rt_median = rs.median;
        /* The SM clock read after every timed run (NVML): its range, and how
         * many samples fell under the floor and were dropped. */
        if (clock)
            *clock = json_pack("{s:i,s:i,s:i,s:i}", "min_mhz", (int)clk_min, "max_mhz", (int)clk_max, "max_possible_mhz",
                               (int)r->max_mhz, "discarded", *discarded);
        if (events) {
            avo_stats ts;
            avo_stats_compute(tails, n, &ts);
            *events = json_pack("{s:o,s:o,s:o,s:o,s:o,s:i,s:o}", "overhead_s", jreal(r->tm.stream_min),
                                "overhead_median_s", jreal(r->tm.stream_median), "calibrated_tail_median_s",
                                jreal(r->tm.tail_median), "tail_allowance_s", jreal(r->tm.tail_allow), "tail_median_s",
                                jreal(ts.median), "tail_charged_runs", charged, "tail_charged_max_s",
                                jreal(charged_max));
        }
    }
out:
    free(t);
    free(rts);
    free(tails);
    avo_tensors_free(&pr1);
    return res;
oom:
    res = -ENOMEM;
    goto out;
}

/* The timing protocol around no call, CALIBRATION_CALLS times in the runner
 * about to be timed (the host's latency differs from one process to the
 * next), with the steps (flags) the timed runs of config c take before it,
 * so the two differ only by the call. The minimum of start -> stream end is
 * subtracted from every sample, and the TAIL_ALLOW_PERCENTILE-th percentile
 * of the tails is the host latency a sample leaves out (TAIL_SLACK covers
 * its growth with the call's length). Both bounded, since the runner
 * reports them. */
static int calibrate_cuda(run_ctx *r, int c, const avo_tensors *x, unsigned flags, char *why, size_t wl)
{
    enum { CALLS = CALIBRATION_CALLS };
    double stream[CALLS], tail[CALLS];
    for (int i = 0; i < CALLS; i++) {
        int ret = 0;
        double rt = 0;
        avo_gpu_times ev;
        int res = cand_call_flags(r, c, x, flags | AVO_GPU_EMPTY | (r->tm.ungated ? 0 : AVO_GPU_GATED), &ret, &rt,
                                  &ev, why, wl);
        if (res != CHECK_OK)
            return res;
        char sub[300];
        if ((res = check_claim(&ev, rt, sub, sizeof sub)) != CHECK_OK) {
            snprintf(why, wl, "calibration: %s", sub);
            return res;
        }
        stream[i] = ev.seconds - ev.tail_s;
        tail[i] = ev.tail_s;
    }
    qsort(stream, CALLS, sizeof *stream, cmp_double);
    qsort(tail, CALLS, sizeof *tail, cmp_double);
    r->tm.stream_min = fmin(stream[0], r->tm.ungated ? OVERHEAD_MAX_UNGATED : OVERHEAD_MAX_GATED);
    r->tm.stream_median = stream[CALLS / 2];
    r->tm.tail_median = tail[CALLS / 2];
    r->tm.tail_allow = fmin(tail[(CALLS - 1) * TAIL_ALLOW_PERCENTILE / 100], TAIL_ALLOW_MAX);
    return CHECK_OK;
}

/* From here on every timed call starts without the gate (why says what made
 * the gate unusable); the empty call is calibrated again, since its event
 * time now includes the launch gap. */
static int go_ungated(run_ctx *r, int c, const avo_tensors *x, unsigned flags, const char *why_ungated, char *why,
                      size_t wl)
{
    r->tm.ungated = 1;
    snprintf(r->tm.ungated_why, sizeof r->tm.ungated_why, "%s", why_ungated);
    return calibrate_cuda(r, c, x, flags, why, wl);
}

/* The vendor baseline (cuBLAS for gemm_bf16) on config c, measured by the
 * same checker on the same inputs with the same protocol, but in a runner of
 * its own: the candidate's process never has the library's entry point to
 * fall back on. One checked call, then the timing loop. Returns the
 * "baseline" object for the config (an "error" member when it failed; the
 * candidate's outcome never depends on it). */
static json_t *time_baseline(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, double cand_median)
{
    char why[600];
    if (!r->cuda)
        return json_pack("{s:s}", "error", "baseline timing is implemented for CUDA problems");
    if (r->base_state == 0) {
        int rc = avo_runner_start(&r->base, r->base_so, "avo_baseline", r->cuda, r->shm_fd, r->shm_bytes,
                                  r->deadline, NULL, NULL, why, sizeof why);
        r->base_state = rc == AVO_RUNNER_OK ? 1 : -1;
        if (rc != AVO_RUNNER_OK)
            snprintf(r->base_err, sizeof r->base_err, "cannot start: %.360s", why);
    }
    if (r->base_state < 0)
        return json_pack("{s:s}", "error", r->base_err);
    avo_runner cand = r->run;
    gpu_timing cand_tm = r->tm;
    double wr = r->worst_rel_l2, wm = r->worst_max_abs;
    r->run = r->base;
    r->tm = r->base_tm;
    avo_stats st;
    double rt = 0;
    int discarded = 0;
    json_t *events = NULL;
    int res = checked_call(r, c, r->nsets - 1, x, pristine, why, sizeof why);
    if (res == CHECK_OK)
        res = time_config_cuda(r, c, x, pristine, &st, &rt, &discarded, NULL, &events, why, sizeof why);
    r->base = r->run;
    r->base_tm = r->tm;
    r->run = cand;
    r->tm = cand_tm;
    r->worst_rel_l2 = wr;
    r->worst_max_abs = wm;
    if (res != CHECK_OK) {
        if (res < 0 || r->base.pid == 0)
            r->base_state = -1;
        snprintf(r->base_err, sizeof r->base_err, "%.390s", why);
        return json_pack("{s:s}", "error", why);
    }
    double flops = 0;
    if (r->p->flops)
        avo_problem_eval_config(r->p, c, r->p->flops, &flops, NULL, 0);
    return json_pack("{s:o,s:o,s:i,s:o,s:o,s:o}", "median_s", jreal(st.median), "tflops",
                     r->p->flops ? jreal(flops / st.median * 1e-12) : json_null(), "runs", st.runs,
                     "vs_baseline", jreal(st.median / cand_median), "events", events ? events : json_null(),
                     "timing_start", timing_start_json(r->base_tm.ungated_why));
}

/* The counters pass on a GPU, after all timing: one profiled call of config
 * c on the first check set's inputs. The report comes from the runner (the
 * candidate's process, so it is data, not evidence): parsed with a size cap,
 * attached as the config's "counters" and never part of the score. */
static json_t *profile_config(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine)
{
    char why[600];
    uint64_t offs[AVO_PROBLEM_MAX_TENSORS], bytes[AVO_PROBLEM_MAX_TENSORS];
    avo_tensors_fill(pristine, r->p, r->seed, c, 0);
    avo_tensors_copy_inputs(x, pristine, r->p);
    avo_tensors_poison(x, r->p);
    for (int i = 0; i < x->n; i++) {
        offs[i] = (uint64_t)((unsigned char *)x->ptr[i] - r->shm);
        bytes[i] = x->bytes[i];
    }
    uint64_t aux = r->shm_bytes - PROFILE_AREA;
    memset(r->shm + aux, 0, PROFILE_AREA);
    int status = 0;
    int rc = avo_runner_profile(&r->run, r->p->configs[c].size, r->p->nsizes, offs, bytes, x->n, aux, PROFILE_AREA,
                                r->deadline, &status, why, sizeof why);
    if (rc != AVO_RUNNER_OK)
        return json_pack("{s:b,s:s}", "available", 0, "reason", why);
    if (status)
        return json_pack("{s:b,s:s}", "available", 0, "reason", why);
    r->shm[aux + PROFILE_AREA - 1] = 0;
    json_error_t je;
    json_t *doc = json_loads((const char *)r->shm + aux, 0, &je);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return json_pack("{s:b,s:s}", "available", 0, "reason", "unreadable counters report");
    }
    json_object_set_new(doc, "available", json_true());
    json_object_set_new(doc, "source", json_string("CUPTI range profiler, AutoRange + KernelReplay"));
    return doc;
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

static void before_load(void *arg, pid_t pid)
{
    run_ctx *r = arg;
    avo_counters_open(&r->ctr, pid);
    r->ctr_open = 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The shared tensor region: big enough for the largest config, sealed
 * against resizing so the runner cannot truncate it under the checker. */
static int make_shm(run_ctx *r, char *err, size_t errlen)
{
    size_t need = 64;
    for (int c = 0; c < r->p->nconfigs; c++) {
        size_t s = avo_tensors_span(r->p, c);
        if (s > need)
            need = s;
    }
    if (r->cuda)   /* two input sets for timing (when they differ), and a report */
        need = (need + 63) / 64 * 64 * (r->nsets > 1 ? 2 : 1) + PROFILE_AREA;
    r->shm_bytes = need;
    r->shm_fd = memfd_create("avo-tensors", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (r->shm_fd < 0 || ftruncate(r->shm_fd, (off_t)need) != 0 ||
        fcntl(r->shm_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot create the shared tensor region (%zu bytes): %s", need, strerror(e));
        return -e;
    }
    r->shm = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, r->shm_fd, 0);
    if (r->shm == MAP_FAILED) {
        int e = errno;
        r->shm = NULL;
        snprintf(err, errlen, "cannot map the shared tensor region: %s", strerror(e));
        return -e;
    }
    return 0;
}

/* Median and minimum of PINGS empty round trips. */
static int calibrate(run_ctx *r, char *why, size_t wl)
{
    double t[PINGS];
    for (int i = 0; i < PINGS; i++) {
        int rc = avo_runner_ping(&r->run, r->deadline, &t[i], why, wl);
        if (rc)
            return rc;
    }
    qsort(t, PINGS, sizeof *t, cmp_double);
    r->overhead = t[0];
    r->overhead_median = t[PINGS / 2];
    return 0;
}

static json_t *runner_json(const run_ctx *r, int calibrated)
{
    json_t *sig = json_null();
    if (r->run.signal) {
        char name[32];
        const char *ab = sigabbrev_np(r->run.signal);
        snprintf(name, sizeof name, "SIG%s", ab ? ab : "?");
        sig = json_string(name);
    }
    return json_pack("{s:b, s:i, s:o, s:o, s:i, s:o, s:o}", "separate_process", 1, "uid", r->run.uid,
                     "overhead_s", calibrated ? json_real(r->overhead) : json_null(), "overhead_median_s",
                     calibrated ? json_real(r->overhead_median) : json_null(), "overhead_pings",
                     calibrated ? PINGS : 0, "signal", sig, "exit",
                     r->run.exit_code >= 0 && !r->run.signal ? json_integer(r->run.exit_code) : json_null());
}

static const char *outcome_of(int res, int timed)
{
    switch (res) {
    case CHECK_WRONG: return timed ? "cheat_suspected" : "wrong_result";
    case CHECK_INPUTS: return "cheat_suspected";
    case CHECK_CRASH: return "crash";
    case CHECK_TIMEOUT: return "timeout";
    case CHECK_FORGED: return "cheat_suspected";
    case CHECK_FAULT: return "crash";
    default: return "ok";
    }
}

int avo_harness_run(const avo_problem *p, const char *cand_so, const char *ref_so, const char *base_so, uint64_t seed,
                    double deadline_s, json_t **result, char *err, size_t errlen)
{
    int rc = 0, calibrated = 0;
    run_ctx r = {.p = p, .seed = seed, .nsets = p->check_input_sets, .shm_fd = -1,
                 .cuda = strcmp(p->backend, "cuda") == 0, .base_so = base_so};
    avo_tensors x = {0}, pristine = {0};
    avo_flusher fl = {0};
    json_t *configs = json_array();
    const char *outcome = "ok";
    char detail[1024] = "";
    double logsum = 0;
    /* Where an evaluation's wall time goes (result "phases_s"): large
     * problems spend far more in the protocol than in the timed calls. */
    const double t_start = avo_now();
    double t0, ph_ref = 0, ph_checks = 0, ph_timing = 0, ph_base = 0, ph_ctr = 0;

    r.run.cmd_w = r.run.reply_r = -1;
    r.base.cmd_w = r.base.reply_r = -1;
    r.deadline = avo_now() + (deadline_s > 0 ? deadline_s : 600);
    for (int i = 0; i < AVO_CTR_N; i++)
        r.ctr.fd[i] = -1;
    *result = NULL;
    size_t nslots = (size_t)p->nconfigs * (size_t)(r.nsets + 1) * (size_t)p->ntensors;
    r.refout = calloc(nslots, sizeof *r.refout);
    if (!r.refout || !configs) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    for (int c = 0; c < p->nconfigs; c++)
        if (avo_tensors_span(p, c) > r.area_bytes)
            r.area_bytes = avo_tensors_span(p, c);
    r.area_bytes = (r.area_bytes + 4095) / 4096 * 4096;
    if (!(r.area = aligned_alloc(4096, r.area_bytes))) {
        snprintf(err, errlen, "cannot allocate %zu bytes for the checker's tensors", r.area_bytes);
        rc = -ENOMEM;
        goto cleanup;
    }
    trace("start");
    t0 = avo_now();
    rc = run_reference(&r, ref_so, err, errlen);
    ph_ref = avo_now() - t0;
    if (rc || (rc = make_shm(&r, err, errlen)))
        goto cleanup;
    if (!r.cuda && (rc = avo_flusher_init(&fl))) {
        snprintf(err, errlen, "cannot allocate the cache-flush buffer");
        goto cleanup;
    }

    char why[600];
    rc = avo_runner_start(&r.run, cand_so, p->entry, r.cuda, r.shm_fd, r.shm_bytes, r.deadline, before_load, &r, why,
                          sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the runner: %s", why);
        goto cleanup;
    }
    if (rc == AVO_RUNNER_LOAD) {
        rc = 0;
        outcome = "compile_error";
        snprintf(detail, sizeof detail, "%s", why);
        goto done;
    }
    trace("runner started (%s)", r.run.host_copies[0] ? r.run.host_copies : "cpu");
    if (rc == 0)
        rc = calibrate(&r, why, sizeof why);
    if (rc) {
        int res = rc == AVO_RUNNER_DIED ? CHECK_CRASH : rc == AVO_RUNNER_TIMEOUT ? CHECK_TIMEOUT : CHECK_FORGED;
        rc = 0;
        outcome = outcome_of(res, 0);
        snprintf(detail, sizeof detail, "runner, loading the candidate: %s", why);
        goto done;
    }
    calibrated = 1;
    if (r.cuda) {
        /* The runner's first GPU calls, before any reference work: a
         * runner that cannot time (or forges) fails here, cheaply. Each
         * config calibrates again, with its own steps, before timing. */
        if ((rc = avo_tensors_place(&x, p, 0, r.shm, r.shm_bytes, err, errlen)))
            goto cleanup;
        int res = calibrate_cuda(&r, 0, &x, 0, why, sizeof why);
        avo_tensors_free(&x);
        if (res != CHECK_OK) {
            if (res < 0) {
                rc = res;
                snprintf(err, errlen, "runner protocol: %s", why);
                goto cleanup;
            }
            outcome = outcome_of(res, 0);
            snprintf(detail, sizeof detail, "runner, calibrating: %s", why);
            goto done;
        }
    }

    for (int c = 0; c < p->nconfigs; c++) {
        int res = CHECK_OK;
        r.worst_rel_l2 = r.worst_max_abs = 0;
        if ((rc = avo_tensors_place(&x, p, c, r.shm, r.shm_bytes, err, errlen)) ||
            (rc = avo_tensors_place(&pristine, p, c, r.area, r.area_bytes, err, errlen)))
            goto cleanup;
        t0 = avo_now();
        for (int s = 0; s < r.nsets && res == CHECK_OK; s++) {
            res = checked_call(&r, c, s, &x, &pristine, why, sizeof why);
            if (res > 0)
                snprintf(detail, sizeof detail, "config %s, input set %d: %s", p->configs[c].name, s, why);
        }
        ph_checks += avo_now() - t0;
        if (res < 0) {
            rc = res;
            snprintf(err, errlen, "runner protocol: %s", why);
            goto cleanup;
        }
        if (res != CHECK_OK) {
            outcome = outcome_of(res, 0);
            goto done;
        }
        avo_stats st;
        double claimed = 0;
        json_t *ctrs = NULL;
        int discarded = 0;
        json_t *clock = NULL, *events = NULL;
        t0 = avo_now();
        if (r.cuda)
            res = time_config_cuda(&r, c, &x, &pristine, &st, &claimed, &discarded, &clock, &events, why,
                                   sizeof why);
        else
            res = time_config(&r, c, &x, &pristine, &fl, &st, &claimed, &ctrs, why, sizeof why);
        ph_timing += avo_now() - t0;
        if (res < 0) {
            rc = res;
            snprintf(err, errlen, "timing failed: %s", res == -ENOMEM ? "out of memory" : why);
            goto cleanup;
        }
        if (res != CHECK_OK) {
            outcome = outcome_of(res, 1);
            snprintf(detail, sizeof detail, "config %s: %s", p->configs[c].name, why);
            goto done;
        }
        /* A fresh input set after timing: a candidate that caches its output
         * across calls passes the checks above and fails here. */
        t0 = avo_now();
        res = checked_call(&r, c, r.nsets, &x, &pristine, why, sizeof why);
        ph_checks += avo_now() - t0;
        if (res != CHECK_OK) {
            json_decref(ctrs);
            json_decref(clock);
            json_decref(events);
            if (res < 0) {
                rc = res;
                snprintf(err, errlen, "runner protocol: %s", why);
                goto cleanup;
            }
            outcome = res == CHECK_WRONG ? "cheat_suspected" : outcome_of(res, 1);
            if (res == CHECK_WRONG || res == CHECK_INPUTS)
                snprintf(detail, sizeof detail,
                         "config %s: correct before timing, wrong on a fresh input set after it "
                         "(output cached across calls?): %s",
                         p->configs[c].name, why);
            else
                snprintf(detail, sizeof detail, "config %s, input set after timing: %s", p->configs[c].name, why);
            goto done;
        }
        double flops = 0, bytes = 0;
        if (p->flops)
            avo_problem_eval_config(p, c, p->flops, &flops, NULL, 0);
        if (p->bytes)
            avo_problem_eval_config(p, c, p->bytes, &bytes, NULL, 0);
        double gflops = flops / st.median * 1e-9, gbps = bytes / st.median * 1e-9;
        double score = strcmp(p->score_metric, "flops") == 0 ? gflops : gbps;
        /* Faster than the hardware can go is not an optimisation: the work
         * ran outside the timed region (a late launch, a host thread), or the
         * time was forged. */
        /* Only the arithmetic peak is a hard bound: a byte rate computed from
         * the minimal traffic can legitimately beat DRAM bandwidth when
         * outputs stay in cache. */
        if (p->roofline_gflops > 0 && p->flops && gflops > ROOFLINE_SLACK * p->roofline_gflops) {
            json_decref(ctrs);
            json_decref(clock);
            json_decref(events);
            outcome = "cheat_suspected";
            snprintf(detail, sizeof detail,
                     "config %s: %.4g GFLOP/s measured, beyond the declared arithmetic peak of %.4g GFLOP/s: "
                     "the work was not inside the timed region",
                     p->configs[c].name, gflops, p->roofline_gflops);
            goto done;
        }
        if (!(score > 0) || !isfinite(score)) {
            json_decref(ctrs);
            json_decref(clock);
            json_decref(events);
            outcome = "wrong_result";
            snprintf(detail, sizeof detail, "config %s: median time %g s gives no finite score",
                     p->configs[c].name, st.median);
            goto done;
        }
        logsum += log(score);
        json_t *cj = config_json(p, c, &st, score, gflops, gbps, r.cuda ? NAN : claimed, ctrs, &r);
        if (r.cuda) {
            json_object_set_new(cj, "timing_source", json_string("cuda_events"));
            json_object_set_new(cj, "round_trip_median_s", jreal(claimed));
            json_object_set_new(cj, "clock_discarded", json_integer(discarded));
            json_object_set_new(cj, "sm_clock", clock ? clock : json_null());
            json_object_set_new(cj, "events", events ? events : json_null());
            clock = events = NULL;
            json_object_set_new(cj, "tflops", p->flops ? jreal(gflops / 1000) : json_null());
        }
        if (base_so) {
            t0 = avo_now();
            json_object_set_new(cj, "baseline", time_baseline(&r, c, &x, &pristine, st.median));
            ph_base += avo_now() - t0;
        }
        json_array_append_new(configs, cj);
        avo_tensors_free(&x);
        avo_tensors_free(&pristine);
    }
    snprintf(detail, sizeof detail, "%d configs, %d input sets each plus one after timing: all within tolerance",
             p->nconfigs, r.nsets);
    /* Counters in a separate pass, never during timing. */
    t0 = avo_now();
    if (r.cuda && getenv("AVO_NO_COUNTERS") == NULL) {
        for (int c = 0; c < p->nconfigs; c++) {
            if (!p->configs[c].profile) {
                json_object_set_new(json_array_get(configs, (size_t)c), "counters",
                                    json_pack("{s:b,s:s}", "available", 0, "reason",
                                              "not profiled: the problem's counters.configs does not list it"));
                continue;
            }
            if ((rc = avo_tensors_place(&x, p, c, r.shm, r.shm_bytes - PROFILE_AREA, err, errlen)) ||
                (rc = avo_tensors_place(&pristine, p, c, r.area, r.area_bytes, err, errlen)))
                goto cleanup;
            json_t *ctr = profile_config(&r, c, &x, &pristine);
            trace("counters %s: profile", p->configs[c].name);
            json_object_set_new(json_array_get(configs, (size_t)c), "counters", ctr);
            avo_tensors_free(&x);
            avo_tensors_free(&pristine);
            if (!r.run.pid)
                break;      /* the runner died profiling: keep the timing results */
        }
    }
    ph_ctr = avo_now() - t0;

done:
    /* The runner is gone before the result exists: nothing of the
     * candidate runs while (or after) the checker writes it. */
    avo_runner_stop(&r.run);
    avo_runner_stop(&r.base);
    if (strcmp(outcome, "ok") != 0)
        zero_scores(configs);
    *result = result_json(p, outcome, detail, strcmp(outcome, "ok") == 0 ? exp(logsum / p->nconfigs) : 0.0,
                          configs, seed);
    configs = NULL;
    if (!*result) {
        snprintf(err, errlen, "cannot build the result object");
        rc = -ENOMEM;
        goto cleanup;
    }
    json_object_set_new(*result, "reference_validated", json_boolean(r.ref_validated));
    json_object_set_new(*result, "reference_validation", json_string(r.ref_note));
    json_object_set_new(*result, "runner", runner_json(&r, calibrated));
    {
        /* "other": GPU context and runner start-up, calibration, laying
         * out and allocating each configuration's tensors. */
        const double total = avo_now() - t_start;
        json_object_set_new(*result, "phases_s",
                            json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "reference", jreal(ph_ref), "checks",
                                      jreal(ph_checks), "timing", jreal(ph_timing), "baseline", jreal(ph_base),
                                      "counters", jreal(ph_ctr), "other",
                                      jreal(total - ph_ref - ph_checks - ph_timing - ph_base - ph_ctr), "total",
                                      jreal(total)));
    }
    if (r.cuda) {
        json_t *rj = json_object_get(*result, "runner");
        json_object_set_new(rj, "reference_copies", json_string(r.ref_copies[0] ? r.ref_copies : "unknown"));
        json_object_set_new(rj, "host_copies", json_string(r.run.host_copies[0] ? r.run.host_copies : "unknown"));
        json_object_set_new(rj, "timing_start", timing_start_json(r.tm.ungated_why));
    }
    if (r.gpu_info) {
        json_object_set_new(*result, "gpu", r.gpu_info);
        r.gpu_info = NULL;
    }
    json_object_set_new(*result, "counters",
                        r.ctr_open ? avo_counters_info_json(&r.ctr)
                                   : json_pack("{s:b, s:s}", "available", 0, "reason", "runner not started"));

cleanup:
    avo_runner_stop(&r.base);
    json_decref(r.gpu_info);
    avo_gpu_close(r.gpu);
    avo_runner_stop(&r.run);
    if (r.ctr_open)
        avo_counters_close(&r.ctr);
    json_decref(configs);
    avo_tensors_free(&x);
    avo_tensors_free(&pristine);
    avo_flusher_free(&fl);
    free(r.area);
    if (r.shm)
        munmap(r.shm, r.shm_bytes);
    if (r.shm_fd >= 0)
        close(r.shm_fd);
    if (r.refout) {
        for (size_t i = 0; i < nslots; i++)
            free(r.refout[i]);
        free(r.refout);
    }
    return rc;
}
