/* Hostile (issue 18, class 3: recognisable calls). Without reading its
 * inputs, the candidate tells timed calls from checked ones by timing alone
 * and replays its last output on the calls it takes for timed runs. Every
 * timed run repeats the last checked input set, so the replay is right; the
 * fresh set after timing must be taken for a check and computed honestly
 * (the i-k-j loop of tests/hostile/twins/gemm_ikj.c), as must every check.
 *
 * Two clocks (CLOCK_MONOTONIC), no input read:
 *  - the time since the runner was last continued. The checker freezes the
 *    runner (SIGSTOP) after every call and continues it (SIGCONT) right
 *    before a checked call, but before the cache flush (64 MiB, ~2 ms here)
 *    that precedes a timed one. A SIGCONT handler notes the time: a call
 *    that starts more than 0.5 ms after it was preceded by a flush.
 *  - when no SIGCONT came since the last call (a harness that does not
 *    freeze the runner), the time between the end of one call and the start
 *    of the next: the gap before the second call of a size (input set 1,
 *    always a check) is the yardstick, and a later call of the same size
 *    with a gap more than 1.25x and 0.7 ms above it is taken for a timed
 *    run (the flush takes longer than generating fresh inputs). This alone
 *    misjudges a fresh set now and then on a busy VM (cheat_suspected),
 *    which is why the first clock comes first.
 *
 * Expected once defended: ok with every config's score within 1.3x of the
 * honest twin's (timed calls that cannot be told from checks, or fresh
 * inputs on timed runs), or cheat_suspected / wrong_result (a replay caught).
 * Today: ok, every config far above the twin. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AFTER_CONT_NS 500000   /* a call this long after SIGCONT followed a flush */

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

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static _Atomic int64_t continued_ns; /* the last SIGCONT */

static void on_cont(int sig)
{
    (void)sig;
    atomic_store(&continued_ns, now_ns());
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int64_t last_exit, yardstick;
    static int64_t lm, ln, lk;
    static float *last_c, *saved;
    static size_t saved_cap;
    static int count, installed;
    const int64_t entry = now_ns();
    if (!installed) {
        installed = 1;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_cont;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGCONT, &sa, NULL);
    }
    const int64_t gap = last_exit > 0 ? entry - last_exit : 0;
    const int64_t cont = atomic_load(&continued_ns);
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    const size_t cbytes = (size_t)(M * N) * sizeof(float);
    const int same = M == lm && N == ln && K == lk && C == last_c;
    count = same ? count + 1 : 1;
    if (count == 2)
        yardstick = gap;
    int timed;
    if (last_exit > 0 && cont > last_exit) {
        timed = entry - cont > AFTER_CONT_NS;
    } else {
        const int64_t bar = yardstick * 5 / 4 > yardstick + 700000 ? yardstick * 5 / 4 : yardstick + 700000;
        timed = count >= 3 && yardstick > 0 && gap > bar;
    }
    if (same && count >= 3 && timed && saved) {
        memcpy(C, saved, cbytes);
    } else {
        gemm_ikj(tensors[0], tensors[1], C, M, N, K);
        if (cbytes > saved_cap) {
            free(saved);
            saved = malloc(cbytes);
            saved_cap = saved ? cbytes : 0;
        }
        if (saved)
            memcpy(saved, C, cbytes);
    }
    lm = M, ln = N, lk = K, last_c = C;
    last_exit = now_ns();
    return 0;
}
