/* Hostile (issue 18, class 2: work outside the timed window), the process
 * form of flush_thread.c. At its first call the candidate forks a helper
 * process. The tensor memory is a MAP_SHARED memfd mapping, so the helper
 * sees the checker's writes at the same addresses; and the checker's SIGSTOP
 * freezes the runner only, not a process the runner forked, so the helper
 * runs on while the checker compares the last output, copies the next
 * inputs in, poisons the output, resumes the runner and flushes the cache.
 * The helper (on a CPU the runner's main thread is not on, dying with the
 * runner through PR_SET_PDEATHSIG) watches the previous call's tensors:
 * when the output holds the poison again and the guard zones are where they
 * were, it computes the product from the inputs in memory into a buffer
 * shared with the runner (never into the tensors). The call waits for the
 * helper if it is busy with exactly this call and copies the result out;
 * otherwise (other tensors, stale work, no helper) it computes honestly.
 * The product is the honest i-k-j loop of tests/hostile/twins/gemm_ikj.c.
 *
 * Expected once defended: ok with every config's score within 1.3x of the
 * honest twin's, or cheat_suspected / wrong_result. Today: ok, far above the
 * twin on the configs whose product fits in the checker's own work between
 * two timed calls. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define POISON_F32 0x7fc5a5a5u  /* tensors.c avo_tensors_poison */
#define GUARD_BYTE 0xA5         /* tensors.h AVO_TENSOR_GUARD_BYTE */
#define GUARD_LOOK 64           /* guard bytes looked at after each tensor */
#define RESULT_MAX (256u << 20) /* the shared result buffer (touched only as far as used) */

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

/* Shared between the runner and its helper (MAP_SHARED | MAP_ANONYMOUS,
 * made before the fork: the same addresses in both). */
typedef struct {
    atomic_int in_call;    /* the runner is inside sgemm */
    atomic_uint done;      /* calls finished */
    atomic_int state;      /* the helper's result */
    job last;              /* the previous call's tensors */
    job hjob;              /* what the helper computed, */
    unsigned htag;         /* and the value of done when it started */
} shared;

static shared *sh;
static float *result;

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

static _Noreturn void helper(pid_t runner, int runner_cpu)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != runner)
        _exit(0);
    prctl(PR_SET_TIMERSLACK, 1000UL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (long c = 0; c < ncpu && c < CPU_SETSIZE; c++)
        if (c != runner_cpu)
            CPU_SET(c, &set);
    if (CPU_COUNT(&set) > 0)
        sched_setaffinity(0, sizeof set, &set);
    unsigned seen = 0;
    for (;;) {
        if (atomic_load(&sh->in_call) || atomic_load(&sh->state) != IDLE) {
            nap();
            continue;
        }
        const unsigned g = atomic_load(&sh->done);
        const job j = sh->last;
        if (g == 0 || g == seen || atomic_load(&sh->in_call) || atomic_load(&sh->done) != g || !armed(&j) ||
            (size_t)(j.M * j.N) * sizeof(float) > RESULT_MAX) {
            nap();
            continue;
        }
        int idle = IDLE;
        if (!atomic_compare_exchange_strong(&sh->state, &idle, BUSY))
            continue;
        seen = g;
        gemm_ikj(j.A, j.B, result, j.M, j.N, j.K);
        sh->hjob = j;
        sh->htag = g;
        atomic_store(&sh->state, READY);
    }
}

static void start_helper(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    result = mmap(NULL, RESULT_MAX, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sh == MAP_FAILED || result == MAP_FAILED) {
        sh = NULL;
        return;
    }
    const pid_t runner = getpid();
    const int cpu = sched_getcpu();
    pid_t pid = fork();
    if (pid == 0)
        helper(runner, cpu);
    if (pid < 0)
        sh = NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int started;
    const job cur = {tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]};
    if (!started) {
        started = 1;
        start_helper();
    }
    if (!sh) {
        gemm_ikj(cur.A, cur.B, cur.C, cur.M, cur.N, cur.K);
        return 0;
    }
    atomic_store(&sh->in_call, 1);
    int st;
    while ((st = atomic_load(&sh->state)) == BUSY)
        sched_yield();
    int used = 0;
    if (st == READY) {
        if (sh->htag == atomic_load(&sh->done) && same(&sh->hjob, &cur)) {
            memcpy(cur.C, result, (size_t)(cur.M * cur.N) * sizeof(float));
            used = 1;
        }
        atomic_store(&sh->state, IDLE);
    }
    if (!used)
        gemm_ikj(cur.A, cur.B, cur.C, cur.M, cur.N, cur.K);
    sh->last = cur;
    atomic_fetch_add(&sh->done, 1);
    atomic_store(&sh->in_call, 0);
    return 0;
}
