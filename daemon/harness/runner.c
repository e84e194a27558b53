#include "runner.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu.h"
#include "timing.h"

/* The runner's fixed descriptors. Nothing else is open in it but 0-2: in
 * particular not fd 3, the worker's result pipe, which stays with the checker. */
enum { FD_CMD = 10, FD_REPLY = 11, FD_MEM = 12, FD_OBJ = 13, FD_EXE = 14 };
enum { OP_LOAD = 1, OP_PING = 2, OP_RUN = 3, OP_QUIT = 4, OP_PROFILE = 5 };
/* Runner status in a reply. */
enum { ST_OK = 0, ST_NOLOAD = 1, ST_NOSYM = 2, ST_BADCMD = 3, ST_FAULT = 4, ST_NOGPU = 5 };

/* An unprivileged uid for the runner when the checker is root: it can then
 * neither ptrace the checker, nor open /proc/<checker>/fd/3 or its memory,
 * nor signal it. */
#define RUNNER_UID 65534

typedef struct {
    uint32_t op, seq;
    int32_t nsizes, ntensors;
    uint32_t flags, poison_mask;         /* CUDA runners: AVO_GPU_* */
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    uint64_t off[AVO_PROBLEM_MAX_TENSORS];
    uint64_t bytes[AVO_PROBLEM_MAX_TENSORS];
    uint64_t aux_off, aux_len;           /* OP_PROFILE: where the report goes */
} cmd_msg;

typedef struct {
    uint32_t seq;
    int32_t status, ret;
    uint32_t mhz;                        /* CUDA runners: SM clock after the run */
    uint32_t notes;                      /* CUDA runners: AVO_GPU_NOTE_* */
    double runner_s;
    double tail_s;                       /* CUDA runners: the call's stream end -> end mark */
    char msg[464];
} reply_msg;

_Static_assert(sizeof(cmd_msg) < PIPE_BUF && sizeof(reply_msg) < PIPE_BUF, "messages must be atomic");

static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- runner side ---------------------------------------------------------- */

