/* The checker's state kept from one evaluation to the next (harness.h,
 * avo_harness_keep; avo-harness --serve). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_internal.h"
#include "gpu.h"
#include "tensors.h"

struct avo_harness_keep {
    int held;              /* r holds a checker's state */
    int reused;            /* evaluations that took it over */
    const avo_problem *p;  /* what it was made for: */
    char ref_so[PATH_MAX]; /* the reference object's path, */
    uint64_t job_seed;     /* the job's seed (its warm-up sets and references), */
    int cache_fd;          /* and the reference cache */
    run_ctx r;             /* only the fields move_state moves are meaningful */
};

/* Move the checker's state (what setup_checker fills and
 * harness_release_checker releases) from `from` to `to`, leaving `from`
 * holding none. */
static void move_state(run_ctx *to, run_ctx *from)
{
    to->ref_handle = from->ref_handle;
    to->ref = from->ref;
    to->ref_rows = from->ref_rows;
    to->gpu = from->gpu;
    to->max_mhz = from->max_mhz;
    to->gpu_info = from->gpu_info;
    to->dev = from->dev;
    to->dev_fill = from->dev_fill;
    to->area = from->area;
    to->ref_area = from->ref_area;
    to->area_bytes = from->area_bytes;
    to->area_pinned = from->area_pinned;
    to->fl = from->fl;
    to->one_cpu = from->one_cpu;
    to->cache = from->cache;
    to->res = from->res;
    to->res_dev = from->res_dev;
    to->ref_validated = from->ref_validated;
    memcpy(to->dev_note, from->dev_note, sizeof to->dev_note);
    memcpy(to->fill_note, from->fill_note, sizeof to->fill_note);
    memcpy(to->ref_copies, from->ref_copies, sizeof to->ref_copies);
    memcpy(to->ref_note, from->ref_note, sizeof to->ref_note);
    from->ref_handle = NULL;
    from->gpu = NULL;
    from->gpu_info = NULL;
    from->dev.n = 0;
    from->area = from->ref_area = NULL;
    from->area_pinned = 0;
    from->fl = (avo_flusher){0};
    from->cache.dirfd = -1;
    from->res = (avo_resident){0};
}

avo_harness_keep *avo_harness_keep_new(void)
{
    avo_harness_keep *k = calloc(1, sizeof *k);
    if (k)
        k->r.shm_fd = k->cache_fd = -1;
    return k;
}

int avo_harness_keep_reused(const avo_harness_keep *k)
{
    return k ? k->reused : 0;
}

static void keep_release(avo_harness_keep *k)
{
    if (k->held)
        harness_release_checker(&k->r);
    k->held = 0;
}

void avo_harness_keep_free(avo_harness_keep *k)
{
    if (!k)
        return;
    keep_release(k);
    free(k);
}

/* What the runners see, fresh for the evaluation: a new shared region
 * (nothing an earlier runner, or anything it left running, wrote or
 * still writes to the old one reaches it), page-locked where the host
 * copies use it (share_tensors), and every shared device tensor zeroed. */
static int fresh_tensors(run_ctx *r, char *err, size_t errlen)
{
    int rc = harness_make_shm(r, err, errlen);
    if (rc)
        return rc;
    if (r->cuda && r->dev.n > 0 && !r->dev_fill) {
        char note[240];
        r->shm_pinned = avo_gpu_pin(r->gpu, r->shm, r->shm_bytes, note, sizeof note) == 0;
    }
    if (r->cuda && r->dev.n > 0 && avo_gpu_clear_shared(r->gpu, err, errlen) != 0)
        return -EIO;
    return 0;
}

int harness_keep_resume(run_ctx *r, avo_harness_keep *k, const char *ref_so, int cache_fd, char *err, size_t errlen)
{
    if (!k->held)
        return 0;
    if (k->p != r->p || strcmp(k->ref_so, ref_so) != 0 || k->job_seed != r->job_seed || k->cache_fd != cache_fd) {
        keep_release(k);
        return 0;
    }
    move_state(r, &k->r);
    k->held = 0;
    k->reused++;
    avo_resident_begin(&r->res);
    /* The input streams' keys are the evaluation's (check_device_fill
     * makes them where a fresh checker starts). */
    avo_tensors_stream_key(r->seed, r->in_key);
    avo_tensors_stream_key(r->job_seed, r->job_key);
    const int rc = fresh_tensors(r, err, errlen);
    return rc ? rc : 1;
}

void harness_keep_park(run_ctx *r, avo_harness_keep *k, const char *ref_so, int cache_fd)
{
    keep_release(k);
    /* The region is the evaluation's own: released here, a new one for
     * the next (fresh_tensors). */
    harness_release_shm(r);
    if (!r->ref_handle || snprintf(k->ref_so, sizeof k->ref_so, "%s", ref_so) >= (int)sizeof k->ref_so)
        return;
    k->p = r->p;
    k->job_seed = r->job_seed;
    k->cache_fd = cache_fd;
    k->r.cuda = r->cuda;
    move_state(&k->r, r);
    k->held = 1;
}
