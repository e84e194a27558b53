/* Hostile: every element off by a relative 3e-5 (a precision downgrade in
 * disguise): max_abs stays under 1e-3, rel_l2 does not stay under 1e-5.
 * Expected: wrong_result naming rel_l2. */
#include <stdint.h>
#include <string.h>

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
    for (int64_t i = 0; i < sizes[0] * sizes[1]; i++)
        C[i] *= 1.00003f;
    return 0;
}
