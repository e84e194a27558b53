/* Hostile (issue 18, class 5: outliving the evaluation). At its first call
 * the candidate double-forks: the child calls setsid (a session and process
 * group of its own, out of reach of the sandbox's group kill) and forks the
 * grandchild, which closes every descriptor (so no pipe of the worker waits
 * on it), renames itself "avo-hostile-dmn" (prctl PR_SET_NAME) and stays
 * when the evaluation ends. It waits until its runner is gone, then, as the
 * runner's uid, sends SIGKILL to every process it may signal (kill(-1)),
 * every 20 ms for 90 s: the runner of the next evaluation, which runs under
 * the same uid, dies as soon as it starts. kill(-1) is only tried when that
 * uid is nobody (65534, the runner's uid under a root worker); under any
 * other uid (a worker run by a developer) the grandchild only lingers, which
 * the no-survivor rule catches just the same. It ends by itself after 90 s.
 * The call itself is honest (the i-k-j loop of
 * tests/hostile/twins/gemm_ikj.c).
 *
 * Expected once defended: any outcome; then an honest threaded twin
 * (tests/hostile/twins/gemm_threads.c) evaluated right after is ok, and no
 * process named avo-hostile-* is alive (the evaluation's processes are all
 * ended with it, whatever their session). Today: ok, the twin after it
 * crashes (its runner is killed), and the grandchild survives. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIFETIME_S 90
#define NOBODY 65534

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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void daemon_main(pid_t runner)
{
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    prctl(PR_SET_NAME, "avo-hostile-dmn");
    const double end = now() + LIFETIME_S;
    const struct timespec tick = {0, 20000000};
    /* Not our own evaluation: wait until its runner has been reaped. */
    while (now() < end && !(kill(runner, 0) != 0 && errno == ESRCH))
        nanosleep(&tick, NULL);
    while (now() < end) {
        if (getuid() == NOBODY)
            kill(-1, SIGKILL); /* every process of this uid but this one */
        nanosleep(&tick, NULL);
    }
    _exit(0);
}

static void escape(void)
{
    const pid_t runner = getpid();
    pid_t child = fork();
    if (child == 0) {
        setsid();
        if (fork() == 0)
            daemon_main(runner);
        _exit(0);
    }
    if (child > 0)
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int escaped;
    if (!escaped) {
        escaped = 1;
        escape();
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
