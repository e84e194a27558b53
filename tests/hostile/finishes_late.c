/* Hostile (issue 20's paired timing on a shared CPU, docs/evaluation.md
 * Residual risks, "A busy neighbour on the harness's CPU"): a call's round
 * trip ends only once the runner's group is frozen again, and after the
 * answer the checker yields the CPU while the group freezes, so a thread
 * of the group that is still computing holds it until the freezer catches
 * it. This candidate computes the first half of the rows of the small
 * configs and answers at once, leaving the second half to a helper thread
 * woken as it returns, in the hope that the helper finishes in the time
 * the checker waits (a rule that took the checker's waits out of the
 * samples, built and withdrawn on 2026-12-06, would have given that time
 * away if its floor had not held). The big configs, whose half no tick
 * could hold, are computed whole by the call. Otherwise the honest i-k-j
 * loop of tests/hostile/twins/gemm_ikj.c.
 *
 * Expected: ok within its twin's bar (the helper's work is inside the
 * round trip), or cheat_suspected / wrong_result where the freezer caught
 * the helper first. Seen on the build VM (2026-12-07): cheat_suspected,
 * the config's later calls wrong (the poison left in the helper's rows):
 * the freezer catches the helper at its next return to user mode, which
 * comes as soon as the checker, woken by the answer, takes the CPU from
 * it. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Rows times columns times depth the helper takes on: about a quarter of
 * a millisecond of i-k-j on the build VM, well inside a tick. */
#define HELPER_WORK (1 << 20)

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

typedef struct {
    const float *A, *B;
    float *C;
    int64_t M, N, K;
} job;

static job pending;            /* the rows the helper is to compute */
static atomic_uint posted;     /* jobs posted (a futex word) */
static atomic_uint finished;   /* jobs the helper finished */
static atomic_int started;

static void futex(atomic_uint *word, int op, unsigned val)
{
    syscall(SYS_futex, (unsigned *)word, op, val, NULL, NULL, 0);
}

static void *helper(void *arg)
{
    (void)arg;
    unsigned seen = 0;
    for (;;) {
        while (atomic_load(&posted) == seen)
            futex(&posted, FUTEX_WAIT, seen);
        seen = atomic_load(&posted);
        gemm_ikj(pending.A, pending.B, pending.C, pending.M, pending.N, pending.K);
        atomic_store(&finished, seen);
    }
    return NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const float *A = tensors[0], *B = tensors[1];
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    const int64_t late = M / 2;
    if (late * N * K > HELPER_WORK || atomic_load(&finished) != atomic_load(&posted)) {
        gemm_ikj(A, B, C, M, N, K);
        return 0;
    }
    if (!atomic_exchange(&started, 1)) {
        pthread_t t;
        if (pthread_create(&t, NULL, helper, NULL) != 0) {
            atomic_store(&started, 0);
            gemm_ikj(A, B, C, M, N, K);
            return 0;
        }
        pthread_detach(t);
    }
    gemm_ikj(A, B, C, M - late, N, K);
    pending = (job){A + (M - late) * K, B, C + (M - late) * N, late, N, K};
    atomic_fetch_add(&posted, 1);
    futex(&posted, FUTEX_WAKE, 1);
    return 0;
}
