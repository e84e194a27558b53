/* Runs one untrusted program confined: namespaces, cgroup, rlimits, timeout (sandbox.h). */
#include "sandbox.h"

#include "avo_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Stages the child reports on the status pipe. ST_NETNS and ST_ISOLATE are
 * notes (the child goes on without that part); the others end the child. */
enum { ST_NETNS = 1, ST_SETUP = 2, ST_EXEC = 3, ST_ISOLATE = 4 };
/* Steps of the isolation the child could not take (ST_ISOLATE's step). */
enum { IS_PRIVATE = 1, IS_RDONLY, IS_CGROUP_RW, IS_TMPFS, IS_HIDE, IS_EXPOSE, IS_PROC, IS_USERMAP, IS_CGJOIN };
static const char *const is_name[] = {"",
                                      "private mounts",
                                      "read-only root",
                                      "writable /sys/fs/cgroup",
                                      "private tmpfs",
                                      "hidden directory",
                                      "exposed path",
                                      "fresh /proc",
                                      "user namespace map",
                                      "joining the control group"};

typedef struct {
    int stage;
    int err;
    int step;
    int index;
} child_status;

/* A capture that keeps either the first or the last cap bytes. */
typedef struct {
    char *buf;
    size_t len, cap;
    int keep_head;
    int truncated;
} capture;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void capture_add(capture *c, const char *d, size_t n)
{
    if (c->keep_head) {
        size_t room = c->cap - c->len;
        if (n > room) {
            n = room;
            c->truncated = 1;
        }
        memcpy(c->buf + c->len, d, n);
        c->len += n;
        return;
    }
    if (n >= c->cap) {
        memcpy(c->buf, d + n - c->cap, c->cap);
        c->len = c->cap;
        c->truncated = 1;
        return;
    }
    if (c->len + n > c->cap) {
        size_t drop = c->len + n - c->cap;
        memmove(c->buf, c->buf + drop, c->len - drop);
        c->len -= drop;
        c->truncated = 1;
    }
    memcpy(c->buf + c->len, d, n);
    c->len += n;
}

/* The child's PATH. Programs are looked up in it by the parent, and run with
 * that absolute path as argv[0]: glibc's execvpe would search the worker's
 * own PATH instead, and nvcc finds its installation (nvcc.profile, headers)
 * by searching the child's PATH for argv[0], so the two must agree (with
 * a /usr/local/bin/nvcc wrapper script they did not: no CUDA headers). */
#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/cuda/bin"

static void resolve(const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", name);
    if (strchr(name, '/'))
        return;
    const char *p = SANDBOX_PATH;
    while (*p) {
        size_t n = strcspn(p, ":");
        char cand[4200];
        snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, name);
        if (access(cand, X_OK) == 0) {
            snprintf(out, outlen, "%s", cand);
            return;
        }
        p += n + (p[n] == ':');
    }
}

/* As avo-harness's runner: nobody, which owns nothing of the worker's. */
#define SANDBOX_NOBODY AVO_SANDBOX_UID

/* Directories every isolated child gets a private tmpfs for: the places
 * anybody may write, so nothing written there outlives the child or is seen
 * by another evaluation. */
static const char *const private_dirs[] = {"/tmp", "/var/tmp", "/dev/shm", NULL};
#define MAX_MOUNTS 24

/* Everything the child's mount namespace is made of, prepared before the
 * fork (the child may only make system calls). */
typedef struct {
    char priv[4][PATH_MAX]; /* private tmpfs mount points */
    int npriv;
    char hide[8][PATH_MAX]; /* empty read-only tmpfs over these */
    int nhide;
    char expose[MAX_MOUNTS][PATH_MAX]; /* bind-mounted back in over the private dirs */
    int expose_rw[MAX_MOUNTS];
    int expose_dir[MAX_MOUNTS];
    int nexpose;
    char tmpfs_opts[64];
    char uid_map[64], gid_map[64];
} mount_plan;

static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == 0);
}

/* path (made absolute) stays visible: bind it back in when it lies under a
 * private or hidden directory. */
static void plan_expose(mount_plan *m, const char *path, int rw)
{
    char real[PATH_MAX];
    if (!path || !*path || !realpath(path, real) || m->nexpose == MAX_MOUNTS)
        return;
    int covered = 0;
    for (int i = 0; i < m->npriv; i++)
        covered |= under(real, m->priv[i]);
    for (int i = 0; i < m->nhide; i++)
        covered |= under(real, m->hide[i]);
    /* A path that contains a private dir would hide our own mounts. */
    for (int i = 0; i < m->npriv; i++)
        if (under(m->priv[i], real))
            return;
    for (int i = 0; i < m->nexpose; i++)
        if (strcmp(m->expose[i], real) == 0) {
            m->expose_rw[i] |= rw;
            return;
        }
    /* Elsewhere the path is visible already, but read-only like the rest of
     * the root: a writable one (the scratch directory, which an operator
     * may put outside /tmp) is mounted again over itself. */
    if (!covered && (!rw || strcmp(real, "/") == 0))
        return;
    struct stat st;
    if (stat(real, &st) != 0)
        return;
    int i = m->nexpose++;
    snprintf(m->expose[i], sizeof m->expose[i], "%s", real);
    m->expose_rw[i] = rw;
    m->expose_dir[i] = S_ISDIR(st.st_mode);
}

