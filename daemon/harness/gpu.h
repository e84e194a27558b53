/* The CUDA side of the harness: one device context per process, device
 * mirrors of the host tensors, and one launch of a kernel entry point with
 * everything the protocol needs around it: host-to-device copies, poisoning
 * of outputs on the device, an L2 flush (a write over a buffer larger than
 * L2), CUDA events around the call (the start gated: avo_gate.h), a mark
 * where the call's own stream ends and a device-wide synchronisation before
 * the end mark (so work the candidate put on other streams is measured too),
 * the SM clock read after the run, sticky-error detection, and
 * device-to-host copies for checking.
 *
 * Built for real only in avo-harness-cuda (AVO_WITH_CUDA); in the plain CPU
 * harness every function reports -ENOTSUP, so callers need no #ifdefs. */
#ifndef AVO_HARNESS_GPU_H
#define AVO_HARNESS_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "avo_problem.h"

typedef struct avo_gpu avo_gpu;

/* CUDA entry points take a stream (cudaStream_t) as third argument. */
typedef int (*avo_gpu_fn)(void *const *tensors, const int64_t *sizes, void *stream);

enum {
    AVO_GPU_COPY_IN = 1,       /* every tensor host -> device before the call */
    AVO_GPU_COPY_OUT = 2,      /* every tensor device -> host after it */
    AVO_GPU_FLUSH = 4,         /* flush L2 before the call (outside the events) */
    AVO_GPU_POISON = 8,        /* fill the tensors in poison_mask with 0xFF bytes (NaN) on the device first */
    AVO_GPU_COPY_INPUTS = 16,  /* host -> device for the tensors not in poison_mask (the inputs) */
    AVO_GPU_EMPTY = 32,        /* time the protocol around no call at all (calibration) */
    AVO_GPU_GATED = 64,        /* hold the stream behind a gate until the call has returned (avo_gate.h) */
    AVO_GPU_PREPARE = 128,     /* only the copies, poisoning and flush asked for, finished: no call, no events */
    AVO_GPU_FETCH = 256,       /* only copy every tensor back: no call, no events */
    AVO_GPU_SHARED = 512,      /* the checker's copies, poisoning and fetch on the tensors it shares (avo_gpu_share) */
    AVO_GPU_GEN_INPUTS = 1024, /* generate the tensors not in poison_mask on the device (avo_gpu_set_inputs) */
    AVO_GPU_COPY_OUTPUTS = 2048, /* host -> device for the tensors in poison_mask (a cached reference's outputs) */
};

/* What *notes says about a call. */
enum {
    AVO_GPU_NOTE_UNGATED = 1,      /* a gate was asked for but could not be set: the call ran ungated */
    AVO_GPU_NOTE_GATE_TIMEOUT = 2, /* the call waited on its own work, so the gate opened by its time
                                      limit: the sample includes that wait and must not be used */
    AVO_GPU_NOTE_GATE_BUSY = 4,    /* the gate's blocks were not all resident within AVO_GATE_WAIT_MAX_S:
                                      the GPU was running other work when the call began */
};

/* Longer than any host-side launch sequence worth timing. */
#define AVO_GPU_GATE_LIMIT_MS 50

/* Errors beyond the usual negative errno values. */
#define AVO_GPU_ESTICKY (-10001) /* the context is broken (illegal address, trap...): process must exit */
#define AVO_GPU_ELAUNCH (-10002) /* the entry returned nonzero or a launch failed; context still usable */

int avo_gpu_available(void);
int avo_gpu_open(avo_gpu **out, char *err, size_t errlen);
void avo_gpu_close(avo_gpu *g);

/* Page-lock host memory the copies of avo_gpu_run read and write, so they
 * run at the link's speed instead of through the driver's staging buffers
 * (pageable copies of attention's 0.5 GB per call took most of an
 * evaluation). Returns 0 with "pinned" in note, or a negative int with
 * "pageable: <why>" in note; callers go on with pageable copies then. AVO_HARNESS_PAGEABLE=1 disables it (for
 * measuring what it saves). A range the process keeps is unpinned with
 * avo_gpu_unpin before it is freed or unmapped (the runner's region is
 * pinned until it exits). */
int avo_gpu_pin(avo_gpu *g, void *ptr, size_t bytes, char *note, size_t notelen);
void avo_gpu_unpin(avo_gpu *g, void *ptr);

