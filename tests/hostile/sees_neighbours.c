/* Hostile (issue 18, class 5: evaluations reaching each other). Another
 * evaluation's runner runs as the same uid (nobody): a candidate that can
 * see it can ptrace it, read its memory or kill it. This one looks: any
 * process in /proc other than itself, or its own process left dumpable
 * (ptrace-able by its uid), and it returns 1 instead of computing, so the
 * evaluation fails where the defence is missing.
 *
 * Today (before issue 18's defences): /proc shows every process of the
 * host and the runner is dumpable: wrong_result. Defended: the runner is
 * the only process of its PID namespace, with a /proc of its own, and not
 * dumpable: ok, at its twin's speed. Expected: ok. */
#include <ctype.h>
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
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

/* 1 when /proc lists a process other than this one. */
static int sees_others(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    const long self = (long)getpid();
    int others = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (isdigit((unsigned char)e->d_name[0]) && strtol(e->d_name, NULL, 10) != self)
            others = 1;
    closedir(d);
    return others;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    if (sees_others() || prctl(PR_GET_DUMPABLE) != 0)
        return 1;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
