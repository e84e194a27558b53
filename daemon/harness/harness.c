/* avo-harness's checker: runs the reference, drives the candidate's runner, checks, times, scores (harness.h). */
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "avo_phases.h"
#include "avo_utf8.h"
#include "counters.h"
#include "gpu.h"
#include "paired.h"
#include "refcache.h"
#include "runner.h"
#include "tensors.h"
#include "timing.h"
#include "harness_internal.h"

/* What one config's calls found. */
typedef struct {
    avo_stats st;          /* the samples */
    double claimed_median; /* CPU: the runner's own time; CUDA: the checker's round trip */
    int calls, checked, random_checks, samples_checked;
    double q;              /* the check probability of a sampled call */
    double checked_median; /* median of the samples whose call was checked (NAN: none) */
    double idle_cpu_s;     /* CPU its group used with no call (-1 unknown) */
    int discarded;         /* CUDA: samples under the clock floor */
    int fail_call;         /* the call a check failed on */
    json_t *clock, *events, *counters;
    avo_timing_stop_t stop; /* why its timing ended */
    double wall_s, cpu_s;   /* CPU: its samples' sum, and its group's CPU time over those calls */
    int outside_runs;       /* CPU: calls charged the CPU time their group used outside the timed window */
    double outside_max_s;   /* ... the most charged to one */
    int cpu_known;          /* cpu_s read for every timed call (a control group counts it) */
    double checker_wait_s;  /* CPU: the checker's waits for its CPU within those calls' round trips */
    int checker_wait_known; /* ... read for every timed call */
} config_run;

/* AVO_HARNESS_TRACE=1 (a run of the harness by hand; the worker's sandbox
 * passes no such variable): each step's wall time on stderr, to find where
 * an evaluation's phases go. */
void harness_trace(const char *fmt, ...)
{
    static int on = -1;
    static double last;
    if (on < 0) {
        const char *v = getenv("AVO_HARNESS_TRACE");
        on = v && *v && strcmp(v, "0") != 0;
        last = avo_timing_now();
    }
    if (!on)
        return;
    const double t = avo_timing_now();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "trace %10.6f s  ", t - last);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    last = t;
}

/* The input set call i of the current config gets: the job's warm-up set
 * in this evaluation's order, or the evaluation's own set i. */
static int call_set(const run_ctx *r, int i)
{
    return i < r->nsets ? JOB_SET_BASE + r->warm_order[i] : r->set_base + i;
}

/* The seed (and the device's key) of set's stream. */
static int job_set(int set)
{
    return set >= JOB_SET_BASE && set < PROFILE_SET;
}
static uint64_t set_seed(const run_ctx *r, int set)
{
    return job_set(set) ? r->job_seed : r->seed;
}

/* A fresh order of the job's warm-up sets for the next config, from the
 * checker's secret generator (Fisher-Yates): a candidate cannot know which
 * set a warm-up call has from its place. */
static void draw_warm_order(run_ctx *r)
{
    for (int k = 0; k < r->nsets; k++)
        r->warm_order[k] = k;
    for (int k = r->nsets - 1; k > 0; k--) {
        int j = (int)(avo_timing_rng_next(&r->rng) * (k + 1));
        j = j > k ? k : j;
        const int t = r->warm_order[k];
        r->warm_order[k] = r->warm_order[j];
        r->warm_order[j] = t;
    }
}

/* The reference (trusted, in this process) gets fresh copies of the
 * pointer and size arrays on every call, like the candidate in the runner.
 * A CUDA reference runs on the checker's own context: tensors copied to the
 * device, the kernel, everything copied back. */
static int call_host(avo_kernel_fn fn, const int64_t *size, avo_tensors *t)
{
    void *ptrs[AVO_PROBLEM_MAX_TENSORS];
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    memcpy(ptrs, t->ptr, sizeof ptrs);
    memcpy(sizes, size, sizeof sizes);
    return fn(ptrs, sizes);
}

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

/* The inputs' check on the device: the first input tensor (role input)
 * whose shared copy differs from the checker's copy generated again, with
 * the element in *elem; -1 when none; < -1 (a negative errno) when the
 * device could not say. */
static int device_inputs_changed(run_ctx *r, const avo_tensors *x, int64_t *elem, char *why, size_t wl)
{
    for (int i = 0; i < x->n; i++) {
        if (r->p->tensors[i].role != AVO_ROLE_INPUT)
            continue;
        int64_t first = -1;
        char err[300];
        int rc = avo_gpu_equal(r->gpu, i, x->elems[i], avo_problem_dtype_size(r->p->tensors[i].dtype), &first, err,
                               sizeof err);
        if (rc) {
            snprintf(why, wl, "the checker's input comparison: %s", err);
            return rc < -1 ? rc : -EIO;
        }
        if (first >= 0) {
            *elem = first;
            return i;
        }
    }
    return -1;
}

/* Output tensor i compared on the device, the host's rule
 * (avo_tensors_compare) applied to the sums that come back. Returns 0 or
 * a negative errno with the reason in why. */
static int device_compare(run_ctx *r, int i, int64_t n, avo_dtype d, avo_tolerance tol, avo_check *ck, char *why,
                          size_t wl)
{
    avo_gpu_cmp g;
    char err[300];
    /* A row subset's reference holds those rows only (call_ref_rows). */
    int rc = r->held_rows ? avo_gpu_compare_rows(r->gpu, i, r->row_elems[i], (int)d, &g, err, sizeof err)
                          : avo_gpu_compare(r->gpu, i, n, (int)d, &g, err, sizeof err);
    if (rc) {
        snprintf(why, wl, "the checker's output comparison: %s", err);
        return rc < 0 ? rc : -EIO;
    }
    memset(ck, 0, sizeof *ck);
    ck->got = g.worst >= 0 || g.nonfinite >= 0 ? avo_tensors_load(g.got, 0, d) : 0;
    ck->want = g.worst >= 0 || g.nonfinite >= 0 ? avo_tensors_load(g.want, 0, d) : 0;
    if (g.nonfinite >= 0) {
        ck->nonfinite = 1;
        ck->worst = g.nonfinite;
        ck->rel_l2 = ck->max_abs = INFINITY;
        return 0;
    }
    ck->worst = g.worst >= 0 ? g.worst : 0;
    ck->max_abs = g.max_abs;
    ck->rel_l2 = g.den > 0 ? sqrt(g.num) / sqrt(g.den) : sqrt(g.num);
    ck->pass = ck->rel_l2 <= tol.rel_l2 && ck->max_abs <= tol.max_abs;
    return 0;
}

/* The reference on config c's input set `set`, generated on the checker's
 * own device tensors (poisoned outputs), everything copied back to rx. */
static int call_ref_generated(run_ctx *r, int c, int set, avo_tensors *rx)
{
    unsigned outputs = 0;
    for (int k = 0; k < rx->n; k++)
        if (r->p->tensors[k].role == AVO_ROLE_OUTPUT)
            outputs |= 1u << k;
    harness_set_device_inputs(r, c, set);
    int ret = 0;
    avo_gpu_times times;
    char err[400];
    int rc = avo_gpu_run(r->gpu, (avo_gpu_fn)(uintptr_t)r->ref, rx->ptr, rx->bytes, rx->n, r->p->configs[c].size,
                         AVO_GPU_GEN_INPUTS | AVO_GPU_POISON, outputs, &ret, &times, err, sizeof err);
    if (rc)
        fprintf(stderr, "avo-harness: reference on the GPU: %s\n", err);
    return rc ? (ret ? ret : -1) : 0;
}

/* Whether a timed call's check compares a row subset (docs/evaluation.md,
 * "Row-subset checks"): the problem declares check.rows, the reference
 * has its row entry, the inputs are generated on the device, and the
 * sample is at most half of the config's rows (else a whole check costs
 * about as much, and drawing distinct rows would take long). */
static int rows_mode(const run_ctx *r)
{
    return r->dev_fill && r->ref_rows && r->rows_total > 0 && 2 * (int64_t)r->p->check_rows_sample <= r->rows_total;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* check.rows.sample distinct rows of the current config's, uniform, from
 * the checker's secret generator (drawn after the call returned, so the
 * candidate cannot know them), ascending. */
static int draw_rows(run_ctx *r)
{
    const int64_t want = r->p->check_rows_sample;
    if (r->rows_cap < want) {
        int64_t *nr = realloc(r->rows, (size_t)want * sizeof *nr);
        if (!nr)
            return -ENOMEM;
        r->rows = nr;
        r->rows_cap = want;
    }
    int64_t n = 0;
    while (n < want) {
        for (; n < want; n++) {
            const int64_t x = (int64_t)(avo_timing_rng_next(&r->rng) * (double)r->rows_total);
            r->rows[n] = x < r->rows_total ? x : r->rows_total - 1;
        }
        qsort(r->rows, (size_t)n, sizeof *r->rows, cmp_i64);
        int64_t u = 0;
        for (int64_t k = 0; k < n; k++)
            if (u == 0 || r->rows[k] != r->rows[u - 1])
                r->rows[u++] = r->rows[k];
        n = u;
    }
    r->nrows = n;
    return 0;
}

/* The reference's rows on config c's input set `set`: the inputs
 * generated on the checker's own device tensors, its outputs poisoned, a
 * fresh draw of rows (draw_rows) computed by the row entry. */
static int call_ref_rows(run_ctx *r, int c, int set, avo_tensors *rx)
{
    unsigned outputs = 0;
    for (int k = 0; k < rx->n; k++)
        if (r->p->tensors[k].role == AVO_ROLE_OUTPUT)
            outputs |= 1u << k;
    int rc = draw_rows(r);
    if (rc)
        return rc;
    harness_set_device_inputs(r, c, set);
    int ret = 0;
    avo_gpu_times times;
    char err[400];
    const int64_t *size = r->p->configs[c].size;
    rc = avo_gpu_run(r->gpu, NULL, rx->ptr, rx->bytes, rx->n, size,
                     AVO_GPU_GEN_INPUTS | AVO_GPU_POISON | AVO_GPU_PREPARE, outputs, &ret, &times, err, sizeof err);
    harness_trace("  check: rows' inputs generated");
    if (!rc)
        rc = avo_gpu_run_rows(r->gpu, r->ref_rows, size, r->rows, r->nrows, &ret, err, sizeof err);
    if (rc)
        fprintf(stderr, "avo-harness: reference's rows on the GPU: %s\n", err);
    return rc ? (ret ? ret : -1) : 0;
}

/* When a call of the lane driven now must have answered. The against's
 * hanging must not spend the candidate's time: its calls (and its load)
 * get AGAINST_LIMIT_FACTOR x the candidate's slowest round trip so far,
 * at least AGAINST_LIMIT_MIN_S, within the evaluation's deadline. */
static double lane_deadline(const run_ctx *r)
{
    if (r->ln->slot != LANE_AGAINST)
        return r->deadline;
    return fmin(r->pair_cutoff, avo_timing_now() + fmax(AGAINST_LIMIT_MIN_S, AGAINST_LIMIT_FACTOR * r->cand_rt_max));
}

/* One call of the entry point in the runner on the tensors of x (which live
 * in the shared region). Returns CHECK_OK with the candidate's return value
 * in *ret and the checker's own round-trip time, a CHECK_ code for a runner
 * that died, hung or forged answers, or a negative int (the checker's
 * failure). */
int harness_cand_call_flags(run_ctx *r, int c, const avo_tensors *x, unsigned flags, int *ret, double *rt,
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
    int rc = avo_runner_call(&r->ln->run, r->p->configs[c].size, r->p->nsizes, offs, bytes, x->n, flags, outputs,
                             lane_deadline(r), ret, rt, claimed, why, wl);
    if (r->ln->slot == LANE_CAND && *rt > r->cand_rt_max)
        r->cand_rt_max = *rt;
    switch (rc) {
    case AVO_RUNNER_OK:
        return CHECK_OK;
    case AVO_RUNNER_DIED:
        return CHECK_CRASH;
    case AVO_RUNNER_TIMEOUT:
        return CHECK_TIMEOUT;
    case AVO_RUNNER_PROTOCOL:
        return CHECK_FORGED;
    case AVO_RUNNER_FAULT:
        return CHECK_FAULT;
    default:
        return rc < 0 ? rc : -EIO;
    }
}

/* How timed calls started: "gated" (the stream held until the call had
 * queued its work) or "ungated" with the reason. */
static json_t *timing_start_json(const char *ungated_why)
{
    return ungated_why[0] ? json_pack("{s:s,s:s}", "mode", "ungated", "reason", ungated_why)
                          : json_pack("{s:s}", "mode", "gated");
}

static json_t *jreal(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int validate_reference(run_ctx *r, void *h, avo_kernel_fn ref, char *err, size_t errlen);

/* The checker's two areas (the call's pristine inputs, the reference's run
 * on them) page-locked for the CUDA reference's copies, as the runner's
 * region is. Pageable copies when pinning fails; ref_copies says which.
 * Only where the host copies are used (share_tensors). */
static void pin_areas(run_ctx *r)
{
    char note[240];
    r->area_pinned = avo_gpu_pin(r->gpu, r->area, r->area_bytes, r->ref_copies, sizeof r->ref_copies) == 0;
    if (r->area_pinned && avo_gpu_pin(r->gpu, r->ref_area, r->area_bytes, note, sizeof note) == 0)
        r->area_pinned = 2;
}

static void unpin_areas(run_ctx *r)
{
    if (r->area_pinned)
        avo_gpu_unpin(r->gpu, r->area);
    if (r->area_pinned == 2)
        avo_gpu_unpin(r->gpu, r->ref_area);
    r->area_pinned = 0;
}

/* Load the reference into this process (the runner, a fresh exec of its
 * own in namespaces of its own, never sees it), open the checker's GPU
 * context for a CUDA problem, and validate the reference against its
 * float64 twin. The reference then runs on demand: on the inputs of every
 * call that is checked. */
static int load_reference(run_ctx *r, const char *ref_so, char *err, size_t errlen)
{
    int rc;
    double t = avo_phases_now();
    r->ref_handle = dlopen(ref_so, RTLD_NOW | RTLD_LOCAL);
    if (!r->ref_handle) {
        const char *e = dlerror();
        avo_utf8_scrub((char *)e);
        snprintf(err, errlen, "reference invalid: cannot load it: %s", e ? e : "?");
        return AVO_HARNESS_EREFERENCE;
    }
    r->ref = (avo_kernel_fn)(uintptr_t)dlsym(r->ref_handle, "avo_reference");
    if (!r->ref) {
        snprintf(err, errlen, "reference invalid: it does not export avo_reference");
        return AVO_HARNESS_EREFERENCE;
    }
    if (r->cuda && r->p->check_rows_dims &&
        !(r->ref_rows = (avo_gpu_rows_fn)(uintptr_t)dlsym(r->ref_handle, "avo_reference_rows"))) {
        snprintf(err, errlen,
                 "reference invalid: the problem declares check.rows but the reference does not export "
                 "avo_reference_rows");
        return AVO_HARNESS_EREFERENCE;
    }
    avo_phases_lap(r->ph, "reference_load", &t);
    if (r->cuda) {
        if ((rc = avo_gpu_open(&r->gpu, err, errlen)))
            return rc == -ENOTSUP ? -ENOTSUP : -ENODEV;
        char name[256];
        int ma, mi, sms, l2;
        avo_gpu_describe(r->gpu, name, sizeof name, &ma, &mi, &sms, &l2, &r->max_mhz);
        r->gpu_info = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "name", name, "cc_major", ma, "cc_minor", mi, "sms", sms,
                                "l2_bytes", l2, "max_sm_mhz", (int)r->max_mhz);
        avo_phases_lap(r->ph, "gpu_context", &t);
    }
    return 0;
}

/* The reference validated against its float64 twin (validate_reference),
 * or its record read from the job's reference cache: the same reference
 * object, spec, device and job seed validated in an earlier evaluation on
 * this worker (the record is the worker's, out of every candidate's
 * reach, as the cached outputs are). A validation that passed is recorded
 * for the next evaluation. */
static int validate_or_recall(run_ctx *r, char *err, size_t errlen)
{
    double t = avo_phases_now();
    char note[sizeof r->ref_note];
    int rc = 0;
    if (avo_refcache_validated(&r->cache, note, sizeof note)) {
        r->ref_validated = 1;
        snprintf(r->ref_note, sizeof r->ref_note,
                 "%.380s; recalled from the reference cache (validated in an earlier evaluation of this job on this "
                 "worker)",
                 note);
    } else if ((rc = validate_reference(r, r->ref_handle, r->ref, err, errlen)) == 0 && r->ref_validated &&
               r->cache.dirfd >= 0) {
        /* A record not written costs the next evaluation a validation. */
        (void)avo_refcache_mark_validated(&r->cache, r->ref_note);
    }
    avo_phases_lap(r->ph, "reference_validation", &t);
    return rc;
}

/* What every call is held to, checked or not: its return value, nothing
 * written past a tensor's end. */
static int check_basic(run_ctx *r, int ret, const avo_tensors *x, char *why, size_t whylen)
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
    return CHECK_OK;
}

/* The reference's outputs in t (its non-input tensors): their buffers and
 * sizes, how many, and their mask. */
static int ref_outputs(const run_ctx *r, const avo_tensors *t, void **bufs, size_t *bytes, unsigned *mask)
{
    int n = 0;
    *mask = 0;
    for (int k = 0; k < t->n; k++) {
        if (r->p->tensors[k].role == AVO_ROLE_INPUT)
            continue;
        *mask |= 1u << k;
        bufs[n] = t->ptr[k];
        bytes[n++] = t->bytes[k];
    }
    return n;
}

/* Config c's cache file for a set: a stand-in's (screen.check_sizes) is
 * another computation and gets a name of its own. */
static void cache_name(const run_ctx *r, int c, int set, char name[AVO_REFCACHE_NAME])
{
    char config[80];
    snprintf(config, sizeof config, "%s%s", r->p->configs[c].name, r->stand_in ? "@check_sizes" : "");
    avo_refcache_name(&r->cache, config, set, name);
}

/* The kept checker's store (resident.h): device memory of its own context
 * where the reference's outputs live on the device, else host memory. */
static int res_dev_alloc(void *ctx, size_t bytes, void **out)
{
    char err[300];
    /* Never below a quarter of the device free: the candidates' runners,
     * and the other kept checkers a worker may hold (--serve-slots, up to
     * 16), need it more than a reference that a file can give again. */
    const size_t avail = avo_gpu_mem_available(ctx), total = avo_gpu_mem_total(ctx);
    if (avail < bytes || avail - bytes < total / 4) {
        *out = NULL;
        return -ENOMEM;
    }
    return avo_gpu_mem_alloc(ctx, bytes, out, err, sizeof err);
}

static void res_dev_release(void *ctx, void *p)
{
    avo_gpu_mem_free(ctx, p);
}

static int res_dev_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    char err[300];
    return avo_gpu_mem_copy(ctx, dst, src, bytes, err, sizeof err);
}

static int res_host_alloc(void *ctx, size_t bytes, void **out)
{
    (void)ctx;
    *out = malloc(bytes ? bytes : 1);
    return *out ? 0 : -ENOMEM;
}

static void res_host_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int res_host_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    memcpy(dst, src, bytes);
    return 0;
}

/* A kept checker's store: the cache's budget, and at most a sixteenth of
 * the memory it lives in, so that the pool of kept checkers a worker may
 * hold (four by default) leaves the candidates most of the GPU. */
static void resident_init(run_ctx *r)
{
    uint64_t budget = r->cache.max_bytes, mem = 0;
    avo_resident_mem m;
    if (r->dev_fill) {
        mem = avo_gpu_mem_total(r->gpu);
        m = (avo_resident_mem){res_dev_alloc, res_dev_release, res_dev_copy, r->gpu};
    } else {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        mem = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
        m = (avo_resident_mem){res_host_alloc, res_host_release, res_host_copy, NULL};
        /* The worker's address-space limit on a CPU checker: its later
         * evaluations' regions must still fit beside the store. */
        struct rlimit as;
        if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && budget > as.rlim_cur / 4)
            budget = as.rlim_cur / 4;
    }
    if (mem && budget > mem / 16)
        budget = mem / 16;
    if (getenv("AVO_HARNESS_NO_RESIDENT"))
        budget = 0;
    avo_resident_init(&r->res, budget, m);
    r->res_dev = r->dev_fill;
}

/* Config c's set `set` into the store from where the checker has the
 * reference's outputs now (its own device tensors, or rx). A failure
 * costs a later evaluation a cache read, nothing else. */