static void plan_mounts(const avo_sandbox_opts *o, const char *exe, mount_plan *m)
{
    memset(m, 0, sizeof *m);
    for (const char *const *d = private_dirs; *d && m->npriv < 4; d++) {
        char real[PATH_MAX];
        struct stat st;
        if (realpath(*d, real) && stat(real, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(m->priv[m->npriv++], PATH_MAX, "%s", real);
    }
    for (int i = 0; o->hide && o->hide[i] && m->nhide < 8; i++) {
        char real[PATH_MAX];
        int inside = 0;
        if (!realpath(o->hide[i], real))
            continue;
        for (int j = 0; j < m->npriv; j++)
            inside |= under(real, m->priv[j]);
        if (!inside && strcmp(real, "/") != 0)
            snprintf(m->hide[m->nhide++], PATH_MAX, "%s", real);
    }
    unsigned long long sz = o->tmpfs_bytes ? o->tmpfs_bytes : (256ull << 20);
    snprintf(m->tmpfs_opts, sizeof m->tmpfs_opts, "size=%llu,mode=1777", sz);
    plan_expose(m, o->cwd, 1);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.4000s", exe);
    char *slash = strrchr(dir, '/');
    if (dir[0] == '/' && slash != dir) {
        *slash = 0;
        plan_expose(m, dir, 0);
    }
    /* Carried libraries on bare GPU hosts. */
    const char *ld = getenv("LD_LIBRARY_PATH");
    while (ld && *ld) {
        size_t n = strcspn(ld, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)n, ld);
        plan_expose(m, dir, 0);
        ld += n + (ld[n] == ':');
    }
    for (int i = 0; o->expose && o->expose[i]; i++)
        plan_expose(m, o->expose[i], 0);
    snprintf(m->uid_map, sizeof m->uid_map, "0 %u 1", (unsigned)getuid());
    snprintf(m->gid_map, sizeof m->gid_map, "0 %u 1", (unsigned)getgid());
}

static void note(int st_w, int step, int index, int err)
{
    child_status st = {ST_ISOLATE, err, step, index};
    (void)!write(st_w, &st, sizeof st);
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    return ok ? 0 : -1;
}

static int setattr(const char *path, int recursive, unsigned long long set, unsigned long long clr)
{
    struct mount_attr a = {.attr_set = set, .attr_clr = clr};
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a, sizeof a);
}

/* mkdir -p of path's directories (and path itself when dir), or an empty
 * file at path: a mount point for an exposure. Async-signal-safe. */
