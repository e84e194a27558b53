/* A seed given as a file or taken from another job is compiled before its
 * job is accepted, so one that does not compile is refused at submission
 * with the compiler's message. avod does not compile itself: it runs
 * `avo-worker eval --compile-only` (the worker's sandboxed compile, nothing
 * executed) as a child on the loop. */
#ifndef AVO_SEEDCHECK_H
#define AVO_SEEDCHECK_H

#include <jansson.h>
#include <uv.h>

/* compiled: 1 it compiles; 0 it does not (detail: the first error, log: the
 * compiler's messages); -1 it could not be checked here (no compiler for the
 * target on this host, the check failed to run: detail says why). disasm:
 * when asked for and compiled, the worker's {"tool", "text"|"error"} (valid
 * during the call only), else NULL. */
/* How detail begins when compiled is 0 because the candidate policy
 * refused the source (docs/evaluation.md, "Policy"), not the compiler. */
#define AVO_SEEDCHECK_POLICY "policy_violation: "

typedef void (*avo_seedcheck_cb)(void *arg, int compiled, const char *detail, const char *log, const json_t *disasm);

/* Render-ready source `src` for problem directory `problem_dir` and target
 * ("cpu" or "sm_XY"); disassemble asks for the object's disassembly too
 * (the agent's disassemble tool). The callback runs exactly once, later, on
 * the loop.
 * Returns 0, or a negative int (nothing started, no callback). */
int avo_seedcheck_start(uv_loop_t *loop, const char *worker_bin, const char *cache_dir, const char *problem_dir,
                        const char *target, const char *src, int disassemble, avo_seedcheck_cb cb, void *arg);

/* Kill every check still running (avod is stopping): their callbacks run
 * once the children are reaped, with compiled = -1. */
void avo_seedcheck_stop_all(void);

#endif