static void resident_put(run_ctx *r, const char *name, const avo_tensors *rx)
{
    if (!r->res.budget || r->res_dev != r->dev_fill)
        return;
    const void *src[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
    int n = 0;
    for (int k = 0; k < rx->n; k++) {
        if (r->p->tensors[k].role == AVO_ROLE_INPUT)
            continue;
        src[n] = r->dev_fill ? avo_gpu_tensor_ptr(r->gpu, k) : rx->ptr[k];
        if (!src[n])
            return;
        bytes[n++] = rx->bytes[k];
    }
    (void)avo_resident_put(&r->res, name, src, bytes, n);
}

/* Set's inputs generated again on the checker's device tensors, and its
 * reference outputs (src[j] for the j-th output in mask; rx's own where src
 * is NULL) copied in beside them: what a warm-up call is compared with. 0,
 * or -1 with the cache note saying what failed. */
static int upload_reference(run_ctx *r, int c, int set, const avo_tensors *rx, unsigned mask, const void *const *src,
                            const char *what)
{
    void *host[AVO_PROBLEM_MAX_TENSORS];
    for (int k = 0, j = 0; k < rx->n; k++)
        host[k] = (mask >> k) & 1 && src ? (void *)(uintptr_t)src[j++] : rx->ptr[k];
    int ret = 0;
    avo_gpu_times times;
    char err[300];
    harness_set_device_inputs(r, c, set);
    if (avo_gpu_run(r->gpu, NULL, host, rx->bytes, rx->n, r->p->configs[c].size,
                    AVO_GPU_GEN_INPUTS | AVO_GPU_COPY_OUTPUTS | AVO_GPU_PREPARE, mask, &ret, &times, err,
                    sizeof err) != 0) {
        snprintf(r->cache_note, sizeof r->cache_note, "%s: %.250s", what, err);
        r->cache_failed++;
        return -1;
    }
    return 0;
}

/* A warm-up set's reference outputs from the kept checker's store: 1 on a
 * hit (as ref_from_cache's), else 0. */
static int ref_from_resident(run_ctx *r, int c, int set, const char *name, avo_tensors *rx)
{
    if (!r->res.budget || r->res_dev != r->dev_fill)
        return 0;
    void *bufs[AVO_PROBLEM_MAX_TENSORS];
    const void *held[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
    unsigned mask;
    const int n = ref_outputs(r, rx, bufs, bytes, &mask);
    if (!avo_resident_get(&r->res, name, bytes, n, held))
        return 0;
    if (r->dev_fill) {
        if (upload_reference(r, c, set, rx, mask, held, "copying a resident reference"))
            return 0;
    } else {
        for (int j = 0; j < n; j++)
            memcpy(bufs[j], held[j], bytes[j]);
    }
    harness_trace("  cache: resident");
    r->res_hits++;
    return 1;
}

/* A warm-up set's reference outputs from the worker's cache (docs/evaluation.md,
 * "Reference cache"): into rx, and where the inputs live on the device into
 * the checker's device tensors beside the set's inputs generated again (what
 * the call's inputs and outputs are compared with). 1 on a hit, else 0 (the
 * reference must run; a corrupt file is counted and rewritten then). */
static int ref_from_cache(run_ctx *r, int c, int set, avo_tensors *rx)
{
    if (!r->cache_cfg || !job_set(set))
        return 0;
    void *bufs[AVO_PROBLEM_MAX_TENSORS];
    const void *mapped[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
    unsigned mask;
    char name[AVO_REFCACHE_NAME];
    const int n = ref_outputs(r, rx, bufs, bytes, &mask);
    cache_name(r, c, set, name);
    if (ref_from_resident(r, c, set, name, rx)) {
        r->cache_hits++;
        return 1;
    }
    /* Outputs that live on the device cross from the file's own pages
     * (mapped, never copied into the checker's area first): the host copy
     * would be read by nothing but the upload. */
    avo_refcache_mapping map = {0};
    int rc = r->dev_fill ? avo_refcache_map(&r->cache, name, bytes, n, &map, mapped) : -EOPNOTSUPP;
    const int in_area = rc == -EOPNOTSUPP; /* read into rx, not mapped */
    if (in_area)
        rc = avo_refcache_load(&r->cache, name, bufs, bytes, n);
    if (rc == -EBADMSG)
        r->cache_corrupt++;
    else if (rc && rc != -ENOENT)
        r->cache_failed++;
    if (rc)
        return 0;
    harness_trace("  cache: %s and summed", in_area ? "read" : "mapped");
    if (r->dev_fill) {
        /* The upload reads the outputs' host pointers only: those point
         * into the read-only mapping (or the area the file was read into). */
        rc = upload_reference(r, c, set, rx, mask, in_area ? NULL : mapped, "uploading a cached reference");
        avo_refcache_unmap(&map);
        harness_trace("  cache: %s", rc ? "upload failed" : "uploaded");
        if (rc)
            return 0;
    }
    resident_put(r, name, rx);
    r->cache_hits++;
    return 1;
}

/* After the reference ran on a warm-up set: its outputs into the cache
 * (fetched from the checker's device tensors first where the inputs live
 * on the device). A failure costs the next evaluation a recomputation,
 * nothing else. */
static void ref_to_cache(run_ctx *r, int c, int set, avo_tensors *rx)
{
    if (!r->cache_cfg || !job_set(set))
        return;
    void *bufs[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
    unsigned mask;
    char name[AVO_REFCACHE_NAME], err[300];
    const int n = ref_outputs(r, rx, bufs, bytes, &mask);
    r->cache_misses++;
    if (r->dev_fill) {
        int ret = 0;
        avo_gpu_times times;
        if (avo_gpu_run(r->gpu, NULL, rx->ptr, rx->bytes, rx->n, r->p->configs[c].size, AVO_GPU_FETCH, mask, &ret,
                        &times, err, sizeof err) != 0) {
            snprintf(r->cache_note, sizeof r->cache_note, "fetching a reference to cache it: %.250s", err);
            r->cache_failed++;
            return;
        }
    }
    cache_name(r, c, set, name);
    resident_put(r, name, rx);
    int rc = avo_refcache_store(&r->cache, name, (const void *const *)bufs, bytes, n);
    if (rc) {
        snprintf(r->cache_note, sizeof r->cache_note, "writing a cache file: %s", strerror(-rc));
        r->cache_failed++;
    }
}

/* Whether config c's warm-up references go through the cache: not when
 * there is none, and not when its K sets' outputs exceed the budget (then
 * they are computed in every evaluation, and the note says so). */
static void cache_config(run_ctx *r, int c)
{
    r->cache_hits = r->cache_misses = r->cache_corrupt = r->cache_failed = r->res_hits = 0;
    r->cache_note[0] = 0;
    r->cache_cfg = 0;
    if (r->cache.dirfd < 0)
        return;
    double need = 0;
    for (int k = 0; k < r->p->ntensors; k++) {
        int64_t elems = 0;
        if (r->p->tensors[k].role != AVO_ROLE_INPUT && avo_problem_tensor_elems(r->p, c, k, &elems, NULL, 0) == 0)
            need += (double)elems * (double)avo_problem_dtype_size(r->p->tensors[k].dtype);
    }
    need *= r->nsets;
    if (need > (double)r->cache.max_bytes) {
        snprintf(r->cache_note, sizeof r->cache_note,
                 "not cached: its %d warm-up sets' reference outputs (%.1f MB) exceed the cache's budget (%.1f MB); "
                 "computed in every evaluation",
                 r->nsets, need / 1e6, (double)r->cache.max_bytes / 1e6);
        return;
    }
    r->cache_cfg = 1;
}

/* Before config c's first call, in every mode: its check figures and
 * reference counts cleared, its warm-up sets' order drawn, whether they go
 * through the cache. */
static void config_begin(run_ctx *r, int c)
{
    r->worst_rel_l2 = r->worst_max_abs = 0;
    r->refs_computed = r->refs_reused = 0;
    r->ref_run_s = 0;
    r->refs_timed = 0;
    r->row_checks = 0;
    r->rows_total = 0;
    /* What the checker holds is another config's, or this one's at other
     * sizes (a stand-in checked before the screen). */
    r->held_c = -1;
    if (r->ref_rows && avo_problem_rows_at(r->p, r->p->configs[c].size, &r->rows_total, r->row_elems, NULL, 0) != 0)
        r->rows_total = 0;
    draw_warm_order(r);
    cache_config(r, c);
}

/* Every output of a checked call against the reference's (rx, or the
 * checker's device tensors), the worst errors kept for the config.
 * CHECK_OK, CHECK_WRONG with the first failing element in why, or the
 * device comparison's negative errno. */
static int compare_outputs(run_ctx *r, const avo_tensors *x, const avo_tensors *rx, char *why, size_t whylen)
{
    const avo_problem *p = r->p;
    int res = CHECK_OK;
    for (int i = 0; i < p->ntensors && res == CHECK_OK; i++) {
        if (p->tensors[i].role == AVO_ROLE_INPUT)
            continue;
        avo_dtype d = p->tensors[i].dtype;
        avo_tolerance tol = p->tol[d];
        avo_check ck;
        if (r->dev_fill) {
            int rc = device_compare(r, i, x->elems[i], d, tol, &ck, why, whylen);
            if (rc)
                return rc;
        } else {
            avo_tensors_compare(x->ptr[i], rx->ptr[i], x->elems[i], d, tol, &ck);
        }
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
        res = CHECK_WRONG;
    }
    return res;
}

/* A checked call (of config c, on input set `set`): its inputs in the
 * checker's pristine copy (made again from the seed for CUDA; the call's
 * own, in the shared region, are the candidate's to read, not to change),
 * the reference run on them (in the checker, while the runner is frozen),
 * then every output compared. The reference's outputs stay where they are
 * (rx, or the checker's device tensors) and are reused by the next check
 * of the same set (r->held_c, r->held_set): the inputs' check and the
 * comparison still run in full. */
static int check_outputs(run_ctx *r, int c, int set, int timed, const avo_tensors *x, avo_tensors *pristine,
                         avo_tensors *rx, double *ref_s, char *why, size_t whylen)
{
    const avo_problem *p = r->p;
    double t = avo_phases_now();
    int64_t elem;
    int ti = -1, ret = 0;
    const int rows = timed && rows_mode(r);
    const int held = r->held_c == c && r->held_set == set && r->held_rows == rows;
    if (r->dev_fill) {
        /* The reference on the call's inputs generated again on the
         * checker's own device tensors; they stay there with its outputs
         * and are the pristine copy the call's fetched inputs must equal. */
        const double t0 = t;
        if (rows)
            r->row_checks++;
        if (!held) {
            r->held_c = -1;
            r->held_rows = rows;
            if (rows) {
                ret = call_ref_rows(r, c, set, rx);
                r->refs_computed++;
                if (ret == 0)
                    r->held_c = c, r->held_set = set;
            } else if (ref_from_cache(r, c, set, rx)) {
                r->held_c = c, r->held_set = set;
            } else {
                ret = call_ref_generated(r, c, set, rx);
                r->refs_computed++;
                if (ret == 0) {
                    r->held_c = c, r->held_set = set;
                    ref_to_cache(r, c, set, rx);
                }
            }
        } else {
            r->refs_reused++;
        }
        avo_phases_lap(r->ph, "reference", &t);
        *ref_s = t - t0;
        harness_trace("  check: reference (%s)", held ? "held" : rows ? "rows" : "whole or cached");
        if (ret == 0 && (ti = device_inputs_changed(r, x, &elem, why, whylen)) < -1)
            return ti;
        avo_phases_lap(r->ph, "checks", &t);
        harness_trace("  check: inputs compared");
    } else {
        if (r->cuda) {
            avo_tensors_fill(pristine, p, set_seed(r, set), c, set);
            avo_phases_lap(r->ph, "inputs", &t);
        }
        ti = avo_tensors_inputs_changed(x, pristine, p, &elem);
        avo_phases_lap(r->ph, "checks", &t);
        if (ti < 0 && held) {
            r->refs_reused++;
        } else if (ti < 0) {
            const double t0 = t;
            r->held_c = -1;
            r->held_rows = 0;
            if (ref_from_cache(r, c, set, rx)) {
                r->held_c = c, r->held_set = set;
            } else {
                for (int k = 0; k < p->ntensors; k++)
                    memcpy(rx->ptr[k], pristine->ptr[k], pristine->bytes[k]);
                avo_tensors_poison(rx, p);
                ret = call_ref(r, r->ref, p->configs[c].size, rx);
                r->refs_computed++;
                if (ret == 0) {
                    r->held_c = c, r->held_set = set;
                    ref_to_cache(r, c, set, rx);
                }
            }
            avo_phases_lap(r->ph, "reference", &t);
            *ref_s = t - t0;
            harness_trace("  check: reference (%s)", r->held_c == c ? "run" : "failed");
        }
    }
    if (ti >= 0) {
        snprintf(why, whylen, "input %s[%lld] was modified by the candidate", p->tensors[ti].name, (long long)elem);
        return CHECK_INPUTS;
    }
    if (ret != 0) {
        snprintf(why, whylen, "the reference returned %d", ret);
        return AVO_HARNESS_EREFERENCE;
    }
    const int res = compare_outputs(r, x, rx, why, whylen);
    if (res < 0)
        return res;
    avo_phases_lap(r->ph, "checks", &t);
    return res;
}

/* The reference's row entry on the validation's sizes and inputs (t, as
 * the whole run left them; d the float64 twin's run): about half of the
 * rows, drawn from the checker's generator, outputs poisoned first, each
 * drawn row compared with the twin's under the same tolerance. */
static int validate_rows(run_ctx *r, const int64_t *size, const char *where, const avo_tensors *t, const avo_tensors *d,
                         char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    int64_t total = 0, per[AVO_PROBLEM_MAX_TENSORS], n = 0;
    int rc = avo_problem_rows_at(p, size, &total, per, err, errlen);
    if (rc)
        return rc;
    int64_t *rows = malloc((size_t)total * sizeof *rows);
    unsigned char *got = NULL;
    double *want = NULL;
    if (!rows)
        return -ENOMEM;
    for (int64_t x = 0; x < total; x++)
        if (avo_timing_rng_next(&r->rng) < 0.5 || (x == total - 1 && n == 0))
            rows[n++] = x;
    unsigned outputs = 0;
    for (int k = 0; k < p->ntensors; k++)
        if (p->tensors[k].role == AVO_ROLE_OUTPUT)
            outputs |= 1u << k;
    int ret = 0;
    avo_gpu_times tm;
    char why[400] = "";
    rc = avo_gpu_run(r->gpu, NULL, t->ptr, t->bytes, t->n, size, AVO_GPU_COPY_IN | AVO_GPU_POISON | AVO_GPU_PREPARE,
                     outputs, &ret, &tm, why, sizeof why);
    if (!rc)
        rc = avo_gpu_run_rows(r->gpu, r->ref_rows, size, rows, n, &ret, why, sizeof why);
    if (!rc)
        rc = avo_gpu_run(r->gpu, NULL, t->ptr, t->bytes, t->n, size, AVO_GPU_FETCH, outputs, &ret, &tm, why,
                         sizeof why);
    if (rc) {
        snprintf(err, errlen, "reference invalid: on %s avo_reference_rows failed: %s", where, why);
        rc = AVO_HARNESS_EREFERENCE;
        goto cleanup;
    }
    for (int i = 0; i < p->ntensors && !rc; i++) {
        if (p->tensors[i].role == AVO_ROLE_INPUT)
            continue;
        const size_t es = avo_problem_dtype_size(p->tensors[i].dtype), row = (size_t)per[i];
        free(got), free(want);
        got = malloc((size_t)n * row * es);
        want = malloc((size_t)n * row * sizeof *want);
        if (!got || !want) {
            rc = -ENOMEM;
            break;
        }
        for (int64_t k = 0; k < n; k++) {
            memcpy(got + (size_t)k * row * es, (unsigned char *)t->ptr[i] + (size_t)rows[k] * row * es, row * es);
            memcpy(want + (size_t)k * row, (double *)d->ptr[i] + (size_t)rows[k] * row, row * sizeof *want);
        }
        avo_check ck;
        avo_tolerance tol = p->tol[p->tensors[i].dtype];
        avo_tensors_compare_f64(got, p->tensors[i].dtype, want, n * per[i], tol, &ck);
        if (!ck.pass) {
            const int64_t at = rows[ck.worst / per[i]] * per[i] + ck.worst % per[i];
            snprintf(err, errlen,
                     "reference invalid: on %s avo_reference_rows disagrees with avo_reference_f64 on %lld of %lld "
                     "rows: %s[%lld] = %.9g vs %.9g, rel_l2 %.3g (bound %.3g), max_abs %.3g (bound %.3g)",
                     where, (long long)n, (long long)total, p->tensors[i].name, (long long)at, ck.got, ck.want,
                     ck.rel_l2, tol.rel_l2, ck.max_abs, tol.max_abs);
            rc = AVO_HARNESS_EREFERENCE;
        }
    }
cleanup:
    free(rows);
    free(got);
    free(want);
    return rc;
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
                     where, p->tensors[i].name, (long long)ck.worst, ck.got, ck.want, ck.rel_l2, tol.rel_l2, ck.max_abs,
                     tol.max_abs);
            rc = AVO_HARNESS_EREFERENCE;
            goto cleanup;
        }
    }
    if (r->cuda && r->ref_rows && (rc = validate_rows(r, size, where, &t, &d, err, errlen)))
        goto cleanup;
    r->ref_validated = 1;
    snprintf(r->ref_note, sizeof r->ref_note, "within tolerance of avo_reference_f64 on %s%s", where,
             r->ref_rows ? " (avo_reference_rows too, on a random half of its rows)" : "");
cleanup:
    avo_tensors_free(&t);
    avo_tensors_free(&d);
    return rc;
}

static json_t *config_json(const avo_problem *p, int c, const avo_stats *st, double score, double gflops, double gbps,
                           double claimed, json_t *counters, const run_ctx *r)
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
                     p->configs[c].name, "score", jreal(score), "median_s", jreal(st->median), "min_s", jreal(st->min),
                     "max_s", jreal(st->max), "stddev_s", jreal(st->stddev), "rse", jreal(st->rse), "runs", st->runs,
                     "gflops", p->flops ? jreal(gflops) : json_null(), "gbps", p->bytes ? jreal(gbps) : json_null(),
                     "check", "rel_l2", jreal(r->worst_rel_l2), "max_abs", jreal(r->worst_max_abs),
                     "runner_reported_median_s", jreal(claimed), "roofline_fraction", roof, "counters",
                     counters ? counters : json_null());
}

/* The shared region past config c's tensors and their guard zones (the
 * room a larger config's take, and a CUDA region's counters report)
 * cleared before every call: it is the one place both runners of a pair
 * can write that no check reads, so an against could leave its outputs
 * there, keyed by its inputs, for the candidate running right after it
 * on the same set (test_paired.sh, collude.c SHM_STASH; the order test
 * catches that only with 8 pairs each way, and a GPU config often has 5).
 * Whole pages are punched out of the memfd (both mappings then read
 * zeros; a range nobody wrote costs a system call), the rest of the last
 * page is zeroed. Not on a GPU: there the region is page-locked for the
 * device's copies (checker and runner), and a punched pinned page leaves
 * the device reading a page neither process maps any more; zeroing it
 * instead costs tens of MB a call (docs/evaluation.md, Residual risks). */
static void clear_slack(run_ctx *r, int c)
{
    if (r->cuda || r->keep_slack || r->shm_fd < 0 || !r->shm)
        return;
    const size_t end = avo_tensors_span(r->p, c);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t whole = (end + page - 1) / page * page;
    if (end >= r->shm_bytes)
        return;
    memset((unsigned char *)r->shm + end, 0, (whole < r->shm_bytes ? whole : r->shm_bytes) - end);
    if (whole < r->shm_bytes &&
        fallocate(r->shm_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)whole, (off_t)(r->shm_bytes - whole)))
        memset((unsigned char *)r->shm + whole, 0, r->shm_bytes - whole);
}

/* Call i of config c laid out the same way for every call: its input set
 * (call_set),
 * outputs poisoned, (CPU) the caches flushed; *tp lapped into r->ph.
 * CPU: filled in the checker's copy (on all its CPUs) and copied in on the
 * pinned CPU, as the flush expects: a fill straight into the shared region
 * left lines of the inputs dirty in other cores' private caches, which the
 * flush does not reach (sgemm at 512 timed 3-5% slower). CUDA: straight in
 * (the device gets them). */