static void make_point(const char *path, int dir)
{
    char b[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof b)
        return;
    memcpy(b, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (b[i] != '/')
            continue;
        b[i] = 0;
        mkdir(b, 0755);
        b[i] = '/';
    }
    if (dir) {
        mkdir(b, 0755);
    } else {
        int fd = open(b, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
}

/* The child's filesystem view (the comment at the top of sandbox.h). Each
 * step that fails is noted and skipped; the caller sees which in the result. */
static void build_mounts(const avo_sandbox_opts *o, const mount_plan *m, int pidns, int st_w)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        note(st_w, IS_PRIVATE, 0, errno);
        return; /* anything more would show on the host */
    }
    /* Detached copies of what must stay visible, taken before the private
     * dirs cover them (a bind mount needs its source in our namespace,
     * which a descriptor opened before the clone is not). */
    int tree[MAX_MOUNTS], skip_priv[4] = {0}, skip_hide[8] = {0};
    for (int i = 0; i < m->nexpose; i++) {
        tree[i] = (int)syscall(SYS_open_tree, AT_FDCWD, m->expose[i],
                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (tree[i] >= 0)
            continue;
        /* It could not be carried over a private or hidden directory: that
         * directory stays as it is (less isolation, said) rather than the
         * program losing what it needs. */
        note(st_w, IS_EXPOSE, i, errno);
        for (int j = 0; j < m->npriv; j++)
            skip_priv[j] |= under(m->expose[i], m->priv[j]);
        for (int j = 0; j < m->nhide; j++)
            skip_hide[j] |= under(m->expose[i], m->hide[j]);
    }
    if (setattr("/", 1, MOUNT_ATTR_RDONLY, 0) != 0)
        note(st_w, IS_RDONLY, 0, errno);
    else if (o->cgroup_rw && setattr("/sys/fs/cgroup", 1, 0, MOUNT_ATTR_RDONLY) != 0 && errno != ENOENT)
        note(st_w, IS_CGROUP_RW, 0, errno);
    for (int i = 0; i < m->npriv; i++)
        if (!skip_priv[i] && mount("tmpfs", m->priv[i], "tmpfs", MS_NOSUID | MS_NODEV, m->tmpfs_opts) != 0)
            note(st_w, IS_TMPFS, i, errno);
    for (int i = 0; i < m->nhide; i++)
        if (!skip_hide[i] &&
            mount("tmpfs", m->hide[i], "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=755") != 0)
            note(st_w, IS_HIDE, i, errno);
    for (int i = 0; i < m->nexpose; i++) {
        if (tree[i] < 0)
            continue;
        make_point(m->expose[i], m->expose_dir[i]);
        if (syscall(SYS_move_mount, tree[i], "", AT_FDCWD, m->expose[i], MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
            setattr(m->expose[i], 1, m->expose_rw[i] ? 0 : MOUNT_ATTR_RDONLY,
                    m->expose_rw[i] ? MOUNT_ATTR_RDONLY : 0) != 0)
            note(st_w, IS_EXPOSE, i, errno);
        close(tree[i]);
    }
    for (int i = 0; i < m->nhide; i++)
        setattr(m->hide[i], 0, MOUNT_ATTR_RDONLY, 0);
    if (pidns && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        note(st_w, IS_PROC, 0, errno);
}

static void set_limit(int res, rlim_t v)
{
    struct rlimit rl = {v, v};
    setrlimit(res, &rl);
}

typedef struct {
    const avo_sandbox_opts *o;
    char *const *argv;
    char *const *envp;
    int out_w, err_w, res_w, in_r, st_w;
    rlim_t cpu, as, fsize, nofile, nproc;
    const mount_plan *m;
    const avo_cgroup *cg;
    unsigned long ns; /* the namespaces the child was created in (CLONE_NEW*) */
} child_args;

/* Runs in the new child: only async-signal-safe calls from here to exec,
 * since the worker may be multithreaded. Everything was prepared before. */
static void child(const child_args *a)
{
    const avo_sandbox_opts *o = a->o;
    child_status st = {0, 0, 0, 0};
    int st_w = a->st_w;
    setsid();
    if (a->cg && avo_cgroup_join(a->cg) != 0)
        note(st_w, IS_CGJOIN, 0, errno);
    if (a->ns & CLONE_NEWUSER) {
        /* Root of our own user namespace, as the worker's uid outside. */
        if (write_file("/proc/self/setgroups", "deny") != 0 || write_file("/proc/self/uid_map", a->m->uid_map) != 0 ||
            write_file("/proc/self/gid_map", a->m->gid_map) != 0) {
            note(st_w, IS_USERMAP, 0, errno);
            if (o->isolate_required)
                goto fail;
        }
    }
    if (o->netns && !(a->ns & CLONE_NEWNET) && unshare(CLONE_NEWNET) != 0) {
        if (o->netns_required)
            goto fail;
        st.stage = ST_NETNS;
        st.err = errno;
        (void)!write(st_w, &st, sizeof st);
    }
    if (a->ns & CLONE_NEWNS)
        build_mounts(o, a->m, (a->ns & CLONE_NEWPID) != 0, st_w);
    if (o->cwd && chdir(o->cwd) != 0)
        goto fail;
    int in = a->in_r >= 0 ? a->in_r : open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, 0) < 0 || dup2(a->out_w, 1) < 0 || dup2(a->err_w, 2) < 0)
        goto fail;
    /* The passed descriptors go to 5, 6, ... through copies above them all,
     * so no dup2 clobbers one still to be moved. */
    int high[8];
    for (int i = 0; i < o->npass && i < 8; i++)
        if ((high[i] = fcntl(o->pass_fds[i], F_DUPFD_CLOEXEC, 64 + o->npass)) < 0)
            goto fail;
    if (a->res_w >= 0 && dup2(a->res_w, 3) < 0)
        goto fail;
    /* The status pipe moves to fd 4 and keeps FD_CLOEXEC, so a successful
     * exec closes it and the parent sees EOF. */
    if (dup3(st_w, 4, O_CLOEXEC) < 0)
        goto fail;
    st_w = 4;
    for (int i = 0; i < o->npass && i < 8; i++)
        if (dup2(high[i], 5 + i) < 0)
            goto fail;
    close_range((unsigned)(5 + (o->npass < 8 ? o->npass : 8)), ~0u, 0);
    if (a->res_w < 0)
        close(3);
    set_limit(RLIMIT_CPU, a->cpu);
    set_limit(RLIMIT_AS, a->as);
    set_limit(RLIMIT_FSIZE, a->fsize);
    set_limit(RLIMIT_NOFILE, a->nofile);
    set_limit(RLIMIT_NPROC, a->nproc);
    set_limit(RLIMIT_CORE, 0);
    /* Groups first, uid last: after setuid the others are not permitted.
     * In a user namespace of our own only our uid exists: stay. */
    /* Raw system calls: after a raw clone glibc still counts the worker's
     * threads, and its set-id wrappers would signal threads that are not
     * here (and wait for them). */
    if (o->drop_uid && getuid() == 0 && !(a->ns & CLONE_NEWUSER) &&
        (syscall(SYS_setgroups, 0, NULL) != 0 ||
         syscall(SYS_setresgid, SANDBOX_NOBODY, SANDBOX_NOBODY, SANDBOX_NOBODY) != 0 ||
         syscall(SYS_setresuid, SANDBOX_NOBODY, SANDBOX_NOBODY, SANDBOX_NOBODY) != 0))
        goto fail;
    signal(SIGPIPE, SIG_DFL);
    execve(a->argv[0], a->argv, a->envp);
    st.stage = ST_EXEC;
    st.err = errno;
    (void)!write(st_w, &st, sizeof st);
    _exit(127);
fail:
    st.stage = ST_SETUP;
    st.err = errno;
    (void)!write(st_w, &st, sizeof st);
    _exit(127);
}

/* fork, or clone into new namespaces: the child continues here on a copy of
 * the stack, as after fork. */
static pid_t spawn(unsigned long ns)
{
    if (!ns)
        return fork();
    return (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD | ns, NULL, NULL, NULL, NULL);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A note from the child, into the result's isolate_note. */
static void add_note(avo_sandbox_result *r, const mount_plan *m, const child_status *cs)
{
    const char *what = cs->step > 0 && cs->step <= IS_CGJOIN ? is_name[cs->step] : "?";
    const char *which = cs->step == IS_TMPFS && cs->index < m->npriv      ? m->priv[cs->index]
                        : cs->step == IS_HIDE && cs->index < m->nhide     ? m->hide[cs->index]
                        : cs->step == IS_EXPOSE && cs->index < m->nexpose ? m->expose[cs->index]
                                                                          : "";
    size_t n = strlen(r->isolate_note);
    if (n + 8 < sizeof r->isolate_note)
        snprintf(r->isolate_note + n, sizeof r->isolate_note - n, "%s%s%s%s: %s", n ? "; " : "", what,
                 which[0] ? " " : "", which, strerror(cs->err));
}

static int next_eval_id(void)
{
    static int counter;
    return __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

/* The child's environment: fixed, so it sees no secret of the worker's
 * (DSN, API keys). envp points into the struct. */
typedef struct {
    char home[sizeof "HOME=" + PATH_MAX], tmp[sizeof "TMPDIR=" + PATH_MAX], cvd[256], acg[64];
    char ldp[sizeof "LD_LIBRARY_PATH=" + 4 * PATH_MAX]; /* a list of directories */
    char cpu[32], pin[32];
    char *envp[12];
} child_env;

static void make_env(const avo_sandbox_opts *o, child_env *e)
{
    snprintf(e->home, sizeof e->home, "HOME=%s", o->cwd ? o->cwd : "/tmp");
    snprintf(e->tmp, sizeof e->tmp, "TMPDIR=%s", o->cwd ? o->cwd : "/tmp");
    /* Besides: which GPU (CUDA_VISIBLE_DEVICES) and where carried libraries
     * are (LD_LIBRARY_PATH, on bare GPU hosts); neither is a secret. */
    e->cvd[0] = e->ldp[0] = e->acg[0] = e->cpu[0] = e->pin[0] = 0;
    const char *v;
    if ((v = getenv("CUDA_VISIBLE_DEVICES")))
        snprintf(e->cvd, sizeof e->cvd, "CUDA_VISIBLE_DEVICES=%s", v);
    /* How control groups are used (avo_cgroup.h; tests): the harness makes
     * its runner's group with the same choice. */
    if ((v = getenv("AVO_CGROUP")))
        snprintf(e->acg, sizeof e->acg, "AVO_CGROUP=%.40s", v);
    if ((v = getenv("LD_LIBRARY_PATH")))
        snprintf(e->ldp, sizeof e->ldp, "LD_LIBRARY_PATH=%s", v);
    /* The CPU a harness times on (daemon/worker/cpulease.h). */
    if ((v = getenv("AVO_HARNESS_CPU")))
        snprintf(e->cpu, sizeof e->cpu, "AVO_HARNESS_CPU=%.12s", v);
    if ((v = getenv("AVO_HARNESS_PIN")))
        snprintf(e->pin, sizeof e->pin, "AVO_HARNESS_PIN=%.12s", v);
    /* OpenMP runtimes spin between parallel regions by default; in a frozen
     * group that is harmless, but an idle runner must use no CPU. */
    int ne = 0;
    e->envp[ne++] = "PATH=" SANDBOX_PATH;
    e->envp[ne++] = "LC_ALL=C";
    e->envp[ne++] = "OMP_WAIT_POLICY=passive";
    e->envp[ne++] = e->home;
    e->envp[ne++] = e->tmp;
    if (e->cvd[0])
        e->envp[ne++] = e->cvd;
    if (e->acg[0])
        e->envp[ne++] = e->acg;
    if (e->ldp[0])
        e->envp[ne++] = e->ldp;
    if (e->cpu[0])
        e->envp[ne++] = e->cpu;
    if (e->pin[0])
        e->envp[ne++] = e->pin;
    e->envp[ne] = NULL;
}

/* The child's argv: o->argv with its program resolved in the sandbox's
 * PATH (into exe); NULL when out of memory. */
static char **child_argv(const avo_sandbox_opts *o, char *exe, size_t exelen)
{
    size_t argc = 0;
    while (o->argv[argc])
        argc++;
    resolve(o->argv[0], exe, exelen);
    char **argv = calloc(argc + 1, sizeof *argv);
    if (argv) {
        memcpy(argv, o->argv, argc * sizeof *argv);
        argv[0] = exe;
    }
    return argv;
}

/* One run's state, shared by its phases: the pipes (parent's and child's
 * ends), what they captured, the mount plan, the control group, the child. */
typedef struct {
    const avo_sandbox_opts *o;
    avo_sandbox_result *r;
    int p_out[2], p_err[2], p_res[2], p_st[2], p_in[2];
    capture cout, cerr, cres;
    mount_plan *plan;
    avo_cgroup cg;
    pid_t pid;
    double start;
    int status;
    child_status st_exec;
} sandbox_run;

/* The pipes to the child, with its stdin written already. */
static int open_pipes(sandbox_run *s, char *err, size_t errlen)
{
    const avo_sandbox_opts *o = s->o;
    if (pipe2(s->p_out, O_CLOEXEC) || pipe2(s->p_err, O_CLOEXEC) || pipe2(s->p_st, O_CLOEXEC) ||
        (o->result_fd && pipe2(s->p_res, O_CLOEXEC)) || (o->stdin_data && pipe2(s->p_in, O_CLOEXEC))) {
        int rc = -errno;
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return rc;
    }
    if (o->stdin_data) {
        /* Small (a seed): fits the pipe, so it is written before the child exists. */
        size_t n = strlen(o->stdin_data);
        if (n >= PIPE_BUF || write(s->p_in[1], o->stdin_data, n) != (ssize_t)n) {
            snprintf(err, errlen, "cannot pass %zu bytes on the child's stdin", n);
            return -EIO;
        }
        close_fd(&s->p_in[1]);
    }
    return 0;
}

/* The child's control group where o->cgroup asks; what it gives (freezer,
 * pids limit), or why there is none, goes into the result. */
static void make_cgroup(sandbox_run *s)
{
    const avo_sandbox_opts *o = s->o;
    avo_sandbox_result *r = s->r;
    long pids_limit = o->pids_max > 0 ? o->pids_max : 1024;
    if (!o->cgroup)
        return;
    char name[64], why[300];
    snprintf(name, sizeof name, "avo-%d-%d", (int)getpid(), next_eval_id());
    if (avo_cgroup_create(&s->cg, name, pids_limit, why, sizeof why) == 0) {
        snprintf(r->cgroup_kind, sizeof r->cgroup_kind, "%s", avo_cgroup_freezer_name(&s->cg));
        r->pids_limit = s->cg.pids >= 0 ? pids_limit : 0;
    } else {
        snprintf(r->cgroup_note, sizeof r->cgroup_note, "%.230s", why);
    }
}

/* The child's resource limits. */
static void child_limits(const avo_sandbox_opts *o, const avo_sandbox_result *r, child_args *ca)
{
    ca->cpu = (rlim_t)(o->cpu_s > 0 ? o->cpu_s : (o->timeout_s > 0 ? o->timeout_s + 5 : 600));
    /* CUDA reserves address space far beyond what it touches: no AS limit
     * for it (memory is still bounded by the device and the wall clock). */
    ca->as = o->no_as_limit ? RLIM_INFINITY : o->as_bytes ? o->as_bytes : (4ull << 30);
    ca->fsize = o->fsize_bytes ? o->fsize_bytes : (64ull << 20);
    ca->nofile = o->nofile ? (rlim_t)o->nofile : 64;
    /* RLIMIT_NPROC counts every process of the uid on the host (nobody is
     * shared by every evaluation): where the group counts them per
     * evaluation, the group is the limit. */
    ca->nproc = r->pids_limit ? RLIM_INFINITY : o->nproc ? (rlim_t)o->nproc : 256;
}

/* The child in new namespaces: as root; as another user inside a user
 * namespace of its own; without the network namespace if that alone
 * fails. Its pid, or -1 with the first failure's errno in *first_errno. */
static pid_t spawn_isolated(const avo_sandbox_opts *o, child_args *ca, int *first_errno)
{
    const unsigned long base = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC;
    const unsigned long tries[] = {base | (o->netns ? CLONE_NEWNET : 0),
                                   base | CLONE_NEWUSER | (o->netns ? CLONE_NEWNET : 0), base, base | CLONE_NEWUSER};
    pid_t pid = -1;
    *first_errno = 0;
    for (size_t i = 0; i < sizeof tries / sizeof *tries && pid < 0; i++) {
        if ((tries[i] & CLONE_NEWUSER) && geteuid() == 0)
            continue;
        ca->ns = tries[i];
        pid = spawn(ca->ns);
        if (pid == 0)
            child(ca);
        if (pid < 0 && !*first_errno)
            *first_errno = errno;
    }
    return pid;
}

/* The child started (isolated where o->isolate asks, else forked), in a
 * process group of its own; the parent keeps only its ends of the pipes. */
static int start_child(sandbox_run *s, child_args *ca, char *err, size_t errlen)
{
    const avo_sandbox_opts *o = s->o;
    avo_sandbox_result *r = s->r;
    s->start = now();
    pid_t pid = -1;
    if (o->isolate) {
        int first_errno;
        pid = spawn_isolated(o, ca, &first_errno);
        if (pid < 0) {
            if (o->isolate_required) {
                snprintf(err, errlen, "cannot isolate %s (PID, mount and IPC namespaces): %s", o->argv[0],
                         strerror(first_errno));
                return -first_errno;
            }
            snprintf(r->isolate_note, sizeof r->isolate_note, "no namespaces: %s", strerror(first_errno));
            ca->ns = 0;
        }
    }
    if (pid < 0) {
        pid = spawn(0);
        if (pid == 0)
            child(ca);
    }
    if (pid < 0) {
        int rc = -errno;
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return rc;
    }
    s->pid = pid;
    r->pidns = (ca->ns & CLONE_NEWPID) != 0;
    r->mountns = (ca->ns & CLONE_NEWNS) != 0;
    r->userns = (ca->ns & CLONE_NEWUSER) != 0;
    /* setsid in the child may not have run yet when a kill comes; also call
     * setpgid from here so -pid is a valid group as early as possible. */
    setpgid(pid, pid);
    close_fd(&s->p_out[1]);
    close_fd(&s->p_err[1]);
    close_fd(&s->p_res[1]);
    close_fd(&s->p_st[1]);
    close_fd(&s->p_in[0]);
    r->netns = o->netns;
    return 0;
}

/* The pipes still open, to poll: each one's fd, and where its bytes go
 * (NULL: the status pipe). How many. */
static int poll_set(sandbox_run *s, struct pollfd *pf, capture **caps, int **fds)
{
    int *pipes[4] = {&s->p_out[0], &s->p_err[0], &s->p_res[0], &s->p_st[0]};
    capture *to[4] = {&s->cout, &s->cerr, &s->cres, NULL};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (*pipes[i] < 0)
            continue;
        pf[n] = (struct pollfd){*pipes[i], POLLIN, 0};
        caps[n] = to[i];
        fds[n++] = pipes[i];
    }
    return n;
}

/* The child's status messages: notes into the result, a failed setup or
 * exec into s->st_exec. */
static void read_status(sandbox_run *s, const char *buf, ssize_t got)
{
    avo_sandbox_result *r = s->r;
    /* Status messages are small, written atomically. */
    for (ssize_t off = 0; off + (ssize_t)sizeof(child_status) <= got; off += sizeof(child_status)) {
        child_status cs;
        memcpy(&cs, buf + off, sizeof cs);
        if (cs.stage == ST_NETNS) {
            r->netns = 0;
            snprintf(r->netns_note, sizeof r->netns_note, "unshare(CLONE_NEWNET): %s", strerror(cs.err));
        } else if (cs.stage == ST_ISOLATE) {
            add_note(r, s->plan, &cs);
            if (cs.step == IS_CGJOIN) {
                r->cgroup_kind[0] = 0;
                r->pids_limit = 0;
            }
        } else {
            s->st_exec = cs;
        }
    }
}

/* What the ready pipes hold; a pipe at its end is closed. */
static void drain_pipes(sandbox_run *s, const struct pollfd *pf, capture **caps, int **fds, int n)
{
    char buf[65536];
    for (int i = 0; i < n; i++) {
        if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t got = read(*fds[i], buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            close_fd(fds[i]);
            continue;
        }
        if (caps[i])
            capture_add(caps[i], buf, (size_t)got);
        else
            read_status(s, buf, got);
    }
}

/* 1 when the child has exited and is reaped, with what it left behind in
 * its group killed. */
static int reap_child(sandbox_run *s)
{
    /* WNOWAIT first: while the child is an unreaped zombie its pid
     * cannot be reused, so killing -pid cannot hit a stranger. */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != s->pid)
        return 0;
    /* Anything the child left behind in its group goes too (in
     * its own PID namespace the kernel has done it already). */
    kill(-s->pid, SIGKILL);
    if (s->cg.freezer >= 0)
        avo_cgroup_kill(&s->cg);
    waitpid(s->pid, &s->status, 0);
    return 1;
}

/* The child killed with its process group and control group. The child
 * is the first process of its PID namespace: its death takes every other
 * process in it along. */
static void kill_group(sandbox_run *s)
{
    kill(-s->pid, SIGKILL);
    kill(s->pid, SIGKILL);
    if (s->cg.freezer >= 0)
        avo_cgroup_kill(&s->cg);
}

/* 1 (and which, into r) when a wait begun at t0 ran past timeout_s or
 * should_cancel says so: a one-shot run's and a kept process's requests
 * end the same way. */
static int past_or_cancelled(double t0, double timeout_s, int (*should_cancel)(void *), void *arg,
                             avo_sandbox_result *r)
{
    if (timeout_s > 0 && now() - t0 > timeout_s)
        return r->timed_out = 1;
    if (should_cancel && should_cancel(arg))
        return r->cancelled = 1;
    return 0;
}

/* 1 when the child ran past its timeout or was cancelled, and is killed. */
static int stop_child(sandbox_run *s)
{
    const avo_sandbox_opts *o = s->o;
    if (!past_or_cancelled(s->start, o->timeout_s, o->should_cancel, o->cancel_arg, s->r))
        return 0;
    kill_group(s);
    return 1;
}

/* Captures the child's output until it is reaped, killing it past its
 * timeout or on a cancel. */
static void supervise(sandbox_run *s)
{
    int reaped = 0, killed = 0;
    double reaped_at = 0;
    while (1) {
        struct pollfd pf[4];
        capture *caps[4];
        int *fds[4];
        int n = poll_set(s, pf, caps, fds);
        /* Done when the child is reaped and the pipes are drained, or 200 ms
         * after reaping: a grandchild that escaped the group may hold a
         * pipe open forever and must not hang the worker. */
        if (reaped && (n == 0 || now() - reaped_at > 0.2))
            break;
        int pr = n ? poll(pf, (nfds_t)n, 100) : (usleep(20000), 0);
        if (pr < 0 && errno != EINTR) {
            kill(-s->pid, SIGKILL);
            killed = 1;
        }
        if (pr > 0)
            drain_pipes(s, pf, caps, fds, n);
        if (!reaped && (reaped = reap_child(s)))
            reaped_at = now();
        if (!reaped && !killed)
            killed = stop_child(s);
    }
}

/* How the child ended, into the result; a failed setup or exec is an error. */
static int end_result(sandbox_run *s, char *err, size_t errlen)
{
    avo_sandbox_result *r = s->r;
    r->wall_s = now() - s->start;
    if (WIFEXITED(s->status)) {
        r->exited = 1;
        r->exit_code = WEXITSTATUS(s->status);
    } else if (WIFSIGNALED(s->status)) {
        r->signal = WTERMSIG(s->status);
    }
    if (!s->st_exec.stage)
        return 0;
    snprintf(err, errlen, "%s %s: %s", s->st_exec.stage == ST_EXEC ? "cannot execute" : "cannot set up", s->o->argv[0],
             strerror(s->st_exec.err));
    return s->st_exec.stage == ST_EXEC ? -s->st_exec.err : -EIO;
}

/* The captures, NUL-terminated, into the result (which owns them now). */
static void hand_over(sandbox_run *s)
{
    avo_sandbox_result *r = s->r;
    if (s->cout.buf)
        s->cout.buf[s->cout.len] = 0;
    if (s->cerr.buf)
        s->cerr.buf[s->cerr.len] = 0;
    if (s->cres.buf)
        s->cres.buf[s->cres.len] = 0;
    r->out = s->cout.buf;
    r->out_len = s->cout.len;
    r->err = s->cerr.buf;
    r->err_len = s->cerr.len;
    r->result = s->cres.buf;
    r->result_len = s->cres.len;
    r->result_truncated = s->cres.truncated;
}

static void close_pipes(sandbox_run *s)
{
    int *p[] = {s->p_out, s->p_err, s->p_res, s->p_st, s->p_in};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) {
        close_fd(&p[i][0]);
        close_fd(&p[i][1]);
    }
}

