/* The host's harness CPU leases (cpulease.h). */
#include "cpulease.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "gpulock.h"

static int lease_path(const char *dir, int cpu, char *path, size_t plen, char *err, size_t errlen)
{
    if (snprintf(path, plen, "%s/avo-harness-cpu-%d.lock", dir, cpu) >= (int)plen) {
        snprintf(err, errlen, "CPU lease: the path under %s is too long", dir);
        return -ENAMETOOLONG;
    }
    return 0;
}

int avo_cpulease_take(const char *dir, const cpu_set_t *allowed, int *cpu, char *err, size_t errlen)
{
    char path[PATH_MAX];
    *cpu = -1;
    for (int i = CPU_SETSIZE - 1; i >= 0; i--) {
        if (!CPU_ISSET(i, allowed))
            continue;
        int rc = lease_path(dir, i, path, sizeof path, err, errlen);
        if (rc < 0)
            return rc;
        int fd = avo_gpulock_open_path("CPU lease", path, err, errlen);
        if (fd < 0)
            return fd;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            *cpu = i;
            return fd;
        }
        int e = errno;
        close(fd);
        if (e != EWOULDBLOCK && e != EINTR) {
            snprintf(err, errlen, "CPU lease: flock %s: %s", path, strerror(e));
            return -e;
        }
    }
    snprintf(err, errlen, "every CPU this worker may use (%d) is leased by another worker's harness in %s",
             CPU_COUNT(allowed), dir);
    return -EBUSY;
}

void avo_cpulease_release(int fd)
{
    if (fd >= 0)
        close(fd); /* the last descriptor of the open file: the lease goes with it */
}

/* Whether someone holds CPU i's lease in dir. A shared try conflicts with
 * the holder's exclusive lock and is dropped at once; a worker leasing that
 * very moment skips to a lower CPU, which costs nothing but the choice. */
static int leased(const char *dir, int i)
{
    char path[PATH_MAX], err[PATH_MAX + 64];
    if (lease_path(dir, i, path, sizeof path, err, sizeof err) < 0)
        return 0;
    /* Never create files here: a CPU nobody ever leased has none. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

int avo_cpulease_free_set(const char *dir, const cpu_set_t *allowed, int own, cpu_set_t *out)
{
    CPU_ZERO(out);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, allowed) && i != own && !leased(dir, i))
            CPU_SET(i, out);
    if (CPU_COUNT(out) > 0)
        return CPU_COUNT(out);
    CPU_OR(out, out, allowed);
    if (own >= 0 && CPU_COUNT(allowed) > 1)
        CPU_CLR(own, out);
    return CPU_COUNT(out);
}

/* The worker's lease, set once at start before any thread (read-only
 * afterwards). */
static struct {
    int on;
    char dir[PATH_MAX];
    cpu_set_t base;
    int own;
} worker;

void avo_cpulease_keep_off_init(const char *dir, const cpu_set_t *base, int own)
{
    snprintf(worker.dir, sizeof worker.dir, "%s", dir);
    worker.base = *base;
    worker.own = own;
    worker.on = 1;
}

void avo_cpulease_keep_off(void)
{
    if (!worker.on)
        return;
    cpu_set_t set;
    if (avo_cpulease_free_set(worker.dir, &worker.base, worker.own, &set) > 0)
        sched_setaffinity(0, sizeof set, &set);
}
