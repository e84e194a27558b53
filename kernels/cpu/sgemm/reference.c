/* Trusted reference for cpu/sgemm: C = A * B, row-major, every product
 * accumulated in double so the reference is more accurate than any float
 * candidate it judges. i-k-j order only to keep it fast enough to run on
 * every input set; the arithmetic is the plain triple loop's. */
#include <stdint.h>
#include <stdlib.h>

int avo_reference(void *const *tensors, const int64_t *sizes)
{
    const float *A = tensors[0], *B = tensors[1];
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    double *acc = malloc((size_t)N * sizeof *acc);
    if (!acc)
        return 1;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++)
            acc[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            const double a = A[i * K + k];
            for (int64_t j = 0; j < N; j++)
                acc[j] += a * (double)B[k * N + j];
        }
        for (int64_t j = 0; j < N; j++)
            C[i * N + j] = (float)acc[j];
    }
    free(acc);
    return 0;
}

/* The float64 twin: the same product on double tensors (every tensor of the
 * spec, as double), the plain i-j-k triple loop with nothing clever, so it
 * is easy to trust by reading. The harness runs it on the spec's "validate"
 * sizes and requires avo_reference to match it within the f32 tolerance. */
int avo_reference_f64(void *const *tensors, const int64_t *sizes)
{
    const double *A = tensors[0], *B = tensors[1];
    double *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
    return 0;
}