/* A run's state before anything is open: its captures and mount plan
 * allocated (NULL when out of memory: the caller checks). */
static void run_init(sandbox_run *s, const avo_sandbox_opts *o, avo_sandbox_result *r)
{
    *s = (sandbox_run){.o = o,
                       .r = r,
                       .p_out = {-1, -1},
                       .p_err = {-1, -1},
                       .p_res = {-1, -1},
                       .p_st = {-1, -1},
                       .p_in = {-1, -1},
                       .pid = -1};
    size_t out_cap = o->out_cap ? o->out_cap : 4096, res_cap = o->result_cap ? o->result_cap : (1u << 20);
    s->cout = (capture){malloc(out_cap + 1), 0, out_cap, o->keep_head, 0};
    s->cerr = (capture){malloc(out_cap + 1), 0, out_cap, o->keep_head, 0};
    s->cres = (capture){o->result_fd ? malloc(res_cap + 1) : NULL, 0, res_cap, 1, 0};
    s->plan = o->isolate ? calloc(1, sizeof *s->plan) : NULL;
    avo_cgroup_clear(&s->cg);
}

int avo_sandbox_run(const avo_sandbox_opts *o, avo_sandbox_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    sandbox_run s;
    run_init(&s, o, r);
    int rc = 0;
    child_env env;
    make_env(o, &env);
    char exe[4200];
    char **argv = child_argv(o, exe, sizeof exe);
    if (!argv || !s.cout.buf || !s.cerr.buf || (o->result_fd && !s.cres.buf) || (o->isolate && !s.plan)) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    if ((rc = open_pipes(&s, err, errlen)))
        goto cleanup;
    if (s.plan)
        plan_mounts(o, exe, s.plan);
    make_cgroup(&s);
    child_args ca = {.o = o,
                     .argv = argv,
                     .envp = env.envp,
                     .out_w = s.p_out[1],
                     .err_w = s.p_err[1],
                     .res_w = s.p_res[1],
                     .in_r = s.p_in[0],
                     .st_w = s.p_st[1],
                     .m = s.plan,
                     .cg = s.cg.freezer >= 0 ? &s.cg : NULL};
    child_limits(o, r, &ca);
    if ((rc = start_child(&s, &ca, err, errlen)))
        goto cleanup;
    supervise(&s);
    rc = end_result(&s, err, errlen);

cleanup:
    avo_cgroup_destroy(&s.cg);
    free(s.plan);
    free(argv);
    close_pipes(&s);
    hand_over(&s);
    if (rc)
        avo_sandbox_result_free(r);
    return rc;
}