static void lay_out_call(run_ctx *r, int c, int i, avo_tensors *x, avo_tensors *pristine, double *tp)
{
    const avo_problem *p = r->p;
    const int set = call_set(r, i);
    clear_slack(r, c);
    /* CPU: filled in the checker's copy (on all its CPUs) and copied
     * in on the pinned CPU, as the flush expects: a fill straight into
     * the shared region left lines of the inputs dirty in other cores'
     * private caches, which the flush does not reach (sgemm at 512
     * timed 3-5% slower). CUDA: straight in (the device gets them), or
     * generated and poisoned on the device by the call's prep. */
    if (r->dev_fill) {
        harness_set_device_inputs(r, c, set);
    } else if (r->cuda) {
        avo_tensors_fill(x, p, set_seed(r, set), c, set);
    } else {
        avo_tensors_fill(pristine, p, set_seed(r, set), c, set);
        avo_tensors_copy_inputs(x, pristine, p);
    }
    if (!r->dev_fill)
        avo_tensors_poison(x, p);
    avo_phases_lap(r->ph, "inputs", tp);
    if (!r->cuda) {
        harness_trace("  inputs");
        avo_timing_flusher_run(&r->fl);
        avo_phases_lap(r->ph, "flush", tp);
        harness_trace("  flush");
    }
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

/* One lane's calls of one config (lane_begin, lane_call per call, lane_stop
 * after each, lane_end): what run_config and run_config_paired share, so a
 * lane is held to the same rules whichever loop drives it. */
typedef struct {
    lane *ln;
    int trusted; /* the vendor baseline's: checked on its warm-up calls only */
    config_run out;
    int cap, n, nc, charged, force, floored, gate_busy, gate_charged, rt_n;
    unsigned clk_min, clk_max;
    double charged_max, gate_charged_max, spent, rt_sum;
    busy_stats busy;
    double *t, *rts, *tails, *tc, *cl, *proto, *host, *entry;
    int sampled;    /* the latest call gave a sample, ... */
    double last;    /* ... this one */
    int give_up;    /* CUDA: every run so far under the clock floor */
    int cal_fresh;  /* CUDA: calibrated for this config, or ... */
    double cal_age; /* ... its calibration kept, this old at the config's start */
} lane_run;

/* CUDA: every call's prep (untimed, a command of its own: the inputs
 * generated on the device, or copied in), then the call, then (inputs made
 * on the host) its tensors back (another command). */
#define GPU_STEPS (AVO_GPU_FLUSH | (r->dev_fill ? AVO_GPU_GEN_INPUTS : AVO_GPU_COPY_INPUTS) | AVO_GPU_POISON)

static int lane_begin(run_ctx *r, lane_run *lr, lane *ln, int c, const avo_tensors *x, char *why, size_t wl)
{
    memset(lr, 0, sizeof *lr);
    lr->ln = r->ln = ln;
    lr->trusted = ln->slot == LANE_BASE;
    lr->cap = 64;
    lr->out.q = lr->trusted ? 0 : 1;
    lr->out.checked_median = NAN;
    lr->out.idle_cpu_s = -1;
    lr->out.cpu_known = lr->out.checker_wait_known = !r->cuda;
    double **arr[] = {&lr->t, &lr->rts, &lr->tails, &lr->tc, &lr->cl, &lr->proto, &lr->host, &lr->entry};
    for (size_t k = 0; k < sizeof arr / sizeof *arr; k++)
        if (!(*arr[k] = malloc((size_t)lr->cap * sizeof **arr[k])))
            return -ENOMEM;
    if (r->cuda && (lr->cal_fresh = gputime_calibration_stale(r, &lr->cal_age))) {
        double tp = avo_phases_now();
        int res = gputime_calibrate(r, c, x, GPU_STEPS, why, wl);
        avo_phases_lap(r->ph, "call_calibration", &tp);
        if (res != CHECK_OK)
            return res;
    }
    harness_trace("config %s: %s", r->p->configs[c].name, lr->cal_fresh ? "calibrated" : "calibration kept");
    return CHECK_OK;
}

/* What one call of a lane measured, and the sample made of it (lane_call's
 * steps). */
typedef struct {
    int ret;
    double rt, reply_s, cpu0; /* cpu0: the runner's CPU time before the call (CPU; -1 unknown) */
    unsigned mhz;
    avo_gpu_times ev;
    double sample, excess, protocol;
} call_meas;

/* The call itself in the lane's runner, its times into m. */
static int lane_issue(run_ctx *r, lane_run *lr, int c, int i, avo_tensors *x, call_meas *m, char *sub, size_t sl)
{
    if (r->cuda)
        return gputime_timed_call(r, c, i, x, GPU_STEPS, &m->ret, &m->rt, &m->reply_s, &m->mhz, &m->ev, &lr->busy, sub,
                                  sl);
    /* Read at the freezes around the call, so it is the call's own. */
    m->cpu0 = r->ln->run.stopped ? r->ln->run.cpu_s : -1;
    const int res = harness_cand_call_flags(r, c, x, 0, &m->ret, &m->rt, &m->ev, sub, sl);
    harness_trace("  run (round trip %.3f ms)", m->rt * 1e3);
    return res;
}

/* Whether the call is checked is decided now that it is over: the
 * candidate cannot know. An against that runs second in its pair takes the
 * candidate's draw (common random numbers), so both are checked on the same
 * pairs wherever both would be and one reference run serves both. Never the
 * other way: a candidate running second could see, in the time since its
 * last call, whether a reference ran for the against just before it, and
 * so predict its own check; its draw is always its own. */
static double lane_draw(run_ctx *r, const lane_run *lr)
{
    double draw = r->pair_open && lr->ln->slot == LANE_AGAINST ? r->pair_draw : NAN;
    if (isnan(draw)) {
        draw = avo_timing_rng_next(&r->rng);
        if (r->pair_open && lr->ln->slot == LANE_CAND)
            r->pair_draw = draw;
    }
    return draw;
}

/* Call i's outputs checked (check_outputs), counted in the lane's checks. */
static int lane_check(run_ctx *r, lane_run *lr, int c, int i, const avo_tensors *x, avo_tensors *pristine,
                      avo_tensors *rx, char *sub, size_t sl)
{
    double ref_s = 0;
    const int runs0 = r->refs_computed;
    const int res = check_outputs(r, c, call_set(r, i), i >= r->nsets, x, pristine, rx, &ref_s, sub, sl);
    /* A check that reused the pair's reference run cost none: counted
     * as free it would halve the measured cost of a reference, double
     * q (call time over reference time) and spend the saving on more
     * checks. q weighs a check by a reference run's own cost: with row
     * subsets, a timed call's (a warm-up's whole run, on a cache miss, is
     * not what q buys). */
    if (r->refs_computed > runs0 && (i >= r->nsets || !rows_mode(r))) {
        r->ref_run_s += ref_s;
        r->refs_timed++;
    }
    lr->out.checked++;
    if (i >= r->nsets)
        lr->out.random_checks++;
    return res;
}

/* A timed CUDA call's sample from its events (m->sample, m->excess,
 * m->protocol), with *keep. No sample (*keep 0) when it holds the gate's
 * time limit (the rest is timed ungated: the recalibration's result is
 * returned) or ran under the clock floor (CHECK_OK). */
static int lane_gpu_sample(run_ctx *r, lane_run *lr, int c, const avo_tensors *x, call_meas *m, int *keep, char *why,
                           size_t wl)
{
    const avo_gpu_times *ev = &m->ev;
    const unsigned mhz = m->mhz;
    char sub[400];
    int res;
    *keep = 0;
    if (ev->notes & AVO_GPU_NOTE_GATE_TIMEOUT) {
        /* The sample holds the gate's time limit: drop it and time
         * the rest of the evaluation from an ungated start. */
        if ((res = gputime_go_ungated(r, c, x, GPU_STEPS, "the entry point waits on its own work before returning", sub,
                                      sizeof sub)) != CHECK_OK &&
            res > 0)
            snprintf(why, wl, "recalibrating without the gate: %s", sub);
        return res;
    }
    if ((ev->notes & AVO_GPU_NOTE_UNGATED) && !r->ln->tm.ungated)
        snprintf(r->ln->tm.ungated_why, sizeof r->ln->tm.ungated_why, "the gate could not be set up in the runner");
    if (mhz) {
        lr->clk_min = lr->clk_min && lr->clk_min < mhz ? lr->clk_min : mhz;
        lr->clk_max = lr->clk_max > mhz ? lr->clk_max : mhz;
    }
    if (lr->busy.call_unsure) {
        /* A busy probe of this call could not tell the GPU's wait from
         * the checker's wait for its CPU (gputime_busy_verdict): no
         * sample from it. */
        lr->busy.call_unsure = 0;
        lr->busy.dropped++;
        return CHECK_OK;
    }
    if (r->max_mhz && mhz && mhz < MIN_CLOCK_FRACTION * r->max_mhz) {
        /* A GPU held under its clocks by the host is not the
         * candidate's doing: give up (no usable sample) rather
         * than run to the deadline. */
        lr->give_up = ++lr->out.discarded >= MAX_DISCARDED && lr->n == 0;
        return CHECK_OK;
    }
    m->sample = avo_timing_gpu_sample(ev->seconds, ev->tail_s, r->ln->tm.stream_min, r->ln->tm.tail_allow, TAIL_SLACK,
                                      &m->excess);
    const gpu_preload *pre = &r->ln->pre[r->ln->tm.ungated];
    if (!r->ln->tm.ungated) {
        /* The GPU busy when the call began: with the candidate's
         * own work, launched before the start mark. */
        const double over = ev->gate_wait_s - pre->gate_wait_max - GATE_WAIT_SLACK;
        lr->gate_busy += (ev->notes & AVO_GPU_NOTE_GATE_BUSY) != 0;
        if (over > 0) {
            m->sample += over;
            lr->gate_charged++;
            lr->gate_charged_max = fmax(lr->gate_charged_max, over);
        }
    }
    const double floor_s = (m->reply_s - pre->rt_over_max) / CLAIM_FACTOR;
    m->protocol = m->reply_s - ev->seconds;
    if (m->sample < floor_s) {
        m->sample = floor_s;
        lr->floored++;
    }
    *keep = 1;
    return CHECK_OK;
}

/* CPU, one CPU shared: the runner's group's CPU time beyond the call's
 * round trip charged to its sample. */
static void lane_charge_outside(const run_ctx *r, config_run *out, call_meas *m)
{
    if (!(!r->cuda && r->one_cpu && m->cpu0 >= 0 && r->ln->run.stopped && r->ln->run.cpu_s >= 0))
        return;
    /* The group was thawed just before the clock started, on the
     * checker's own CPU: a thread of the candidate's that takes the CPU
     * in that moment works outside the window (flush_thread.c, once it
     * could no longer leave the CPU: 4-10x its twin). Its CPU time is
     * not: what the group used beyond the round trip is charged to the
     * call. The runner's threads share one CPU, so an honest call uses
     * no more CPU than its wall time (the slack covers the accounting's
     * granularity). Not where the runner may use several CPUs
     * (AVO_NO_PIN): there CPU time beyond the wall is parallel work. */
    const double outside = (r->ln->run.cpu_s - m->cpu0) - m->rt;
    if (outside > CPU_OUTSIDE_SLACK_S) {
        m->sample += outside;
        out->outside_runs++;
        out->outside_max_s = fmax(out->outside_max_s, outside);
    }
}

/* The call's sample (checked or not) into the lane's buffers. 0, or
 * -ENOMEM. */
static int lane_record(const run_ctx *r, lane_run *lr, const call_meas *m, int check)
{
    config_run *out = &lr->out;
    if (lr->n == lr->cap) {
        lr->cap *= 2;
        if (grow(&lr->t, lr->cap) || grow(&lr->rts, lr->cap) || grow(&lr->tails, lr->cap) || grow(&lr->tc, lr->cap) ||
            grow(&lr->cl, lr->cap) || grow(&lr->proto, lr->cap) || grow(&lr->host, lr->cap) ||
            grow(&lr->entry, lr->cap))
            return -ENOMEM;
    }
    const int n = lr->n;
    const double sample = m->sample;
    lr->rts[n] = m->rt;
    lr->proto[n] = m->protocol;
    lr->host[n] = m->ev.host_s;
    lr->entry[n] = m->ev.entry_s;
    lr->tails[n] = m->ev.tail_s;
    lr->cl[n] = m->ev.seconds;
    if (check)
        lr->tc[lr->nc++] = sample;
    lr->t[lr->n++] = sample;
    lr->sampled = 1;
    lr->last = sample;
    if (m->excess > 0) {
        lr->charged++;
        lr->charged_max = fmax(lr->charged_max, m->excess);
    }
    if (!r->cuda) {
        /* Wall time the runner was not on a CPU shows a loaded host. */
        out->wall_s += sample;
        /* The checker's own waits for its CPU (another process had it):
         * a busy neighbour, shown, not taken out (docs/evaluation.md,
         * Residual risks, "A busy neighbour on the harness's CPU"). */
        if (r->ln->run.wait_s >= 0)
            out->checker_wait_s += r->ln->run.wait_s;
        else
            out->checker_wait_known = 0;
        if (m->cpu0 >= 0 && r->ln->run.stopped && r->ln->run.cpu_s >= 0)
            out->cpu_s += r->ln->run.cpu_s - m->cpu0;
        else
            out->cpu_known = 0;
    }
    return 0;
}

/* Call i of config c in the lane's runner, on input set i of the config's
 * stream: laid out, poisoned and (CPU) flushed, timed, held to every rule.
 * CHECK_OK with lr->sampled when it gave a sample (warm-up calls, CUDA
 * calls under the clock floor and a gate's time limit give none), else the
 * CHECK_ code or a negative int, with why. */
/* The counters a lane's timed calls run under (CPU problems): the
 * candidate's, read into its result, or the against's; NULL for others. */
static avo_counters *lane_counters(run_ctx *r, const lane *ln)
{
    if (r->cuda)
        return NULL;
    if (ln->slot == LANE_CAND)
        return r->ctr_open ? &r->ctr : NULL;
    return ln->slot == LANE_AGAINST && r->actr_open ? &r->actr : NULL;
}

static int lane_call(run_ctx *r, lane_run *lr, int c, int i, avo_tensors *x, avo_tensors *pristine, avo_tensors *rx,
                     char *why, size_t wl)
{
    const avo_problem *p = r->p;
    config_run *out = &lr->out;
    const int warm = r->nsets, trusted = lr->trusted;
    avo_counters *counted = lane_counters(r, lr->ln);
    r->ln = lr->ln;
    lr->sampled = 0;
    const double t_begin = avo_timing_now();
    double tp = t_begin;
    lay_out_call(r, c, i, x, pristine, &tp);
    if (i == warm && counted)
        avo_counters_start(counted);
    call_meas m = {.cpu0 = -1};
    char sub[400];
    int res = lane_issue(r, lr, c, i, x, &m, sub, sizeof sub);
    if (res == CHECK_OK)
        res = check_basic(r, m.ret, x, sub, sizeof sub);
    avo_phases_lap(r->ph, "calls", &tp);
    if (i >= warm)
        lr->spent += tp - t_begin;
    /* The GPU ran the entry's kernels for the call's own stream time
     * (a sample holding the gate's time limit says nothing of it). */
    if (r->cuda && res == CHECK_OK && !(m.ev.notes & AVO_GPU_NOTE_GATE_TIMEOUT)) {
        r->gpu_s[lr->ln->slot] += m.ev.seconds - m.ev.tail_s;
        r->gpu_calls[lr->ln->slot]++;
    }
    lr->rt_sum += m.rt;
    lr->rt_n++;
    out->calls = i + 1;
    const double draw = lane_draw(r, lr);
    const int check = res == CHECK_OK && (i < warm || (!trusted && (lr->force || draw < out->q)));
    if (check)
        res = lane_check(r, lr, c, i, x, pristine, rx, sub, sizeof sub);
    harness_trace("config %s lane %d call %d%s", p->configs[c].name, lr->ln->slot, i, check ? " (checked)" : "");
    if (res != CHECK_OK) {
        out->fail_call = i;
        if (res > 0)
            snprintf(why, wl, "%s", sub);
        return res;
    }
    if (!trusted && i + 1 >= warm)
        out->q = avo_timing_check_rate(lr->rt_sum / lr->rt_n, r->refs_timed ? r->ref_run_s / r->refs_timed : 0,
                                       CHECK_Q_MIN);
    if (i < warm)
        return CHECK_OK;
    if (r->cuda) {
        int keep;
        res = lane_gpu_sample(r, lr, c, x, &m, &keep, why, wl);
        if (!keep)
            return res;
    } else if (avo_timing_cpu_sample(m.rt, r->ln->overhead, &m.sample) != 0) {
        out->fail_call = i;
        snprintf(why, wl,
                 "call %d came back in %.3g us, faster than an empty round trip (%.3g us, measured before the "
                 "candidate loaded): the time was not the call's",
                 i, m.rt * 1e6, r->ln->overhead * 1e6);
        return CHECK_FORGED;
    }
    lane_charge_outside(r, out, &m);
    if (lane_record(r, lr, &m, check))
        return -ENOMEM;
    return CHECK_OK;
}

/* Whether the lane's random checks are done (the stopping rule's
 * checks_done). */
static int lane_checks_done(const lane_run *lr)
{
    if (lr->trusted)
        return 1;
    if (lr->out.random_checks < CHECK_K_MIN)
        return 0;
    return lr->out.random_checks >= CHECK_K_JUDGE || !(lr->out.st.median > 0) ||
           avo_timing_checked_consistent(lr->tc, lr->nc, lr->out.st.median, CONSISTENCY_FACTOR) == 0;
}

/* After a sample: the stopping rule on the lane's samples, with spent the
 * time its config's calls used (paired: both lanes'). Sets out.stop and,
 * out of time with too few checks, has every call checked until there are
 * enough (which only an honest runner can welcome). */
static avo_timing_stop_t lane_stop(const run_ctx *r, lane_run *lr, double spent)
{
    const avo_problem *p = r->p;
    config_run *out = &lr->out;
    if (lr->n >= p->timing_min_runs)
        avo_timing_stats_compute(lr->t, lr->n, &out->st); /* reorders t; order does not matter */
    const int checks_done = lane_checks_done(lr);
    const int at_floor = !lr->trusted && out->q <= CHECK_Q_MIN && out->random_checks >= CHECK_K_MAX;
    /* The vendor baseline is shown beside the score, never decided on:
     * a share of the time bound is enough for its median, and as many
     * runs as the candidate's make it as precise as the median it is
     * shown beside (a 7 us cuBLAS call whose spread never reaches
     * timing.rse otherwise runs to the bound on every evaluation). */
    const double max_s = p->timing_max_seconds * (lr->trusted ? BASELINE_TIME_SHARE : 1.0);
    out->stop = avo_timing_stop(lr->n, p->timing_min_runs, checks_done, at_floor, out->st.rse, p->timing_rse, spent,
                                max_s);
    if (lr->trusted && out->stop == AVO_STOP_NONE && lr->n >= r->base_runs)
        out->stop = AVO_STOP_RUNS;
    lr->force = spent >= max_s && !checks_done;
    return out->stop;
}

/* The verdicts on a lane's calls as a whole that its samples need not be
 * computed for: GPU work left running after too many calls, the GPU busy
 * when too many began, no usable sample. res unchanged when none applies. */
static int lane_busy_verdicts(const run_ctx *r, const lane_run *lr, int res, char *why, size_t wl)
{
    const int n = lr->n;
    if (res == CHECK_OK && lr->busy.over > GPU_BUSY_OVER_MIN && lr->busy.over > GPU_BUSY_OVER_SHARE * lr->busy.probes &&
        !getenv("AVO_HARNESS_BUSY_LOG")) {
        snprintf(why, wl,
                 "the GPU was still busy after %d of its %d calls' ends (over %.0f us, the context switch before "
                 "the candidate loaded: %.0f us at most): work left running outside the calls",
                 lr->busy.over, lr->busy.probes, r->ln->busy_max * 1e6,
                 (r->ln->busy_max - GPU_BUSY_SLACK) / GPU_BUSY_FACTOR * 1e6);
        res = CHECK_IDLE;
    }
    if (res == CHECK_OK && lr->gate_busy > GPU_BUSY_OVER_MIN && lr->gate_busy > GPU_BUSY_OVER_SHARE * n) {
        snprintf(why, wl,
                 "the GPU was busy when %d of its %d timed calls began (the timing gate found no room on the SMs "
                 "within its limit): work started outside the calls",
                 lr->gate_busy, n);
        res = CHECK_IDLE;
    }
    if (res == CHECK_OK && n == 0 && lr->busy.dropped && !lr->out.discarded) {
        snprintf(why, wl,
                 "every timed call's busy probe waited for the checker's CPU (%d calls; another process on the CPU "
                 "it is pinned to): no usable sample",
                 lr->busy.dropped);
        res = -EAGAIN;
    }
    if (res == CHECK_OK && n == 0) {
        snprintf(why, wl, "every timed run ran under %.0f%% of the maximum SM clock (%u MHz): no usable sample",
                 MIN_CLOCK_FRACTION * 100, r->max_mhz);
        res = -EAGAIN;
    }
    return res;
}

/* A CUDA lane's "events": its calibrated protocol (and the one measured
 * before its object loaded), its tails, what was charged to its samples,
 * its busy probes and round trips. */
static json_t *lane_events_json(const run_ctx *r, const lane_run *lr)
{
    const int n = lr->n;
    avo_stats ts, ps;
    avo_timing_stats_compute(lr->tails, n, &ts);
    avo_timing_stats_compute(lr->proto, n, &ps);
    avo_stats hs, es;
    avo_timing_stats_compute(lr->host, n, &hs);
    avo_timing_stats_compute(lr->entry, n, &es);
    const gpu_timing *tm = &r->ln->tm;
    const gpu_preload *pre = &r->ln->pre[tm->ungated];
    return json_pack(
        "{s:o,s:o,s:o,s:o,s:o,s:i,s:o,s:{s:o,s:o,s:o,s:o,s:o},s:i,s:o,s:o,s:i,s:i,s:i,s:o,s:o,s:o,s:o,"
        "s:o,s:o,s:o,s:o,s:i,s:o,s:i,s:b,s:o,s:i}",
        "overhead_s", jreal(tm->stream_min), "overhead_median_s", jreal(tm->stream_median), "calibrated_tail_median_s",
        jreal(tm->tail_median), "tail_allowance_s", jreal(tm->tail_allow), "tail_median_s", jreal(ts.median),
        "tail_charged_runs", lr->charged, "tail_charged_max_s", jreal(lr->charged_max), "before_load", "overhead_s",
        jreal(pre->stream_min), "tail_allowance_s", jreal(pre->tail_allow), "round_trip_over_s", jreal(pre->rt_over),
        "round_trip_over_max_s", jreal(pre->rt_over_max), "gate_wait_max_s", jreal(pre->gate_wait_max),
        "claim_floor_runs", lr->floored, "busy_probe_max_s", jreal(lr->busy.longest), "busy_probe_limit_s",
        jreal(r->ln->busy_max), "busy_probes_over", lr->busy.over, "busy_probes_retaken", lr->busy.reprobed,
        "busy_dropped_samples", lr->busy.dropped, "busy_probe_first_max_s", jreal(lr->busy.first_max),
        "busy_probe_off_cpu_max_s", jreal(lr->busy.off_cpu_max), "protocol_median_s", jreal(ps.median),
        "protocol_min_s", jreal(ps.min), "calibrated_protocol_s", jreal(tm->rt_over), "calibrated_host_s",
        jreal(tm->host_median), "runner_host_median_s", jreal(hs.median), "entry_host_median_s", jreal(es.median),
        "gate_wait_charged_runs", lr->gate_charged, "gate_wait_charged_max_s", jreal(lr->gate_charged_max),
        "gate_busy_runs", lr->gate_busy, "calibrated_here", lr->cal_fresh, "calibration_age_s",
        lr->cal_fresh ? json_real(0) : jreal(lr->cal_age), "calibrations", tm->calibrations);
}

/* Nothing of the runner's may go on working between calls: its group
 * runs for a moment with no command and must stay idle. CHECK_OK, the
 * CHECK_ code, or a negative int, with why. */
static int lane_idle_probe(run_ctx *r, config_run *out, char *why, size_t wl)
{
    int res = CHECK_OK;
    char sub[300];
    double tp = avo_phases_now();
    int rc = avo_runner_idle(&r->ln->run, IDLE_PROBE_S, &out->idle_cpu_s, sub, sizeof sub);
    avo_phases_lap(r->ph, "idle_probe", &tp);
    if (rc == AVO_RUNNER_DIED) {
        res = CHECK_CRASH;
        snprintf(why, wl, "after its calls: %s", sub);
    } else if (rc) {
        res = rc < 0 ? rc : CHECK_TIMEOUT;
        snprintf(why, wl, "after its calls: %s", sub);
    } else if (out->idle_cpu_s > IDLE_CPU_MAX) {
        res = CHECK_IDLE;
        snprintf(why, wl,
                 "work left running outside the calls: its processes used %.3g ms of CPU in a %.0f ms wait "
                 "with no call",
                 out->idle_cpu_s * 1e3, IDLE_PROBE_S * 1e3);
    }
    return res;
}

/* The lane's sample buffers freed. */
static void lane_free(lane_run *lr)
{
    free(lr->t);
    free(lr->rts);
    free(lr->tails);
    free(lr->tc);
    free(lr->cl);
    free(lr->proto);
    free(lr->host);
    free(lr->entry);
    lr->t = lr->rts = lr->tails = lr->tc = lr->cl = lr->proto = lr->host = lr->entry = NULL;
}

/* After the lane's last call (res: how its calls ended): the verdicts on
 * the calls as a whole (GPU work left running, checked samples slower than
 * the rest, the idle probe), its statistics and events. Frees the lane's
 * buffers whatever res is. */
static int lane_end(run_ctx *r, lane_run *lr, int res, char *why, size_t wl)
{
    config_run *out = &lr->out;
    const int n = lr->n, nc = lr->nc, trusted = lr->trusted;
    r->ln = lr->ln;
    res = lane_busy_verdicts(r, lr, res, why, wl);
    avo_counters *ctr = lane_counters(r, lr->ln);
    if (ctr && out->calls > r->nsets) {
        avo_counter_values cv;
        avo_counters_stop(ctr, &cv);
        if (res == CHECK_OK)
            out->counters = avo_counters_values_json(ctr, &cv, n);
    }
    if (res != CHECK_OK)
        goto out;
    avo_timing_stats_compute(lr->t, n, &out->st);
    out->samples_checked = nc;
    if (nc) {
        avo_stats cs;
        avo_timing_stats_compute(lr->tc, nc, &cs);
        out->checked_median = cs.median;
        if (!trusted && avo_timing_checked_consistent(lr->tc, nc, out->st.median, CONSISTENCY_FACTOR) != 0) {
            out->fail_call = out->calls - 1;
            snprintf(why, wl,
                     "its %d checked calls (fastest %.4g s) were all over %.1fx slower than the median of its %d "
                     "samples (%.4g s): the calls that were not checked ran faster",
                     nc, cs.min, CONSISTENCY_FACTOR, n, out->st.median);
            res = CHECK_FORGED;
            goto out;
        }
    }
    avo_stats ms;
    avo_timing_stats_compute(r->cuda ? lr->rts : lr->cl, n, &ms);
    out->claimed_median = ms.median;
    if (r->cuda) {
        /* The SM clock read after every timed run (NVML): its range, and how
         * many samples fell under the floor and were dropped. */
        out->clock = json_pack("{s:i,s:i,s:i,s:i}", "min_mhz", (int)lr->clk_min, "max_mhz", (int)lr->clk_max,
                               "max_possible_mhz", (int)r->max_mhz, "discarded", out->discarded);
        out->events = lane_events_json(r, lr);
    }
    if (!trusted)
        res = lane_idle_probe(r, out, why, wl);
out:
    lane_free(lr);
    return res;
}

/* The calls of config c in the runner of lane ln (the candidate's, or the
 * baseline's, trusted). Every call gets an input set of its own, never
 * seen before in this process (call_set: the job's warm-up sets, then set
 * i of the evaluation's stream), laid
 * out, poisoned and (CPU) flushed the same way, so nothing the candidate
 * sees tells one call from another; the first r->nsets calls are always
 * checked and not timed (they warm up), every later one is a sample and is
 * checked, after it returned, with probability q (a secret draw; never for
 * a trusted baseline). Every call, checked or not, must return 0, stay
 * within its tensors and leave its inputs alone.
 *
 * A CPU sample is the checker's own round trip (from the command to the
 * runner's group frozen again) less the empty round trip calibrated before
 * the candidate loaded; a faster call is forged. A CUDA sample is the
 * CUDA-event time from the start mark to the end of the call's own stream,
 * less the calibrated time of that protocol around no call, plus the part of
 * the tail (stream end -> the end mark after a device-wide synchronisation)
 * beyond the calibrated host latency (avo_timing_gpu_sample); the runner reports
 * the times, so the checker bounds them by its own round trip. Samples
 * taken under MIN_CLOCK_FRACTION of the maximum SM clock are discarded and
 * counted.
 *
 * Stops once n >= timing.min_runs, CHECK_K_MIN random checks were made,
 * and the relative standard error is within timing.rse, or the calls used
 * timing.max_seconds (checks not counted), or CHECK_K_MAX checks were made
 * at the floor rate. Then the runner's group gets an idle moment: work
 * still running without a call fails the config. */
static int run_config(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_tensors *rx, lane *ln,
                      config_run *out, char *why, size_t wl)
{
    lane_run lr;
    int res = lane_begin(r, &lr, ln, c, x, why, wl);
    for (int i = 0; res == CHECK_OK && !lr.give_up; i++) {
        res = lane_call(r, &lr, c, i, x, pristine, rx, why, wl);
        if (res == CHECK_OK && lr.sampled && lane_stop(r, &lr, lr.spent) != AVO_STOP_NONE)
            break;
    }
    res = lane_end(r, &lr, res, why, wl);
    *out = lr.out;
    return res;
}

/* Paired measurement: one config's pairs (the candidate's time, the
 * against's, on the same input set) and the against's median. */
typedef struct {
    double *a, *b;
    int n, cap;
    double against_median;
    json_t *against_counters; /* CPU: the against's counters over its timed calls (owned), or NULL */
    json_t *order;            /* paired.configs[].order (pair_order_json; owned), or NULL */
    double *place[2];         /* the candidate's samples by place (pair_run.by_place; owned): the pooled test */
    int n_place[2];
    double *ag[2]; /* the against's by place (pair_run.ag_place; owned): the pooled test turned round */
    int n_ag[2];
    double spent; /* the lanes' timed seconds in the screen's earlier stages on this config */
} pair_set;

static void pair_set_free(pair_set *ps)
{
    free(ps->a);
    free(ps->b);
    free(ps->place[0]);
    free(ps->place[1]);
    free(ps->ag[0]);
    free(ps->ag[1]);
    json_decref(ps->against_counters);
    json_decref(ps->order);
}

static int pair_add(pair_set *ps, double a, double b)
{
    if (ps->n == ps->cap) {
        const int cap = ps->cap ? 2 * ps->cap : 64;
        if (grow(&ps->a, cap) || grow(&ps->b, cap))
            return -ENOMEM;
        ps->cap = cap;
    }
    ps->a[ps->n] = a;
    ps->b[ps->n++] = b;
    return 0;
}

/* The against's steps in the config's table: the reference runs its checks
 * paid for as the config's reference, its comparisons and idle probe as
 * against_checks, the rest of its calls as against_calls, so the phases
 * still add up. */
static void merge_against(avo_phases *dst, const avo_phases *src)
{
    for (int k = 0; k < src->n; k++) {
        const char *nm = src->name[k];
        /* A reference run on the pair's input set serves both lanes, and
         * whichever was checked first pays for it: it is the reference's
         * time, not the against's. */
        const int chk = !strcmp(nm, "checks") || !strcmp(nm, "idle_probe");
        avo_phases_add(dst,
                       !strcmp(nm, "reference") ? "reference"
                       : chk                    ? "against_checks"
                                                : "against_calls",
                       src->s[k]);
    }
}

static const char *outcome_of(int res, int timed);
static int calibrate(run_ctx *r, char *why, size_t wl);
static void swap_check_sizes(const avo_problem *p, int c);

/* The against failed on config c (res: its CHECK_ code, or the checker's
 * negative int while driving it): the candidate's evaluation goes on
 * unpaired, and the result's paired.error says why. Its runner goes at
 * once. */
static void against_failed(run_ctx *r, int c, int res, int call, const char *why)
{
    r->against_state = -1;
    if (res > 0)
        snprintf(r->against_err, sizeof r->against_err, "the against on config %s, call %d: %s: %.400s",
                 r->p->configs[c].name, call, outcome_of(res, call >= r->nsets), why);
    else
        snprintf(r->against_err, sizeof r->against_err, "the against on config %s: %.400s", r->p->configs[c].name,
                 why[0] ? why : strerror(-res));
    avo_runner_stop(&r->lanes[LANE_AGAINST].run);
}

/* One config's paired loop (run_config_paired): both lanes, the against's
 * result and its own table of phases, the candidate's samples by place. */
typedef struct {
    lane_run a, b; /* the candidate's, the against's */
    int bres;      /* how the against's calls stand (its failure ends the pairing only) */
    char bwhy[600];
    avo_phases *ph, bph; /* the config's table, and the against's (merge_against) */
    /* The candidate's samples by its place in the pair: [0] first, [1]
     * right after the against on the same input set (the order test). */
    double *by_place[2];
    int n_place[2], cap_place;
    /* The against's samples by its place: [0] first, [1] right after the
     * candidate (paired.configs[].order; pair_against_order_test). */
    double *ag_place[2];
    int n_ag[2];
    int extended_at; /* the pairs when order_suspect kept the loop going; 0: it did not */
} pair_run;

/* The against's call i of the pair, on the same input set as the
 * candidate's; its failure lands in pr->bres and pr->bwhy. */
static void pair_against_call(run_ctx *r, pair_run *pr, int c, int i, avo_tensors *x, avo_tensors *pristine,
                              avo_tensors *rx)
{
    if (avo_timing_now() > r->pair_cutoff) {
        snprintf(pr->bwhy, sizeof pr->bwhy,
                 "out of time: the against's calls stop at %.0f%% of the evaluation's deadline, to leave the "
                 "candidate its own",
                 PAIR_CUTOFF_SHARE * 100);
        pr->bres = -ETIME;
        return;
    }
    /* Its checks say nothing of the candidate's errors. */
    const double wr = r->worst_rel_l2, wm = r->worst_max_abs;
    r->ph = &pr->bph;
    pr->bres = lane_call(r, &pr->b, c, i, x, pristine, rx, pr->bwhy, sizeof pr->bwhy);
    r->ph = pr->ph;
    r->worst_rel_l2 = wr;
    r->worst_max_abs = wm;
    if (pr->bres == CHECK_OK && pr->b.give_up) {
        snprintf(pr->bwhy, sizeof pr->bwhy, "every timed run ran under %.0f%% of the maximum SM clock",
                 MIN_CLOCK_FRACTION * 100);
        pr->bres = -EAGAIN;
    }
}

/* A pair where both lanes gave a sample: into ps, and the candidate's
 * sample by its place. 0, or -ENOMEM. */
static int pair_record(pair_run *pr, pair_set *ps, int b_first)
{
    int res;
    if ((res = pair_add(ps, pr->a.last, pr->b.last)) != 0)
        return res;
    if (pr->n_place[b_first] == pr->cap_place || pr->n_place[!b_first] == pr->cap_place) {
        pr->cap_place = pr->cap_place ? 2 * pr->cap_place : 64;
        if (grow(&pr->by_place[0], pr->cap_place) || grow(&pr->by_place[1], pr->cap_place) ||
            grow(&pr->ag_place[0], pr->cap_place) || grow(&pr->ag_place[1], pr->cap_place))
            return -ENOMEM;
    }
    pr->by_place[b_first][pr->n_place[b_first]++] = pr->a.last;
    pr->ag_place[!b_first][pr->n_ag[!b_first]++] = pr->b.last;
    return 0;
}

/* One lane's times by place: the median right after the other lane over
 * the median before it, and the one-sided rank test's p-value in the
 * direction asked (after smaller, or after larger); NULL with fewer than 2
 * a side. Reorders the samples. */
static json_t *place_json(double *before, int nb, double *after, int na, int after_smaller)
{
    if (nb < 2 || na < 2)
        return NULL;
    const double p = after_smaller ? avo_timing_rank_p_smaller(before, nb, after, na)
                                   : avo_timing_rank_p_smaller(after, na, before, nb);
    avo_stats sb, sa;
    avo_timing_stats_compute(before, nb, &sb);
    avo_timing_stats_compute(after, na, &sa);
    return json_pack("{s:o,s:o,s:[i,i]}", "ratio", jreal(sa.median / sb.median), "p", jreal(p), "pairs", nb, na);
}

/* The order test turned round: CHECK_FORGED (why), the against's, when
 * its calls right after the candidate's ran ORDER_AGAINST_FACTOR x slower
 * than those before it, by the rank test too: the candidate's work reached
 * it (work left running, a signal to a colluding against), or it tells its
 * place and slows itself there; either way the pairs' ratios are
 * inflated. */
static int pair_against_order_test(const json_t *order, char *why, size_t wl)
{
    const json_t *ag = json_object_get(order, "against_after_candidate");
    const double ratio = json_real_value(json_object_get(ag, "ratio"));
    const double p = json_real_value(json_object_get(ag, "p"));
    if (!ag || !(ratio > ORDER_AGAINST_FACTOR) || !(p < ORDER_ALPHA))
        return CHECK_OK;
    snprintf(why, wl,
             "its calls right after the candidate's, on the same input sets, ran %.0f%% slower than those before it "
             "(rank test p = %.2g): its time depends on its place in the pair (the candidate's work reached it, or it "
             "tells its place and slows itself), so the pairing is void",
             (ratio - 1) * 100, p);
    return CHECK_FORGED;
}

/* paired.configs[].order: how each lane's time depends on its place in the
 * pair. The candidate's right after the against's is what the order test
 * judges (faster), and the against's right after the candidate's
 * (slower, pair_against_order_test). */
static json_t *pair_order_json(pair_run *pr)
{
    json_t *cand = place_json(pr->by_place[0], pr->n_place[0], pr->by_place[1], pr->n_place[1], 1);
    json_t *ag = place_json(pr->ag_place[0], pr->n_ag[0], pr->ag_place[1], pr->n_ag[1], 0);
    json_t *j = json_pack("{s:o?,s:o?}", "candidate_after_against", cand, "against_after_candidate", ag);
    if (j && pr->extended_at > 0)
        json_object_set_new(j, "extended_at", json_integer(pr->extended_at));
    return j;
}

/* The order test pooled over the configs (paired.order_pooled): the
 * candidate's samples by place, each config a stratum of van Elteren's
 * rank test (ranks within a config, so every config counts whatever its
 * time); the place is still the checker's coin, so for an honest
 * candidate each config's two groups are one sample split at random and
 * the p-value holds. The ratio: the configs' after-over-before median
 * ratios, their geometric mean weighted by na nb / (na + nb). Over one
 * pool's median instead, a config split 7 to 3 and one split 3 to 7 put
 * both groups' medians near 1 and hid a channel the rank test saw (ratio
 * 0.95 at p 1e-6, 2026-12-06). A paired GPU config often stops at 10
 * pairs, under the per-config test's 8 each way: pooled, a channel used
 * on every config is judged anyway. NULL with fewer than 2 a side. */
static json_t *pooled_order_json(const run_ctx *r, const pair_set *ps, int against)
{
    const int nc = r->p->nconfigs;
    int n[2] = {0, 0}, nconf = 0, most = 1;
    for (int c = 0; c < nc; c++)
        most = ps[c].n_place[0] + ps[c].n_place[1] > most ? ps[c].n_place[0] + ps[c].n_place[1] : most;
    avo_rank_stratum *st = calloc((size_t)nc + 1, sizeof *st);
    double *tmp = malloc((size_t)most * sizeof(double));
    double logsum = 0, wsum = 0, p = 1;
    for (int c = 0; st && tmp && c < nc; c++) {
        /* [0] first in the pair, [1] right after the other lane */
        double *const *pl = against ? ps[c].ag : ps[c].place;
        const int *np = against ? ps[c].n_ag : ps[c].n_place;
        const int nb = np[0], na = np[1];
        if (nb < 1 || na < 1 || nb + na > most)
            continue;
        avo_stats sb, sa;
        memcpy(tmp, pl[0], (size_t)nb * sizeof(double));
        avo_timing_stats_compute(tmp, nb, &sb);
        memcpy(tmp, pl[1], (size_t)na * sizeof(double));
        avo_timing_stats_compute(tmp, na, &sa);
        if (!(sb.median > 0) || !(sa.median > 0))
            continue;
        /* The candidate is judged on after smaller, the against on after
         * larger. */
        st[nconf++] = against ? (avo_rank_stratum){pl[1], na, pl[0], nb} : (avo_rank_stratum){pl[0], nb, pl[1], na};
        const double w = (double)na * nb / (na + nb);
        logsum += w * log(sa.median / sb.median);
        wsum += w;
        n[0] += nb;
        n[1] += na;
    }
    json_t *j = NULL;
    if (st && tmp && n[0] >= 2 && n[1] >= 2 && (p = avo_timing_rank_p_smaller_strata(st, nconf)) >= 0)
        j = json_pack("{s:o,s:o,s:[i,i],s:i,s:s}", "ratio", jreal(exp(logsum / wsum)), "p", jreal(p), "pairs", n[0],
                      n[1], "configs", nconf, "method", "van Elteren stratified rank-sum test, one stratum a config");
    free(st);
    free(tmp);
    return j;
}

/* Whether a config about to stop short of the order test's pairs looks
 * like a channel (ORDER_SUSPECT_ALPHA), or cannot be looked at (a place
 * with fewer than 2 samples: about 1 config in 50 at 10 pairs, where a
 * channel would otherwise pass unlooked at): its loop goes on until the
 * test can run. The extra pairs depend on the checker's coin alone, so the
 * final test's p-value still holds; an honest candidate pays them only
 * where its calls after the against already ran twice as fast (rare on a
 * GPU; a burst of load on a shared host) or the coin split its pairs
 * 9 to 1. Not in the screen's stage. */
static int order_suspect(const run_ctx *r, const pair_run *pr, const pair_set *ps)
{
    const int nb = pr->n_place[0], na = pr->n_place[1];
    if (r->screen_pairs > 0 || r->no_order_extend || ps->n >= ORDER_EXTEND_MAX ||
        (nb >= ORDER_MIN_PAIRS && na >= ORDER_MIN_PAIRS))
        return 0;
    if (nb < 2 || na < 2) {
        harness_trace("order unjudged after %d pairs: %d first, %d second", ps->n, nb, na);
        return 1;
    }
    double before[ORDER_EXTEND_MAX], after[ORDER_EXTEND_MAX];
    memcpy(before, pr->by_place[0], (size_t)nb * sizeof(double));
    memcpy(after, pr->by_place[1], (size_t)na * sizeof(double));
    const double p = avo_timing_rank_p_smaller(before, nb, after, na);
    avo_stats sb, sa;
    avo_timing_stats_compute(before, nb, &sb);
    avo_timing_stats_compute(after, na, &sa);
    const int suspect = p >= 0 && p < ORDER_SUSPECT_ALPHA && sa.median < ORDER_FACTOR * sb.median;
    if (suspect)
        harness_trace("order suspect after %d pairs: ratio %.3g, p %.3g", ps->n, sa.median / sb.median, p);
    return suspect;
}

/* After a pair in which the candidate gave a sample: both lanes' stopping
 * rules on the time both used. 1 when the config's loop ends. */
static int pair_stop(const run_ctx *r, pair_run *pr, const pair_set *ps)
{
    const double max_s = r->p->timing_max_seconds;
    const double spent = pr->a.spent + pr->b.spent;
    const avo_timing_stop_t stop = lane_stop(r, &pr->a, spent);
    if (pr->bres == CHECK_OK)
        lane_stop(r, &pr->b, spent);
    /* Enough pairs for an interval come first: a slow config gets
     * them past PAIRED_TIME_FACTOR (the against's cut-off still bounds
     * the whole evaluation). */
    const int enough = ps->n >= (r->p->timing_min_runs > PAIRED_MIN_PAIRS ? r->p->timing_min_runs : PAIRED_MIN_PAIRS);
    if (r->screen_pairs > 0) {
        /* The screen's timed stage: screen.runs pairs (fewer, but
         * enough for an interval, when they would take longer than the
         * paired time bound, its earlier stages' time counted), both
         * lanes' random checks done. */
        const int checked = lane_checks_done(&pr->a) && lane_checks_done(&pr->b);
        return pr->bres != CHECK_OK || stop == AVO_STOP_RUNS ||
               (checked && (ps->n >= r->screen_pairs || (ps->spent + spent >= PAIRED_TIME_FACTOR * max_s && enough)));
    }
    if (stop == AVO_STOP_NONE)
        return 0;
    if (pr->bres != CHECK_OK || stop == AVO_STOP_RUNS)
        return 1;
    if (!(enough && (lane_checks_done(&pr->b) || spent >= PAIRED_TIME_FACTOR * max_s)))
        return 0;
    if (order_suspect(r, pr, ps)) {
        pr->extended_at = pr->extended_at ? pr->extended_at : ps->n;
        return 0;
    }
    return 1;
}

/* The order test: CHECK_FORGED (why) when the candidate's calls right
 * after the against's ran far faster than those before it, and a rank test
 * says the place explains it. Reads paired.configs[].order (pair_order_json),
 * the figures the result reports. */
static int pair_order_test(const json_t *order, char *why, size_t wl)
{
    /* The same work on the same inputs, the caches flushed before each
     * call: where the candidate went does not change its time, unless
     * the against's run of those inputs reached it (a channel through
     * the shared region, the device tensors' slack, IPC). The place is
     * the checker's secret coin, so for an honest candidate the two
     * groups are one distribution split at random and the rank test's
     * p-value is what it says, however bursts of load shape that
     * distribution: a median alone split a bimodal one (calls with and
     * without a preemption) 3x apart in about one honest A/A evaluation
     * in ten on a loaded 2-CPU host. */
    const json_t *cand = json_object_get(order, "candidate_after_against");
    const double ratio = json_real_value(json_object_get(cand, "ratio"));
    const double p = json_real_value(json_object_get(cand, "p"));
    const json_t *pairs = json_object_get(cand, "pairs");
    if (cand && p < 0)
        return -ENOMEM;
    harness_trace("order test: candidate after against ratio %.4g, p %.3g", ratio, p);
    if (!cand || !(ratio < ORDER_FACTOR) || !(p < ORDER_ALPHA))
        return CHECK_OK;
    snprintf(why, wl,
             "its calls right after the against's, on the same input sets, ran %.0f%% faster (median over %d) than "
             "those before it (over %d; rank test p = %.2g): the against's work reached it",
             (1 - ratio) * 100, (int)json_integer_value(json_array_get(pairs, 1)),
             (int)json_integer_value(json_array_get(pairs, 0)), p);
    return CHECK_FORGED;
}

/* The against's lane ended after the candidate's: its verdicts, its phases
 * into the config's table, its median into ps; a failure ends the pairing
 * (against_failed). */
static void pair_end_against(run_ctx *r, pair_run *pr, int c, pair_set *ps)
{
    lane_run *b = &pr->b;
    if (pr->bres == CHECK_OK && !lane_checks_done(b)) {
        snprintf(pr->bwhy, sizeof pr->bwhy,
                 "only %d of its timed calls were checked within the time budget (%d needed)", b->out.random_checks,
                 CHECK_K_MIN);
        pr->bres = -ETIME;
    }
    r->ph = &pr->bph;
    pr->bres = lane_end(r, b, pr->bres, pr->bwhy, sizeof pr->bwhy);
    r->ph = pr->ph;
    r->ln = &r->lanes[LANE_CAND];
    merge_against(pr->ph, &pr->bph);
    json_decref(ps->against_counters);
    ps->against_counters = b->out.counters;
    json_decref(b->out.clock);
    json_decref(b->out.events);
    ps->against_median = b->out.st.median;
    if (pr->bres != CHECK_OK)
        against_failed(r, c, pr->bres, b->out.fail_call, pr->bwhy);
}

/* Config c timed paired: call i of the candidate and call i of the against
 * on the same input set (set i of the config's stream: each runner sees
 * each set once), in an order drawn from the checker's secret generator
 * for every pair. The candidate's calls are its own as in run_config (its
 * samples alone make its result); the against is held to every rule the
 * candidate is, and its failure ends the pairing, never the candidate's
 * evaluation. The candidate's stopping rule runs on the time both lanes'
 * calls used, and the loop goes on until timing.min_runs pairs were made
 * and the against's random checks are done (within PAIRED_TIME_FACTOR x
 * timing.max_seconds). */
static int run_config_paired(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_tensors *rx, config_run *out,
                             pair_set *ps, char *why, size_t wl)
{
    pair_run pr = {.ph = r->ph};
    lane_run *a = &pr.a;
    int res = lane_begin(r, a, &r->lanes[LANE_CAND], c, x, why, wl);
    r->ph = &pr.bph;
    pr.bres = lane_begin(r, &pr.b, &r->lanes[LANE_AGAINST], c, x, pr.bwhy, sizeof pr.bwhy);
    r->ph = pr.ph;
    for (int i = 0; res == CHECK_OK && !a->give_up; i++) {
        /* Which goes first: neither runner can tell its place in the
         * pair, and drift and first-or-second effects cancel. */
        const int b_first = avo_timing_rng_next(&r->rng) < 0.5;
        r->pair_open = 1;
        r->pair_draw = NAN;
        for (int k = 0; k < 2 && res == CHECK_OK; k++) {
            if ((k == 0) != b_first)
                res = lane_call(r, a, c, i, x, pristine, rx, why, wl);
            else if (pr.bres == CHECK_OK)
                pair_against_call(r, &pr, c, i, x, pristine, rx);
        }
        if (res != CHECK_OK)
            break;
        if (pr.bres == AVO_HARNESS_EREFERENCE) {
            /* The reference failed on the against's inputs: the whole
             * evaluation's, not the against's. */
            res = pr.bres;
            snprintf(why, wl, "%s", pr.bwhy);
            break;
        }
        if (pr.bres == CHECK_OK && a->sampled && pr.b.sampled && (res = pair_record(&pr, ps, b_first)) != 0)
            break;
        if (a->sampled && pair_stop(r, &pr, ps))
            break;
    }
    r->pair_open = 0;
    /* Not in the screen's timed stage: a channel from the against there
     * could only make the candidate pass the screen, and the full run that
     * follows (this test included) decides; with a screen's few pairs a
     * burst of load on a shared host would call an honest candidate a
     * cheat (test_screen.sh met one at 30 pairs, load 3 on 2 CPUs). */
    json_decref(ps->order);
    ps->order = pair_order_json(&pr);
    if (res == CHECK_OK && r->screen_pairs == 0 && pr.n_place[0] >= ORDER_MIN_PAIRS &&
        pr.n_place[1] >= ORDER_MIN_PAIRS && (res = pair_order_test(ps->order, why, wl)) != CHECK_OK)
        a->out.fail_call = a->out.calls - 1;
    /* The against's failure, not the candidate's: a hostile against can
     * tell its place from the time since its own previous call and slow
     * itself there to frame an honest candidate (test_paired.sh (j)). The
     * pairing is then worth nothing either way, and a result with a
     * paired.error is never committed, so a colluding candidate gains
     * nothing from it either. */
    if (res == CHECK_OK && pr.bres == CHECK_OK && r->screen_pairs == 0 && pr.n_ag[0] >= ORDER_MIN_PAIRS &&
        pr.n_ag[1] >= ORDER_MIN_PAIRS &&
        (pr.bres = pair_against_order_test(ps->order, pr.bwhy, sizeof pr.bwhy)) != CHECK_OK)
        pr.b.out.fail_call = pr.b.out.calls - 1;
    for (int k = 0; k < 2; k++) {
        free(ps->place[k]);
        ps->place[k] = pr.by_place[k];
        ps->n_place[k] = pr.n_place[k];
        free(ps->ag[k]);
        ps->ag[k] = pr.ag_place[k];
        ps->n_ag[k] = pr.n_ag[k];
    }
    ps->spent += a->spent + pr.b.spent;
    res = lane_end(r, a, res, why, wl);
    *out = a->out;
    pair_end_against(r, &pr, c, ps);
    return res;
}

/* The memfd a lane's runner maps: the shared region, or, for a CUDA runner
 * on the checker's device tensors (which copies nothing), an area of its
 * own for the counters report. The region would otherwise be memory both
 * runners of a pair map and no check reads (pages locked for the device,
 * so never punched out between calls): a channel from the against to the
 * candidate (tests/hostile/gpu/pairs/stash_pair.cu). The descriptor, or a
 * negative int with why. */
static int lane_mem_fd(run_ctx *r, lane *ln, char *why, size_t wl)
{
    if (!r->cuda || !r->dev.n)
        return r->shm_fd;
    if (ln->report)
        return ln->report_fd;
    int fd = memfd_create("avo-runner-report", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, PROFILE_AREA) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int rc = -errno;
        snprintf(why, wl, "the runner's report area: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    void *p = mmap(NULL, PROFILE_AREA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int rc = -errno;
        snprintf(why, wl, "mapping the runner's report area: %s", strerror(errno));
        close(fd);
        return rc;
    }
    ln->report_fd = fd;
    ln->report = p;
    return fd;
}
/* The against's runner as the candidate's: started and calibrated (its
 * empty round trip, and on a GPU its protocol and busy probe) before
 * either object is loaded (load 0), then loaded after the candidate
 * (load 1). Any failure is the against's: paired.error. */
enum { AGAINST_SPAWN, AGAINST_CALIBRATE, AGAINST_LOAD };

/* The against's runner, one step: spawned (right after the candidate's, so
 * their process and GPU context start-ups overlap), calibrated (once both
 * are up: no start-up runs beside a calibration), loaded. A failure leaves
 * the candidate's evaluation unpaired, with against_err saying why. */
static void start_against(run_ctx *r, const char *against_so, int step)
{
    lane *ag = &r->lanes[LANE_AGAINST];
    char why[600] = "";
    static const char *const what[] = {"starting", "calibrating", "loading"};
    int rc = 0;
    if (r->against_state < 0)
        return;
    r->ln = ag;
    if (step == AGAINST_SPAWN) {
        rc = lane_mem_fd(r, ag, why, sizeof why);
        if (rc >= 0)
            rc = avo_runner_spawn(&ag->run, against_so, r->p->entry, r->cuda, rc, &r->dev, r->deadline, why,
                                  sizeof why);
        if (rc == 0 && r->ctr_open) {
            avo_counters_open(&r->actr, ag->run.pid);
            r->actr_open = 1;
        }
    } else if (step == AGAINST_CALIBRATE) {
        rc = calibrate(r, why, sizeof why);
        if (rc == 0 && r->cuda)
            rc = gputime_calibrate_preload(r, why, sizeof why);
    } else {
        rc = avo_runner_load(&ag->run, lane_deadline(r), why, sizeof why);
    }
    r->ln = &r->lanes[LANE_CAND];
    if (rc == 0) {
        r->against_state = step == AGAINST_LOAD;
        return;
    }
    r->against_state = -1;
    avo_utf8_scrub(why);
    snprintf(r->against_err, sizeof r->against_err, "the against's runner, %s: %.450s", what[step], why);
    avo_runner_stop(&ag->run);
}

/* The vendor baseline's runner, one step (AGAINST_SPAWN, AGAINST_CALIBRATE:
 * up, AGAINST_LOAD). Where the evaluation times every config (no screen
 * can stop it first) it is spawned beside the others so that its process,
 * GPU context and library start-up overlap theirs instead of coming after
 * the first config's timing; elsewhere time_baseline spawns and loads it
 * on first use. It is trusted and shares the candidate's calibration, so
 * "up" is a round trip. A failure is the baseline's alone: base_err. */
static void start_baseline(run_ctx *r, int step)
{
    lane *base = &r->lanes[LANE_BASE];
    char why[600] = "";
    double rt;
    int rc;
    if (!r->base_so || !r->cuda || r->base_state != (step == AGAINST_SPAWN ? 0 : 2))
        return;
    if (step == AGAINST_SPAWN) {
        rc = lane_mem_fd(r, base, why, sizeof why);
        if (rc >= 0)
            rc = avo_runner_spawn(&base->run, r->base_so, "avo_baseline", r->cuda, rc, &r->dev, r->deadline, why,
                                  sizeof why);
    } else if (step == AGAINST_CALIBRATE) {
        rc = avo_runner_ping(&base->run, r->deadline, &rt, why, sizeof why);
    } else {
        rc = avo_runner_load(&base->run, r->deadline, why, sizeof why);
    }
    if (rc == 0) {
        r->base_state = step == AGAINST_LOAD ? 1 : 2;
        return;
    }
    r->base_state = -1;
    avo_utf8_scrub(why);
    snprintf(r->base_err, sizeof r->base_err, "cannot start: %.360s", why);
    avo_runner_stop(&base->run);
}

/* Wait until the against's runner is up (its first round trip returns once
 * its start-up, the GPU context included, is done). */
static void against_ready(run_ctx *r)
{
    lane *ag = &r->lanes[LANE_AGAINST];
    char why[600] = "";
    double rt;
    if (r->against_state < 0)
        return;
    const int rc = avo_runner_ping(&ag->run, r->deadline, &rt, why, sizeof why);
    if (rc == 0)
        return;
    r->against_state = -1;
    avo_utf8_scrub(why);
    snprintf(r->against_err, sizeof r->against_err, "the against's runner, starting: %.450s", why);
    avo_runner_stop(&ag->run);
}

/* The result's "paired" (docs/evaluation.md, "Paired measurement"), or
 * {"error"} when the against failed or the statistics could not be made:
 * over every config, or (screen_only) over the screen's configs alone. */
static json_t *paired_json(const run_ctx *r, const pair_set *ps, int screen_only)
{
    const avo_problem *p = r->p;
    if (r->against_state < 0)
        return json_pack("{s:s}", "error", r->against_err);
    avo_paired_config *cfg = calloc((size_t)p->nconfigs, sizeof *cfg);
    avo_paired_est *est = calloc((size_t)p->nconfigs, sizeof *est);
    int *idx = calloc((size_t)p->nconfigs, sizeof *idx);
    avo_paired_est agg;
    json_t *j = NULL, *cj = NULL;
    char err[300] = "";
    int n = 0;
    if (!cfg || !est || !idx) {
        snprintf(err, sizeof err, "out of memory");
        goto cleanup;
    }
    for (int c = 0; c < p->nconfigs; c++) {
        if (screen_only && !p->configs[c].screen)
            continue;
        if (ps[c].n < PAIRED_MIN_PAIRS) {
            /* A percentile interval of a median from a handful of pairs
             * is far too narrow (one pair: every resample the same). */
            snprintf(err, sizeof err, "config %s: %d pairs of timed calls, fewer than the %d an interval needs",
                     p->configs[c].name, ps[c].n, PAIRED_MIN_PAIRS);
            goto cleanup;
        }
        idx[n] = c;
        cfg[n++] = (avo_paired_config){ps[c].a, ps[c].b, ps[c].n};
    }
    int rc = avo_paired_bootstrap(cfg, n, r->confidence, AVO_PAIRED_RESAMPLES, est, &agg);
    if (rc) {
        snprintf(err, sizeof err, "the bootstrap failed: %s", strerror(-rc));
        goto cleanup;
    }
    cj = json_array();
    for (int k = 0; cj && k < n; k++)
        json_array_append_new(cj,
                              json_pack("{s:s,s:o,s:o,s:[o,o],s:i,s:o,s:o,s:O?,s:O?}", "config",
                                        p->configs[idx[k]].name, "ratio", jreal(est[k].ratio), "low", jreal(est[k].low),
                                        "ci", jreal(est[k].ci_lo), jreal(est[k].ci_hi), "runs", ps[idx[k]].n,
                                        "median_s", jreal(est[k].median_a), "against_median_s", jreal(est[k].median_b),
                                        "against_counters", ps[idx[k]].against_counters, "order", ps[idx[k]].order));
    j = json_pack("{s:s,s:s,s:i,s:f,s:o,s:o,s:[o,o],s:s,s:o}", "measure",
                  "speed ratio: the median over the pairs of the against's time over the candidate's, per config; "
                  "aggregate: their geometric mean",
                  "method", "bootstrap-percentile", "resamples", AVO_PAIRED_RESAMPLES, "confidence", r->confidence,
                  "ratio", jreal(agg.ratio), "low", jreal(agg.low), "ci", jreal(agg.ci_lo), jreal(agg.ci_hi), "order",
                  "random within each pair", "configs", cj ? cj : json_null());
    cj = NULL;
    json_t *pooled = screen_only ? NULL : pooled_order_json(r, ps, 0);
    json_t *pooled_ag = screen_only ? NULL : pooled_order_json(r, ps, 1);
    if (j && pooled)
        json_object_set_new(j, "order_pooled", pooled);
    else
        json_decref(pooled);
    if (j && pooled_ag)
        json_object_set_new(j, "order_pooled_against", pooled_ag);
    else
        json_decref(pooled_ag);
    if (!j)
        snprintf(err, sizeof err, "out of memory");
cleanup:
    free(cfg);
    free(est);
    free(idx);
    json_decref(cj);
    return j ? j : json_pack("{s:s}", "error", err);
}

/* The vendor baseline (cuBLAS for gemm_bf16) on config c, measured by the
 * same checker on the same kind of inputs with the same protocol, but in a
 * runner of its own: the candidate's process never has the library's entry
 * point to fall back on. Trusted: its first calls are checked, the rest not.
 * Returns the "baseline" object for the config (an "error" member when it
 * failed; the candidate's outcome never depends on it). */
static json_t *time_baseline(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_tensors *rx,
                             double cand_median, int cand_runs)
{
    char why[600];
    if (!r->cuda)
        return json_pack("{s:s}", "error", "baseline timing is implemented for CUDA problems");
    lane *base = &r->lanes[LANE_BASE], *cand = r->ln;
    /* Trusted: the bounds measured before the candidate loaded serve for
     * it too. */
    memcpy(base->pre, cand->pre, sizeof base->pre);
    base->busy_max = cand->busy_max;
    base->busy_hard = cand->busy_hard;
    /* Where a screen left it unstarted, on first use: spawned and loaded
     * (each step a no-op once done, or once failed). */
    start_baseline(r, AGAINST_SPAWN);
    start_baseline(r, AGAINST_LOAD);
    if (r->base_state < 0)
        return json_pack("{s:s}", "error", r->base_err);
    double wr = r->worst_rel_l2, wm = r->worst_max_abs;
    /* Its runs are the config's "baseline" phase as a whole. */
    avo_phases *cand_ph = r->ph, base_ph = {0};
    r->ph = &base_ph;
    r->base_runs = cand_runs > r->p->timing_min_runs ? cand_runs : r->p->timing_min_runs;
    config_run cr;
    int res = run_config(r, c, x, pristine, rx, base, &cr, why, sizeof why);
    r->ph = cand_ph;
    r->ln = cand;
    r->worst_rel_l2 = wr;
    r->worst_max_abs = wm;
    json_decref(cr.clock);
    if (res != CHECK_OK) {
        json_decref(cr.events);
        if (res < 0 || base->run.pid == 0)
            r->base_state = -1;
        snprintf(r->base_err, sizeof r->base_err, "%.390s", why);
        return json_pack("{s:s}", "error", why);
    }
    double flops = 0;
    if (r->p->flops)
        avo_problem_eval_config(r->p, c, r->p->flops, &flops, NULL, 0);
    const char *stopped = avo_timing_stop_name(cr.stop);
    return json_pack("{s:o,s:o,s:i,s:s?,s:o,s:o,s:o}", "median_s", jreal(cr.st.median), "tflops",
                     r->p->flops ? jreal(flops / cr.st.median * 1e-12) : json_null(), "runs", cr.st.runs, "stopped_by",
                     stopped, "vs_baseline", jreal(cr.st.median / cand_median), "events",
                     cr.events ? cr.events : json_null(), "timing_start", timing_start_json(base->tm.ungated_why));
}

/* The counters pass on a GPU, after all timing: one profiled call of config
 * c on an input set none of its calls had. The report comes from the
 * runner (the candidate's process, so it is data, not evidence): parsed
 * with a size cap, attached as the config's "counters" and never part of
 * the score. */
static json_t *profile_config(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine)
{
    char why[600];
    uint64_t offs[AVO_PROBLEM_MAX_TENSORS], bytes[AVO_PROBLEM_MAX_TENSORS];
    avo_tensors_fill(pristine, r->p, r->seed, c, PROFILE_SET);
    avo_tensors_copy_inputs(x, pristine, r->p);
    avo_tensors_poison(x, r->p);
    for (int i = 0; i < x->n; i++) {
        offs[i] = (uint64_t)((unsigned char *)x->ptr[i] - r->shm);
        bytes[i] = x->bytes[i];
    }
    /* On the checker's device tensors the runner has no host tensors: the
     * checker lays them out, and the report comes in the runner's own
     * area. */
    unsigned char *report = r->dev.n ? r->ln->report : r->shm + r->shm_bytes - PROFILE_AREA;
    const uint64_t aux = r->dev.n ? 0 : r->shm_bytes - PROFILE_AREA;
    if (!report)
        return json_pack("{s:b,s:s}", "available", 0, "reason", "the runner has no report area");
    if (r->dev.n && gputime_checker_copies(r, c, x, AVO_GPU_COPY_IN | AVO_GPU_PREPARE, why, sizeof why) != CHECK_OK)
        return json_pack("{s:b,s:s}", "available", 0, "reason", why);
    memset(report, 0, PROFILE_AREA);
    int status = 0;
    int rc = avo_runner_profile(&r->ln->run, r->p->configs[c].size, r->p->nsizes, offs, bytes, x->n, aux, PROFILE_AREA,
                                r->deadline, &status, why, sizeof why);
    if (rc != AVO_RUNNER_OK || status)
        return json_pack("{s:b,s:s}", "available", 0, "reason", why);
    report[PROFILE_AREA - 1] = 0;
    avo_utf8_scrub((char *)report);
    json_error_t je;
    json_t *doc = json_loads((const char *)report, 0, &je);
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

int harness_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The shared tensor region: big enough for the largest config (and, for
 * CUDA, a counters report), sealed against resizing so the runner cannot
 * truncate it under the checker. */
int harness_make_shm(run_ctx *r, char *err, size_t errlen)
{
    size_t need = 64;
    for (int c = 0; c < r->p->nconfigs; c++) {
        size_t s = avo_tensors_span(r->p, c);
        if (s > need)
            need = s;
    }
    if (r->cuda)
        need = (need + 63) / 64 * 64 + PROFILE_AREA;
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

/* CUDA: device tensors of the checker's, each the size of its largest
 * config, shared with the runners (avo_gpu_share), so the runner is thawed
 * only for timed runs: a thread of the candidate's that wakes up during a
 * prep or a fetch (when the call's inputs are already in the shared
 * region) could otherwise compute untimed (tests/hostile/gpu/
 * computes_in_prep.cu). The checker's mapping of the region is page-locked
 * for its copies. Where the GPU or driver cannot share memory the runner
 * keeps its own copies, and dev_note (the result's runner.device_tensors)
 * says so. */
/* Generating every call's inputs on the device (the same stream, bit for
 * bit) spares the host's generation and the copy in, most of a large
 * problem's evaluation (docs/benchmarks.md, eval_cost). It is used only
 * when the device's stream matches the host's for every dtype the problem's
 * inputs have, checked here on an odd length under a nonce no call uses
 * (config word 0xfffffffe), before any candidate exists: else the host
 * generates them, as before, and fill_note says why. */
#define FILL_CHECK_ELEMS 4099
static void check_device_fill(run_ctx *r)
{
    const avo_problem *p = r->p;
    static double dev_buf[FILL_CHECK_ELEMS], host_buf[FILL_CHECK_ELEMS];
    char err[240];
    avo_tensors_stream_key(r->seed, r->in_key);
    avo_tensors_stream_key(r->job_seed, r->job_key);
    for (int i = 0; i < p->ntensors; i++) {
        if (p->tensors[i].role == AVO_ROLE_OUTPUT)
            continue;
        const avo_dtype d = p->tensors[i].dtype;
        const float scale = (float)p->tensors[i].scale;
        const uint32_t nonce[3] = {0xfffffffeu, 1, (uint32_t)i + 1};
        int rc = avo_gpu_fill_sample(r->gpu, r->in_key, (int)d, scale, nonce[0], nonce[1], nonce[2], dev_buf,
                                     FILL_CHECK_ELEMS, err, sizeof err);
        if (rc) {
            snprintf(r->fill_note, sizeof r->fill_note, "host: the device's generator failed its check: %s", err);
            return;
        }
        avo_tensors_fill_stream(host_buf, FILL_CHECK_ELEMS, d, scale, r->in_key, nonce);
        if (memcmp(dev_buf, host_buf, FILL_CHECK_ELEMS * avo_problem_dtype_size(d)) != 0) {
            snprintf(r->fill_note, sizeof r->fill_note,
                     "host: the device's stream differs from the host's for %s (dtype %d)", p->tensors[i].name, (int)d);
            return;
        }
    }
    if (getenv("AVO_HARNESS_HOST_FILL")) {
        snprintf(r->fill_note, sizeof r->fill_note, "host: AVO_HARNESS_HOST_FILL set");
        return;
    }
    r->dev_fill = 1;
    snprintf(r->fill_note, sizeof r->fill_note,
             "device: every call's inputs generated on the GPU by the checker (ChaCha20, the host's stream bit for "
             "bit, checked at start)");
}

/* The device's generator set to config c's input set `set` (-1: the
 * calibration's own, which no call gets). */
void harness_set_device_inputs(run_ctx *r, int c, int set)
{
    const avo_problem *p = r->p;
    int dtypes[AVO_PROBLEM_MAX_TENSORS];
    float scales[AVO_PROBLEM_MAX_TENSORS];
    for (int i = 0; i < p->ntensors; i++) {
        dtypes[i] = (int)p->tensors[i].dtype;
        scales[i] = (float)p->tensors[i].scale;
    }
    avo_gpu_set_inputs(r->gpu, job_set(set) ? r->job_key : r->in_key, p->ntensors, dtypes, scales, (uint32_t)c + 1,
                       (uint32_t)(set + 1));
}

static void share_tensors(run_ctx *r)
{
    size_t most[AVO_PROBLEM_MAX_TENSORS] = {0};
    char err[300];
    for (int c = 0; c < r->p->nconfigs; c++)
        for (int i = 0; i < r->p->ntensors; i++) {
            int64_t elems = 0;
            if (avo_problem_tensor_elems(r->p, c, i, &elems, err, sizeof err) == 0) {
                const size_t b = (size_t)elems * avo_problem_dtype_size(r->p->tensors[i].dtype);
                most[i] = b > most[i] ? b : most[i];
            }
        }
    r->dev.n = 0;
    int rc = avo_gpu_share(r->gpu, r->p->ntensors, most, r->dev.fd, r->dev.bytes, err, sizeof err);
    if (rc != 0) {
        snprintf(r->dev_note, sizeof r->dev_note, "runner: %.280s", err);
        pin_areas(r);
        return;
    }
    r->dev.n = r->p->ntensors;
    check_device_fill(r);
    /* Inputs made and checked on the device leave the host copies laid out
     * but untouched: page-locking them (three regions the size of the
     * largest config, faulted in and registered) cost every evaluation
     * about 0.5 s on attention and bought nothing. The cached references
     * still cross from the host, pageable. */
    if (r->dev_fill) {
        snprintf(r->dev_note, sizeof r->dev_note,
                 "checker (host copies: none, the inputs are generated and checked on the device)");
        snprintf(r->ref_copies, sizeof r->ref_copies,
                 "pageable: only cached references cross, the inputs and checks stay on the device");
        return;
    }
    char note[240];
    r->shm_pinned = avo_gpu_pin(r->gpu, r->shm, r->shm_bytes, note, sizeof note) == 0;
    snprintf(r->dev_note, sizeof r->dev_note, "checker (host copies %s)", note);
    pin_areas(r);
}

/* PINGS empty round trips, each with the freeze and thaw every call has,
 * before the candidate is loaded: nothing of it exists yet to slow them.
 * The minimum is subtracted from every sample (capped at
 * CPU_OVERHEAD_MAX), the median reported. */
static int calibrate(run_ctx *r, char *why, size_t wl)
{
    double t[PINGS];
    for (int i = 0; i < PINGS; i++) {
        int rc = avo_runner_ping(&r->ln->run, r->deadline, &t[i], why, wl);
        if (rc)
            return rc;
    }
    qsort(t, PINGS, sizeof *t, harness_cmp_double);
    r->ln->overhead_measured = t[0];
    r->ln->overhead = fmin(t[0], CPU_OVERHEAD_MAX);
    r->ln->overhead_median = t[PINGS / 2];
    return 0;
}

static json_t *runner_json(const lane *ln, int calibrated)
{
    json_t *sig = json_null();
    if (ln->run.signal) {
        char name[32];
        const char *ab = sigabbrev_np(ln->run.signal);
        snprintf(name, sizeof name, "SIG%s", ab ? ab : "?");
        sig = json_string(name);
    }
    return json_pack("{s:b, s:i, s:b, s:o, s:o, s:i, s:o, s:o, s:b, s:s, s:o}", "separate_process", 1, "uid",
                     ln->run.uid, "syscall_filter", ln->run.seccomp == 2, "overhead_s",
                     calibrated ? json_real(ln->overhead) : json_null(), "overhead_median_s",
                     calibrated ? json_real(ln->overhead_median) : json_null(), "overhead_pings",
                     calibrated ? PINGS : 0, "signal", sig, "exit",
                     ln->run.exit_code >= 0 && !ln->run.signal ? json_integer(ln->run.exit_code) : json_null(), "pidns",
                     ln->run.pidns, "freezer", ln->run.freezer ? ln->run.freezer : "none", "isolation_note",
                     ln->run.isolation_note[0] ? json_string(ln->run.isolation_note) : json_null());
}

static const char *outcome_of(int res, int timed)
{
    switch (res) {
    case CHECK_WRONG:
        return timed ? "cheat_suspected" : "wrong_result";
    case CHECK_INPUTS:
        return "cheat_suspected";
    case CHECK_CRASH:
        return "crash";
    case CHECK_TIMEOUT:
        return "timeout";
    case CHECK_FORGED:
        return "cheat_suspected";
    case CHECK_FAULT:
        return "crash";
    case CHECK_IDLE:
        return "cheat_suspected";
    default:
        return "ok";
    }
}

/* The config's "references": how many checks ran the reference, and how
 * many reused the outputs of one that had run on the same input set
 * (check_outputs). */
static json_t *references_json(const run_ctx *r)
{
    json_t *cache = json_null();
    if (r->cache.dirfd >= 0) {
        char note[400] = "";
        if (r->cache_corrupt)
            snprintf(note, sizeof note,
                     "%d cache file(s) failed their checksum or length: recomputed and rewritten%s%s", r->cache_corrupt,
                     r->cache_note[0] ? "; " : "", r->cache_note);
        else
            snprintf(note, sizeof note, "%s", r->cache_note);
        cache = json_pack("{s:b,s:i,s:i,s:i,s:i,s:i,s:o}", "used", r->cache_cfg, "hits", r->cache_hits, "resident",
                          r->res_hits, "misses", r->cache_misses, "corrupt", r->cache_corrupt, "failed",
                          r->cache_failed, "note", note[0] ? json_string(note) : json_null());
    }
    json_t *rows = json_null();
    if (r->ref_rows)
        rows = rows_mode(r) ? json_pack("{s:i,s:I,s:I}", "checks", r->row_checks, "per_check",
                                        (json_int_t)r->p->check_rows_sample, "of", (json_int_t)r->rows_total)
                            : json_pack("{s:i,s:s}", "checks", 0, "note",
                                        !r->dev_fill ? "whole checks: the inputs are not generated on the device"
                                                     : "whole checks: the sample is over half of the config's rows");
    return json_pack("{s:i,s:i,s:o,s:o}", "computed", r->refs_computed, "reused", r->refs_reused, "cache", cache,
                     "rows", rows);
}

/* The config's "checks": how its calls were checked. */
static json_t *checks_json(const config_run *cr)
{
    return json_pack("{s:i,s:i,s:i,s:o,s:i,s:o,s:o}", "calls", cr->calls, "checked", cr->checked, "random_checks",
                     cr->random_checks, "check_probability", jreal(cr->q), "samples_checked", cr->samples_checked,
                     "checked_median_s", jreal(cr->checked_median), "idle_cpu_s",
                     cr->idle_cpu_s >= 0 ? jreal(cr->idle_cpu_s) : json_null());
}

/* The first r->nsets calls of config c as an evaluation makes them (fresh
 * input sets, laid out alike, every one checked), with no timing: a
 * profile-only run's, and screening's check of the configs it does not
 * time. With counters (profile-only), on a CPU the perf events count those
 * calls (*counters: their per-call means, with whether the hardware events
 * were readable and why not); a GPU's counters come from the CUPTI pass
 * after them. counters NULL: none. */
static int checked_calls(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_tensors *rx, json_t **counters,
                         int *fail_call, char *why, size_t wl)
{
    const unsigned prep = GPU_STEPS;
    int res = CHECK_OK, i;
    if (counters)
        *counters = NULL;
    if (!r->cuda && counters)
        avo_counters_start(&r->ctr);
    for (i = 0; i < r->nsets && res == CHECK_OK; i++) {
        double tp = avo_phases_now(), rt = 0, ref_s = 0;
        int ret = 0;
        avo_gpu_times ev;
        char sub[400] = "";
        lay_out_call(r, c, i, x, pristine, &tp);
        if (r->cuda) {
            res = gputime_call(r, c, x, prep, 0, &ret, &rt, &ev, sub, sizeof sub);
            /* The outputs back to the shared region for the check (unless
             * it runs on the device). */
            if (res == CHECK_OK && ret == 0 && !r->dev_fill)
                res = r->dev.n ? gputime_checker_copies(r, c, x, AVO_GPU_FETCH, sub, sizeof sub)
                               : harness_cand_call_flags(r, c, x, AVO_GPU_FETCH, &ret, &rt, &ev, sub, sizeof sub);
        } else {
            res = harness_cand_call_flags(r, c, x, 0, &ret, &rt, &ev, sub, sizeof sub);
        }
        if (res == CHECK_OK)
            res = check_basic(r, ret, x, sub, sizeof sub);
        avo_phases_lap(r->ph, "calls", &tp);
        if (res == CHECK_OK)
            res = check_outputs(r, c, call_set(r, i), 0, x, pristine, rx, &ref_s, sub, sizeof sub);
        if (res != CHECK_OK) {
            *fail_call = i;
            if (res > 0)
                snprintf(why, wl, "%s", sub);
        }
    }
    if (!r->cuda && counters) {
        avo_counter_values cv;
        avo_counters_stop(&r->ctr, &cv);
        if (res == CHECK_OK && (*counters = avo_counters_values_json(&r->ctr, &cv, i))) {
            json_object_set_new(*counters, "available", json_boolean(r->ctr.hw));
            json_object_set_new(*counters, "reason", r->ctr.hw ? json_null() : json_string(r->ctr.reason));
            json_object_set_new(*counters, "source",
                                json_string("perf_event_open, user space, over the checked calls"));
            json_object_set_new(*counters, "calls", json_integer(i));
        }
    }
    return res;
}

/* The profile-only run (avo_harness_opts.profile_only): each config asked
 * for (o->config, else those counters.configs lists) gets its checked
 * calls and then its counters, appended to configs as {name, calls, check,
 * counters}. A failed check ends the run with that outcome in *outcome and
 * detail; a negative int is the checker's own failure (err). */
static int profile_run(run_ctx *r, const avo_harness_opts *o, json_t *configs, avo_phases *cph, int *nstarted,
                       const char **outcome, char *detail, size_t dl, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    avo_tensors x = {0}, pristine = {0}, rx = {0};
    int rc = 0;
    for (int c = 0; c < p->nconfigs && rc == 0; c++) {
        const char *name = p->configs[c].name;
        if (o->config ? strcmp(name, o->config) != 0 : (r->cuda && !p->configs[c].profile))
            continue;
        config_begin(r, c);
        r->ph = &cph[c];
        *nstarted = c + 1;
        double t = avo_phases_now();
        if ((rc = avo_tensors_place(&x, p, c, r->shm, r->shm_bytes - (r->cuda ? PROFILE_AREA : 0), err, errlen)) ||
            (rc = avo_tensors_place(&pristine, p, c, r->area, r->area_bytes, err, errlen)) ||
            (rc = avo_tensors_place(&rx, p, c, r->ref_area, r->area_bytes, err, errlen)))
            break;
        avo_phases_lap(r->ph, "layout", &t);
        json_t *ctr = NULL;
        int fail = 0;
        char why[600] = "";
        int res = checked_calls(r, c, &x, &pristine, &rx, &ctr, &fail, why, sizeof why);
        t = avo_phases_now();
        if (res == AVO_HARNESS_EREFERENCE || res < 0) {
            rc = res;
            snprintf(err, errlen, "%sconfig %s: %s", res == AVO_HARNESS_EREFERENCE ? "reference invalid: " : "", name,
                     res == -ENOMEM ? "out of memory" : why);
        } else if (res != CHECK_OK) {
            *outcome = outcome_of(res, 0);
            snprintf(detail, dl, "config %s, call %d (checked, profile run): %s", name, fail, why);
            avo_tensors_free(&x);
            avo_tensors_free(&pristine);
            avo_tensors_free(&rx);
            return 0;
        } else {
            if (r->cuda) {
                ctr = profile_config(r, c, &x, &pristine);
                avo_phases_lap(r->ph, "counters", &t);
            }
            json_array_append_new(configs, json_pack("{s:s,s:i,s:{s:o,s:o},s:o}", "name", name, "calls", r->nsets,
                                                     "check", "rel_l2", jreal(r->worst_rel_l2), "max_abs",
                                                     jreal(r->worst_max_abs), "counters", ctr ? ctr : json_null()));
        }
        avo_tensors_free(&x);
        avo_tensors_free(&pristine);
        avo_tensors_free(&rx);
        if (r->cuda && !r->lanes[LANE_CAND].run.pid && rc == 0) {
            *outcome = "crash";
            snprintf(detail, dl, "config %s: the runner died in the counters pass", name);
            return 0;
        }
    }
    if (rc == 0 && json_array_size(configs) == 0) {
        snprintf(err, errlen, "%s", o->config ? "no such configuration" : "counters.configs lists no configuration");
        rc = -EINVAL;
    }
    if (rc == 0)
        snprintf(detail, dl, "%zu configs profiled: the first %d calls of each checked, no timing, no score",
                 json_array_size(configs), r->nsets);
    return rc;
}

/* The timed calls' wall time against the runner's CPU time over them (its
 * control group's usage, read while frozen before and after each call):
 * what the runner spent off a CPU, waiting for one on a loaded host (or
 * sleeping). Threads on several CPUs can make the gap negative, hiding
 * waits: a lower bound. */
static json_t *clock_gap_json(int cuda, int known, double wall, double cpu, int outside_runs, double outside_max,
                              double checker_wait)
{
    const char *note = cuda     ? "not measured on a GPU problem: the runner waits for the GPU off a CPU"
                       : !known ? "not measured: no control group counts the runner's CPU time on this host"
                                : NULL;
    if (note)
        return json_pack("{s:n,s:n,s:n,s:n,s:s}", "wall_s", "task_clock_s", "gap_s", "off_cpu_fraction", "note", note);
    const double gap = wall - cpu;
    return json_pack("{s:o,s:o,s:o,s:o,s:n,s:i,s:o,s:o}", "wall_s", jreal(wall), "task_clock_s", jreal(cpu), "gap_s",
                     jreal(gap), "off_cpu_fraction", jreal(wall > 0 ? fmax(gap, 0) / wall : 0), "note",
                     "outside_charged_runs", outside_runs, "outside_charged_max_s", jreal(outside_max),
                     "checker_wait_s", checker_wait >= 0 ? jreal(checker_wait) : json_null());
}

/* A config's noise: its rse against the problem's target (the figure its
 * stopping rule compares), why its timing stopped, its clock gap. */
static void noise_json(const avo_problem *p, const config_run *cr, int cuda, json_t *cj)
{
    const char *stop = avo_timing_stop_name(cr->stop);
    json_object_set_new(cj, "noisy", json_boolean(avo_timing_noisy(cr->st.rse, p->timing_rse)));
    json_object_set_new(cj, "rse_target", jreal(p->timing_rse));
    json_object_set_new(cj, "stopped_by", stop ? json_string(stop) : json_null());
    json_object_set_new(cj, "clock_gap",
                        clock_gap_json(cuda, cr->cpu_known, cr->wall_s, cr->cpu_s, cr->outside_runs, cr->outside_max_s,
                                       cr->checker_wait_known ? cr->checker_wait_s : -1));
}

/* The result's noisy_configs and clock_gap, summed over its configs. */
static void noise_totals(json_t *result, int cuda)
{
    size_t i;
    json_t *c;
    int noisy = 0, known = 1, outside = 0;
    double wall = 0, cpu = 0, outside_max = 0, waited = 0;
    json_array_foreach(json_object_get(result, "configs"), i, c)
    {
        const json_t *g = json_object_get(c, "clock_gap");
        if (json_is_false(json_object_get(c, "timed")))
            continue; /* screened out: checked, not timed */
        noisy += json_is_true(json_object_get(c, "noisy"));
        known &= json_is_number(json_object_get(g, "task_clock_s"));
        wall += json_number_value(json_object_get(g, "wall_s"));
        cpu += json_number_value(json_object_get(g, "task_clock_s"));
        outside += (int)json_integer_value(json_object_get(g, "outside_charged_runs"));
        outside_max = fmax(outside_max, json_number_value(json_object_get(g, "outside_charged_max_s")));
        const json_t *w = json_object_get(g, "checker_wait_s");
        waited = waited >= 0 && json_is_number(w) ? waited + json_number_value(w) : -1;
    }
    json_object_set_new(result, "noisy_configs", json_integer(noisy));
    json_object_set_new(result, "clock_gap",
                        i == 0 && !cuda ? json_pack("{s:n,s:n,s:n,s:n,s:s}", "wall_s", "task_clock_s", "gap_s",
                                                    "off_cpu_fraction", "note", "no configuration was timed")
                                        : clock_gap_json(cuda, known, wall, cpu, outside, outside_max, waited));
}

/* The result's "phases": "total" (the harness's wall up to here), the steps
 * around the configs, each per-config phase summed over the configs, then
 * per config ("configs") and, for CUDA, the GPU's busy time by the calls'
 * own events ("gpu": what bench/eval_cost.sh divides by the evaluation's
 * wall). Every number is a disjoint stretch of wall time, so the phases sum
 * to no more than "total". */
static json_t *phases_json(const run_ctx *r, const avo_phases *top, const avo_phases *cph, int n, double t_start)
{
    avo_phases sum = *top;
    for (int c = 0; c < n; c++)
        avo_phases_merge(&sum, &cph[c]);
    json_t *j = avo_phases_json(&sum), *cj = json_array();
    if (!j || !cj) {
        json_decref(j);
        json_decref(cj);
        return json_null();
    }
    json_object_set_new(j, "total", json_real(avo_phases_now() - t_start));
    for (int c = 0; c < n; c++) {
        json_t *one = avo_phases_json(&cph[c]);
        if (one)
            json_object_set_new(one, "name", json_string(r->p->configs[c].name));
        json_array_append_new(cj, one ? one : json_null());
    }
    json_object_set_new(j, "configs", cj);
    if (r->cuda)
        json_object_set_new(j, "gpu",
                            json_pack("{s:s,s:f,s:i,s:f,s:i,s:f,s:i}", "method", "cuda_events", "candidate_s",
                                      r->gpu_s[LANE_CAND], "candidate_calls", r->gpu_calls[LANE_CAND], "baseline_s",
                                      r->gpu_s[LANE_BASE], "baseline_calls", r->gpu_calls[LANE_BASE], "against_s",
                                      r->gpu_s[LANE_AGAINST], "against_calls", r->gpu_calls[LANE_AGAINST]));
    return j;
}

/* Config c's tensors laid out: the call's in the shared region, the
 * checker's pristine copy and the reference's. With the inputs made and
 * checked on the device, the host's copies only carry the sizes: laid out,
 * never touched. */
static int place_config(run_ctx *r, int c, avo_tensors *x, avo_tensors *pristine, avo_tensors *rx, char *err,
                        size_t errlen)
{
    const avo_problem *p = r->p;
    int rc;
    int (*const lay)(avo_tensors *, const avo_problem *, int, void *, size_t, char *,
                     size_t) = r->dev_fill ? avo_tensors_place_lazy : avo_tensors_place;
    if ((rc = lay(x, p, c, r->shm, r->shm_bytes - (r->cuda ? PROFILE_AREA : 0), err, errlen)) ||
        (rc = lay(pristine, p, c, r->area, r->area_bytes, err, errlen)) ||
        (rc = lay(rx, p, c, r->ref_area, r->area_bytes, err, errlen)))
        return rc;
    return 0;
}

/* The JSON a config's calls made, dropped (the config is not scored). */
static void config_run_drop(config_run *cr)
{
    json_decref(cr->counters);
    json_decref(cr->clock);
    json_decref(cr->events);
}

/* The candidate failed config c's calls (res, a CHECK_ code): *outcome and
 * detail say how. */
static void config_failed(const run_ctx *r, int c, int res, const config_run *cr, const char *why, const char **outcome,
                          char *detail, size_t dl)
{
    const avo_problem *p = r->p;
    const int sampled = cr->fail_call >= r->nsets;
    *outcome = outcome_of(res, sampled);
    if ((res == CHECK_WRONG) && sampled)
        snprintf(detail, dl,
                 "config %s: correct on its first %d calls, wrong on call %d (a fresh input set, checked "
                 "unannounced): %s",
                 p->configs[c].name, r->nsets, cr->fail_call, why);
    else if (res == CHECK_IDLE)
        snprintf(detail, dl, "config %s: %s", p->configs[c].name, why);
    else
        snprintf(detail, dl, "config %s, call %d%s: %s", p->configs[c].name, cr->fail_call,
                 sampled ? "" : " (checked before timing)", why);
}

/* A scored config's result entry: its figures, checks and noise, and on a
 * GPU its events and clock (which it takes over). */
static json_t *config_entry(const run_ctx *r, int c, config_run *cr, double score, double gflops, double gbps)
{
    const avo_problem *p = r->p;
    json_t *cj = config_json(p, c, &cr->st, score, gflops, gbps, r->cuda ? NAN : cr->claimed_median, cr->counters, r);
    json_object_set_new(cj, "checks", checks_json(cr));
    noise_json(p, cr, r->cuda, cj);
    if (r->cuda) {
        json_object_set_new(cj, "timing_source", json_string("cuda_events"));
        json_object_set_new(cj, "round_trip_median_s", jreal(cr->claimed_median));
        json_object_set_new(cj, "clock_discarded", json_integer(cr->discarded));
        json_object_set_new(cj, "sm_clock", cr->clock ? cr->clock : json_null());
        json_object_set_new(cj, "events", cr->events ? cr->events : json_null());
        json_object_set_new(cj, "tflops", p->flops ? jreal(gflops / 1000) : json_null());
    } else {
        json_decref(cr->clock);
        json_decref(cr->events);
    }
    return cj;
}

/* Config c timed (paired when the against is loaded, into ps) and scored,
 * held to every rule: its calls' checks, a finite score, the roofline bound,
 * and the against to the same bound. 0 with *cj (the config's result entry)
 * and *log_score; 0 with *cj NULL, *outcome and detail when the candidate
 * failed; a negative int (err) when the evaluation itself cannot go on.
 * with_baseline: the trusted baseline timed beside it (a full run's). */
static int time_config(run_ctx *r, int c, pair_set *ps, int with_baseline, json_t **cj, double *log_score,
                       const char **outcome, char *detail, size_t dl, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    avo_tensors x = {0}, pristine = {0}, rx = {0};
    char why[600];
    int rc = 0;
    *cj = NULL;
    config_begin(r, c);
    double t = avo_phases_now();
    if ((rc = place_config(r, c, &x, &pristine, &rx, err, errlen)))
        goto out;
    avo_phases_lap(r->ph, "layout", &t);
    config_run cr;
    int res = r->against_state == 1 ? run_config_paired(r, c, &x, &pristine, &rx, &cr, ps, why, sizeof why)
                                    : run_config(r, c, &x, &pristine, &rx, &r->lanes[LANE_CAND], &cr, why, sizeof why);
    t = avo_phases_now();
    if (res == AVO_HARNESS_EREFERENCE) {
        rc = res;
        snprintf(err, errlen, "reference invalid: on config %s: %s", p->configs[c].name, why);
        goto out;
    }
    if (res < 0) {
        rc = res;
        snprintf(err, errlen, "config %s: %s", p->configs[c].name, res == -ENOMEM ? "out of memory" : why);
        goto out;
    }
    if (res != CHECK_OK) {
        config_run_drop(&cr);
        config_failed(r, c, res, &cr, why, outcome, detail, dl);
        goto out;
    }
    double flops = 0, bytes = 0;
    if (p->flops)
        avo_problem_eval_config(p, c, p->flops, &flops, NULL, 0);
    if (p->bytes)
        avo_problem_eval_config(p, c, p->bytes, &bytes, NULL, 0);
    const double med = cr.st.median;
    double gflops = flops / med * 1e-9, gbps = bytes / med * 1e-9;
    double score = strcmp(p->score_metric, "flops") == 0 ? gflops : gbps;
    /* Faster than the hardware can go is not an optimisation: the work
     * ran outside the timed region, or the time was forged. Only the
     * arithmetic peak is a hard bound (a byte rate computed from the
     * minimal traffic can beat DRAM bandwidth when data stays in cache);
     * a CPU problem without a declared peak gets the host's. */
    const double peak = p->roofline_gflops > 0 ? p->roofline_gflops
                        : r->cuda              ? 0
                                               : sysconf(_SC_NPROCESSORS_ONLN) * HOST_CORE_FLOPS * 1e-9;
    if (peak > 0 && p->flops && gflops > ROOFLINE_SLACK * peak) {
        config_run_drop(&cr);
        *outcome = "cheat_suspected";
        snprintf(detail, dl,
                 "config %s: %.4g GFLOP/s measured, beyond the %s arithmetic peak of %.4g GFLOP/s: the work "
                 "was not inside the timed region",
                 p->configs[c].name, gflops, p->roofline_gflops > 0 ? "declared" : "host's", peak);
        goto out;
    }
    if (!(score > 0) || !isfinite(score)) {
        config_run_drop(&cr);
        *outcome = "wrong_result";
        snprintf(detail, dl, "config %s: median time %g s gives no finite score", p->configs[c].name, med);
        goto out;
    }
    *log_score = log(score);
    /* The against is held to the same bound. */
    if (r->against_state == 1 && peak > 0 && p->flops && flops / ps->against_median * 1e-9 > ROOFLINE_SLACK * peak) {
        snprintf(why, sizeof why, "%.4g GFLOP/s measured, beyond the arithmetic peak of %.4g GFLOP/s",
                 flops / ps->against_median * 1e-9, peak);
        against_failed(r, c, CHECK_FORGED, r->nsets, why);
    }
    *cj = config_entry(r, c, &cr, score, gflops, gbps);
    avo_phases_lap(r->ph, "scoring", &t);
    if (with_baseline && r->base_so) {
        json_object_set_new(*cj, "baseline", time_baseline(r, c, &x, &pristine, &rx, med, cr.st.runs));
        avo_phases_lap(r->ph, "baseline", &t);
    }
    json_object_set_new(*cj, "references", references_json(r));
out:
    avo_tensors_free(&x);
    avo_tensors_free(&pristine);
    avo_tensors_free(&rx);
    if (*cj)
        avo_phases_lap(r->ph, "scoring", &t);
    return rc;
}

/* Config c outside the screen: its checked calls, and its result entry
 * (*entry: checked, not timed). A failed check: 0 with *failed, *outcome
 * and detail; a negative int: err. */
static int screen_check_config(run_ctx *r, int c, json_t **entry, int *failed, const char **outcome, char *detail,
                               size_t dl, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    avo_tensors x = {0}, pristine = {0}, rx = {0};
    char why[600] = "";
    int fail = 0;
    /* A stand-in: its sizes swapped in for the checked calls (every step
     * of a call reads the config's sizes), and back after them. */
    if ((r->stand_in = p->configs[c].has_check_size))
        swap_check_sizes(p, c);
    config_begin(r, c);
    double t = avo_phases_now();
    int res = place_config(r, c, &x, &pristine, &rx, err, errlen);
    if (res == 0) {
        avo_phases_lap(r->ph, "layout", &t);
        res = checked_calls(r, c, &x, &pristine, &rx, NULL, &fail, why, sizeof why);
    } else {
        fail = -1; /* err says why */
    }
    avo_tensors_free(&x);
    avo_tensors_free(&pristine);
    avo_tensors_free(&rx);
    if (r->stand_in)
        swap_check_sizes(p, c);
    const int stand_in = r->stand_in;
    r->stand_in = 0;
    if (fail < 0)
        return res;
    if (res == AVO_HARNESS_EREFERENCE || res < 0) {
        snprintf(err, errlen, "%sconfig %s: %s", res == AVO_HARNESS_EREFERENCE ? "reference invalid: " : "",
                 p->configs[c].name, res == -ENOMEM ? "out of memory" : why);
        return res;
    }
    if (res != CHECK_OK) {
        *failed = 1;
        *outcome = outcome_of(res, 0);
        snprintf(detail, dl, "config %s%s, call %d (checked before timing): %s", p->configs[c].name,
                 stand_in ? " at its screen.check_sizes" : "", fail, why);
        return 0;
    }
    *entry = json_pack("{s:s,s:n,s:b,s:i,s:{s:o,s:o},s:s}", "name", p->configs[c].name, "score", "timed", 0, "calls",
                       r->nsets, "check", "rel_l2", jreal(r->worst_rel_l2), "max_abs", jreal(r->worst_max_abs), "note",
                       stand_in ? "checked at its screen.check_sizes, not timed: the candidate was screened out before "
                                  "the full run"
                                : "checked, not timed: the candidate was screened out before the full run");
    if (*entry && stand_in) {
        json_t *sizes = json_object();
        for (int s = 0; s < p->nsizes; s++)
            json_object_set_new(sizes, p->sizes[s], json_integer(p->configs[c].check_size[s]));
        json_object_set_new(*entry, "check_sizes", sizes);
    }
    return 0;
}

/* Config c's sizes and its stand-in's (screen.check_sizes) exchanged: the
 * problem is this process's own copy, and every step of a call reads the
 * config's sizes from it. */
static void swap_check_sizes(const avo_problem *p, int c)
{
    avo_config_spec *cs = &p->configs[c];
    for (int s = 0; s < p->nsizes; s++) {
        const int64_t v = cs->size[s];
        cs->size[s] = cs->check_size[s];
        cs->check_size[s] = v;
    }
}

/* The result's "screen" (*screen) from the screen's paired member pj, its
 * configs' names, their aggregate and the wall time of its checks and its
 * timed stage (lsum over nscreen: their log scores); *hi: the upper end of its interval. 1 when the candidate is
 * screened out, 0 when not, -ENOMEM. */
static int screen_json(const run_ctx *r, json_t *pj, json_t *names, double lsum, int nscreen, const double wall[2],
                       json_t **screen, double *hi)
{
    const char *perr = json_string_value(json_object_get(pj, "error"));
    if (!perr)
        *hi = json_number_value(json_array_get(json_object_get(pj, "ci"), 1));
    const int screened = !perr && *hi < 1;
    /* The interval's own (a look's, where the screen has two). */
    const json_t *conf = json_object_get(pj, "confidence");
    *screen = json_pack("{s:b,s:O,s:i,s:f,s:{s:f,s:f}}", "screened_out", screened, "configs", names, "runs",
                        r->p->screen_runs, "confidence", json_is_number(conf) ? json_number_value(conf) : r->confidence,
                        "wall_s", "checks", wall[0], "timed", wall[1]);
    if (!*screen)
        return -ENOMEM;
    if (nscreen > 0)
        json_object_set_new(*screen, "aggregate", jreal(exp(lsum / nscreen))); /* the screen's configs' only */
    json_object_set_new(*screen, "rule",
                        json_string("screened out when, at a look, the upper end of the two-sided interval (at "
                                    "looks.confidence) of the paired ratio over the screen's configurations is "
                                    "under 1"));
    if (perr) {
        json_object_set_new(*screen, "error", json_string(perr));
    } else {
        json_object_set(*screen, "ratio", json_object_get(pj, "ratio"));
        json_object_set(*screen, "low", json_object_get(pj, "low"));
        json_object_set(*screen, "ci", json_object_get(pj, "ci"));
    }
    return screened;
}

/* Screening's looks (docs/evaluation.md, "Screening"): a screen whose
 * screen.runs hold twice the pairs an interval needs is looked at after
 * half of them too, and a candidate already slower beyond noise stops
 * there. The pairs at which the first look is made, or 0 for one look. */
static int screen_first_look(const avo_problem *p)
{
    const int need = p->timing_min_runs > PAIRED_MIN_PAIRS ? p->timing_min_runs : PAIRED_MIN_PAIRS;
    return p->screen_runs >= 2 * need ? p->screen_runs / 2 : 0;
}

/* One stage of the screen's timing: each screen config paired until its
 * pair set holds `pairs` (a later stage adds to the same sets, on input
 * sets from set_base, none an earlier stage gave), entry[c] the stage's
 * entry, names, *lsum and *nscreen the stage's. 0; 1 when the candidate
 * failed a config (*outcome, detail); a negative int: err. */
static int screen_stage(run_ctx *r, avo_phases *cph, int *nstarted, int pairs, int set_base, pair_set *sp,
                        json_t **entry, json_t *names, double *lsum, int *nscreen, const char **outcome, char *detail,
                        size_t dl, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    r->set_base = set_base;
    r->screen_pairs = pairs;
    *lsum = 0;
    *nscreen = 0;
    json_array_clear(names);
    for (int c = 0; c < p->nconfigs && r->against_state == 1; c++) {
        if (!p->configs[c].screen)
            continue;
        r->ph = &cph[c];
        *nstarted = *nstarted > c + 1 ? *nstarted : c + 1;
        json_decref(entry[c]);
        entry[c] = NULL;
        double ls = 0;
        int rc = time_config(r, c, &sp[c], 0, &entry[c], &ls, outcome, detail, dl, err, errlen);
        if (rc || !entry[c])
            return rc ? rc : 1;
        json_array_append_new(names, json_string(p->configs[c].name));
        *lsum += ls;
        (*nscreen)++;
    }
    return 0;
}

/* The screen's paired member at one look: its interval at the look's
 * confidence (with two looks each takes half the risk of calling a
 * candidate that is not slower slower, so the two together take no more
 * than one look did: Bonferroni). */
static json_t *screen_look(run_ctx *r, const pair_set *sp, double look_conf)
{
    const double conf = r->confidence;
    r->confidence = look_conf;
    json_t *pj = paired_json(r, sp, 1);
    r->confidence = conf;
    return pj;
}

/* The result's screen.looks: how many were made, at how many pairs, and
 * each one's confidence. */
static void screen_looks_json(json_t *screen, const avo_problem *p, int first, int looks, double look_conf)
{
    json_t *at = first ? json_pack("[i,i]", first, p->screen_runs) : json_pack("[i]", p->screen_runs);
    json_object_set_new(
        screen, "looks",
        json_pack("{s:i,s:o,s:f}", "made", looks, "pairs", at ? at : json_null(), "confidence", look_conf));
}

/* Screening (docs/evaluation.md, "Screening"): each config outside the
 * screen gets its checked calls (input sets from SCREEN_CHECK_SET), then
 * the screen's configs are timed paired, screen.runs pairs each (input
 * sets from SCREEN_TIMED_SET): so a candidate is screened out only once it
 * was checked on every config, and the full run that follows sees none of
 * these sets. The screen's paired interval decides: its upper end under 1
 * (slower than the against beyond noise at the confidence) screens the
 * candidate out: *out is then its result's configs (the screen's timed and
 * scored, the others checked only), *log_sum and *nscored their scores',
 * *paired the screen's paired member, and detail says so. Else *out stays
 * NULL and the full run follows. *screen: the result's "screen" either way.
 * A failed check: 0 with *outcome and detail; a negative int: err. */
static int screen_run(run_ctx *r, avo_phases *cph, int *nstarted, json_t **screen, json_t **paired, json_t **out,
                      double *log_sum, int *nscored, const char **outcome, char *detail, size_t dl, char *err,
                      size_t errlen)
{
    const avo_problem *p = r->p;
    const int n = p->nconfigs;
    json_t **entry = calloc((size_t)n, sizeof *entry);
    pair_set *sp = calloc((size_t)n, sizeof *sp);
    json_t *names = json_array(), *pj = NULL;
    int rc = 0, nscreen = 0, nchecked = 0;
    double lsum = 0;
    const double t0 = avo_phases_now();
    if (!entry || !sp || !names) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    r->set_base = SCREEN_CHECK_SET;
    for (int c = 0; c < n; c++) {
        if (p->configs[c].screen)
            continue;
        r->ph = &cph[c];
        *nstarted = *nstarted > c + 1 ? *nstarted : c + 1;
        int failed = 0;
        if ((rc = screen_check_config(r, c, &entry[c], &failed, outcome, detail, dl, err, errlen)) || failed)
            goto cleanup;
        nchecked++;
    }
    const double t1 = avo_phases_now();
    const int first = screen_first_look(p);
    const double look_conf = first ? (1 + r->confidence) / 2 : r->confidence;
    int looks = 0;
    for (int look = first ? 0 : 1; look < 2; look++) {
        if ((rc = screen_stage(r, cph, nstarted, look == 0 ? first : p->screen_runs,
                               look == 0 || !first ? SCREEN_TIMED_SET : SCREEN_MORE_SET, sp, entry, names, &lsum,
                               &nscreen, outcome, detail, dl, err, errlen))) {
            rc = rc > 0 ? 0 : rc;
            goto cleanup;
        }
        looks++;
        json_decref(pj);
        pj = screen_look(r, sp, look_conf);
        /* The screen decides only on a pairing it completed: an against
         * that failed on it leaves the full run (unpaired) to score the
         * candidate. */
        if (json_object_get(pj, "error") || json_number_value(json_array_get(json_object_get(pj, "ci"), 1)) < 1)
            break;
    }
    const double wall[2] = {t1 - t0, avo_phases_now() - t1};
    double hi = NAN;
    const int screened = screen_json(r, pj, names, lsum, nscreen, wall, screen, &hi);
    if (screened >= 0)
        screen_looks_json(*screen, p, first, looks, look_conf);
    if (screened < 0) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    if (!screened)
        goto cleanup;
    /* Screened out: what it has is kept, and said to be partial. */
    json_t *cfgs = json_array();
    for (int c = 0; cfgs && c < n; c++) {
        json_array_append_new(cfgs, entry[c]);
        entry[c] = NULL;
    }
    json_object_set_new(pj, "scope", json_string("screen"));
    json_object_set_new(pj, "screened_out", json_true());
    *paired = pj;
    pj = NULL;
    *out = cfgs;
    *log_sum = lsum;
    *nscored = nscreen;
    snprintf(detail, dl,
             "screened out: %.4g x the against's speed over the %d configs of the screen after %d pairs each (%g%% "
             "interval [%.4g, %.4g], under 1): slower beyond noise, so the other %d configs were checked (%d calls "
             "each, all within tolerance) but not timed; scores and aggregate are the screen's configs' only",
             json_number_value(json_object_get(*screen, "ratio")), nscreen,
             looks == 1 && first ? first : p->screen_runs, look_conf * 100,
             json_number_value(json_array_get(json_object_get(*screen, "ci"), 0)), hi, nchecked, r->nsets);
cleanup:
    r->set_base = 0;
    r->screen_pairs = 0;
    for (int c = 0; entry && c < n; c++)
        json_decref(entry[c]);
    for (int c = 0; sp && c < n; c++)
        pair_set_free(&sp[c]);
    free(entry);
    free(sp);
    json_decref(names);
    json_decref(pj);
    return rc;
}

/* What avo_harness_run carries from one phase to the next: the result's
 * parts as they are made, and where its wall time goes. */
typedef struct {
    const avo_harness_opts *o;
    const char *outcome;
    char detail[1024];
    double logsum;
    int calibrated;
    int nstarted, nscored;
    json_t *configs;
    json_t *screen, *screen_paired; /* screening: the result's "screen", and when screened out
                                       its "paired" (the screen's) */
    /* Where the harness's wall time goes (result "phases"): the steps
     * around the configs in top, each config's own in cph[c]; large
     * problems spend far more in the protocol than in the timed calls. */
    double t_start, t;
    avo_phases top;
    avo_phases *cph;
    pair_set *pairs;
    int done; /* the outcome is known: the result follows (a phase's "goto done") */
    /* The confirmation round (CPU, paired): when the timed stages began,
     * each round's paired member, and the result's paired.confirmation
     * when no second round ran. */
    double t_timed;
    json_t *round[2];
    json_t *confirm;
} harness_eval;

/* The checker's two areas (the call's pristine inputs, the reference's run
 * on them), each sized for the largest config. */
static int alloc_areas(run_ctx *r, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    for (int c = 0; c < p->nconfigs; c++)
        if (avo_tensors_span(p, c) > r->area_bytes)
            r->area_bytes = avo_tensors_span(p, c);
    r->area_bytes = (r->area_bytes + 4095) / 4096 * 4096;
    if (!(r->area = aligned_alloc(4096, r->area_bytes)) || !(r->ref_area = aligned_alloc(4096, r->area_bytes))) {
        snprintf(err, errlen, "cannot allocate %zu bytes for the checker's tensors", 2 * r->area_bytes);
        return -ENOMEM;
    }
    /* Not inherited by the runners' forks (they exec at once and never
     * touch them): fork copies page-locked (DMA-pinned) private pages
     * eagerly, so a CUDA checker's pinned areas (pin_areas; attention's
     * two are about 1 GiB) would make every runner's spawn a copy of them.
     * Both areas are page-aligned and a whole number of pages. */
    madvise(r->area, r->area_bytes, MADV_DONTFORK);
    madvise(r->ref_area, r->area_bytes, MADV_DONTFORK);
    return 0;
}

/* Everything of the checker's before a runner exists: its areas, the
 * reference (loaded and validated), the shared region, the reference
 * cache, the cache flush, the device tensors it shares. */
static int setup_checker(run_ctx *r, harness_eval *ev, const char *ref_so, char *err, size_t errlen)
{
    const avo_harness_opts *o = ev->o;
    int rc;
    if (o->keep && (rc = harness_keep_resume(r, o->keep, ref_so, o->ref_cache_fd, err, errlen)) != 0) {
        avo_phases_lap(&ev->top, "setup", &ev->t);
        return rc < 0 ? rc : 0;
    }
    if ((rc = alloc_areas(r, err, errlen)))
        return rc;
    harness_trace("start");
    avo_phases_lap(&ev->top, "setup", &ev->t);
    rc = load_reference(r, ref_so, err, errlen);
    ev->t = avo_phases_now();
    if (rc || (rc = harness_make_shm(r, err, errlen)))
        return rc;
    /* The reference cache is the job's: only with its seed. Its key holds
     * the device too (a reference may round differently on another GPU). */
    if (o->ref_cache_fd > 2 && o->job_seed) {
        const char *dev = r->gpu_info ? json_string_value(json_object_get(r->gpu_info, "name")) : "";
        char cerr[400];
        if (avo_refcache_init(&r->cache, o->ref_cache_fd, o->ref_cache_max, o->job_seed, ref_so, r->p->dir,
                              dev ? dev : "", cerr, sizeof cerr) != 0)
            fprintf(stderr, "avo-harness: %s: no reference cache in this evaluation\n", cerr);
        avo_phases_lap(&ev->top, "setup", &ev->t);
    }
    rc = validate_or_recall(r, err, errlen);
    ev->t = avo_phases_now();
    if (rc)
        return rc;
    cpu_set_t mask;
    r->one_cpu = sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) == 1;
    if (!r->cuda && (rc = avo_timing_flusher_open(&r->fl))) {
        snprintf(err, errlen, "cannot allocate the cache-flush buffer");
        return rc;
    }
    if (r->cuda)
        share_tensors(r);
    /* After share_tensors: where the reference's outputs live (device or
     * host) decides where the store keeps them. */
    if (o->keep && r->cache.dirfd >= 0)
        resident_init(r);
    avo_phases_lap(&ev->top, "setup", &ev->t);
    return 0;
}

/* The candidate's runner spawned (and the against's beside it), both up,
 * the candidate's empty round trip calibrated. 0, or the runner's code
 * with why. */
static int start_runners(run_ctx *r, harness_eval *ev, const char *cand_so, char *why, size_t wl)
{
    const avo_harness_opts *o = ev->o;
    lane *cand = &r->lanes[LANE_CAND];
    int rc = lane_mem_fd(r, cand, why, wl);
    if (rc >= 0)
        rc = avo_runner_spawn(&cand->run, cand_so, r->p->entry, r->cuda, rc, &r->dev, r->deadline, why, wl);
    if (rc)
        return rc;
    /* Counters open on the runner before the candidate loads, so
     * threads it starts are counted too. */
    avo_counters_open(&r->ctr, cand->run.pid);
    r->ctr_open = 1;
    if (o->against_so) {
        const double now = avo_timing_now();
        r->pair_cutoff = now + PAIR_CUTOFF_SHARE * (r->deadline - now);
        start_against(r, o->against_so, AGAINST_SPAWN);
    }
    if (!o->profile_only && !(o->screen && r->p->screen_runs > 0))
        start_baseline(r, AGAINST_SPAWN);
    avo_phases_lap(&ev->top, "runner_start", &ev->t);
    /* Every runner up before any is calibrated: no start-up runs beside
     * the candidate's calibration. */
    if (o->against_so) {
        against_ready(r);
        avo_phases_lap(&ev->top, "against_runner", &ev->t);
    }
    if (r->base_state == 2) {
        start_baseline(r, AGAINST_CALIBRATE);
        avo_phases_lap(&ev->top, "baseline_runner", &ev->t);
    }
    return calibrate(r, why, wl);
}

/* The runners started and calibrated (on a GPU the empty call's protocol
 * too), then the candidate loaded. A negative int: err; the candidate's
 * failure (it cannot be loaded, its runner died or hung): ev->done with
 * the outcome. */
static int load_candidate(run_ctx *r, harness_eval *ev, const char *cand_so, char *err, size_t errlen)
{
    const avo_harness_opts *o = ev->o;
    char why[600];
    int rc = start_runners(r, ev, cand_so, why, sizeof why);
    if (rc == 0 && r->cuda) {
        int res = gputime_calibrate_preload(r, why, sizeof why);
        if (res < 0) {
            snprintf(err, errlen, "runner, calibrating: %s", why);
            return res;
        }
        if (res != CHECK_OK) {
            ev->outcome = outcome_of(res, 0);
            snprintf(ev->detail, sizeof ev->detail, "runner, calibrating before the candidate loaded: %s", why);
            ev->done = 1;
            return 0;
        }
    }
    ev->calibrated = rc == 0;
    avo_phases_lap(&ev->top, r->ctr_open ? "calibration" : "runner_start", &ev->t);
    /* Both runners calibrated before either object exists. */
    if (rc == 0 && o->against_so) {
        start_against(r, o->against_so, AGAINST_CALIBRATE);
        avo_phases_lap(&ev->top, "against_runner", &ev->t);
    }
    if (rc == 0) {
        rc = avo_runner_load(&r->lanes[LANE_CAND].run, r->deadline, why, sizeof why);
        avo_phases_lap(&ev->top, "runner_load", &ev->t);
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s%s", rc == -ENODEV ? "" : "runner: ", why);
        return rc;
    }
    if (rc) {
        int res = rc == AVO_RUNNER_DIED ? CHECK_CRASH : rc == AVO_RUNNER_TIMEOUT ? CHECK_TIMEOUT : CHECK_FORGED;
        ev->outcome = rc == AVO_RUNNER_LOAD ? "compile_error" : outcome_of(res, 0);
        if (rc == AVO_RUNNER_LOAD)
            snprintf(ev->detail, sizeof ev->detail, "%s", why);
        else
            snprintf(ev->detail, sizeof ev->detail, "runner, %s the candidate: %s",
                     ev->calibrated ? "loading" : "before loading", why);
        ev->done = 1;
    }
    return 0;
}

/* Screening: the screen's configs first, paired; a candidate slower than
 * the against beyond noise stops there (ev->done), as does a failed check. */
static int screen_phase(run_ctx *r, harness_eval *ev, char *err, size_t errlen)
{
    int rc;
    if (!(ev->o->screen && r->p->screen_runs > 0))
        return 0;
    if (r->against_state != 1) {
        ev->screen = json_pack("{s:b,s:s}", "screened_out", 0, "error",
                               r->against_state < 0 ? r->against_err : "no against to screen with");
        return 0;
    }
    json_t *out = NULL;
    if ((rc = screen_run(r, ev->cph, &ev->nstarted, &ev->screen, &ev->screen_paired, &out, &ev->logsum, &ev->nscored,
                         &ev->outcome, ev->detail, sizeof ev->detail, err, errlen)))
        return rc;
    if (strcmp(ev->outcome, "ok") != 0) {
        ev->done = 1;
    } else if (out) {
        json_decref(ev->configs);
        ev->configs = out;
        ev->done = 1;
    }
    return 0;
}

/* Whether a pooled order figure (pooled_order_json) crosses the rule:
 * ORDER_MIN_PAIRS each way, the ratio past factor (under it for the
 * candidate, over it for the against), p under ORDER_ALPHA. */
static int pooled_fires(const json_t *j, double factor, int against, double *ratio, double *p)
{
    const json_t *pairs = json_object_get(j, "pairs");
    *ratio = json_real_value(json_object_get(j, "ratio"));
    *p = json_real_value(json_object_get(j, "p"));
    return j && json_integer_value(json_array_get(pairs, 0)) >= ORDER_MIN_PAIRS &&
           json_integer_value(json_array_get(pairs, 1)) >= ORDER_MIN_PAIRS &&
           (against ? *ratio > factor : *ratio < factor) && *p < ORDER_ALPHA;
}

/* After a round's configs, paired (the full run's, ps = ev->pairs, or the
 * confirmation round's): the order test pooled over them
 * (pooled_order_json), both ways, held to the per-config tests' rules.
 * The candidate faster right after the against: 1, a cheat (ev->outcome,
 * ev->detail, ev->done). The against slower right after the candidate
 * (it tells its place and frames the candidate, on configs of too few
 * pairs for its own test; test_paired.sh (j)): the pairing is void, the
 * against's failure (paired.error), 0. */
static int pooled_order_test(run_ctx *r, harness_eval *ev, const pair_set *ps)
{
    if (r->against_state != 1)
        return 0;
    double ratio, p;
    json_t *j = pooled_order_json(r, ps, 0);
    const int fired = pooled_fires(j, ORDER_FACTOR, 0, &ratio, &p);
    json_decref(j);
    if (fired) {
        ev->outcome = "cheat_suspected";
        snprintf(ev->detail, sizeof ev->detail,
                 "over every config, its calls right after the against's, on the same input sets, ran %.0f%% faster "
                 "than those before it (the configs' median ratios pooled; stratified rank test p = %.2g): something "
                 "of the against's reached it",
                 (1 - ratio) * 100, p);
        ev->done = 1;
        return 1;
    }
    j = pooled_order_json(r, ps, 1);
    if (pooled_fires(j, ORDER_AGAINST_FACTOR, 1, &ratio, &p)) {
        r->against_state = -1;
        snprintf(r->against_err, sizeof r->against_err,
                 "the against over every config: cheat_suspected: its calls right after the candidate's, on the same "
                 "input sets, ran %.0f%% slower than those before it (the configs' median ratios pooled; stratified "
                 "rank test p = %.2g): its time depends on its place in the pair, so the pairing is void",
                 (ratio - 1) * 100, p);
        avo_runner_stop(&r->lanes[LANE_AGAINST].run);
    }
    json_decref(j);
    return 0;
}

/* The full run: every config timed and scored in turn (the trusted
 * baseline beside it). A failed config ends it (ev->done). */
static int time_configs(run_ctx *r, harness_eval *ev, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    int rc;
    for (int c = 0; c < p->nconfigs; c++) {
        r->ph = &ev->cph[c];
        ev->nstarted = ev->nstarted > c + 1 ? ev->nstarted : c + 1;
        json_t *cj = NULL;
        double ls = 0;
        if ((rc = time_config(r, c, &ev->pairs[c], 1, &cj, &ls, &ev->outcome, ev->detail, sizeof ev->detail, err,
                              errlen)))
            return rc;
        if (!cj) {
            ev->done = 1;
            return 0;
        }
        ev->logsum += ls;
        json_array_append_new(ev->configs, cj);
    }
    if (pooled_order_test(r, ev, ev->pairs))
        return 0;
    snprintf(ev->detail, sizeof ev->detail,
             "%d configs, every call on an input set of its own: the first %d of each (the job's warm-up sets) and "
             "a random share of the timed ones checked, all within tolerance",
             p->nconfigs, r->nsets);
    return 0;
}

/* Both runners stopped and started again as at the start: new processes,
 * calibrated, loaded. The candidate's failure to come back is its own
 * (ev->done, the detail says when); the against's is paired.error. */
static int restart_runners(run_ctx *r, harness_eval *ev, const char *cand_so, char *err, size_t errlen)
{
    avo_runner_stop(&r->lanes[LANE_CAND].run);
    avo_runner_stop(&r->lanes[LANE_AGAINST].run);
    if (r->ctr_open)
        avo_counters_close(&r->ctr);
    if (r->actr_open)
        avo_counters_close(&r->actr);
    r->ctr_open = r->actr_open = 0;
    r->against_state = 0;
    int rc = load_candidate(r, ev, cand_so, err, errlen);
    if (rc == 0 && !ev->done)
        start_against(r, ev->o->against_so, AGAINST_LOAD);
    return rc;
}

/* The second round: every config timed paired again, on input sets of its
 * own (CONFIRM_SET), into ps. The candidate is held to every rule as in the
 * first, and a failure here is its own (ev->done); its config entries are
 * dropped: its scores are the first round's. */
static int confirm_configs(run_ctx *r, harness_eval *ev, pair_set *ps, char *err, size_t errlen)
{
    int rc = 0;
    r->set_base = CONFIRM_SET;
    for (int c = 0; c < r->p->nconfigs && r->against_state == 1; c++) {
        json_t *cj = NULL;
        double ls = 0;
        if ((rc = time_config(r, c, &ps[c], 0, &cj, &ls, &ev->outcome, ev->detail, sizeof ev->detail, err, errlen)))
            break;
        if (!cj) {
            ev->done = 1;
            break;
        }
        json_decref(cj);
    }
    r->set_base = 0;
    return rc;
}

/* The confirmation round (docs/evaluation.md): on the CPU, a paired first
 * round whose lower bound is above 1 is timed again in fresh runner
 * processes, and the round with the lower bound is the result's. A
 * bootstrap over pairs cannot see a bias the pair of processes carries
 * for a whole evaluation (the 2-core VM's A/A: one run in 50 at 1.095,
 * interval [1.084, 1.117]); a new pair of processes draws it again. Runners
 * restarted only here, never between configs: a candidate that counts its
 * calls per process would see a fresh count each time (test_screen's
 * count case), and here the first round, in one process, must still pass. */
static int confirm_phase(run_ctx *r, harness_eval *ev, const char *cand_so, char *err, size_t errlen)
{
    if (!ev->o->against_so || r->against_state != 1)
        return 0;
    if (r->cuda) {
        ev->confirm = json_pack("{s:b,s:s}", "ran", 0, "why",
                                "not on a GPU: its A/A runs show no bias from the process a lane runs in");
        return 0;
    }
    json_t *pj = paired_json(r, ev->pairs, 0);
    if (!pj || json_object_get(pj, "error") || !(json_number_value(json_object_get(pj, "low")) > 1)) {
        json_decref(pj);
        ev->confirm = json_pack("{s:b,s:s}", "ran", 0, "why", "no gain to confirm: the lower bound is not above 1");
        return 0;
    }
    ev->round[0] = pj;
    const double spent = avo_phases_now() - ev->t_timed, left = r->deadline - avo_timing_now();
    if (PAIR_CUTOFF_SHARE * left < CONFIRM_TIME_FACTOR * spent) {
        char why[300];
        snprintf(why, sizeof why,
                 "no time left for it: the first round took %.3g s and %.3g s remain to the deadline (%.0f%% of "
                 "them for the against)",
                 spent, left > 0 ? left : 0, PAIR_CUTOFF_SHARE * 100);
        ev->confirm = json_pack("{s:b,s:s}", "ran", 0, "why", why);
        return 0;
    }
    avo_phases conf = {0};
    avo_phases *const top = r->ph;
    const avo_phases saved = ev->top;
    pair_set *ps = calloc((size_t)r->p->nconfigs, sizeof *ps);
    if (!ps) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    const double t0 = avo_phases_now();
    ev->top = conf;
    ev->t = t0;
    r->ph = &conf;
    int rc = restart_runners(r, ev, cand_so, err, errlen);
    if (rc == 0 && !ev->done)
        rc = confirm_configs(r, ev, ps, err, errlen);
    /* The round's own pooled order test: its figures are what the result
     * may report (test_paired.sh met a first round the test let pass and a
     * second whose pooled figures, 0.30 at p 2e-5, went unjudged). */
    if (rc == 0 && !ev->done)
        pooled_order_test(r, ev, ps);
    if (rc == 0 && !ev->done)
        ev->round[1] = paired_json(r, ps, 0);
    if (ev->done) {
        char d[sizeof ev->detail];
        snprintf(d, sizeof d, "%s", ev->detail);
        snprintf(ev->detail, sizeof ev->detail,
                 "the confirmation round (fresh runners, after a gain in the first): %.900s", d);
    }
    ev->top = saved;
    r->ph = top;
    ev->t = avo_phases_now();
    avo_phases_add(&ev->top, "confirmation", ev->t - t0);
    for (int c = 0; c < r->p->nconfigs; c++) {
        pair_set_free(&ps[c]);
    }
    free(ps);
    return rc;
}

/* A round's figures for paired.confirmation.rounds. */
static json_t *round_json(json_t *pj)
{
    if (json_object_get(pj, "error"))
        return json_pack("{s:O}", "error", json_object_get(pj, "error"));
    return json_pack("{s:O,s:O,s:O}", "ratio", json_object_get(pj, "ratio"), "low", json_object_get(pj, "low"), "ci",
                     json_object_get(pj, "ci"));
}

/* The result's paired member after a confirmation round was called for:
 * the round with the lower bound, both rounds' figures beside it; an error
 * (so no gain commits) when the second round could not run or pair. */
static json_t *confirmed_paired(harness_eval *ev)
{
    static const char rule[] =
        "CPU: a first round whose lower bound is above 1 is timed again in fresh runner processes on input sets "
        "of its own; the round with the lower bound is reported";
    json_t *rounds = json_array(), *pj;
    for (int k = 0; k < 2 && ev->round[k]; k++)
        json_array_append_new(rounds, round_json(ev->round[k]));
    if (!ev->round[1] || json_object_get(ev->round[1], "error")) {
        char e[900];
        snprintf(e, sizeof e, "a gain in the first round (lower bound %.4g) was not confirmed: %s",
                 json_number_value(json_object_get(ev->round[0], "low")),
                 ev->round[1] ? json_string_value(json_object_get(ev->round[1], "error"))
                              : json_string_value(json_object_get(ev->confirm, "why")));
        pj = json_pack("{s:s}", "error", e);
        json_object_set_new(pj, "confirmation",
                            json_pack("{s:b,s:s,s:o}", "ran", ev->round[1] != NULL, "rule", rule, "rounds", rounds));
        return pj;
    }
    const int k = json_number_value(json_object_get(ev->round[1], "low")) <
                  json_number_value(json_object_get(ev->round[0], "low"));
    pj = ev->round[k];
    ev->round[k] = NULL;
    json_object_set_new(pj, "confirmation",
                        json_pack("{s:b,s:s,s:i,s:o}", "ran", 1, "rule", rule, "kept", k + 1, "rounds", rounds));
    return pj;
}

/* Counters in a separate pass, never during timing, and only when asked:
 * a profile task (profile_run) is where they are read now.
 * AVO_NO_COUNTERS (a run by hand) still turns an asked-for pass off. */
static int counters_pass(run_ctx *r, harness_eval *ev, char *err, size_t errlen)
{
    const avo_problem *p = r->p;
    const avo_harness_opts *o = ev->o;
    avo_tensors x = {0}, pristine = {0};
    int rc = 0;
    if (r->cuda && !(o->counters && getenv("AVO_NO_COUNTERS") == NULL)) {
        for (int c = 0; c < p->nconfigs; c++)
            json_object_set_new(
                json_array_get(ev->configs, (size_t)c), "counters",
                json_pack("{s:b,s:s}", "available", 0, "reason",
                          o->counters ? "not profiled: AVO_NO_COUNTERS is set" : AVO_HARNESS_NOT_PROFILED));
    } else if (r->cuda) {
        for (int c = 0; c < p->nconfigs; c++) {
            if (!p->configs[c].profile) {
                json_object_set_new(json_array_get(ev->configs, (size_t)c), "counters",
                                    json_pack("{s:b,s:s}", "available", 0, "reason",
                                              "not profiled: the problem's counters.configs does not list it"));
                continue;
            }
            if ((rc = avo_tensors_place(&x, p, c, r->shm, r->shm_bytes - PROFILE_AREA, err, errlen)) ||
                (rc = avo_tensors_place(&pristine, p, c, r->area, r->area_bytes, err, errlen)))
                break;
            ev->t = avo_phases_now();
            json_t *ctr = profile_config(r, c, &x, &pristine);
            avo_phases_lap(&ev->cph[c], "counters", &ev->t);
            harness_trace("counters %s: profile", p->configs[c].name);
            json_object_set_new(json_array_get(ev->configs, (size_t)c), "counters", ctr);
            avo_tensors_free(&x);
            avo_tensors_free(&pristine);
            if (!r->lanes[LANE_CAND].run.pid)
                break; /* the runner died profiling: keep the timing results */
        }
    }
    avo_tensors_free(&x);
    avo_tensors_free(&pristine);
    return rc;
}

/* The one CPU this checker (and so its runners) is pinned to, null when it
 * may run on several (main.c's pin_cpu). */
static json_t *pinned_cpu_json(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1)
        return json_null();
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set))
            return json_integer(i);
    return json_null();
}

