/* Evaluate one candidate source for one problem: compile it (through the
 * content-addressed cache), run avo-harness on it in a sandboxed child with a
 * wall-clock timeout, and return the classified result. Used by the queue
 * loop and by `avo-worker eval`. Never runs candidate code in this process. */
#ifndef AVO_EVALUATE_H
#define AVO_EVALUATE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "avo_problem.h"
#include "served.h"

typedef struct {
    const char *harness_path; /* the avo-harness binary */
    const char *cache_dir;    /* compile cache root (created if missing) */
    const char *state_dir;    /* the worker's state (avod's home), hidden from everything run; NULL: $AVO_HOME */
    const char *scratch_root; /* per-candidate scratch dirs go under it */
    const char *cc;           /* C compiler, NULL = "cc" */
    const char *nvcc;         /* CUDA compiler, NULL = "nvcc" (PATH, then /usr/local/cuda/bin) */
    const char *gpu_arch;     /* CUDA problems: "sm_90a"...; NULL = read from the GPU through NVML */
    int gpu_index;            /* NVML index of this worker's GPU (energy, arch, the GPU lock) */
    const char *gpu_lock_dir; /* where the host's workers lock a GPU while its harness runs (gpulock.h);
                                   NULL or "": avo_gpulock_default_dir() */
    double timeout_s;         /* wall clock for compile and for the harness; 0 = 120 */
    uint64_t rng_seed;        /* 0 = fresh from getrandom() and recorded */
    uint64_t job_seed;        /* the job's secret seed (the warm-up calls' input sets, the same in every
                                   evaluation of the job): to the harness's stdin only, never recorded;
                                   0 = fresh from getrandom() for this evaluation alone */
    uint64_t ref_cache_bytes; /* the reference cache's budget (<cache_dir>/ref, daemon/worker/refstore.h):
                                   used only with a job_seed; 0 = off */
    int disassemble;          /* compile-only: add the object's disassembly ("disassembly") */
    int trusted;              /* compile-only: the source is the package's reference or baseline, compiled as
                                   an evaluation compiles those (linked with the vendor libraries, no candidate
                                   policy); `avo-worker check` */
    const char *src_name;     /* compile-only: the source's file name in compiler messages (NULL: cand.c or
                                   cand.cu) */
    /* Paired measurement (docs/evaluation.md, "Paired measurement"): the
     * version the candidate is measured against (the island's best), timed
     * in the same harness process, interleaved run by run on the same input
     * sets; the result gains "paired". NULL: unpaired. against_id is the
     * candidate id recorded as paired.against (0: none, `avo-worker eval`). */
    const char *against_src;
    size_t against_len;
    long long against_id;
    double confidence; /* of paired's interval and lower bound; 0 = 0.95 */
    int screen;        /* paired, on a problem that declares "screen": screen first (docs/evaluation.md,
                                   "Screening"); avod asks for it for a search's evaluations */
    /* Counters (docs/evaluation.md, "Counters"): profile runs the harness
     * in its profile-only mode (the profile task: checked calls and
     * counters, no timing, no score; no baseline), on profile_config alone
     * when set; counters asks a CUDA evaluation for its CUPTI pass. */
    int profile;
    const char *profile_config;
    int counters;
    /* Stop before the harness: *result is the evaluation's own when it
     * ended there (a source the policy refuses, a compile error: compiles
     * a precompile made are cache hits), else NULL. The worker uses it to
     * post a claimed-ahead evaluation's early end at once (queue.c). */
    int compile_only;
    /* A job's evaluation (job_seed set, not a profile) runs on the
     * worker's kept checker for its job in *served (served.h: started,
     * reused or replaced here) instead of a fresh one. NULL: a fresh one. */
    avo_served_pool *served;
    /* Polled while the harness runs; when it returns nonzero the harness's
     * process group is killed and the outcome is "cancelled". May be NULL. */
    int (*should_cancel)(void *arg);
    void *cancel_arg;
} avo_evaluate_opts;

/* Processes and threads one evaluation may have at once (the harness,
 * its runner, the candidate's threads and helpers), where the host's
 * control groups can count them. */
#define AVO_EVAL_PIDS_MAX 512

/* On success returns 0 and a new result object in *result (see
 * docs/evaluation.md), whatever the candidate's outcome. Returns a negative
 * int only when the evaluation itself could not be carried out (cannot fork,
 * harness missing), with a message in err. */
int avo_evaluate_candidate(const avo_evaluate_opts *o, const avo_problem *p, const char *src, size_t len,
                           json_t **result, char *err, size_t errlen);

/* Compile what avo_evaluate_candidate would (reference, candidate and, paired, the against) into the
 * cache, nothing else: the worker does this for the next evaluation while
 * the current one holds the GPU, so compiling overlaps timing. A compile
 * error is not an error here (it is cached, and reported by the evaluation
 * itself), nor is a source the candidate policy refuses (never compiled):
 * *ends_early (when not NULL) says the evaluation will end before its
 * harness for either. Safe to call from another thread. */
int avo_evaluate_precompile(const avo_evaluate_opts *o, const avo_problem *p, const char *src, size_t len,
                            int *ends_early, char *err, size_t errlen);

/* Disassembly kept per compile (the head: kernels come in file order). */
#define AVO_DISASM_CAP (2u << 20)

/* Compile the candidate only, in the sandbox and through the cache, as
 * avo_evaluate_candidate would: {"outcome": "ok"|"compile_error"|"timeout",
 * "detail", "compile"}. avod asks for this (`avo-worker eval --compile-only`)
 * to refuse a seed that does not compile at submission, and for the agent's
 * compile and disassemble tools (o->disassemble adds "disassembly":
 * {"tool", "text"|"error"}). Nothing of the candidate is run. */
int avo_evaluate_compile_only(const avo_evaluate_opts *o, const avo_problem *p, const char *src, size_t len,
                              json_t **result, char *err, size_t errlen);

/* A microbenchmark (the agent's microbenchmark tool): compile one
 * standalone program (language "c" or "cuda", for this worker's GPU) in the
 * sandbox and run it there as nobody, without network, under
 * AVO_PROGRAM_TIMEOUT_S, output capped at AVO_PROGRAM_OUT_CAP per stream.
 * *result: {"outcome": "ran"|"compile_error"|"timeout"|"crash", "exit_code",
 * "signal", "stdout", "stderr", "wall_s", "compile_log"}. Returns a negative
 * int only when it could not be attempted. */
#define AVO_PROGRAM_TIMEOUT_S 60
#define AVO_PROGRAM_OUT_CAP (64u << 10)
int avo_evaluate_program(const avo_evaluate_opts *o, const char *language, const char *src, size_t len, json_t **result,
                         char *err, size_t errlen);

/* Where `avo-worker eval` and `check` cache compiles by default
 * ($AVO_HOME/cache, $XDG_CACHE_HOME/avo, ~/.cache/avo) and find the
 * harness (beside the running binary). 0 or a negative int. */
int avo_evaluate_default_cache(char *out, size_t outlen);
int avo_evaluate_default_harness(char *out, size_t outlen);

/* `avo-worker eval <problem-dir> <candidate-file> [--json] [...]`. Returns the
 * process exit code: 0 ok, 1 the candidate failed, 2 usage or input error. */
int avo_evaluate_cli(int argc, char **argv);

#endif
