/* Whole-file reads, mkdir -p and atomic writes for small files (avo_file.h). */
#include "avo_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *avo_file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *g = realloc(buf, cap = cap ? cap * 2 : 16384);
            if (!g) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = g;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

static int make_one(const char *dir, mode_t mode, char *failed, size_t failedlen)
{
    struct stat st;
    if (mkdir(dir, mode) == 0)
        return 0;
    int e = errno;
    /* EEXIST is success only for a directory; a file there is ENOTDIR */
    if (e == EEXIST && stat(dir, &st) == 0)
        e = S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (e && failed)
        snprintf(failed, failedlen, "%s", dir);
    return -e;
}

int avo_file_mkdirs(const char *path, mode_t mode, char *failed, size_t failedlen)
{
    char buf[PATH_MAX];
    if (failed && failedlen)
        failed[0] = 0;
    if (!path[0])
        return -ENOENT;
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        int rc = make_one(buf, mode, failed, failedlen);
        *s = '/';
        if (rc)
            return rc;
    }
    return make_one(buf, mode, failed, failedlen);
}

/* A temporary name beside path no other writer uses: the pid for other
 * processes, a counter for other threads of this one (the worker's compile
 * thread and its main thread may store into the same cache). */
static int temp_beside(char *tmp, size_t len, const char *path)
{
    static unsigned counter;
    unsigned k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    /* hidden (.name.tmp.pid.k): a listing or a glob of the directory never
     * takes one left by a crash for a finished file */
    const char *slash = strrchr(path, '/');
    const int dirlen = slash ? (int)(slash - path + 1) : 0;
    int n = snprintf(tmp, len, "%.*s.%s.tmp.%ld.%u", dirlen, path, path + dirlen, (long)getpid(), k);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int avo_file_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The file at tmp, written by fill (0 or a negative errno) from arg, flushed
 * and renamed over path; on any failure nothing is left at tmp. */
static int publish(const char *path, mode_t mode, int (*fill)(int fd, void *arg), void *arg)
{
    char tmp[PATH_MAX];
    int rc = temp_beside(tmp, sizeof tmp, path);
    if (rc)
        return rc;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    rc = fill(fd, arg);
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

typedef struct {
    const void *data;
    size_t len;
} bytes;

static int fill_bytes(int fd, void *arg)
{
    const bytes *b = arg;
    return avo_file_write_all(fd, b->data, b->len);
}

int avo_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    bytes b = {data, len};
    return publish(path, mode, fill_bytes, &b);
}

static int fill_copy(int fd, void *arg)
{
    int in = *(int *)arg;
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return 0;
        int rc = avo_file_write_all(fd, buf, (size_t)n);
        if (rc)
            return rc;
    }
}

int avo_file_copy_atomic(const char *from, const char *to, mode_t mode)
{
    struct stat st;
    int in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return -errno;
    int rc = fstat(in, &st) != 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
    if (!rc)
        rc = publish(to, mode, fill_copy, &in);
    close(in);
    return rc;
}