/* The result's runner member, with on a GPU how its copies and timed calls
 * went. */
static json_t *result_runner_json(const run_ctx *r, int calibrated)
{
    const lane *cand = &r->lanes[LANE_CAND];
    json_t *rj = runner_json(cand, calibrated);
    json_object_set_new(rj, "cpu", pinned_cpu_json());
    if (r->cuda) {
        json_object_set_new(rj, "reference_copies", json_string(r->ref_copies[0] ? r->ref_copies : "unknown"));
        json_object_set_new(rj, "host_copies",
                            json_string(cand->run.host_copies[0] ? cand->run.host_copies : "unknown"));
        json_object_set_new(rj, "device_tensors", json_string(r->dev_note[0] ? r->dev_note : "runner"));
        json_object_set_new(rj, "inputs", json_string(r->fill_note[0] ? r->fill_note : "host"));
        json_object_set_new(rj, "timing_start", timing_start_json(cand->tm.ungated_why));
    }
    return rj;
}

/* What the result says beside its outcome and configs: the warm-up sets,
 * the reference's validation, the runner, the GPU, the counters, the
 * noise, paired and screening, and the phases. */
static void annotate_result(run_ctx *r, harness_eval *ev, json_t *result)
{
    const avo_harness_opts *o = ev->o;
    const int ok = strcmp(ev->outcome, "ok") == 0;
    /* Where the warm-up calls' inputs came from; never the job's seed. */
    json_object_set_new(result, "warm_up_sets",
                        json_pack("{s:s,s:i,s:s}", "source", o->job_seed ? "job" : "evaluation", "per_config", r->nsets,
                                  "order", "fresh random order in each evaluation, the same for every lane"));
    json_object_set_new(result, "reference_validated", json_boolean(r->ref_validated));
    json_object_set_new(result, "reference_validation", json_string(r->ref_note));
    json_object_set_new(result, "runner", result_runner_json(r, ev->calibrated));
    if (r->gpu_info) {
        /* A copy: a kept checker's next evaluation reports it too. */
        json_object_set_new(result, "gpu", json_deep_copy(r->gpu_info));
    }
    json_object_set_new(result, "counters",
                        r->ctr_open ? avo_counters_info_json(&r->ctr)
                                    : json_pack("{s:b, s:s}", "available", 0, "reason", "runner not started"));
    if (o->profile_only)
        json_object_set_new(result, "mode", json_string("profile"));
    else
        noise_totals(result, r->cuda);
    /* A candidate that failed has nothing to compare. */
    if (o->against_so && ok) {
        json_t *pj = ev->screen_paired ? ev->screen_paired
                     : ev->round[0]    ? confirmed_paired(ev)
                                       : paired_json(r, ev->pairs, 0);
        if (ev->confirm && !ev->screen_paired && !ev->round[0] && !json_object_get(pj, "error"))
            json_object_set(pj, "confirmation", ev->confirm);
        json_object_set_new(result, "paired", pj);
        ev->screen_paired = NULL;
    }
    /* Screening said, and a screened-out result's partial figures said to
     * be partial. */
    if (ev->screen && ok) {
        const int out = json_is_true(json_object_get(ev->screen, "screened_out"));
        json_object_set_new(result, "screened_out", json_boolean(out));
        json_object_set_new(result, "aggregate_scope", json_string(out ? "screen" : "all"));
        json_object_set_new(result, "screen", ev->screen);
        ev->screen = NULL;
    }
    avo_phases_lap(&ev->top, "result", &ev->t);
    json_object_set_new(result, "phases", phases_json(r, &ev->top, ev->cph, ev->nstarted, ev->t_start));
}

