/* Hostile: after two honest calls per size it replays its last output
 * (caching across calls). Correct on the check sets and during timing (same
 * inputs), stale on the fresh set after timing. Expected: cheat_suspected. */
#include <stdlib.h>
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
    static int calls;
    static int64_t last_m, last_n, last_k;
    static float *saved;
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    if (M != last_m || N != last_n || K != last_k) {
        calls = 0;
        free(saved);
        saved = malloc((size_t)(M * N) * sizeof *saved);
        last_m = M, last_n = N, last_k = K;
    }
    if (++calls > 2 && saved) {
        memcpy(C, saved, (size_t)(M * N) * sizeof *C);
        return 0;
    }
    gemm(tensors[0], tensors[1], C, M, N, K);
    if (saved)
        memcpy(saved, C, (size_t)(M * N) * sizeof *C);
    return 0;
}
