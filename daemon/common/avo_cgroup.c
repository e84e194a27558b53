/* One control group per evaluation on cgroup v2, v1 or hybrid hosts (avo_cgroup.h). */
#include "avo_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The controller (v1) or the filesystem type (v2) each hierarchy is found by. */
static const char *const hier_key[AVO_CG_NHIER] = {"", "freezer", "pids", "cpuacct"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void avo_cgroup_clear(avo_cgroup *cg)
{
    memset(cg, 0, sizeof *cg);
    for (int h = 0; h < AVO_CG_NHIER; h++)
        cg->dir[h] = cg->procs[h] = -1;
    cg->freezer = cg->pids = cg->cpu = -1;
}

/* Is word one of the comma-separated words of list? */
static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* Where hierarchy h is mounted and which of its groups is mounted there
 * (not "/" inside containers), from /proc/self/mountinfo. */
static int find_mount(int h, char *mnt, size_t mntlen, char *root, size_t rootlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char line[4096];
    int found = -ENOENT;
    while (found && fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint options [optional...] - fstype source superoptions */
        char r[1024], m[1024], fstype[64], src[256], super[1024];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", r, m) != 2 ||
            sscanf(dash + 3, "%63s %255s %1023s", fstype, src, super) != 3)
            continue;
        if (h == AVO_CG_UNIFIED ? strcmp(fstype, "cgroup2") != 0
                                : strcmp(fstype, "cgroup") != 0 || !has_word(super, hier_key[h]))
            continue;
        snprintf(mnt, mntlen, "%s", m);
        snprintf(root, rootlen, "%s", r);
        found = 0;
    }
    fclose(f);
    return found;
}

/* The calling process's group in hierarchy h, from /proc/self/cgroup. */
static int own_group(int h, char *out, size_t outlen)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -errno;
    char line[4096];
    int found = -ENOENT;
    while (found && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        char *path = c2 + 1;
        path[strcspn(path, "\n")] = 0;
        if (h == AVO_CG_UNIFIED ? strcmp(line, "0") != 0 || c1[1] != 0 : !has_word(c1 + 1, hier_key[h]))
            continue;
        snprintf(out, outlen, "%s", path);
        found = 0;
    }
    fclose(f);
    return found;
}

/* The directory of the calling process's group in hierarchy h. */
static int own_dir(int h, char *out, size_t outlen)
{
    char mnt[PATH_MAX], root[PATH_MAX], grp[PATH_MAX];
    int rc;
    if ((rc = find_mount(h, mnt, sizeof mnt, root, sizeof root)) || (rc = own_group(h, grp, sizeof grp)))
        return rc;
    /* A mount of a subtree shows the group relative to its root. */
    const char *rel = grp;
    size_t rl = strlen(root);
    if (strcmp(root, "/") != 0) {
        if (strncmp(grp, root, rl) != 0 || (grp[rl] != 0 && grp[rl] != '/'))
            return -ENOENT; /* our group is outside what is mounted here */
        rel = grp + rl;
    }
    if (snprintf(out, outlen, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) >= (int)outlen)
        return -ENAMETOOLONG;
    return 0;
}

static int write_at(int dir, const char *file, const char *text)
{
    int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
    close(fd);
    return rc;
}

