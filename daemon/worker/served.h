/* The worker's kept checkers: each an avo-harness --serve (daemon/harness/
 * serve.h) in its sandbox, serving one job's evaluations one after another
 * on this worker, so they pay the checker's start (its process, GPU
 * context, reference validation, regions) once. A checker is started for
 * one key (the harness, the problem's directory and spec, the reference
 * object, the job seed, the reference cache); a worker keeps up to a
 * pool's slots of them, one per key, because the jobs of a campaign
 * interleave on a worker (each evaluation another job's). A checker that
 * ended, timed out or was cancelled, or served AVO_SERVED_MAX_EVALS
 * evaluations is replaced; a key with no checker takes a free slot, else
 * the least recently used one. docs/evaluation.md, "A checker kept between
 * evaluations". */
#ifndef AVO_WORKER_SERVED_H
#define AVO_WORKER_SERVED_H

#include <stddef.h>
#include <stdint.h>

#include "sandbox.h"

/* Evaluations one checker serves before it is replaced (its RLIMIT_CPU is
 * this many evaluations' worth). */
#define AVO_SERVED_MAX_EVALS 64

/* Seconds a worker with no work keeps its checker (it holds the GPU
 * context and the job's device tensors). */
#define AVO_SERVED_IDLE_S 120

typedef struct avo_served avo_served;

/* The most slots a pool has (avo-worker --serve-slots). */
#define AVO_SERVED_SLOTS_MAX 16

/* A worker's kept checkers, one per key. Zeroed, then n set (1 to
 * AVO_SERVED_SLOTS_MAX); closed with avo_served_pool_close. */
typedef struct {
    int n;                                /* slots: at most this many checkers at once */
    avo_served *sv[AVO_SERVED_SLOTS_MAX]; /* NULL: a free slot */
    double used[AVO_SERVED_SLOTS_MAX];    /* when each last answered (CLOCK_MONOTONIC, s) */
} avo_served_pool;

/* How to start a checker: its sandbox (argv, limits, descriptors passed
 * as fds 5, 6, ...; cwd, timeout_s, should_cancel and stdin_data are
 * ignored) and what goes after "--serve FD" on its command line. */
typedef struct {
    const char *key;          /* what it serves (a hash: avo_served_key) */
    const char *scratch_root; /* its own working directory goes under it */
    avo_sandbox_opts so;      /* so.argv: the command line before "--serve FD" */
    char *const *argv_tail;   /* NULL-terminated: after it (may be NULL) */
} avo_served_start;

/* One evaluation on the pool's checker for st->key (started, in a free
 * slot or the least recently used one, when there is none: *started 1
 * then): the request (JSON text) with nfds descriptors
 * attached, its answer waited for up to timeout_s, cancel polled. A kept
 * checker (not started for it) that ends without an answer, not past the
 * time nor cancelled, may have ended for an earlier evaluation's sake: the
 * request goes once more to a fresh one, with the whole timeout. A checker
 * whose answer says it ends (serve.h, "ends") is closed after it. Returns 0 with r as
 * avo_sandbox_next_line fills it (a line: the result; else how the
 * checker ended, and the pool no longer holds it), or a negative int with
 * err (it could not be started or the request not sent; the pool holds
 * none for the key). */
int avo_served_eval(avo_served_pool *pool, const avo_served_start *st, const char *request, const int *fds, int nfds,
                    double timeout_s, int (*should_cancel)(void *), void *arg, avo_sandbox_result *r, int *started,
                    char *err, size_t errlen);

/* The key's text for avo_served_start.key from the parts named there. */
void avo_served_key(char out[65], const char *harness, const char *problem_dir, const char *ref_so, uint64_t job_seed,
                    const char *cache_dir, uint64_t cache_bytes);

/* The pool's checkers that have not answered for idle_s seconds closed
 * (they hold GPU memory); idle_s < 0: every one. */
void avo_served_pool_idle(avo_served_pool *pool, double idle_s);

/* Every checker of the pool closed. */
void avo_served_pool_close(avo_served_pool *pool);

/* Checkers the pool holds. */
int avo_served_pool_count(const avo_served_pool *pool);

#endif
