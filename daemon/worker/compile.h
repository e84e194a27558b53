/* Compile one C source into a shared object through a content-addressed
 * cache: the key is sha256 over the source, the flags, the compiler's
 * identity and the target, so a hit is always the object the same compile
 * would produce. The compiler runs in the sandbox under a timeout. */
#ifndef AVO_COMPILE_H
#define AVO_COMPILE_H

#include "avo_attr.h"
#include <limits.h>
#include <stddef.h>

#include "avo_problem.h"

/* Compiler messages kept per compile. */
#define AVO_COMPILE_LOG_CAP 8192

typedef struct {
    const char *cc;           /* NULL = "cc" */
    const char *nvcc;         /* CUDA problems: NULL = "nvcc" */
    const char *gpu_arch;     /* CUDA problems: the worker's GPU, e.g. "sm_90a" (required) */
    const char *const *extra; /* more flags after the problem's (NULL-terminated; in the cache key) */
    const char *cache_dir;    /* created if missing */
    const char *work_dir;     /* an existing scratch dir for the source and the object (given to the sandbox user) */
    const char *hide_dir;     /* besides the cache, hidden from the compiler (the worker's state dir), or NULL */
    double timeout_s;         /* <= 0: 120 */
    int (*should_cancel)(void *arg);
    void *cancel_arg;
    int cache_only; /* a miss is not compiled: -EAGAIN (the worker's early end of a claim, queue.c) */
} avo_compile_opts;

typedef struct {
    int ok;          /* so_path holds a loadable object */
    int cached;      /* no compiler ran */
    int failed_kept; /* it failed, and the cache keeps that verdict (a clean compiler error, not a
                        timeout, a signal or the machine's fault) */
    int timed_out;
    int cancelled;
    double seconds;
    char key[65];
    char so_path[PATH_MAX];
    /* What the compile kept for the policy checks (daemon/worker/policy.h),
     * copied into the cache beside the object; "" when it left none (a
     * compile that failed early): the assembler's input (.s) and, for CUDA,
     * the PTX nvcc emitted. */
    char asm_path[PATH_MAX];
    char ptx_path[PATH_MAX];
    char *log; /* compiler messages (capped), owned, never NULL after success */
} avo_compile_result;

/* Compile src (file name `name` in messages, e.g. "cand.c") with the
 * problem's cflags plus -shared -fPIC and -save-temps; for a CUDA problem
 * with nvcc, its nvcc flags, -gencode for o->gpu_arch, the ptxas report
 * (-Xptxas -v), the shared CUDA runtime, -keep and -Xcompiler=-save-temps
 * (the kept intermediates change no generated code: docs/evaluation.md,
 * "Policy"). The compiler runs confined (sandbox.h,
 * avo_sandbox_confine): as nobody under a root worker, seeing only the
 * toolchain and work_dir. Returns 0 when the compile ran or
 * was served from the cache (r->ok says whether it succeeded), or a negative
 * int with err when it could not be attempted. */
int avo_compile(const avo_compile_opts *o, const avo_problem *p, const char *src, size_t len, const char *name,
                avo_compile_result *r, char *err, size_t errlen);
void avo_compile_result_free(avo_compile_result *r);

/* Whether a failed compile's log is the source's verdict, to be cached:
 * not when it names the machine (a read-only or full disk, no memory),
 * which a later attempt may not meet. */
int avo_compile_failure_cacheable(const char *log);

/* The first line of `cc --version`, computed once per process and compiler.
 * Returns 0 or a negative int. */
int avo_compile_identity(const char *cc, char *out, size_t outlen);

#endif
