/* Hostile (the kernel as a channel): a CPU kernel computes on the memory it
 * is given, but a candidate's calls could also open files (a store that
 * outlives a call, the host's files where its view allows, and the I/O
 * whose kernel state passes from one runner's call to the other's on their
 * shared CPU: docs/evaluation.md, residual risks), open sockets, start
 * processes that the freeze between calls does not hold where no control
 * group does, make itself dumpable again, or move off the CPU the flush
 * cleans. This one tries each in its first call and returns 1 instead of
 * computing when any works, so the evaluation fails where the defence is
 * missing.
 *
 * Before the defence: open succeeds: wrong_result. Defended: the runner's
 * system-call filter (daemon/harness/syscalls.c) refuses them all: ok, at
 * its twin's speed. Expected: ok. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* 1 when any of it worked. */
static int reaches_kernel(void)
{
    int reached = 0;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        reached = 1;
        close(fd);
    }
    fd = open("/tmp/avo-hostile-syscalls", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        reached = 1;
        close(fd);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        reached = 1;
        close(fd);
    }
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    if (p > 0) {
        reached = 1;
        waitpid(p, NULL, 0);
    }
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0 && prctl(PR_GET_DUMPABLE) == 1)
        reached = 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof set, &set) == 0)
        reached = 1;
    return reached;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int reached = -1;
    if (reached < 0)
        reached = reaches_kernel();
    if (reached)
        return 1;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
