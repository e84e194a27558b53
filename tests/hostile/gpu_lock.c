/* Hostile (issue 24's GPU lock, read as an optimiser): every worker of a
 * host takes an exclusive flock on <lock dir>/avo-gpu-<UUID>.lock around
 * its CUDA timing, and the default directory, /run/lock, is world-writable
 * and sticky. Candidate code that can reach it can (a) flock a lock file
 * from a helper and stall every GPU evaluation of the host while it lives,
 * (b) plant avo-gpu-<UUID>.lock before a worker has made it: a FIFO hangs
 * the worker's open, a file of its own it can later unlink while a worker
 * holds the lock, so the next worker locks a new inode and times beside
 * the first. This one tries all three on /run/lock (the documented default)
 * and returns 1 instead of computing when any of them works, so the
 * evaluation fails where the defence is missing. The same directory holds
 * each worker's lease of its timing CPU (avo-harness-cpu-N.lock,
 * daemon/worker/cpulease.h): a lease flocked or planted there keeps the
 * next worker off that CPU (all of them then time on one CPU, each slowing
 * the others' calls), so it reaches for those too.
 *
 * Before the defence: /run/lock is the host's: wrong_result. Defended: the
 * evaluation sees an empty read-only directory there: ok, at its twin's
 * speed, and nothing is left in the host's /run/lock. Expected: ok. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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

/* 1 when any host GPU lock could be opened (and it was flocked) or a lock
 * name could be planted. The descriptors stay open: a real attacker keeps
 * them for its whole evaluation. */
static int reaches_locks(void)
{
    int reached = 0;
    DIR *d = opendir("/run/lock");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "avo-gpu-", 8) != 0 && strncmp(e->d_name, "avo-harness-cpu-", 16) != 0)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            flock(fd, LOCK_EX | LOCK_NB);
            reached = 1;
        }
    }
    if (d)
        closedir(d);
    if (mkfifo("/run/lock/avo-gpu-hostile-planted-fifo.lock", 0666) == 0)
        reached = 1;
    int fd = open("/run/lock/avo-gpu-hostile-planted-file.lock", O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0)
        reached = 1;
    if (mkfifo("/run/lock/avo-harness-cpu-hostile-planted-fifo.lock", 0666) == 0)
        reached = 1;
    return reached;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int reached = -1;
    if (reached < 0)
        reached = reaches_locks();
    if (reached)
        return 1;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
