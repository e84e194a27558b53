/* Hostile: correct everywhere except one element, which is NaN (NaN passes
 * a naive "abs(got - ref) > tol" test because every NaN comparison is
 * false). Expected: wrong_result naming the element. */
#include <math.h>
#include <stdint.h>

static void gemm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K)
{
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++)
            C[i * N + j] = 0;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
    }
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    float *C = tensors[2];
    gemm(tensors[0], tensors[1], C, sizes[0], sizes[1], sizes[2]);
    C[sizes[0] * sizes[1] / 2 + 7] = NAN;
    return 0;
}