/* Device tensors the checker owns and a runner maps, so that the checker
 * lays out and fetches every call's tensors itself while the runner stays
 * frozen: the runner (the candidate's process) then runs only inside the
 * timed call, never during the untimed copies around it. CUDA virtual
 * memory management, each tensor exported as a POSIX file descriptor.
 *
 * avo_gpu_share (checker): n tensors of at least bytes[i] each, mapped in
 * this context for AVO_GPU_SHARED runs; fds[i] the exported handles (close
 * on exec; the caller closes them), mapped[i] their rounded sizes, which
 * the importer must be given. Returns 0, or -ENOTSUP / -EIO with the
 * reason in err (a GPU or driver without the feature: the caller falls
 * back to the runner's own copies and says so).
 * avo_gpu_import (runner): map them as its tensors; calls whose tensors do
 * not fit fail instead of reallocating. */
int avo_gpu_share(avo_gpu *g, int n, const size_t *bytes, int *fds, size_t *mapped, char *err, size_t errlen);
int avo_gpu_import(avo_gpu *g, int n, const int *fds, const size_t *mapped, char *err, size_t errlen);

/* Checker: every shared tensor zeroed whole, before a runner of another
 * evaluation maps them (avo-harness --serve): no candidate finds what an
 * earlier one left. Returns 0, or -EIO with the reason in err. */
int avo_gpu_clear_shared(avo_gpu *g, char *err, size_t errlen);

/* Device name, compute capability, SM count, L2 size, max SM clock. */
int avo_gpu_describe(avo_gpu *g, char *name, size_t namelen, int *cc_major, int *cc_minor, int *sms, int *l2_bytes,
                     unsigned *max_sm_mhz);

/* What one call measured. The events are start, stream end (recorded on
 * the call's stream right after the entry point returns, so the GPU takes it
 * when the work queued there is done) and end (recorded by the host after
 * the device-wide synchronisation, so it follows work on every stream, plus
 * the host's wake-up and launch latency). */
typedef struct {
    double seconds;     /* start -> end */
    double tail_s;      /* stream end -> end: the host's latency, and any work left on other streams */
    double gate_wait_s; /* gated calls: the gate's time on the GPU (a mark before it -> start) less
                           the host's hold: what kept its blocks from their SMs (other work) */
    unsigned notes;     /* AVO_GPU_NOTE_* */
    double host_s;      /* the runner's host time from the call's start to the gate's release (or the entry's
                         return): reported, to show where a call's protocol goes */
    double entry_s;     /* of which inside the entry point */
} avo_gpu_times;

/* The SM clock now (NVML), 0 when unknown. The checker reads it from its
 * own process after each call: the runner's report could be anything. */
unsigned avo_gpu_sm_clock(avo_gpu *g);

/* How long one tiny kernel of this context waits to run (avo_gate_probe):
 * from the checker, right after a runner's call returned, it measures work
 * that call left running on the GPU. Returns 0 or a negative int. */
int avo_gpu_busy_probe(avo_gpu *g, double *seconds);

/* One call of fn on n tensors whose host copies are host[i] (bytes[i] long);
 * *t what it measured (times zero when the call did not run).
 * Returns 0, the entry's nonzero return as AVO_GPU_ELAUNCH (with *ret), or
 * AVO_GPU_ESTICKY / a negative errno with the reason in err. */
int avo_gpu_run(avo_gpu *g, avo_gpu_fn fn, void *const *host, const size_t *bytes, int n, const int64_t *sizes,
                unsigned flags, unsigned poison_mask, int *ret, avo_gpu_times *t, char *err, size_t errlen);

/* What AVO_GPU_GEN_INPUTS generates: tensor i (for i < n) from the input
 * stream (daemon/gpu/avo_fill.h) under key with nonce {nonce0, nonce1,
 * i + 1}, of dtypes[i] (avo_dtype) times scales[i], exactly the host's
 * avo_tensors_fill(seed, config, set) when nonce0 = config + 1 and nonce1 =
 * set + 1. Kept until set again. */
int avo_gpu_set_inputs(avo_gpu *g, const unsigned char key[32], int n, const int *dtypes, const float *scales,
                       uint32_t nonce0, uint32_t nonce1);

/* Generate n elements of one stream (as avo_gpu_set_inputs describes) on
 * the device and copy them to host: the check, before any candidate loads,
 * that the device's stream is the host's bit for bit. Returns 0 or a
 * negative int with the reason in err. */
int avo_gpu_fill_sample(avo_gpu *g, const unsigned char key[32], int dtype, float scale, uint32_t nonce0,
                        uint32_t nonce1, uint32_t nonce2, void *host, int64_t n, char *err, size_t errlen);

