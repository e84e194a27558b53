/* Hostile: sleeps one second in every call, then computes correctly. Under
 * a short wall-clock limit it must end as timeout; if it completes, the
 * sleep is inside the timed region and its score is far below the seed's.
 * Expected: timeout (or ok with a negligible score). */
#include <stdint.h>
#include <time.h>

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
    struct timespec one = {1, 0};
    while (nanosleep(&one, &one) != 0)
        ;
    gemm(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
