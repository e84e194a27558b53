/* The worker's side of the work queue: find the database, register, claim
 * evaluations (avo_claim: FOR UPDATE SKIP LOCKED), renew the lease while the
 * harness runs, store the result (avo_complete re-checks state and lease
 * owner), and sleep on LISTEN avo_work with polling as the fallback.
 * A worker is a plain sequential process: libpq in blocking mode is fine
 * here, because the candidate runs in another process. */
#ifndef AVO_QUEUE_H
#define AVO_QUEUE_H

#include <signal.h>
#include <stdint.h>

typedef struct {
    const char *dsn;
    const char *kernels;
    const char *target;
    const char *harness;
    const char *cache_dir;
    const char *state_dir; /* the worker's home (avod's state): hidden from everything it runs */
    const char *scratch_root;
    double lease_s;
    double timeout_s;
    int poll_ms;
    int max_evals;              /* stop after this many (0 = no limit) */
    int gpu_index;              /* NVML index of the GPU (GPU targets) */
    int prefetch;               /* evaluations claimed and compiled ahead while one runs, 0..AVO_PREFETCH_MAX */
    int serve;                  /* a job's evaluations on one kept checker (served.h) */
    int serve_slots;            /* checkers kept at once, one per job (--serve-slots) */
    uint64_t ref_cache_bytes;   /* the reference cache's budget (--ref-cache-mb); 0: off */
    const char *gpu_lock_dir;   /* the host's per-GPU timing locks (--gpu-lock-dir); NULL: the default */
    const char *toolchain_file; /* --toolchain-file: overrides of the probed toolchain (toolchain.h), or "" */
    volatile sig_atomic_t *stop;
} avo_queue_opts;

/* The most claims a worker keeps ahead of the one it runs (--prefetch N). */
#define AVO_PREFETCH_MAX 8

/* Runs until *stop is set; returns 0, or a negative int on a fatal error. */
int avo_queue_run(const avo_queue_opts *o);

#endif
