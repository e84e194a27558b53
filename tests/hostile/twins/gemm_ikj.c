/* Honest twin of the hostile cases (tests/integration/test_hostile.sh): the
 * plain single-thread i-k-j product that every case in tests/hostile uses
 * when it computes honestly, exported as sgemm with no cheat at all. Its
 * scores are what an attack that gains nothing would get: the test allows a
 * case at most 1.3 times its twin's score per config (noise), while the
 * attacks it guards against gain 5x to 10^6x.
 * Expected: ok. */
#include <stdint.h>

static void gemm_ikj(const float *restrict A, const float *restrict B, float *restrict C, int64_t M, int64_t N,
                     int64_t K)
{
    for (int64_t i = 0; i < M; i++) {
        float *restrict c = C + i * N;
        for (int64_t j = 0; j < N; j++)
            c[j] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float a = A[i * K + k];
            const float *restrict b = B + k * N;
            for (int64_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
