/* avo-harness's core: run the trusted reference, then the candidate, on
 * every size configuration of a problem; check, time and score. This is the
 * only code that calls candidate functions, and it runs in a sandboxed child
 * started by avo-worker. Candidate/reference ABI: docs/problems.md. */
#ifndef AVO_HARNESS_H
#define AVO_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "avo_problem.h"

typedef int (*avo_kernel_fn)(void *const *tensors, const int64_t *sizes);

/* Evaluate cand_so against ref_so. Returns 0 with a new result object in
 * *result whatever the candidate did (outcome ok, wrong_result,
 * cheat_suspected or compile_error when it cannot be loaded). Returns a
 * negative int with a message in err when the evaluation itself is
 * impossible (reference missing or failing, out of memory). A candidate that
 * crashes takes the harness down with it; the parent classifies that. */
int avo_harness_run(const avo_problem *p, const char *cand_so, const char *ref_so, uint64_t seed,
                    json_t **result, char *err, size_t errlen);

#endif