/* The evaluation's end, whatever its outcome: the runners stopped, then
 * the result object. */
static int finish_result(run_ctx *r, harness_eval *ev, json_t **result, char *err, size_t errlen)
{
    const avo_harness_opts *o = ev->o;
    /* The runner is gone before the result exists: nothing of the
     * candidate runs while (or after) the checker writes it. */
    ev->t = avo_phases_now();
    for (int l = 0; l < LANES; l++)
        avo_runner_kill(&r->lanes[l].run);
    for (int l = 0; l < LANES; l++)
        avo_runner_stop(&r->lanes[l].run);
    avo_phases_lap(&ev->top, "runner_stop", &ev->t);
    if (strcmp(ev->outcome, "ok") != 0 && !o->profile_only)
        zero_scores(ev->configs);
    avo_utf8_scrub(ev->detail);
    *result = result_json(r->p, ev->outcome, ev->detail,
                          o->profile_only                  ? NAN
                          : strcmp(ev->outcome, "ok") == 0 ? exp(ev->logsum / ev->nscored)
                                                           : 0.0,
                          ev->configs, r->seed);
    ev->configs = NULL;
    if (!*result) {
        snprintf(err, errlen, "cannot build the result object");
        return -ENOMEM;
    }
    annotate_result(r, ev, *result);
    return 0;
}

