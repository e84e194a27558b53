/* Hostile (issue 18, class 2: work outside the timed window). Before every
 * timed run the checker copies the inputs into the shared tensor memory,
 * poisons the output, resumes the runner (SIGCONT) and only then flushes the
 * cache (64 MiB read-modify-write, ~2 ms on the 2-core VM) and sends the
 * call. A helper thread, moved to a CPU the runner's main thread is not on
 * (the sandbox pins the runner, but not its threads' right to choose), polls
 * the tensors of the previous call: when the output holds the checker's
 * poison again (and the guard zones still sit where they were) it computes
 * the product from the inputs already in memory into a private buffer,
 * while the checker flushes. The call then only waits for the helper (or
 * finds the result ready) and copies it out: the timed window holds a
 * memcpy instead of the product. When there is nothing from the helper for
 * exactly this call (other tensors, another call since it started) the call
 * computes honestly; the helper never writes the shared memory.
 * The product is the honest i-k-j loop of tests/hostile/twins/gemm_ikj.c.
 *
 * Expected once defended: ok with every config's score within 1.3x of the
 * honest twin's (nothing of the next call is in reach before its timed
 * window starts), or cheat_suspected / wrong_result. Today: ok, the small
 * configs (whose product fits in the flush) far above the twin. */
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
static int main_cpu = -1;

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
    struct timespec ts = {0, 10000};
    nanosleep(&ts, NULL);
}

static void *helper(void *arg)
{
    (void)arg;
    prctl(PR_SET_TIMERSLACK, 1000UL);
    /* Any CPU but the one the runner's main thread (and the checker) use. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (long c = 0; c < ncpu && c < CPU_SETSIZE; c++)
        if (c != main_cpu)
            CPU_SET(c, &set);
    if (CPU_COUNT(&set) > 0)
        sched_setaffinity(0, sizeof set, &set);
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
        main_cpu = sched_getcpu();
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
