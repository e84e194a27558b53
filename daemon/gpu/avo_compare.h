/* A checked call's comparisons on the device: the candidate's outputs
 * against the reference's and its inputs against their pristine copy,
 * where both already live, so no tensor crosses to the host (only a few
 * hundred partial sums and the worst elements do). The same rule as the
 * host's (daemon/harness/tensors.c, avo_tensors_compare). */
#ifndef AVO_COMPARE_H
#define AVO_COMPARE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double num, den;   /* sum of (got - want)^2, sum of want^2 */
    double max_abs;    /* the largest |got - want| (NaN differences never count) */
    int64_t worst;     /* its first element (-1: none) */
    int64_t nonfinite; /* the first element of got that is not finite (-1: none) */
} avo_compare_sums;

/* Scratch the two functions below need (device memory), from
 * avo_compare_scratch_bytes(). */
size_t avo_compare_scratch_bytes(void);

/* got and want: n elements of dtype (an avo_dtype value), device pointers.
 * Waits for the result on st. Returns 0, -EINVAL (dtype), or -EIO. */
int avo_compare_run(const void *got, const void *want, int64_t n, int dtype, void *scratch, cudaStream_t st,
                    avo_compare_sums *out);

/* The same over nrows rows of row_elems elements each (rows: a device
 * array of row indices; row r is elements r * row_elems ..); worst and
 * nonfinite are the tensors' own element indices. */
int avo_compare_run_rows(const void *got, const void *want, const int64_t *rows, int64_t nrows, int64_t row_elems,
                         int dtype, void *scratch, cudaStream_t st, avo_compare_sums *out);

/* The first element (elem_size bytes each) where a and b differ, -1 when
 * none. Waits on st. Returns 0 or -EIO. */
int avo_compare_equal(const void *a, const void *b, int64_t n, size_t elem_size, void *scratch, cudaStream_t st,
                      int64_t *first);

#ifdef __cplusplus
}
#endif

#endif
