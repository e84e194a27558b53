/* Hostile (issue 18, class 6: evidence). A constructor kills its own
 * process while the runner loads the candidate (dlopen), before the runner
 * has answered the load command: the checker sees the answer pipe close
 * during the load, not during a call. The rest of the file is a correct
 * product (the i-k-j loop of tests/hostile/twins/gemm_ikj.c) that never
 * runs.
 *
 * Expected: crash (runner exited with code 3, said in the detail), reported
 * within 10 s of wall time although the evaluation's timeout is 60 s: a
 * runner that dies is noticed at once, not at the deadline. Today: timeout
 * after ~58 s ("no answer before the harness's wall-clock deadline"), with
 * runner.signal SIGKILL: during the load handshake the checker itself still
 * holds the write end of the answer pipe (runner.c avo_runner_start closes
 * its copies of the child's pipe ends only after the load answer), so the
 * runner's death brings no EOF. */
#include <unistd.h>
#include <stdint.h>

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

/* _exit, not raise(SIGKILL): the runner is the first process of its own
 * PID namespace, and such a process ignores signals it sends itself that
 * have no handler (only the checker, from outside, can SIGKILL it). */
__attribute__((constructor)) static void die_loading(void)
{
    _exit(3);
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