/* Blocking read of one whole command; 0 on EOF or error. */
static int read_cmd(cmd_msg *c)
{
    size_t got = 0;
    while (got < sizeof *c) {
        ssize_t n = read(FD_CMD, (char *)c + got, sizeof *c - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    return 1;
}

static void reply_gpu(uint32_t seq, int status, int ret, const avo_gpu_times *t, const char *msg)
{
    reply_msg m;
    memset(&m, 0, sizeof m);
    m.seq = seq;
    m.status = status;
    m.ret = ret;
    m.mhz = t->sm_mhz;
    m.notes = t->notes;
    m.runner_s = t->seconds;
    m.tail_s = t->tail_s;
    if (msg)
        snprintf(m.msg, sizeof m.msg, "%s", msg);
    if (write_full(FD_REPLY, &m, sizeof m))
        _exit(0);
}

static void reply(uint32_t seq, int status, int ret, double t, const char *msg)
{
    const avo_gpu_times times = {.seconds = t};
    reply_gpu(seq, status, ret, &times, msg);
}

_Noreturn void avo_runner_main(int argc, char **argv)
{
    if (argc < 3)
        _exit(2);
    const char *entry = argv[2];
    const int cuda = argc > 4 && strcmp(argv[4], "--cuda") == 0;
    avo_gpu *gpu = NULL;
    char gerr[400];
    struct stat st;
    if (fstat(FD_MEM, &st) != 0 || st.st_size <= 0)
        _exit(2);
    size_t bytes = (size_t)st.st_size;
    unsigned char *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, FD_MEM, 0);
    if (base == MAP_FAILED)
        _exit(2);
    /* Closed before any candidate code (constructors included) runs. */
    close(FD_MEM);

    cmd_msg c;
    if (!read_cmd(&c) || c.op != OP_LOAD)
        _exit(2);
    /* The context exists before the candidate loads, so its creation is in
     * no timed call. Its failure is the machine's, not the candidate's. */
    if (cuda && avo_gpu_open(&gpu, gerr, sizeof gerr) != 0) {
        reply(c.seq, ST_NOGPU, 0, 0, gerr);
        _exit(0);
    }
    /* Page-locked, the shared region's copies to and from the device run
     * at the link's speed (pageable ones go through the driver's staging
     * buffers: most of an attention evaluation). Done before the candidate
     * loads; never unpinned (the process ends with _exit). */
    char copies[200] = "";
    if (cuda)
        avo_gpu_pin(gpu, base, bytes, copies, sizeof copies);
    void *h = dlopen("/proc/self/fd/13", RTLD_NOW | RTLD_LOCAL);
    close(FD_OBJ);
    if (!h) {
        const char *e = dlerror();
        reply(c.seq, ST_NOLOAD, 0, 0, e ? e : "dlopen failed");
        _exit(0);
    }
    int (*fn)(void *const *, const int64_t *) = (int (*)(void *const *, const int64_t *))(uintptr_t)dlsym(h, entry);
    if (!fn) {
        reply(c.seq, ST_NOSYM, 0, 0, entry);
        _exit(0);
    }
    reply(c.seq, ST_OK, 0, 0, cuda ? copies : NULL);

    while (read_cmd(&c)) {
        if (c.op == OP_PING) {
            reply(c.seq, ST_OK, 0, 0, NULL);
        } else if (c.op == OP_PROFILE && cuda && c.ntensors >= 0 && c.ntensors <= AVO_PROBLEM_MAX_TENSORS &&
                   c.aux_off < bytes && c.aux_len <= bytes - c.aux_off) {
            void *ptrs[AVO_PROBLEM_MAX_TENSORS] = {0};
            size_t tb[AVO_PROBLEM_MAX_TENSORS] = {0};
            int64_t sizes[AVO_PROBLEM_MAX_SIZES];
            int bad = 0;
            memcpy(sizes, c.sizes, sizeof sizes);
            for (int i = 0; i < c.ntensors; i++) {
                if (c.off[i] >= bytes || c.bytes[i] > bytes - c.off[i])
                    bad = 1;
                else
                    ptrs[i] = base + c.off[i], tb[i] = c.bytes[i];
            }
            if (bad) {
                reply(c.seq, ST_BADCMD, 0, 0, "tensor outside the shared region");
                continue;
            }
            int rc = avo_gpu_profile(gpu, (avo_gpu_fn)(uintptr_t)fn, ptrs, tb, c.ntensors, sizes,
                                     (char *)base + c.aux_off, c.aux_len, gerr, sizeof gerr);
            if (rc == AVO_GPU_ESTICKY) {
                reply(c.seq, ST_FAULT, 0, 0, gerr);
                _exit(0);
            }
            reply(c.seq, ST_OK, rc, 0, rc ? gerr : NULL);
        } else if (c.op == OP_RUN && c.ntensors >= 0 && c.ntensors <= AVO_PROBLEM_MAX_TENSORS) {
            /* Fresh arrays on every call, as in the old in-process harness. */
            void *ptrs[AVO_PROBLEM_MAX_TENSORS] = {0};
            int64_t sizes[AVO_PROBLEM_MAX_SIZES];
            memcpy(sizes, c.sizes, sizeof sizes);
            int bad = 0;
            for (int i = 0; i < c.ntensors; i++) {
                if (c.off[i] >= bytes)
                    bad = 1;
                else
                    ptrs[i] = base + c.off[i];
            }
            if (bad) {
                reply(c.seq, ST_BADCMD, 0, 0, "tensor offset outside the shared region");
                continue;
            }
            if (cuda) {
                size_t tb[AVO_PROBLEM_MAX_TENSORS] = {0};
                for (int i = 0; i < c.ntensors; i++) {
                    tb[i] = c.bytes[i];
                    if (c.bytes[i] > bytes - c.off[i])
                        bad = 1;
                }
                if (bad) {
                    reply(c.seq, ST_BADCMD, 0, 0, "tensor outside the shared region");
                    continue;
                }
                int ret = 0;
                avo_gpu_times t;
                int rc = avo_gpu_run(gpu, (avo_gpu_fn)(uintptr_t)fn, ptrs, tb, c.ntensors, sizes, c.flags,
                                     c.poison_mask, &ret, &t, gerr, sizeof gerr);
                if (rc == AVO_GPU_ESTICKY) {
                    /* The context is gone: say why and leave. */
                    reply(c.seq, ST_FAULT, 0, 0, gerr);
                    _exit(0);
                }
                if (rc == AVO_GPU_ELAUNCH)
                    reply_gpu(c.seq, ST_OK, ret ? ret : -1, &t, gerr);
                else if (rc)
                    reply(c.seq, ST_NOGPU, 0, 0, gerr);
                else
                    reply_gpu(c.seq, ST_OK, ret, &t, NULL);
                continue;
            }
            const double t0 = avo_now();
            int ret = fn(ptrs, sizes);
            const double t1 = avo_now();
            reply(c.seq, ST_OK, ret, t1 - t0, NULL);
        } else {
            break; /* OP_QUIT or garbage */
        }
    }
    /* _exit: no candidate destructor runs. */
    _exit(0);
}

/* ---- checker side --------------------------------------------------------- */

static void reap(avo_runner *r, int block)
{
    if (!r->pid)
        return;
    int st = 0;
    pid_t w;
    do
        w = waitpid(r->pid, &st, block ? 0 : WNOHANG);
    while (w < 0 && errno == EINTR);
    if (w != r->pid)
        return;
    if (WIFEXITED(st))
        r->exit_code = WEXITSTATUS(st);
    else if (WIFSIGNALED(st))
        r->signal = WTERMSIG(st);
    else
        return; /* stopped or continued: not ended */
    r->pid = 0;
}

static void describe_end(const avo_runner *r, char *why, size_t wl)
{
    if (r->signal) {
        const char *ab = sigabbrev_np(r->signal);
        snprintf(why, wl, "killed by SIG%s (%s)", ab ? ab : "?", strsignal(r->signal));
    } else if (r->exit_code >= 0) {
        snprintf(why, wl, "exited with code %d", r->exit_code);
    } else {
        snprintf(why, wl, "ended");
    }
}

/* EOF on the reply pipe: give a dying runner a moment to finish dying (so
 * its signal is reported), then kill it: it may have closed the pipe itself. */
static void reap_after_eof(avo_runner *r)
{
    for (int i = 0; i < 100 && r->pid; i++) {
        reap(r, 0);
        if (r->pid)
            usleep(5000);
    }
    if (r->pid) {
        kill(r->pid, SIGKILL);
        reap(r, 1);
    }
}

void avo_runner_stop(avo_runner *r)
{
    if (r->pid) {
        /* Our kill, not the candidate's end: not reported as its signal. */
        kill(r->pid, SIGKILL);
        reap(r, 1);
        r->signal = 0;
        r->exit_code = -1;
    }
    if (r->cmd_w > 0)
        close(r->cmd_w);
    if (r->reply_r > 0)
        close(r->reply_r);
    r->cmd_w = r->reply_r = -1;
    r->pid = 0;
}

void avo_runner_resume(avo_runner *r)
{
    if (r->pid && r->stopped) {
        kill(r->pid, SIGCONT);
        r->stopped = 0;
    }
}

/* Wait for one whole answer to seq, until deadline. */
static int wait_reply(avo_runner *r, double deadline, reply_msg *m, char *why, size_t wl)
{
    size_t got = 0;
    while (got < sizeof *m) {
        double left = deadline - avo_now();
        if (left <= 0) {
            kill(r->pid, SIGKILL);
            reap(r, 1);
            snprintf(why, wl, "no answer before the harness's wall-clock deadline; runner killed");
            return AVO_RUNNER_TIMEOUT;
        }
        struct pollfd pf = {r->reply_r, POLLIN, 0};
        int ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
        int pr = poll(&pf, 1, ms);
        if (pr < 0 && errno != EINTR) {
            snprintf(why, wl, "poll: %s", strerror(errno));
            return -errno;
        }
        if (pr <= 0)
            continue;
        ssize_t n = read(r->reply_r, (char *)m + got, sizeof *m - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            reap_after_eof(r);
            describe_end(r, why, wl);
            return AVO_RUNNER_DIED;
        }
        got += (size_t)n;
    }
    if (m->seq != r->seq) {
        snprintf(why, wl, "answer %u to command %u: forged or stale answer on the protocol pipe", m->seq, r->seq);
        return AVO_RUNNER_PROTOCOL;
    }
    return AVO_RUNNER_OK;
}

/* Freeze the runner right after its answer: a thread the candidate left
 * running cannot finish the work (or touch the tensors) while the checker
 * reads them. Returns DIED when it ended instead of stopping. */
static int freeze(avo_runner *r, char *why, size_t wl)
{
    if (kill(r->pid, SIGSTOP) != 0) {
        reap_after_eof(r);
        describe_end(r, why, wl);
        return AVO_RUNNER_DIED;
    }
    int st = 0;
    pid_t w;
    do
        w = waitpid(r->pid, &st, WUNTRACED);
    while (w < 0 && errno == EINTR);
    if (w == r->pid && WIFSTOPPED(st)) {
        r->stopped = 1;
        return AVO_RUNNER_OK;
    }
    if (w == r->pid) {
        if (WIFEXITED(st))
            r->exit_code = WEXITSTATUS(st);
        else if (WIFSIGNALED(st))
            r->signal = WTERMSIG(st);
        r->pid = 0;
    }
    describe_end(r, why, wl);
    return AVO_RUNNER_DIED;
}

/* Anything more on the reply pipe than the one answer is forged. */
static int extra_bytes(avo_runner *r)
{
    struct pollfd pf = {r->reply_r, POLLIN, 0};
    if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLIN))
        return 0;
    int n = 0;
    return ioctl(r->reply_r, FIONREAD, &n) == 0 && n > 0;
}

