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

int avo_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    const char *p = data;
    int rc = 0;
    while (len && !rc) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = w < 0 ? -errno : -EIO;
        else {
            p += w;
            len -= (size_t)w;
        }
    }
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
