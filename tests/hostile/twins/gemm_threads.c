/* Honest threaded twin (tests/integration/test_hostile.sh): the same i-k-j
 * product as gemm_ikj.c, its rows split between 2 pthreads that are joined
 * before sgemm returns; nothing is left running. The test evaluates it right
 * after the cases that try to outlive their evaluation (escapes_daemon,
 * squats_nproc): a process they left behind that kills the runner's uid, or
 * that holds the uid's RLIMIT_NPROC, makes this honest candidate fail.
 * A thread that cannot be started is reported, not worked around: sgemm
 * returns 1 (wrong_result), so a squatted process limit is visible.
 * Expected: ok. */
#include <pthread.h>
#include <stdint.h>

typedef struct {
    const float *A, *B;
    float *C;
    int64_t M, N, K, row0, row1;
} part;

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

static void *work(void *arg)
{
    const part *p = arg;
    gemm_ikj(p->A + p->row0 * p->K, p->B, p->C + p->row0 * p->N, p->row1 - p->row0, p->N, p->K);
    return NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    part parts[2];
    pthread_t tid[2];
    int started[2] = {0, 0}, failed = 0;
    for (int t = 0; t < 2; t++) {
        parts[t] = (part){tensors[0], tensors[1], tensors[2], M, N, K, M * t / 2, M * (t + 1) / 2};
        started[t] = pthread_create(&tid[t], NULL, work, &parts[t]) == 0;
        failed |= !started[t];
    }
    for (int t = 0; t < 2; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
    return failed ? 1 : 0;
}