static ssize_t read_at(int dir, const char *file, char *buf, size_t len)
{
    int fd = openat(dir, file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

static int exists_at(int dir, const char *file)
{
    return faccessat(dir, file, F_OK, 0) == 0;
}

/* Make the directory `path` a group of hierarchy h in cg. */
static int add_dir(avo_cgroup *cg, int h, const char *path)
{
    if (strlen(path) >= sizeof cg->path[h])
        return -ENAMETOOLONG; /* a group we could not name again to remove it */
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return -errno;
    int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
        int e = errno;
        rmdir(path);
        return -e;
    }
    int p = openat(d, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (p < 0) {
        int e = errno;
        close(d);
        rmdir(path);
        return -e;
    }
    cg->dir[h] = d;
    cg->procs[h] = p;
    snprintf(cg->path[h], sizeof cg->path[h], "%s", path);
    return 0;
}

/* Decide what each part of the job is done with, from the directories cg has. */
static void settle(avo_cgroup *cg)
{
    const char *mode = getenv("AVO_CGROUP");
    const int v1_only = mode && strcmp(mode, "v1") == 0;
    int u = cg->dir[AVO_CG_UNIFIED];
    cg->freezer = u >= 0 && !v1_only && exists_at(u, "cgroup.freeze") ? AVO_CG_UNIFIED
                  : cg->dir[AVO_CG_FREEZER] >= 0                      ? AVO_CG_FREEZER
                                                                      : -1;
    cg->pids = u >= 0 && exists_at(u, "pids.max") ? AVO_CG_UNIFIED : cg->dir[AVO_CG_PIDS] >= 0 ? AVO_CG_PIDS : -1;
    cg->cpu = u >= 0 && exists_at(u, "cpu.stat") ? AVO_CG_UNIFIED : cg->dir[AVO_CG_CPUACCT] >= 0 ? AVO_CG_CPUACCT : -1;
}

int avo_cgroup_create(avo_cgroup *cg, const char *name, long pids_max, char *why, size_t wl)
{
    avo_cgroup_clear(cg);
    const char *mode = getenv("AVO_CGROUP");
    if (mode && strcmp(mode, "none") == 0) {
        snprintf(why, wl, "control groups turned off (AVO_CGROUP=none)");
        return -ENOTSUP;
    }
    char first_err[300] = "";
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        char parent[PATH_MAX], path[PATH_MAX];
        int rc = own_dir(h, parent, sizeof parent);
        if (rc == 0) {
            /* pids under v2: only where our own group already hands the
             * controller to its children (we never move processes around
             * to make that possible). */
            /* Not avo_paths_join: the CUDA harness links this file without avo_paths.c. */
            int n = snprintf(path, sizeof path, "%s/%s", parent, name);
            rc = n < 0 || (size_t)n >= sizeof path ? -ENAMETOOLONG : add_dir(cg, h, path);
        }
        if (rc && rc != -ENOENT && !first_err[0])
            snprintf(first_err, sizeof first_err, "%s hierarchy (%.200s): %s",
                     h == AVO_CG_UNIFIED ? "unified" : hier_key[h], parent, strerror(-rc));
    }
    settle(cg);
    if (cg->freezer < 0) {
        snprintf(why, wl, "no control group to freeze with%s%s", first_err[0] ? ": " : " (none mounted)", first_err);
        avo_cgroup_destroy(cg);
        return -ENOTSUP;
    }
    if (pids_max > 0 && cg->pids >= 0) {
        char v[32];
        snprintf(v, sizeof v, "%ld", pids_max);
        if (write_at(cg->dir[cg->pids], "pids.max", v) != 0)
            cg->pids = -1;
    }
    return 0;
}

int avo_cgroup_create_child(const avo_cgroup *parent, const char *name, avo_cgroup *cg, char *why, size_t wl)
{
    avo_cgroup_clear(cg);
    /* Only what freezing and counting need: the pids limit stays the parent's. */
    const int want[] = {AVO_CG_UNIFIED, AVO_CG_FREEZER, AVO_CG_CPUACCT};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int h = want[i];
        if (parent->dir[h] < 0)
            continue;
        char path[PATH_MAX];
        int n = snprintf(path, sizeof path, "%s/%s", parent->path[h], name);
        if (n < 0 || (size_t)n >= sizeof path) {
            snprintf(why, wl, "group path too long");
            avo_cgroup_destroy(cg);
            return -ENAMETOOLONG;
        }
        int rc = add_dir(cg, h, path);
        if (rc) {
            snprintf(why, wl, "cannot create %s: %s", path, strerror(-rc));
            avo_cgroup_destroy(cg);
            return rc;
        }
    }
    settle(cg);
    if (cg->freezer < 0) {
        snprintf(why, wl, "the parent group has no freezer");
        avo_cgroup_destroy(cg);
        return -ENOTSUP;
    }
    return 0;
}

int avo_cgroup_join(const avo_cgroup *cg)
{
    for (int h = 0; h < AVO_CG_NHIER; h++)
        if (cg->procs[h] >= 0 && write(cg->procs[h], "0", 1) != 1)
            return -errno;
    return 0;
}

