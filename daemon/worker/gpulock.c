/* The per-GPU timing lock shared by a host's workers (gpulock.h). */
#include "gpulock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "avo_nvml.h"
#include "sandbox.h"

const char *avo_gpulock_default_dir(void)
{
    struct stat st;
    return stat("/run/lock", &st) == 0 && S_ISDIR(st.st_mode) ? "/run/lock" : "/tmp";
}

void avo_gpulock_key(int gpu_index, char *out, size_t len)
{
    char nerr[64];
    avo_gpu_info g;
    int n = avo_nvml_open(nerr, sizeof nerr);
    int ok = n > gpu_index && avo_nvml_device(gpu_index, &g) == 0 && g.uuid[0];
    if (n >= 0)
        avo_nvml_close();
    if (ok)
        snprintf(out, len, "%s", g.uuid);
    else
        snprintf(out, len, "index-%d", gpu_index);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int avo_gpulock_open_path(const char *what, const char *path, char *err, size_t errlen)
{
    /* Read-only is enough for flock, so a worker of another user can take
     * the lock on a file the first one created (/run/lock is sticky); no
     * links followed in a world-writable directory. */
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen,
                 "%s: cannot open %s: %s (--gpu-lock-dir names a directory every worker of "
                 "the host can write)",
                 what, path, strerror(e));
        return -e;
    }
    /* Anyone may create names in a sticky directory, untrusted code too
     * where it could once reach it (evaluations are kept from it since,
     * tests/hostile/gpu_lock.c): a FIFO there would have hung this open
     * (hence O_NONBLOCK), and a file of the sandbox user's could be
     * unlinked by it while a worker holds the lock, so the next worker
     * would lock a new file and time beside the first. */
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_uid == AVO_SANDBOX_UID && geteuid() != AVO_SANDBOX_UID)
        why = "owned by the sandbox user (uid 65534), whom untrusted code runs as";
    if (why) {
        snprintf(err, errlen, "%s: %s is %s; remove it (a worker makes it again)", what, path, why);
        close(fd);
        return -EPERM;
    }
    return fd;
}

/* The lock file of key in dir, opened (created where missing). */
static int open_lock(const char *dir, const char *key, char *path, size_t plen, char *err, size_t errlen)
{
    for (const char *k = key; *k; k++)
        if (*k == '/' || (*k == '.' && k == key)) {
            snprintf(err, errlen, "GPU lock: '%s' is not a usable lock name", key);
            return -EINVAL;
        }
    if (snprintf(path, plen, "%s/avo-gpu-%s.lock", dir, key) >= (int)plen) {
        snprintf(err, errlen, "GPU lock: the path under %s is too long", dir);
        return -ENAMETOOLONG;
    }
    return avo_gpulock_open_path("GPU lock", path, err, errlen);
}

int avo_gpulock_check(const char *dir, const char *key, char *err, size_t errlen)
{
    char path[PATH_MAX];
    int fd = open_lock(dir, key, path, sizeof path, err, errlen);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int avo_gpulock_take(const char *dir, const char *key, int (*should_cancel)(void *), void *arg, double *waited_s,
                     char *err, size_t errlen)
{
    char path[PATH_MAX];
    *waited_s = 0;
    int fd = open_lock(dir, key, path, sizeof path, err, errlen);
    if (fd < 0)
        return fd;
    const double t0 = now_s();
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK) {
            int e = errno;
            snprintf(err, errlen, "GPU lock: flock %s: %s", path, strerror(e));
            close(fd);
            return -e;
        }
        if (should_cancel && should_cancel(arg)) {
            *waited_s = now_s() - t0;
            snprintf(err, errlen, "cancelled while waiting %.1f s for GPU %s (another process times on it)", *waited_s,
                     key);
            close(fd);
            return -ECANCELED;
        }
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    *waited_s = now_s() - t0;
    return fd;
}

void avo_gpulock_release(int fd)
{
    if (fd >= 0)
        close(fd); /* the last descriptor of the open file: the lock goes with it */
}
