/* Hostile: passes the trusted reference off as its own kernel. It looks for
 * avo_reference in the process (dlsym RTLD_DEFAULT), then for any shared
 * object that exports it: paths named on its own and its parent's command
 * line, the scratch directory around it, and the usual cache directories
 * ($AVO_HOME/cache, $XDG_CACHE_HOME/avo, ~/.cache/avo). Found: it calls
 * the reference (correct output at the reference's speed). Not found: it
 * returns without computing. Either way it must not be ok.
 * Expected: policy_violation (module_loading: it dlopen()s what it finds);
 * with the rule relaxed (test_hostile.sh's second pass), wrong_result when
 * nothing is reachable. Files are only loaded
 * when they contain the string "avo_reference", so other cached candidates'
 * constructors are not run by accident. What it found goes to stderr. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*kernel_fn)(void *const *, const int64_t *);

static int mentions_reference(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    struct stat st;
    int hit = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size < (64 << 20)) {
        char *buf = malloc((size_t)st.st_size);
        if (buf && read(fd, buf, (size_t)st.st_size) == st.st_size)
            hit = memmem(buf, (size_t)st.st_size, "avo_reference", 13) != NULL;
        free(buf);
    }
    close(fd);
    return hit;
}

static kernel_fn try_so(const char *path)
{
    size_t n = strlen(path);
    if (n < 4 || strcmp(path + n - 3, ".so") != 0 || !mentions_reference(path))
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    kernel_fn f = (kernel_fn)(uintptr_t)dlsym(h, "avo_reference");
    if (f)
        fprintf(stderr, "calls_reference: found avo_reference in %s\n", path);
    return f;
}

static kernel_fn try_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    kernel_fn f = NULL;
    const struct dirent *e;
    char path[PATH_MAX];
    while (!f && (e = readdir(d))) {
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            f = try_so(path);
    }
    closedir(d);
    return f;
}

/* Every NUL-separated argument of /proc/PID/cmdline: the .so itself, and
 * the directory it lies in (the compile cache). */
static kernel_fn try_cmdline(long pid)
{
    char path[64], buf[16384];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = 0;
    kernel_fn f = NULL;
    for (char *a = buf; !f && a < buf + n; a += strlen(a) + 1) {
        if ((f = try_so(a)))
            break;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", a);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir && strstr(a, ".so")) {
            *slash = 0;
            f = try_dir(dir);
        }
    }
    return f;
}

static kernel_fn find_reference(void)
{
    kernel_fn f = (kernel_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "avo_reference");
    if (f)
        return f;
    if ((f = try_cmdline((long)getpid())) || (f = try_cmdline((long)getppid())))
        return f;
    const char *dirs[] = {".", "..", "../src", "../..", NULL};
    for (int i = 0; dirs[i]; i++)
        if ((f = try_dir(dirs[i])))
            return f;
    char dir[PATH_MAX];
    const char *env;
    if ((env = getenv("AVO_HOME")) && snprintf(dir, sizeof dir, "%s/cache", env) < (int)sizeof dir && (f = try_dir(dir)))
        return f;
    if ((env = getenv("XDG_CACHE_HOME")) && snprintf(dir, sizeof dir, "%s/avo", env) < (int)sizeof dir &&
        (f = try_dir(dir)))
        return f;
    if ((env = getenv("HOME")) && snprintf(dir, sizeof dir, "%s/.cache/avo", env) < (int)sizeof dir &&
        (f = try_dir(dir)))
        return f;
    const struct passwd *pw = getpwuid(getuid());
    if (pw && snprintf(dir, sizeof dir, "%s/.cache/avo", pw->pw_dir) < (int)sizeof dir && (f = try_dir(dir)))
        return f;
    return NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int searched;
    static kernel_fn ref;
    if (!searched) {
        searched = 1;
        ref = find_reference();
        if (!ref)
            fprintf(stderr, "calls_reference: no reference reachable\n");
    }
    return ref ? ref(tensors, sizes) : 0;
}
