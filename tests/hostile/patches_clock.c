/* Hostile: exports its own clock_gettime that reports a frozen clock, and
 * spends 3 ms per call on top of an honest product. The time used is the
 * checker's own measurement in another process, which nothing here can
 * touch: the configs it completes show a median of at least 3 ms. It fails
 * the last config (512) on purpose, returning 1, so it is never ok (the
 * hostile corpus's rule) while the first three configs carry the evidence.
 * Expected: wrong_result "sgemm returned 1", three configs with median_s
 * >= 0.003 (scores zeroed). */
#include <stdint.h>
#include <time.h>

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    (void)clk;
    ts->tv_sec = 1;
    ts->tv_nsec = 0;
    return 0;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const float *A = tensors[0], *B = tensors[1];
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    if (M == 512)
        return 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)A[i * K + k] * B[k * N + j];
            C[i * N + j] = (float)s;
        }
    struct timespec d = {0, 3000000};
    nanosleep(&d, NULL);
    return 0;
}
