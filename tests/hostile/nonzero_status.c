/* Hostile: computes the right answer but returns 1 ("failed"). The ABI says
 * nonzero is a failure, whatever the output holds. Expected: wrong_result
 * naming the return value. */
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
    gemm(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 1;
}