/* Everything the evaluation held, released (one owner each). */
/* What setup_checker made (harness_internal.h); what a keep holds is no
 * longer here (harness_keep_park). */
void harness_release_shm(run_ctx *r)
{
    if (r->shm_pinned)
        avo_gpu_unpin(r->gpu, r->shm);
    r->shm_pinned = 0;
    if (r->shm)
        munmap(r->shm, r->shm_bytes);
    r->shm = NULL;
    if (r->shm_fd >= 0)
        close(r->shm_fd);
    r->shm_fd = -1;
}

void harness_release_checker(run_ctx *r)
{
    /* Device memory of the checker's context: before it is closed. */
    avo_resident_free(&r->res);
    json_decref(r->gpu_info);
    r->gpu_info = NULL;
    unpin_areas(r);
    for (int i = 0; i < r->dev.n; i++)
        close(r->dev.fd[i]);
    r->dev.n = 0;
    harness_release_shm(r);
    avo_gpu_close(r->gpu);
    r->gpu = NULL;
    if (r->ref_handle)
        dlclose(r->ref_handle);
    r->ref_handle = NULL;
    avo_timing_flusher_close(&r->fl);
    free(r->area);
    free(r->ref_area);
    r->area = r->ref_area = NULL;
}

static void harness_close(run_ctx *r, harness_eval *ev)
{
    for (int l = 0; l < LANES; l++) {
        avo_runner_stop(&r->lanes[l].run);
        if (r->lanes[l].report) {
            munmap(r->lanes[l].report, PROFILE_AREA);
            close(r->lanes[l].report_fd);
        }
    }
    json_decref(ev->screen);
    json_decref(ev->screen_paired);
    json_decref(ev->round[0]);
    json_decref(ev->round[1]);
    json_decref(ev->confirm);
    if (r->ctr_open)
        avo_counters_close(&r->ctr);
    if (r->actr_open)
        avo_counters_close(&r->actr);
    harness_release_checker(r);
    json_decref(ev->configs);
    free(ev->cph);
    for (int c = 0; ev->pairs && c < r->p->nconfigs; c++) {
        pair_set_free(&ev->pairs[c]);
    }
    free(ev->pairs);
    free(r->warm_order);
    free(r->rows);
}

