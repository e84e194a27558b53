/* The worker's kept checker: one avo-harness --serve (daemon/harness/
 * serve.h) in its sandbox, serving a job's evaluations one after another
 * on this worker, so they pay the checker's start (its process, GPU
 * context, reference validation, regions) once. Started for one key (the
 * harness, the problem's directory and spec, the reference object, the job
 * seed, the reference cache): a request for another key, a checker that
 * ended, timed out or was cancelled, or AVO_SERVED_MAX_EVALS evaluations
 * start a fresh one. docs/evaluation.md, "A checker kept between
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

/* How to start a checker: its sandbox (argv, limits, descriptors passed
 * as fds 5, 6, ...; cwd, timeout_s, should_cancel and stdin_data are
 * ignored) and what goes after "--serve FD" on its command line. */
typedef struct {
    const char *key;          /* what it serves (a hash: avo_served_key) */
    const char *scratch_root; /* its own working directory goes under it */
    avo_sandbox_opts so;      /* so.argv: the command line before "--serve FD" */
    char *const *argv_tail;   /* NULL-terminated: after it (may be NULL) */
} avo_served_start;

/* One evaluation on the kept checker *sv (started or replaced as the key
 * says: *started 1 then): the request (JSON text) with nfds descriptors
 * attached, its answer waited for up to timeout_s, cancel polled. A kept
 * checker (not started for it) that ends without an answer, not past the
 * time nor cancelled, may have ended for an earlier evaluation's sake: the
 * request goes once more to a fresh one, with the whole timeout. A checker
 * whose answer says it ends (serve.h, "ends") is closed after it. Returns 0 with r as
 * avo_sandbox_next_line fills it (a line: the result; else how the
 * checker ended, and *sv no longer holds it), or a negative int with err
 * (it could not be started or the request not sent; *sv holds none). */
int avo_served_eval(avo_served **sv, const avo_served_start *st, const char *request, const int *fds, int nfds,
                    double timeout_s, int (*should_cancel)(void *), void *arg, avo_sandbox_result *r, int *started,
                    char *err, size_t errlen);

/* The key's text for avo_served_start.key from the parts named there. */
void avo_served_key(char out[65], const char *harness, const char *problem_dir, const char *ref_so, uint64_t job_seed,
                    const char *cache_dir, uint64_t cache_bytes);

/* The checker told to end (its socket closed), given a moment, then
 * killed; its directory removed. NULL: nothing. */
void avo_served_close(avo_served *sv);

#endif
