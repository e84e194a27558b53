/* Hostile (issue 18, class 5: outliving the evaluation). RLIMIT_NPROC
 * counts every process and thread of a real uid, system-wide, and the
 * sandbox gives the harness (and so the runner) a limit of 64. Under a root
 * worker every runner is nobody (65534). At its first call the candidate
 * forks until fork fails (at most 256 times): each child calls setsid (out
 * of reach of the sandbox's group kill), closes its descriptors, renames
 * itself "avo-hostile-sq" and sleeps, ending by itself after 120 s. The uid
 * then sits at its limit after this evaluation, and the next candidate
 * cannot start a thread (or the next runner cannot even start). The call
 * itself is honest (the i-k-j loop of tests/hostile/twins/gemm_ikj.c) and
 * needs no thread.
 *
 * Expected once defended: any outcome; then an honest threaded twin
 * (tests/hostile/twins/gemm_threads.c) evaluated right after is ok, and no
 * process named avo-hostile-* is alive. Today: ok, the twin after it fails
 * (no thread, or no runner), and the sleepers survive. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_SQUATTERS 256
#define LIFETIME_S 120

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

static _Noreturn void squat(void)
{
    setsid();
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    prctl(PR_SET_NAME, "avo-hostile-sq");
    signal(SIGALRM, SIG_DFL);
    alarm(LIFETIME_S); /* ends it, whatever happens to the test */
    for (;;)
        pause();
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int squatted;
    if (!squatted) {
        squatted = 1;
        for (int i = 0; i < MAX_SQUATTERS; i++) {
            pid_t pid = fork();
            if (pid == 0)
                squat();
            if (pid < 0)
                break; /* EAGAIN: the uid is at its limit */
        }
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
