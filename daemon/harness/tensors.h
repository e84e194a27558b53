/* The harness's tensor buffers for one size configuration: allocation,
 * seeded random fill, NaN poisoning, and comparison against the reference. */
#ifndef AVO_HARNESS_TENSORS_H
#define AVO_HARNESS_TENSORS_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "avo_problem.h"

typedef struct {
    int n;
    int owned; /* 1: ptr[] are aligned_alloc'd; 0: placed in a caller's region */
    void *ptr[AVO_PROBLEM_MAX_TENSORS];
    int64_t elems[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
    size_t guard[AVO_PROBLEM_MAX_TENSORS]; /* placed tensors: guard-zone bytes after each */
} avo_tensors;

/* Placed tensors are followed by a guard zone of at least this many bytes. */
#define AVO_TENSOR_GUARD 16384
#define AVO_TENSOR_GUARD_BYTE 0xA5

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
/* The same over an explicit size vector; dtype_override >= 0 gives every
 * tensor that dtype instead of its declared one (the float64 twin). */
int avo_tensors_alloc_at(avo_tensors *t, const avo_problem *p, const int64_t *size, int dtype_override, char *err,
                         size_t errlen);
/* Lay the tensors of `config` out inside [base, base + cap) (64-byte aligned
 * offsets from base, which must itself be 64-byte aligned), e.g. in memory
 * shared with the runner. Nothing is allocated; free is a no-op for them. */
int avo_tensors_place(avo_tensors *t, const avo_problem *p, int config, void *base, size_t cap, char *err,
                      size_t errlen);
/* The same layout without touching the memory (no zeroing, no guard
 * zones): for host tensors that only name device tensors' sizes, whose
 * contents never cross to the host (the CUDA checks on the device). */
int avo_tensors_place_lazy(avo_tensors *t, const avo_problem *p, int config, void *base, size_t cap, char *err,
                           size_t errlen);
/* Index of the first placed tensor whose guard zone was written (with the
 * first changed byte after its end in *byte), or -1. */
int avo_tensors_guard_broken(const avo_tensors *t, int64_t *byte);

/* Bytes avo_tensors_place needs for `config`. */
size_t avo_tensors_span(const avo_problem *p, int config);
void avo_tensors_free(avo_tensors *t);

/* The most threads a fill or comparison pass uses (the worker sizes the
 * harness's CPU-time limit by it). */
#define AVO_TENSORS_MAX_THREADS 16

/* The CPUs the fill and comparison passes may spread over (NULL: the
 * calling thread's own affinity); threads > 0 forces that many threads and
 * min_elems > 0 the elements per thread (tests); 0 keeps the defaults. */
void avo_tensors_set_workers(const cpu_set_t *cpus, int threads, int64_t min_elems);

/* Fill every input and inout tensor from the stream identified by
 * (seed, config, set): ChaCha20 keyed by the seed, so the data of one set
 * says nothing of another's without the seed; the same triple always gives
 * the same data. */
void avo_tensors_fill(avo_tensors *t, const avo_problem *p, uint64_t seed, int config, int set);

/* The stream's key for a seed, and one stream (n elements of dtype d times
 * scale under nonce): what avo_tensors_fill writes into each tensor, for the
 * device's generator (daemon/gpu/avo_fill.h) and its check against this. */
void avo_tensors_stream_key(uint64_t seed, unsigned char key[32]);
void avo_tensors_fill_stream(void *dst, int64_t n, avo_dtype d, float scale, const unsigned char key[32],
                             const uint32_t nonce[3]);

/* Write the NaN pattern (a fixed marker for i32) into every output-only
 * tensor so elements the candidate does not write cannot pass. */
void avo_tensors_poison(avo_tensors *t, const avo_problem *p);

/* Copy the tensors whose role matches (inputs: input+inout, outputs:
 * output+inout) from src to dst; both come from the same config. */
void avo_tensors_copy_inputs(avo_tensors *dst, const avo_tensors *src, const avo_problem *p);

/* Index of the first input tensor (role input) that differs from the
 * pristine copy, or -1. *elem receives the first differing element. */
int avo_tensors_inputs_changed(const avo_tensors *t, const avo_tensors *pristine, const avo_problem *p, int64_t *elem);

/* Compare tensor i of got against want (n elements of dtype) under tol. */
void avo_tensors_compare(const void *got, const void *want, int64_t n, avo_dtype d, avo_tolerance tol, avo_check *out);
/* The same with want held as double (the float64 twin's output). */
void avo_tensors_compare_f64(const void *got, avo_dtype d, const double *want, int64_t n, avo_tolerance tol,
                             avo_check *out);

/* Element i of a tensor of dtype d, as double (exact). */
double avo_tensors_load(const void *base, int64_t i, avo_dtype d);

/* Widen n elements of dtype d to double (exactly: every dtype fits). */
void avo_tensors_to_f64(const void *src, avo_dtype d, int64_t n, double *dst);

#endif