int avo_harness_run(const avo_problem *p, const char *cand_so, const char *ref_so, const avo_harness_opts *o,
                    json_t **result, char *err, size_t errlen)
{
    static const avo_harness_opts plain = {0};
    if (!o)
        o = &plain;
    int rc = 0;
    const uint64_t seed = o->seed;
    const double deadline_s = o->deadline_s;
    run_ctx r = {.p = p,
                 .seed = seed,
                 .job_seed = o->job_seed ? o->job_seed : seed,
                 .nsets = p->check_input_sets,
                 .shm_fd = -1,
                 .held_c = -1,
                 .keep_slack = getenv("AVO_HARNESS_KEEP_SLACK") != NULL,
                 .no_order_extend = getenv("AVO_HARNESS_NO_ORDER_EXTEND") != NULL,
                 .cache = {.dirfd = -1},
                 .cuda = strcmp(p->backend, "cuda") == 0,
                 .base_so = o->base_so,
                 .confidence = o->confidence > 0 ? o->confidence : 0.95};
    harness_eval ev = {.o = o, .outcome = "ok", .nscored = p->nconfigs, .configs = json_array()};
    ev.t_start = ev.t = avo_phases_now();
    ev.cph = calloc((size_t)p->nconfigs, sizeof *ev.cph);
    ev.pairs = calloc((size_t)p->nconfigs, sizeof *ev.pairs);
    r.ph = &ev.top;
    for (int l = 0; l < LANES; l++) {
        avo_cgroup_clear(&r.lanes[l].run.cg);
        r.lanes[l].run.cmd_w = r.lanes[l].run.reply_r = -1;
        r.lanes[l].slot = l;
    }
    r.ln = &r.lanes[LANE_CAND];
    r.deadline = avo_timing_now() + (deadline_s > 0 ? deadline_s : 600);
    for (int i = 0; i < AVO_CTR_N; i++)
        r.ctr.fd[i] = r.actr.fd[i] = -1;
    avo_timing_rng_init(&r.rng);
    *result = NULL;
    r.warm_order = calloc((size_t)(r.nsets > 0 ? r.nsets : 1), sizeof *r.warm_order);
    if (!ev.configs || !ev.cph || !ev.pairs || !r.warm_order) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    if ((rc = setup_checker(&r, &ev, ref_so, err, errlen)) || (rc = load_candidate(&r, &ev, cand_so, err, errlen)))
        goto cleanup;
    if (ev.done)
        goto done;
    harness_trace("runner started (%s)",
                  r.lanes[LANE_CAND].run.host_copies[0] ? r.lanes[LANE_CAND].run.host_copies : "cpu");
    if (o->profile_only) {
        if ((rc = profile_run(&r, o, ev.configs, ev.cph, &ev.nstarted, &ev.outcome, ev.detail, sizeof ev.detail, err,
                              errlen)))
            goto cleanup;
        goto done;
    }
    if (o->against_so) {
        start_against(&r, o->against_so, AGAINST_LOAD);
        avo_phases_lap(&ev.top, "against_runner", &ev.t);
    }
    if (r.base_state == 2) {
        start_baseline(&r, AGAINST_LOAD);
        avo_phases_lap(&ev.top, "baseline_runner", &ev.t);
    }
    ev.t_timed = avo_phases_now();
    rc = screen_phase(&r, &ev, err, errlen);
    if (rc == 0 && !ev.done)
        rc = time_configs(&r, &ev, err, errlen);
    if (rc == 0 && !ev.done)
        rc = confirm_phase(&r, &ev, cand_so, err, errlen);
    if (rc == 0 && !ev.done)
        rc = counters_pass(&r, &ev, err, errlen);
    if (rc)
        goto cleanup;
done:
    rc = finish_result(&r, &ev, result, err, errlen);
cleanup:;
    /* After "total": the checker's context and device tensors released
     * (where the worker's harness_process beyond total goes). */
    const double t_close = avo_phases_now();
    /* A result given: the checker's state waits for the next evaluation
     * (moved out of r, so harness_close below stops the runners and
     * releases the rest, not it). */
    if (o->keep && rc == 0 && *result)
        harness_keep_park(&r, o->keep, ref_so, o->ref_cache_fd);
    harness_close(&r, &ev);
    json_t *ph = *result ? json_object_get(*result, "phases") : NULL;
    if (json_is_object(ph))
        json_object_set_new(ph, "close", json_real(avo_phases_now() - t_close));
    return rc;
}
