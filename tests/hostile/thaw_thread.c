/* Hostile (issue 18, class 2, once the runner cannot leave its CPU): the
 * checker thaws the runner's group and only then starts its clock, on the
 * same CPU the runner is pinned to (the system-call filter keeps it there).
 * A helper thread that sleeps 1 ms at a time is woken by the thaw (its
 * timer ran out while frozen) and, woken, takes the CPU from the checker
 * before the clock starts: when the previous call's tensors hold the
 * checker's poison again (the next call's inputs are laid out) it computes
 * the product into a private buffer, and the timed call copies it out.
 * Sleeping, it uses next to no CPU in the idle check's 5 ms (the busy-polling
 * flush_thread.c is caught there). Otherwise flush_thread.c's logic, and
 * the honest i-k-j loop of tests/hostile/twins/gemm_ikj.c.
 *
 * Before the defence: ok at several times its twin on the small configs.
 * Defended: the CPU time the runner's group used beyond the round trip is
 * charged to the call (harness.c, CPU_OUTSIDE_SLACK_S): ok within its
 * twin's bar, or cheat_suspected / wrong_result. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define POISON_F32 0x7fc5a5a5u  /* tensors.c avo_tensors_poison */
#define GUARD_BYTE 0xA5         /* tensors.h AVO_TENSOR_GUARD_BYTE */
#define GUARD_LOOK 64           /* guard bytes looked at after each tensor */

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

enum { IDLE, BUSY, READY };

static atomic_int in_call;        /* the runner's thread is inside sgemm */
static atomic_uint done;          /* calls finished */
static atomic_int state = IDLE;   /* the helper's result */
static job last;                  /* the previous call's tensors (written outside calls) */
static job hjob;                  /* what the helper computed, */
static unsigned htag;             /* and the value of done when it started */
static float *hbuf;
static size_t hcap;

static int same(const job *a, const job *b)
{
    return a->A == b->A && a->B == b->B && a->C == b->C && a->M == b->M && a->N == b->N && a->K == b->K;
}

static int guard_intact(const void *t, int64_t elems)
{
    const unsigned char *g = (const unsigned char *)t + elems * 4;
    for (int i = 0; i < GUARD_LOOK; i++)
        if (g[i] != GUARD_BYTE)
            return 0;
    return 1;
}

static int bits(const float *p, int64_t i)
{
    uint32_t u;
    memcpy(&u, p + i, 4);
    return u == POISON_F32;
}

/* The checker has laid out this call's inputs and poisoned its output. */
static int armed(const job *j)
{
    const int64_t n = j->M * j->N;
    return bits(j->C, 0) && bits(j->C, n / 2) && bits(j->C, n - 1) && guard_intact(j->A, j->M * j->K) &&
           guard_intact(j->B, j->K * j->N) && guard_intact(j->C, n);
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

static void *helper(void *arg)
{
    (void)arg;
    unsigned seen = 0;
    for (;;) {
        if (atomic_load(&in_call) || atomic_load(&state) != IDLE) {
            nap();
            continue;
        }
        const unsigned g = atomic_load(&done);
        const job j = last;
        if (g == 0 || g == seen || atomic_load(&in_call) || atomic_load(&done) != g || !armed(&j)) {
            nap();
            continue;
        }
        int idle = IDLE;
        if (!atomic_compare_exchange_strong(&state, &idle, BUSY))
            continue;
        const size_t need = (size_t)(j.M * j.N) * sizeof(float);
        if (need > hcap) {
            free(hbuf);
            hbuf = malloc(need);
            hcap = hbuf ? need : 0;
        }
        seen = g;
        if (!hbuf) {
            atomic_store(&state, IDLE);
            continue;
        }
        gemm_ikj(j.A, j.B, hbuf, j.M, j.N, j.K);
        hjob = j;
        htag = g;
        atomic_store(&state, READY);
    }
    return NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int started;
    const job cur = {tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]};
    atomic_store(&in_call, 1);
    if (!started) {
        started = 1;
        pthread_t t;
        if (pthread_create(&t, NULL, helper, NULL) == 0)
            pthread_detach(t);
    }
    int st;
    while ((st = atomic_load(&state)) == BUSY)
        sched_yield();
    int used = 0;
    if (st == READY) {
        if (htag == atomic_load(&done) && same(&hjob, &cur)) {
            memcpy(cur.C, hbuf, (size_t)(cur.M * cur.N) * sizeof(float));
            used = 1;
        }
        atomic_store(&state, IDLE);
    }
    if (!used)
        gemm_ikj(cur.A, cur.B, cur.C, cur.M, cur.N, cur.K);
    last = cur;
    atomic_fetch_add(&done, 1);
    atomic_store(&in_call, 0);
    return 0;
}
