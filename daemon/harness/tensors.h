/* The harness's tensor buffers for one size configuration: allocation,
 * seeded random fill, NaN poisoning, and comparison against the reference. */
#ifndef AVO_HARNESS_TENSORS_H
#define AVO_HARNESS_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "avo_problem.h"

typedef struct {
    int n;
    void *ptr[AVO_PROBLEM_MAX_TENSORS];
    int64_t elems[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
} avo_tensors;

/* What one comparison found. worst is the element with the largest absolute
 * error, or the first non-finite one (then nonfinite is 1). */
typedef struct {
    double rel_l2;
    double max_abs;
    int64_t worst;
    double got, want;
    int nonfinite;
    int pass;
} avo_check;

int avo_tensors_alloc(avo_tensors *t, const avo_problem *p, int config, char *err, size_t errlen);
void avo_tensors_free(avo_tensors *t);

/* Fill every input and inout tensor from the stream identified by
 * (seed, config, set); the same triple always gives the same data. */
void avo_tensors_fill(avo_tensors *t, const avo_problem *p, uint64_t seed, int config, int set);

/* Write the NaN pattern (a fixed marker for i32) into every output-only
 * tensor so elements the candidate does not write cannot pass. */
void avo_tensors_poison(avo_tensors *t, const avo_problem *p);

/* Copy the tensors whose role matches (inputs: input+inout, outputs:
 * output+inout) from src to dst; both come from the same config. */
void avo_tensors_copy_inputs(avo_tensors *dst, const avo_tensors *src, const avo_problem *p);

/* Index of the first input tensor (role input) that differs from the
 * pristine copy, or -1. *elem receives the first differing element. */
int avo_tensors_inputs_changed(const avo_tensors *t, const avo_tensors *pristine, const avo_problem *p,
                               int64_t *elem);

/* Compare tensor i of got against want (n elements of dtype) under tol. */
void avo_tensors_compare(const void *got, const void *want, int64_t n, avo_dtype d, avo_tolerance tol,
                         avo_check *out);

#endif
