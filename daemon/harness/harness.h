/* avo-harness's core, the checker: run (and validate) the trusted
 * reference, then drive the candidate in a separate runner process (see
 * runner.h) on every size configuration of a problem; check, time and score.
 * The checker never calls candidate code itself; it runs in a sandboxed
 * child started by avo-worker. Candidate/reference ABI: docs/problems.md. */
#ifndef AVO_HARNESS_H
#define AVO_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "avo_problem.h"

typedef int (*avo_kernel_fn)(void *const *tensors, const int64_t *sizes);

/* The reference is unusable (cannot load, fails, or disagrees with its own
 * float64 twin): an infrastructure error, not the candidate's fault.
 * avo-harness exits with AVO_HARNESS_EXIT_REFERENCE and a stderr line
 * "avo-harness: reference invalid: ..."; avo-worker reports outcome crash
 * with detail "reference invalid: ...". */
#define AVO_HARNESS_EREFERENCE (-10001)
#define AVO_HARNESS_EXIT_REFERENCE 3

/* How to evaluate: the input seed (the timed calls' sets), the job's seed
 * (the warm-up calls' sets, the same in every evaluation of a job:
 * docs/evaluation.md, "Input sets"), the wall-time limit (<= 0: 600 s), the
 * trusted vendor baseline to time beside the candidate (NULL: none), for a
 * paired measurement (docs/evaluation.md) the against's object (NULL: none)
 * and the confidence of its interval (<= 0: 0.95); and what a run does
 * besides checking ("Counters"): an evaluation times and scores, the CUPTI
 * counters pass (CUDA) runs only when asked, since it replays kernels for
 * seconds per configuration. A profile-only run (the worker's profile task)
 * neither times nor scores: each configuration it profiles gets the calls
 * an evaluation begins with (fresh input sets, every one checked, so a
 * wrong candidate is reported), then its counters: the perf events around
 * those calls on a CPU, the CUPTI pass on a GPU. Screening (o->screen
 * with an against, on a problem that declares "screen"): every config not
 * in the screen gets its checked calls, then the screen's configs are timed
 * paired for screen.runs pairs each; a candidate slower than the against
 * beyond noise stops there (outcome ok, "screened_out": true, the screen's
 * scores and ratio only), any other is evaluated in full as without a
 * screen. */
typedef struct {
    uint64_t seed;
    uint64_t job_seed; /* the job's secret seed: the warm-up calls' input sets (0: seed stands in) */
    double deadline_s;
    const char *base_so;
    const char *against_so;
    double confidence;
    int counters;                  /* CUDA evaluation: the CUPTI pass after timing (avo-harness --counters) */
    int profile_only;              /* avo-harness --profile */
    const char *config;            /* profile_only: this configuration alone (NULL: what counters.configs lists) */
    int ref_cache_fd;              /* > 2: the worker's reference cache directory (refcache.h): the warm-up
                                   sets' reference outputs read from it, or computed and written to it
                                   (needs job_seed); else none */
    uint64_t ref_cache_max;        /* its budget: a config whose warm-up outputs take more is not cached */
    int screen;                    /* paired, and the problem declares "screen": screen first (avo-harness --screen;
                                   docs/evaluation.md, "Screening") */
    struct avo_harness_keep *keep; /* non-NULL: the checker's state outlives this evaluation (below) */
} avo_harness_opts;

/* The checker's state that outlives an evaluation (avo-harness --serve):
 * the reference loaded and validated, the GPU context, the device tensors
 * shared with the runners, the cache flush, the reference cache. An
 * evaluation given a keep that holds them takes them over (the device
 * tensors zeroed first and a shared region of its own made, so no runner
 * finds what an earlier evaluation's left) and parks them there again when
 * it gives a result; one that fails releases them. A keep holds one problem, reference object, job seed and
 * reference cache: an evaluation that differs in any releases it and
 * starts afresh. Runners are never kept: every evaluation spawns its own. */
typedef struct avo_harness_keep avo_harness_keep;
avo_harness_keep *avo_harness_keep_new(void);
/* How many evaluations took over a held state (0: each started afresh). */
int avo_harness_keep_reused(const avo_harness_keep *k);
void avo_harness_keep_free(avo_harness_keep *k);

/* The reason a CUDA evaluation's configurations give for having no counters. */
#define AVO_HARNESS_NOT_PROFILED "not profiled in the evaluation: counters run as their own task (avoctl profile)"

/* Evaluate cand_so against ref_so as o says. Returns 0 with a new result object in *result whatever the
 * candidate did (outcome ok, wrong_result, cheat_suspected, crash, timeout,
 * or compile_error when it cannot be loaded). Returns AVO_HARNESS_EREFERENCE
 * (message in err, starting "reference invalid: ") or another negative int
 * (out of memory, cannot start the runner) when the evaluation itself is
 * impossible. A profile-only result has outcome ok (every checked call
 * right) or the failed check's outcome, aggregate null, and per
 * configuration only name, check, calls and counters. */
int avo_harness_run(const avo_problem *p, const char *cand_so, const char *ref_so, const avo_harness_opts *o,
                    json_t **result, char *err, size_t errlen);

#endif