static int send_cmd(avo_runner *r, cmd_msg *c, char *why, size_t wl)
{
    c->seq = ++r->seq;
    if (write_full(r->cmd_w, c, sizeof *c)) {
        reap_after_eof(r);
        describe_end(r, why, wl);
        return AVO_RUNNER_DIED;
    }
    return AVO_RUNNER_OK;
}

int avo_runner_start(avo_runner *r, const char *cand_so, const char *entry, int cuda, int mem_fd, size_t mem_bytes,
                     double deadline, void (*before_load)(void *arg, pid_t pid), void *arg, char *why, size_t wl)
{
    memset(r, 0, sizeof *r);
    r->cmd_w = r->reply_r = -1;
    r->exit_code = -1;
    int rc = 0, obj = -1, src = -1, exe = -1, p_cmd[2] = {-1, -1}, p_rep[2] = {-1, -1};
    (void)mem_bytes;

    /* The candidate object goes over as a sealed memfd copy: the runner, as
     * nobody, may not be able to read the cache, and learns no path. */
    if ((src = open(cand_so, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = AVO_RUNNER_LOAD;
        snprintf(why, wl, "cannot open %s: %s", cand_so, strerror(errno));
        goto cleanup;
    }
    if ((obj = memfd_create("avo-candidate", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
        rc = -errno;
        snprintf(why, wl, "memfd_create: %s", strerror(errno));
        goto cleanup;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(src, buf, sizeof buf)) > 0)
        if (write_full(obj, buf, (size_t)n)) {
            rc = -EIO;
            snprintf(why, wl, "cannot copy the candidate object");
            goto cleanup;
        }
    fcntl(obj, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    if ((exe = open("/proc/self/exe", O_PATH | O_CLOEXEC)) < 0 || pipe2(p_cmd, O_CLOEXEC) ||
        pipe2(p_rep, O_CLOEXEC)) {
        rc = -errno;
        snprintf(why, wl, "cannot set up the runner: %s", strerror(errno));
        goto cleanup;
    }

    /* The candidate's CPU time: the wall time left plus 5 s, as the worker
     * gives a process (the harness's own limit is that times its CPUs, for
     * its fill and compare threads, and must not pass on to the candidate). */
    const double left = deadline - avo_now();
    const rlim_t cpu_s = (rlim_t)(left > 0 ? left : 0) + 5;
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        rc = -errno;
        snprintf(why, wl, "fork: %s", strerror(errno));
        goto cleanup;
    }
    if (pid == 0) {
        /* Move everything above the target numbers first so no dup2 below
         * clobbers a descriptor still to be moved. */
        int a = fcntl(p_cmd[0], F_DUPFD, 20), b = fcntl(p_rep[1], F_DUPFD, 20), m = fcntl(mem_fd, F_DUPFD, 20),
            o = fcntl(obj, F_DUPFD, 20), e = fcntl(exe, F_DUPFD, 20);
        if (a < 0 || b < 0 || m < 0 || o < 0 || e < 0 || dup2(a, FD_CMD) < 0 || dup2(b, FD_REPLY) < 0 ||
            dup2(m, FD_MEM) < 0 || dup2(o, FD_OBJ) < 0 || dup3(e, FD_EXE, O_CLOEXEC) < 0)
            _exit(126);
        /* fd 3 (the worker's result pipe) and everything else: gone. */
        close_range(3, FD_CMD - 1, 0);
        close_range(FD_EXE + 1, ~0u, 0);
        struct rlimit rl;
        if (getrlimit(RLIMIT_CPU, &rl) == 0 && (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > cpu_s)) {
            rl.rlim_cur = rl.rlim_max = cpu_s;
            if (setrlimit(RLIMIT_CPU, &rl) != 0)
                _exit(126);
        }
        if (geteuid() == 0 && (setgroups(0, NULL) || setresgid(RUNNER_UID, RUNNER_UID, RUNNER_UID) ||
                               setresuid(RUNNER_UID, RUNNER_UID, RUNNER_UID))) {
            fprintf(stderr, "avo-harness: runner cannot drop to uid %d: %s\n", RUNNER_UID, strerror(errno));
            _exit(126);
        }
        /* After the uid change, which would clear it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        /* The object path is only for ps (the runner loads fd 13). */
        char *argv[] = {"avo-harness", "--runner", (char *)entry, (char *)cand_so, cuda ? "--cuda" : NULL, NULL};
        extern char **environ;
        execveat(FD_EXE, "", argv, environ, AT_EMPTY_PATH);
        fprintf(stderr, "avo-harness: cannot exec the runner: %s\n", strerror(errno));
        _exit(127);
    }
    r->pid = pid;
    r->uid = geteuid() == 0 ? RUNNER_UID : (int)geteuid();
    r->cmd_w = p_cmd[1];
    r->reply_r = p_rep[0];
    p_cmd[1] = p_rep[0] = -1;
    if (before_load)
        before_load(arg, pid);

    cmd_msg c;
    memset(&c, 0, sizeof c);
    c.op = OP_LOAD;
    reply_msg m;
    if ((rc = send_cmd(r, &c, why, wl)) || (rc = wait_reply(r, deadline, &m, why, wl)))
        goto cleanup;
    if (m.status == ST_NOGPU) {
        m.msg[sizeof m.msg - 1] = 0;
        rc = -ENODEV;
        snprintf(why, wl, "the runner has no usable GPU: %s", m.msg);
        avo_runner_stop(r);
    } else if (m.status != ST_OK) {
        m.msg[sizeof m.msg - 1] = 0;
        rc = AVO_RUNNER_LOAD;
        if (m.status == ST_NOSYM)
            snprintf(why, wl, "the candidate does not export '%s'", entry);
        else
            snprintf(why, wl, "cannot load the candidate: %s", m.msg);
        avo_runner_stop(r);
    } else if (cuda) {
        /* Sent after the candidate loaded, so only its form is checked:
         * the result labels it as the runner's report. */
        m.msg[sizeof m.msg - 1] = 0;
        if (strcmp(m.msg, "pinned") == 0 || strncmp(m.msg, "pageable: ", 10) == 0)
            snprintf(r->host_copies, sizeof r->host_copies, "%.150s", m.msg);
        else
            snprintf(r->host_copies, sizeof r->host_copies, "unknown (malformed report)");
    }

cleanup:
    if (src >= 0)
        close(src);
    if (obj >= 0)
        close(obj);
    if (exe >= 0)
        close(exe);
    for (int i = 0; i < 2; i++) {
        if (p_cmd[i] >= 0)
            close(p_cmd[i]);
        if (p_rep[i] >= 0)
            close(p_rep[i]);
    }
    if (rc < 0 && r->pid)
        avo_runner_stop(r);
    return rc;
}

int avo_runner_ping(avo_runner *r, double deadline, double *round_trip_s, char *why, size_t wl)
{
    cmd_msg c;
    reply_msg m;
    memset(&c, 0, sizeof c);
    c.op = OP_PING;
    avo_runner_resume(r);
    const double t0 = avo_now();
    int rc = send_cmd(r, &c, why, wl);
    if (!rc)
        rc = wait_reply(r, deadline, &m, why, wl);
    *round_trip_s = avo_now() - t0;
    return rc;
}

int avo_runner_call(avo_runner *r, const int64_t *sizes, int nsizes, const uint64_t *offs, const uint64_t *bytes,
                    int ntensors, unsigned flags, unsigned poison_mask, double deadline, int *ret,
                    double *round_trip_s, avo_gpu_times *claimed, char *why, size_t wl)
{
    cmd_msg c;
    reply_msg m;
    memset(&c, 0, sizeof c);
    memset(claimed, 0, sizeof *claimed);
    c.op = OP_RUN;
    c.nsizes = nsizes;
    c.ntensors = ntensors;
    c.flags = flags;
    c.poison_mask = poison_mask;
    memcpy(c.sizes, sizes, (size_t)nsizes * sizeof *sizes);
    memcpy(c.off, offs, (size_t)ntensors * sizeof *offs);
    if (bytes)
        memcpy(c.bytes, bytes, (size_t)ntensors * sizeof *bytes);
    avo_runner_resume(r);
    const double t0 = avo_now();
    int rc = send_cmd(r, &c, why, wl);
    if (!rc)
        rc = wait_reply(r, deadline, &m, why, wl);
    const double t1 = avo_now();
    *round_trip_s = t1 - t0;
    if (rc)
        return rc;
    if ((rc = freeze(r, why, wl)))
        return rc;
    if (m.status == ST_FAULT) {
        m.msg[sizeof m.msg - 1] = 0;
        snprintf(why, wl, "sticky CUDA error, GPU context lost: %s", m.msg);
        reap_after_eof(r);
        return AVO_RUNNER_FAULT;
    }
    if (m.status == ST_NOGPU) {
        m.msg[sizeof m.msg - 1] = 0;
        snprintf(why, wl, "GPU failure in the runner: %s", m.msg);
        return -EIO;
    }
    if (m.status != ST_OK) {
        snprintf(why, wl, "runner refused the command (status %d)", m.status);
        return AVO_RUNNER_PROTOCOL;
    }
    if (m.ret != 0 && m.msg[0]) {
        m.msg[sizeof m.msg - 1] = 0;
        snprintf(why, wl, "%s", m.msg);
    }
    if (extra_bytes(r)) {
        snprintf(why, wl, "extra bytes after the answer on the protocol pipe (forged answers)");
        return AVO_RUNNER_PROTOCOL;
    }
    *ret = m.ret;
    claimed->seconds = m.runner_s;
    claimed->tail_s = m.tail_s;
    claimed->sm_mhz = m.mhz;
    claimed->notes = m.notes;
    return AVO_RUNNER_OK;
}

int avo_runner_profile(avo_runner *r, const int64_t *sizes, int nsizes, const uint64_t *offs, const uint64_t *bytes,
                       int ntensors, uint64_t aux_off, uint64_t aux_len, double deadline, int *status, char *why,
                       size_t wl)
{
    cmd_msg c;
    reply_msg m;
    memset(&c, 0, sizeof c);
    c.op = OP_PROFILE;
    c.nsizes = nsizes;
    c.ntensors = ntensors;
    memcpy(c.sizes, sizes, (size_t)nsizes * sizeof *sizes);
    memcpy(c.off, offs, (size_t)ntensors * sizeof *offs);
    memcpy(c.bytes, bytes, (size_t)ntensors * sizeof *bytes);
    c.aux_off = aux_off;
    c.aux_len = aux_len;
    avo_runner_resume(r);
    int rc = send_cmd(r, &c, why, wl);
    if (!rc)
        rc = wait_reply(r, deadline, &m, why, wl);
    if (rc)
        return rc;
    if ((rc = freeze(r, why, wl)))
        return rc;
    m.msg[sizeof m.msg - 1] = 0;
    if (m.status == ST_FAULT) {
        snprintf(why, wl, "sticky CUDA error, GPU context lost: %s", m.msg);
        reap_after_eof(r);
        return AVO_RUNNER_FAULT;
    }
    if (m.status != ST_OK)
        return AVO_RUNNER_PROTOCOL;
    *status = m.ret;
    if (m.ret)
        snprintf(why, wl, "%s", m.msg);
    return AVO_RUNNER_OK;
}