/* A checked call's comparison on the device (daemon/gpu/avo_compare.h):
 * shared tensor i (the call's, as the runner left it) against the checker's
 * own tensor i (the reference's run on the same set, avo_gpu_run without
 * AVO_GPU_SHARED), n elements of dtype. The sums of the host's rule, the
 * worst and the first non-finite element (-1: none) with the raw bytes of
 * got and want at the element the host would report (the first non-finite
 * one, else the worst). */
typedef struct {
    double num, den, max_abs;
    int64_t worst, nonfinite;
    unsigned char got[8], want[8];
} avo_gpu_cmp;
int avo_gpu_compare(avo_gpu *g, int i, int64_t n, int dtype, avo_gpu_cmp *out, char *err, size_t errlen);

/* A reference's row entry (avo_reference_rows, docs/problems.md): the
 * rows' indices are a device array. */
typedef int (*avo_gpu_rows_fn)(void *const *tensors, const int64_t *sizes, const int64_t *rows, int64_t nrows,
                               void *stream);

/* fn on this process's own device tensors as the last avo_gpu_run without
 * AVO_GPU_SHARED left them (inputs generated or copied, outputs poisoned),
 * for the nrows row indices in rows (host memory, ascending), copied to the
 * device and kept for avo_gpu_compare_rows. Finished on return. Returns 0,
 * the entry's nonzero return as AVO_GPU_ELAUNCH (with *ret), or
 * AVO_GPU_ESTICKY / a negative errno with the reason in err. */
int avo_gpu_run_rows(avo_gpu *g, avo_gpu_rows_fn fn, const int64_t *sizes, const int64_t *rows, int64_t nrows, int *ret,
                     char *err, size_t errlen);

/* Device memory the checker keeps for itself across evaluations (the
 * references held resident: resident.h), never shared with a runner.
 * avo_gpu_mem_alloc: 0 with *out, or a negative int with the reason in
 * err. avo_gpu_mem_total: the device's memory in bytes (0 unknown).
 * avo_gpu_mem_copy: bytes from src to dst, either in device memory of this
 * context or host memory, finished on return; 0 or a negative int.
 * avo_gpu_tensor_ptr: this process's own device tensor i as the last
 * avo_gpu_run without AVO_GPU_SHARED left it (NULL: none). Such memory
 * may also stand for a host pointer of AVO_GPU_COPY_OUTPUTS (the copy is
 * then device to device). */
int avo_gpu_mem_alloc(avo_gpu *g, size_t bytes, void **out, char *err, size_t errlen);
void avo_gpu_mem_free(avo_gpu *g, void *p);
size_t avo_gpu_mem_total(avo_gpu *g);
size_t avo_gpu_mem_available(avo_gpu *g); /* free device memory now (cudaMemGetInfo; 0 unknown) */
int avo_gpu_mem_copy(avo_gpu *g, void *dst, const void *src, size_t bytes, char *err, size_t errlen);
const void *avo_gpu_tensor_ptr(avo_gpu *g, int i);

/* avo_gpu_compare over the rows of the last avo_gpu_run_rows only, each
 * row_elems elements of tensor i (row r: elements r * row_elems ..
 * (r + 1) * row_elems - 1); the elements reported are the tensor's own. */
int avo_gpu_compare_rows(avo_gpu *g, int i, int64_t row_elems, int dtype, avo_gpu_cmp *out, char *err, size_t errlen);

/* The first element (elem_size bytes) where shared tensor i differs from
 * the checker's own tensor i, -1 when none (an input the call must not
 * have changed, against the copy generated again). */
int avo_gpu_equal(avo_gpu *g, int i, int64_t n, size_t elem_size, int64_t *first, char *err, size_t errlen);

/* The counters pass (CUPTI range profiler, one range per kernel the call
 * launches, each replayed for every pass the metric set needs): copies the
 * tensors in (host NULL: they are on the device already, the imported
 * shared ones laid out by the checker), profiles one call, and writes a JSON document {"passes",
 * "unsupported", "kernels": [{"range", "metrics"}]} into out (NUL-terminated,
 * at most cap bytes). Returns 0, or a negative int with the reason in err
 * (e.g. profiling not permitted for this user). Never during timing. */
int avo_gpu_profile(avo_gpu *g, avo_gpu_fn fn, void *const *host, const size_t *bytes, int n, const int64_t *sizes,
                    char *out, size_t cap, char *err, size_t errlen);

#endif
