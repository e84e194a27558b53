/* Hostile: correct output, but an input is overwritten afterwards.
 * Expected: cheat_suspected. */
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
    float *A = tensors[0];
    gemm(A, tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    A[0] = 0.0f;
    return 0;
}
