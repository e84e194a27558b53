#include "sandbox.h"

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
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Stages the child reports on the status pipe when it fails before exec. */
enum { ST_NETNS = 1, ST_SETUP = 2, ST_EXEC = 3 };

typedef struct {
    int stage;
    int err;
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
#define SANDBOX_NOBODY 65534

static void set_limit(int res, rlim_t v)
{
    struct rlimit rl = {v, v};
    setrlimit(res, &rl);
}

/* Runs in the forked child: only async-signal-safe calls from here to exec,
 * since the worker may be multithreaded. Everything was prepared before fork. */
static void child(const avo_sandbox_opts *o, char *const *argv, char *const *envp, int out_w, int err_w, int res_w,
                  int st_w, rlim_t cpu, rlim_t as, rlim_t fsize, rlim_t nofile, rlim_t nproc)
{
    child_status st = {0, 0};
    setsid();
    if (o->netns && unshare(CLONE_NEWNET) != 0) {
        if (o->netns_required)
            goto fail;
        st.stage = ST_NETNS;
        st.err = errno;
        (void)!write(st_w, &st, sizeof st);
    }
    if (o->cwd && chdir(o->cwd) != 0)
        goto fail;
    int in = open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        goto fail;
    if (res_w >= 0) {
        if (dup2(res_w, 3) < 0)
            goto fail;
    }
    /* The status pipe moves to fd 4 (or 3) and keeps FD_CLOEXEC, so a
     * successful exec closes it and the parent sees EOF. */
    int st_fd = res_w >= 0 ? 4 : 3;
    if (dup3(st_w, st_fd, O_CLOEXEC) < 0)
        goto fail;
    st_w = st_fd;
    close_range((unsigned)st_fd + 1, ~0u, 0);
    set_limit(RLIMIT_CPU, cpu);
    set_limit(RLIMIT_AS, as);
    set_limit(RLIMIT_FSIZE, fsize);
    set_limit(RLIMIT_NOFILE, nofile);
    set_limit(RLIMIT_NPROC, nproc);
    set_limit(RLIMIT_CORE, 0);
    /* Groups first, uid last: after setuid the others are not permitted. */
    if (o->drop_uid && getuid() == 0 &&
        (setgroups(0, NULL) != 0 || setgid(SANDBOX_NOBODY) != 0 || setuid(SANDBOX_NOBODY) != 0))
        goto fail;
    signal(SIGPIPE, SIG_DFL);
    execve(argv[0], argv, envp);
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

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int avo_sandbox_run(const avo_sandbox_opts *o, avo_sandbox_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    int p_out[2] = {-1, -1}, p_err[2] = {-1, -1}, p_res[2] = {-1, -1}, p_st[2] = {-1, -1};
    int rc = 0;
    size_t out_cap = o->out_cap ? o->out_cap : 4096;
    capture cout = {malloc(out_cap + 1), 0, out_cap, o->keep_head, 0};
    capture cerr = {malloc(out_cap + 1), 0, out_cap, o->keep_head, 0};
    size_t res_cap = o->result_cap ? o->result_cap : (1u << 20);
    capture cres = {o->result_fd ? malloc(res_cap + 1) : NULL, 0, res_cap, 1, 0};
    /* The child sees no secrets of the worker (DSN, API keys): a fixed env. */
    char home[4200];
    snprintf(home, sizeof home, "HOME=%s", o->cwd ? o->cwd : "/tmp");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "TMPDIR=%s", o->cwd ? o->cwd : "/tmp");
    /* Besides: which GPU (CUDA_VISIBLE_DEVICES) and where carried libraries
     * are (LD_LIBRARY_PATH, on bare GPU hosts); neither is a secret. */
    char cvd[256] = "", ldp[4200] = "";
    const char *v;
    if ((v = getenv("CUDA_VISIBLE_DEVICES")))
        snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%s", v);
    if ((v = getenv("LD_LIBRARY_PATH")))
        snprintf(ldp, sizeof ldp, "LD_LIBRARY_PATH=%s", v);
    char *envp[8] = {"PATH=" SANDBOX_PATH, "LC_ALL=C", home, tmp, NULL};
    int ne = 4;
    if (cvd[0])
        envp[ne++] = cvd;
    if (ldp[0])
        envp[ne++] = ldp;
    envp[ne] = NULL;

    size_t argc = 0;
    while (o->argv[argc])
        argc++;
    char exe[4200];
    resolve(o->argv[0], exe, sizeof exe);
    char **argv = calloc(argc + 1, sizeof *argv);
    if (argv) {
        memcpy(argv, o->argv, argc * sizeof *argv);
        argv[0] = exe;
    }
    if (!argv || !cout.buf || !cerr.buf || (o->result_fd && !cres.buf)) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto cleanup;
    }
    if (pipe2(p_out, O_CLOEXEC) || pipe2(p_err, O_CLOEXEC) || pipe2(p_st, O_CLOEXEC) ||
        (o->result_fd && pipe2(p_res, O_CLOEXEC))) {
        rc = -errno;
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto cleanup;
    }
    rlim_t cpu = (rlim_t)(o->cpu_s > 0 ? o->cpu_s : (o->timeout_s > 0 ? o->timeout_s + 5 : 600));
    /* CUDA reserves address space far beyond what it touches: no AS limit
     * for it (memory is still bounded by the device and the wall clock). */
    rlim_t as = o->no_as_limit ? RLIM_INFINITY : o->as_bytes ? o->as_bytes : (4ull << 30);
    rlim_t fsize = o->fsize_bytes ? o->fsize_bytes : (64ull << 20);
    rlim_t nofile = o->nofile ? (rlim_t)o->nofile : 64;
    rlim_t nproc = o->nproc ? (rlim_t)o->nproc : 256;

    const double start = now();
    pid_t pid = fork();
    if (pid < 0) {
        rc = -errno;
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto cleanup;
    }
    if (pid == 0)
        child(o, argv, envp, p_out[1], p_err[1], p_res[1], p_st[1], cpu, as, fsize, nofile, nproc);
    /* setsid in the child may not have run yet when a kill comes; also call
     * setpgid from here so -pid is a valid group as early as possible. */
    setpgid(pid, pid);
    close_fd(&p_out[1]);
    close_fd(&p_err[1]);
    close_fd(&p_res[1]);
    close_fd(&p_st[1]);

    r->netns = o->netns;
    int status = 0, reaped = 0, killed = 0;
    double reaped_at = 0;
    child_status st_exec = {0, 0};
    char buf[65536];
    while (1) {
        struct pollfd pf[4];
        capture *caps[4];
        int *fds[4];
        int n = 0;
        if (p_out[0] >= 0) { pf[n] = (struct pollfd){p_out[0], POLLIN, 0}; caps[n] = &cout; fds[n++] = &p_out[0]; }
        if (p_err[0] >= 0) { pf[n] = (struct pollfd){p_err[0], POLLIN, 0}; caps[n] = &cerr; fds[n++] = &p_err[0]; }
        if (p_res[0] >= 0) { pf[n] = (struct pollfd){p_res[0], POLLIN, 0}; caps[n] = &cres; fds[n++] = &p_res[0]; }
        if (p_st[0] >= 0) { pf[n] = (struct pollfd){p_st[0], POLLIN, 0}; caps[n] = NULL; fds[n++] = &p_st[0]; }
        /* Done when the child is reaped and the pipes are drained, or 200 ms
         * after reaping: a grandchild that escaped the group may hold a
         * pipe open forever and must not hang the worker. */
        if (reaped && (n == 0 || now() - reaped_at > 0.2))
            break;
        int pr = n ? poll(pf, (nfds_t)n, 100) : (usleep(20000), 0);
        if (pr < 0 && errno != EINTR) {
            kill(-pid, SIGKILL);
            killed = 1;
        }
        for (int i = 0; pr > 0 && i < n; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t got = read(*fds[i], buf, sizeof buf);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                close_fd(fds[i]);
                continue;
            }
            if (caps[i]) {
                capture_add(caps[i], buf, (size_t)got);
            } else {
                /* Status messages are 8 bytes, written atomically. */
                for (ssize_t off = 0; off + (ssize_t)sizeof(child_status) <= got; off += sizeof(child_status)) {
                    child_status cs;
                    memcpy(&cs, buf + off, sizeof cs);
                    if (cs.stage == ST_NETNS) {
                        r->netns = 0;
                        snprintf(r->netns_note, sizeof r->netns_note, "unshare(CLONE_NEWNET): %s",
                                 strerror(cs.err));
                    } else {
                        st_exec = cs;
                    }
                }
            }
        }
        if (!reaped) {
            /* WNOWAIT first: while the child is an unreaped zombie its pid
             * cannot be reused, so killing -pid cannot hit a stranger. */
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
                /* Anything the child left behind in its group goes too. */
                kill(-pid, SIGKILL);
                waitpid(pid, &status, 0);
                reaped = 1;
                reaped_at = now();
            }
        }
        if (!reaped && !killed) {
            if (o->timeout_s > 0 && now() - start > o->timeout_s) {
                r->timed_out = 1;
                kill(-pid, SIGKILL);
                killed = 1;
            } else if (o->should_cancel && o->should_cancel(o->cancel_arg)) {
                r->cancelled = 1;
                kill(-pid, SIGKILL);
                killed = 1;
            }
        }
    }
    r->wall_s = now() - start;
    if (WIFEXITED(status)) {
        r->exited = 1;
        r->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r->signal = WTERMSIG(status);
    }
    if (st_exec.stage) {
        rc = st_exec.stage == ST_EXEC ? -st_exec.err : -EIO;
        snprintf(err, errlen, "%s %s: %s", st_exec.stage == ST_EXEC ? "cannot execute" : "cannot set up",
                 o->argv[0], strerror(st_exec.err));
    }

cleanup:
    free(argv);
    close_fd(&p_out[0]);
    close_fd(&p_out[1]);
    close_fd(&p_err[0]);
    close_fd(&p_err[1]);
    close_fd(&p_res[0]);
    close_fd(&p_res[1]);
    close_fd(&p_st[0]);
    close_fd(&p_st[1]);
    if (cout.buf)
        cout.buf[cout.len] = 0;
    if (cerr.buf)
        cerr.buf[cerr.len] = 0;
    if (cres.buf)
        cres.buf[cres.len] = 0;
    r->out = cout.buf;
    r->out_len = cout.len;
    r->err = cerr.buf;
    r->err_len = cerr.len;
    r->result = cres.buf;
    r->result_len = cres.len;
    r->result_truncated = cres.truncated;
    if (rc)
        avo_sandbox_result_free(r);
    return rc;
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