/* v2: wait for "frozen 1" in cgroup.events. The tasks being frozen need
 * the CPU to get there (the checker shares one with the runner), so the
 * wait yields it: first by sched_yield (a task on its way back to a system
 * call freezes within microseconds), then by sleeping on the file's change
 * notification. A 1 ms sleep from the start had added about 1.1 ms to
 * every call of a CPU evaluation (the runner was still returning from its
 * answer when the freeze began). */
static int wait_frozen_v2(int dir, double timeout_s)
{
    int fd = openat(dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    const double end = now() + timeout_s;
    int rc = -ETIMEDOUT;
    char buf[256];
    for (int spins = 0;; spins++) {
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n < 0) {
            rc = -errno;
            break;
        }
        buf[n] = 0;
        if (strstr(buf, "frozen 1")) {
            rc = 0;
            break;
        }
        if (now() >= end)
            break;
        if (spins < 1000) {
            sched_yield();
        } else {
            struct pollfd pf = {fd, POLLPRI | POLLERR, 0};
            poll(&pf, 1, 1);
        }
    }
    close(fd);
    return rc;
}

static int wait_frozen_v1(int dir, double timeout_s)
{
    const double end = now() + timeout_s;
    char buf[64];
    while (1) {
        if (read_at(dir, "freezer.state", buf, sizeof buf) < 0)
            return -errno;
        if (strncmp(buf, "FROZEN", 6) == 0)
            return 0;
        if (now() >= end)
            return -ETIMEDOUT;
        usleep(50);
    }
}

int avo_cgroup_freeze(avo_cgroup *cg, int on, double timeout_s)
{
    if (cg->freezer < 0)
        return -ENOTSUP;
    int d = cg->dir[cg->freezer], rc;
    if (cg->freezer == AVO_CG_UNIFIED) {
        if ((rc = write_at(d, "cgroup.freeze", on ? "1" : "0")))
            return rc;
        rc = on ? wait_frozen_v2(d, timeout_s) : 0;
    } else {
        if ((rc = write_at(d, "freezer.state", on ? "FROZEN" : "THAWED")))
            return rc;
        rc = on ? wait_frozen_v1(d, timeout_s) : 0;
    }
    cg->frozen = on && rc == 0;
    return rc;
}

/* fn(child, depth + 1) for every child group of dir (at most 8 deep),
 * then, with remove, the child's directory itself. */
