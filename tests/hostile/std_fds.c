/* Hostile (the system-call filter read as an optimiser): the CPU runner
 * closes what the candidate's load opened and refuses every open in a
 * call, but it keeps descriptors 0-2 for stdout and stderr. A constructor
 * can put a file of its own, opened read-write, under those numbers before
 * the filter goes on; its calls then read and write a file after all (a
 * store across calls, the kernel work between runners). This one does so
 * at load with a file in its /tmp and, in its first call, reads back what
 * it wrote there through fd 0 and fd 2; it returns 1 instead of computing
 * when either read works, so the evaluation fails where the defence is
 * missing.
 *
 * Before the defence: wrong_result. Defended: descriptors 0-2 that the
 * load replaced are put back to /dev/null before the filter: ok, at its
 * twin's speed. Expected: ok. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
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

#define MARK "avo-hostile-std-fds"

__attribute__((constructor)) static void keep_a_file(void)
{
    int fd = open("/tmp/avo-hostile-std-fds", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return;
    if (write(fd, MARK, sizeof MARK) == (ssize_t)sizeof MARK) {
        dup2(fd, 0);
        dup2(fd, 2);
    }
    close(fd);
}

/* 1 when a kept descriptor still leads to the file. */
static int reads_back(int fd)
{
    char buf[sizeof MARK] = "";
    return lseek(fd, 0, SEEK_SET) == 0 && read(fd, buf, sizeof buf) == (ssize_t)sizeof buf &&
           memcmp(buf, MARK, sizeof MARK) == 0;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int reached = -1;
    if (reached < 0)
        reached = reads_back(0) || reads_back(2);
    if (reached)
        return 1;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