/* A child started and left running (sandbox.h, avo_sandbox_start). Its
 * options are a copy (the fields used after the start: none of the
 * caller's pointers), its run's notes in r. */
struct avo_sandbox_proc {
    avo_sandbox_opts o;
    avo_sandbox_result r;
    sandbox_run s;
    int reaped;
};

int avo_sandbox_start(const avo_sandbox_opts *o, avo_sandbox_proc **out, char *err, size_t errlen)
{
    *out = NULL;
    avo_sandbox_proc *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->o = *o;
    /* Each wait has its own timeout and cancel. */
    p->o.timeout_s = 0;
    p->o.should_cancel = NULL;
    sandbox_run *s = &p->s;
    run_init(s, &p->o, &p->r);
    child_env env;
    make_env(o, &env);
    char exe[4200];
    char **argv = child_argv(o, exe, sizeof exe);
    int rc = 0;
    if (!o->result_fd) {
        snprintf(err, errlen, "a started child needs its result pipe (result_fd)");
        rc = -EINVAL;
    } else if (!argv || !s->cout.buf || !s->cerr.buf || !s->cres.buf || (o->isolate && !s->plan)) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
    } else if ((rc = open_pipes(s, err, errlen)) == 0) {
        if (s->plan)
            plan_mounts(o, exe, s->plan);
        make_cgroup(s);
        child_args ca = {.o = o,
                         .argv = argv,
                         .envp = env.envp,
                         .out_w = s->p_out[1],
                         .err_w = s->p_err[1],
                         .res_w = s->p_res[1],
                         .in_r = s->p_in[0],
                         .st_w = s->p_st[1],
                         .m = s->plan,
                         .cg = s->cg.freezer >= 0 ? &s->cg : NULL};
        child_limits(o, &p->r, &ca);
        rc = start_child(s, &ca, err, errlen);
    }
    free(argv);
    if (rc) {
        p->reaped = 1;
        avo_sandbox_stop(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* The first line in the result capture moved to r->result (1), or 0. */
static int take_line(sandbox_run *s, avo_sandbox_result *r)
{
    char *nl = memchr(s->cres.buf, '\n', s->cres.len);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - s->cres.buf) + 1;
    if (!(r->result = malloc(n + 1)))
        return 0;
    memcpy(r->result, s->cres.buf, n);
    r->result[n] = 0;
    r->result_len = n;
    memmove(s->cres.buf, s->cres.buf + n, s->cres.len - n);
    s->cres.len -= n;
    return 1;
}

/* What the child wrote on stdout and stderr since the last wait, and the
 * start's notes, into r (which owns the copies). */
static void take_captures(avo_sandbox_proc *p, avo_sandbox_result *r)
{
    capture *c[2] = {&p->s.cout, &p->s.cerr};
    char **to[2] = {&r->out, &r->err};
    size_t *len[2] = {&r->out_len, &r->err_len};
    for (int i = 0; i < 2; i++) {
        if ((*to[i] = malloc(c[i]->len + 1))) {
            memcpy(*to[i], c[i]->buf, c[i]->len);
            (*to[i])[c[i]->len] = 0;
            *len[i] = c[i]->len;
        }
        c[i]->len = 0;
        c[i]->truncated = 0;
    }
}

/* The notes of the start (namespaces, control group) copied into r. */
static void copy_notes(const avo_sandbox_result *from, avo_sandbox_result *r)
{
    r->netns = from->netns;
    r->pidns = from->pidns;
    r->mountns = from->mountns;
    r->userns = from->userns;
    r->pids_limit = from->pids_limit;
    memcpy(r->netns_note, from->netns_note, sizeof r->netns_note);
    memcpy(r->isolate_note, from->isolate_note, sizeof r->isolate_note);
    memcpy(r->cgroup_kind, from->cgroup_kind, sizeof r->cgroup_kind);
    memcpy(r->cgroup_note, from->cgroup_note, sizeof r->cgroup_note);
}

/* The child killed with everything in its group and reaped. */
static void kill_proc(avo_sandbox_proc *p)
{
    if (p->reaped || p->s.pid <= 0)
        return;
    kill_group(&p->s);
    waitpid(p->s.pid, &p->s.status, 0);
    p->reaped = 1;
}

int avo_sandbox_next_line(avo_sandbox_proc *p, double timeout_s, int (*should_cancel)(void *), void *arg,
                          avo_sandbox_result *r)
{
    memset(r, 0, sizeof *r);
    copy_notes(&p->r, r);
    sandbox_run *s = &p->s;
    const double t0 = now();
    int line = take_line(s, r);
    while (!line && !p->reaped) {
        struct pollfd pf[4];
        capture *caps[4];
        int *fds[4];
        int n = poll_set(s, pf, caps, fds);
        int pr = n ? poll(pf, (nfds_t)n, 100) : (usleep(20000), 0);
        if (pr > 0)
            drain_pipes(s, pf, caps, fds, n);
        if ((line = take_line(s, r)))
            break;
        /* ECHILD: reaped by someone else (the worker's orphan reaper),
         * its status lost. */
        errno = 0;
        if (reap_child(s) || errno == ECHILD) {
            p->reaped = 1;
            continue;
        }
        if (past_or_cancelled(t0, timeout_s, should_cancel, arg, r))
            kill_proc(p);
    }
    r->wall_s = now() - t0;
    take_captures(p, r);
    if (line) {
        /* A line is the child's answer: as a run that exited 0 with it. */
        r->exited = 1;
        return 1;
    }
    if (WIFEXITED(s->status) && !r->timed_out && !r->cancelled) {
        r->exited = 1;
        r->exit_code = WEXITSTATUS(s->status);
    } else if (WIFSIGNALED(s->status) && !r->timed_out && !r->cancelled) {
        r->signal = WTERMSIG(s->status);
    }
    if (s->st_exec.stage && !r->err_len) {
        free(r->err);
        if ((r->err = malloc(300)))
            r->err_len = (size_t)snprintf(r->err, 300, "%s: %s\n",
                                          s->st_exec.stage == ST_EXEC ? "cannot execute" : "cannot set up",
                                          strerror(s->st_exec.err));
    }
    return 0;
}

int avo_sandbox_proc_alive(const avo_sandbox_proc *p)
{
    return p && !p->reaped;
}

void avo_sandbox_stop(avo_sandbox_proc *p)
{
    if (!p)
        return;
    kill_proc(p);
    avo_cgroup_destroy(&p->s.cg);
    free(p->s.plan);
    close_pipes(&p->s);
    free(p->s.cout.buf);
    free(p->s.cerr.buf);
    free(p->s.cres.buf);
    free(p);
}

void avo_sandbox_confine(avo_sandbox_opts *o, const char *const *hide)
{
    o->isolate = 1;
    o->cgroup = 1;
    o->netns = 1;
    o->drop_uid = 1;
    o->hide = hide;
}

void avo_sandbox_result_free(avo_sandbox_result *r)
{
    free(r->out);
    free(r->err);
    free(r->result);
    r->out = r->err = r->result = NULL;
    r->out_len = r->err_len = r->result_len = 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

int avo_sandbox_rmtree(const char *path)
{
    /* FTW_PHYS: a symlink planted in the scratch dir is removed, not followed. */
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) ? -errno : 0;
}
