/* Hostile (issue 18, class 5: outliving the evaluation). At its first call
 * the candidate writes 288 MiB into files named avo-hostile-shm-<pid>-<n>:
 * four of 48 MiB in /dev/shm (tmpfs: host memory, until someone deletes
 * them) and two in /tmp, each under the sandbox's 64 MiB RLIMIT_FSIZE, and
 * leaves them there. Repeated, such files fill the host's memory and disk.
 * The call itself is honest (the i-k-j loop of
 * tests/hostile/twins/gemm_ikj.c).
 *
 * Expected once defended: any outcome, and no file with the marker under
 * /dev/shm or /tmp afterwards (a private /tmp and /dev/shm per evaluation,
 * removed with it). Today: ok, and the six files stay. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FILE_MIB 48
#define IN_SHM 4
#define IN_TMP 2

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

static char block[1 << 20];

static void fill(const char *dir, int n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/avo-hostile-shm-%d-%d", dir, (int)getpid(), n);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    for (int m = 0; m < FILE_MIB; m++)
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block)
            break;
    close(fd);
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int filled;
    if (!filled) {
        filled = 1;
        memset(block, 0x5a, sizeof block);
        for (int n = 0; n < IN_SHM; n++)
            fill("/dev/shm", n);
        for (int n = 0; n < IN_TMP; n++)
            fill("/tmp", IN_SHM + n);
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