static void for_each_child(int dir, int depth, void (*fn)(int, int), int remove)
{
    int fd = depth < 8 ? dup(dir) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        int sub = openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub >= 0) {
            fn(sub, depth + 1);
            close(sub);
        }
        if (remove)
            unlinkat(dir, e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* SIGKILL every pid listed in the group's procs and in its children's
 * (cgroup.procs lists a group's own members only). */
static void kill_listed(int dir, int depth)
{
    char buf[8192];
    if (read_at(dir, "cgroup.procs", buf, sizeof buf) > 0) {
        for (char *p = buf; *p;) {
            char *end;
            long pid = strtol(p, &end, 10);
            if (end == p)
                break;
            if (pid > 0)
                kill((pid_t)pid, SIGKILL);
            p = end + (*end == '\n');
        }
    }
    for_each_child(dir, depth, kill_listed, 0);
}

/* Remove the child groups below dir (deepest first); they must be empty. */
static void rmdir_children(int dir, int depth)
{
    for_each_child(dir, depth, rmdir_children, 1);
}

void avo_cgroup_kill(avo_cgroup *cg)
{
    int u = cg->dir[AVO_CG_UNIFIED];
    if (u >= 0 && write_at(u, "cgroup.kill", "1") == 0)
        return;
    /* No cgroup.kill: freeze so nothing forks while we kill, kill what is
     * listed, thaw so the SIGKILLs are taken. */
    if (cg->freezer >= 0)
        avo_cgroup_freeze(cg, 1, 0.5);
    for (int h = 0; h < AVO_CG_NHIER; h++)
        if (cg->dir[h] >= 0)
            kill_listed(cg->dir[h], 0);
    if (cg->freezer >= 0)
        avo_cgroup_freeze(cg, 0, 0);
}

double avo_cgroup_cpu_s(const avo_cgroup *cg)
{
    char buf[1024];
    if (cg->cpu == AVO_CG_UNIFIED) {
        if (read_at(cg->dir[AVO_CG_UNIFIED], "cpu.stat", buf, sizeof buf) <= 0)
            return -1;
        const char *u = strstr(buf, "usage_usec ");
        return u ? strtod(u + 11, NULL) * 1e-6 : -1;
    }
    if (cg->cpu == AVO_CG_CPUACCT) {
        if (read_at(cg->dir[AVO_CG_CPUACCT], "cpuacct.usage", buf, sizeof buf) <= 0)
            return -1;
        return strtod(buf, NULL) * 1e-9;
    }
    return -1;
}

int avo_cgroup_nprocs(const avo_cgroup *cg)
{
    int d = -1;
    for (int h = 0; h < AVO_CG_NHIER && d < 0; h++)
        d = cg->dir[h];
    if (d < 0)
        return -1;
    char buf[8192];
    ssize_t n = read_at(d, "cgroup.procs", buf, sizeof buf);
    if (n < 0)
        return -1;
    int count = 0;
    for (ssize_t i = 0; i < n; i++)
        count += buf[i] == '\n';
    return count;
}

void avo_cgroup_destroy(avo_cgroup *cg)
{
    int any = 0;
    for (int h = 0; h < AVO_CG_NHIER; h++)
        any |= cg->dir[h] >= 0;
    if (!any)
        return;
    if (cg->frozen)
        avo_cgroup_freeze(cg, 0, 0);
    /* Dying processes leave the group a moment after SIGKILL. */
    for (int i = 0; i < 200 && avo_cgroup_nprocs(cg) > 0; i++) {
        avo_cgroup_kill(cg);
        usleep(5000);
    }
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        if (cg->procs[h] >= 0)
            close(cg->procs[h]);
        if (cg->dir[h] >= 0) {
            rmdir_children(cg->dir[h], 0);
            close(cg->dir[h]);
            rmdir(cg->path[h]);
        }
    }
    avo_cgroup_clear(cg);
}

const char *avo_cgroup_freezer_name(const avo_cgroup *cg)
{
    return cg->freezer == AVO_CG_UNIFIED ? "cgroup2" : cg->freezer == AVO_CG_FREEZER ? "cgroup1" : "none";
}

/* How old a group must be before avo_cgroup_sweep takes it. */
#define SWEEP_MIN_AGE_S 60

/* "<prefix>-PID-N" with PID no live process (a live one, or one we may not
 * signal, is left alone: a pid reused by another process keeps its group). */
static int stale_name(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0 || name[pl] != '-')
        return 0;
    const char *q = name + pl + 1;
    long long pid = 0;
    for (; *q >= '0' && *q <= '9' && pid <= INT_MAX; q++)
        pid = pid * 10 + (*q - '0');
    if (pid <= 0 || pid > INT_MAX || *q != '-' || !q[1])
        return 0;
    for (q++; *q >= '0' && *q <= '9'; q++)
        ;
    return *q == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int avo_cgroup_sweep(const char *prefix)
{
    int removed = 0;
    const char *mode = getenv("AVO_CGROUP");
    if (mode && strcmp(mode, "none") == 0)
        return 0;
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        char parent[PATH_MAX];
        if (own_dir(h, parent, sizeof parent) != 0)
            continue;
        DIR *d = opendir(parent);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_type != DT_DIR || !stale_name(e->d_name, prefix))
                continue;
            /* A live process's new group is empty until its child joins,
             * and a pid seen from another pid namespace looks gone: only
             * groups older than a minute are taken. */
            struct stat sb;
            if (fstatat(dirfd(d), e->d_name, &sb, 0) != 0 || time(NULL) - sb.st_mtime < SWEEP_MIN_AGE_S)
                continue;
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (sub >= 0) {
                rmdir_children(sub, 0);
                close(sub);
            }
            removed += unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0;
        }
        closedir(d);
    }
    return removed;
}
