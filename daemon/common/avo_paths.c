/* Where the project's data lives relative to the running binary (avo_paths.h). */
#include "avo_paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int avo_paths_exe_dir(char *out, size_t len)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return -ENOENT;
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = 0;
    snprintf(out, len, "%s", buf);
    return 0;
}

void avo_paths_compile_check(const char *home, char *cache, size_t cachelen, char *worker, size_t workerlen)
{
    char dir[PATH_MAX];
    snprintf(cache, cachelen, "%s/cache/seed-check", home);
    if (avo_paths_exe_dir(dir, sizeof dir) == 0)
        snprintf(worker, workerlen, "%s/avo-worker", dir);
    else if (workerlen)
        worker[0] = 0;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int avo_paths_data(const char *what, char *out, size_t len)
{
    char exe[PATH_MAX];
    if (avo_paths_exe_dir(exe, sizeof exe) < 0)
        return -ENOENT;
    const char *const rel[] = {"../..", "../share/avo"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s/%s", exe, rel[i], what);
        char real[PATH_MAX];
        if (is_dir(cand) && realpath(cand, real)) {
            snprintf(out, len, "%s", real);
            return 0;
        }
    }
    snprintf(out, len, "%s/../share/avo/%s", exe, what);
    return -ENOENT;
}
