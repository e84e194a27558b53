/* The worker's reference-cache directory and its LRU budget (refstore.h). */
#include "refstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "avo_file.h"
#include "avo_paths.h"
#include "daemon/harness/refcache.h"

int avo_refstore_open(const char *cache_dir, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (avo_paths_join(dir, sizeof dir, cache_dir, "ref") < 0) {
        snprintf(err, errlen, "the reference cache: path too long: %.200s.../ref", cache_dir);
        return -ENAMETOOLONG;
    }
    int rc = avo_file_mkdirs(dir, 0700, NULL, 0);
    if (rc != 0) {
        int e = -rc;
        snprintf(err, errlen, "cannot create the reference cache %s: %s", dir, strerror(e));
        return -e;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fchmod(fd, 0700) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open the reference cache %s: %s", dir, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    return fd;
}

typedef struct {
    char name[AVO_REFCACHE_NAME];
    uint64_t bytes;
    struct timespec mtime;
} entry;

static int older_first(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

int avo_refstore_evict(int dirfd, uint64_t budget, uint64_t *freed, uint64_t *kept)
{
    int dup_fd = dup(dirfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        int e = errno;
        if (dup_fd >= 0)
            close(dup_fd);
        return -e;
    }
    rewinddir(d);
    entry *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0, gone = 0;
    int removed = 0, rc = 0;
    const time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        const size_t len = strlen(de->d_name), sl = strlen(AVO_REFCACHE_SUFFIX);
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (strncmp(de->d_name, AVO_REFCACHE_TMP, strlen(AVO_REFCACHE_TMP)) == 0) {
            if (now - st.st_mtim.tv_sec > AVO_REFSTORE_TMP_AGE_S && unlinkat(dirfd, de->d_name, 0) == 0)
                removed++, gone += (uint64_t)st.st_size;
            continue;
        }
        const size_t vl = strlen(AVO_REFCACHE_VALID_SUFFIX);
        const int ref = len >= sl && strcmp(de->d_name + len - sl, AVO_REFCACHE_SUFFIX) == 0;
        const int valid = len >= vl && strcmp(de->d_name + len - vl, AVO_REFCACHE_VALID_SUFFIX) == 0;
        if (len >= AVO_REFCACHE_NAME || !(ref || valid))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            entry *g = realloc(v, cap * sizeof *v);
            if (!g) {
                rc = -ENOMEM;
                goto out;
            }
            v = g;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        v[n].bytes = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        total += v[n].bytes;
        n++;
    }
    qsort(v, n, sizeof *v, older_first);
    for (size_t i = 0; i < n && total > budget; i++) {
        if (unlinkat(dirfd, v[i].name, 0) != 0)
            continue;
        total -= v[i].bytes;
        gone += v[i].bytes;
        removed++;
    }
out:
    free(v);
    closedir(d);
    if (freed)
        *freed = gone;
    if (kept)
        *kept = total;
    return rc ? rc : removed;
}

int avo_refstore_parse_mb(const char *s, long long *mb)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v >= (1ll << 40))
        return -EINVAL;
    *mb = v;
    return 0;
}
