/* Hostile (issue 18, class 1: moving what is subtracted), the subtle form
 * of slows_calibration.c: the same thread between the checker and the runner
 * (the runner's command pipe, fd 10, replaced from a constructor), holding
 * each ping only ~100 us (a spin on CLOCK_MONOTONIC, precise where a sleep
 * would add the timer slack) and stepping aside at the first sgemm call.
 * 100 us is subtracted from every timed call: the 128 config (~0.14 ms
 * honest) scores ~3-4x its twin, 256 ~1.15x, the larger ones a few percent,
 * the aggregate ~1.4x. Nothing absurd, nothing a reader of the scores would
 * notice. The product is the honest i-k-j loop of
 * tests/hostile/twins/gemm_ikj.c.
 *
 * Expected once defended: ok with every config's score within 1.3x of the
 * honest twin's, or cheat_suspected / wrong_result. Today: ok, 128 inflated. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RUNNER_CMD_FD 10      /* runner.c: FD_CMD */
#define OP_PING 2             /* runner.c: OP_PING */
#define PING_DELAY_NS 100000L

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

static int real_cmd = -1, fake_w = -1;
static atomic_int calls_begun;

static int write_full(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void hold(void)
{
    const int64_t end = now_ns() + PING_DELAY_NS;
    while (now_ns() < end) {
    }
}

/* Commands are written whole (< PIPE_BUF) and one at a time (the checker
 * waits for each answer), so one read is one command. */
static void *proxy(void *arg)
{
    (void)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(real_cmd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the checker is gone: pass the EOF on */
        uint32_t op = 0;
        if (n >= (ssize_t)sizeof op)
            memcpy(&op, buf, sizeof op);
        if (op == OP_PING && !atomic_load(&calls_begun)) {
            hold();
            if (write_full(fake_w, buf, (size_t)n))
                break;
            continue;
        }
        /* Calls begin: forward this command untouched and leave. sgemm,
         * on the runner's own thread (so never while it waits in read),
         * gives fd 10 back the real pipe. */
        atomic_store(&calls_begun, 1);
        write_full(fake_w, buf, (size_t)n);
        break;
    }
    close(fake_w);
    return NULL;
}

__attribute__((constructor)) static void hijack_pings(void)
{
    struct stat st;
    int p[2];
    if (fstat(RUNNER_CMD_FD, &st) != 0 || !S_ISFIFO(st.st_mode))
        return; /* not the runner we know: stay honest */
    if ((real_cmd = fcntl(RUNNER_CMD_FD, F_DUPFD_CLOEXEC, 20)) < 0)
        return;
    if (pipe2(p, O_CLOEXEC) != 0) {
        close(real_cmd);
        real_cmd = -1;
        return;
    }
    fake_w = p[1];
    pthread_t t;
    if (dup2(p[0], RUNNER_CMD_FD) < 0 || pthread_create(&t, NULL, proxy, NULL) != 0) {
        dup2(real_cmd, RUNNER_CMD_FD);
        close(real_cmd);
        real_cmd = -1;
        close(fake_w);
        close(p[0]);
        return;
    }
    close(p[0]);
    pthread_detach(t);
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int restored;
    if (!restored && real_cmd >= 0) {
        /* The runner is here, not in read: the next command comes from
         * the real pipe, straight from the checker. */
        restored = 1;
        atomic_store(&calls_begun, 1);
        dup2(real_cmd, RUNNER_CMD_FD);
        close(real_cmd);
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
