/* The runner, the only process that executes candidate code, and the checker's side of it (runner.h). */
#include "runner.h"
#include "syscalls.h"

#include <dlfcn.h>
#include <sched.h>
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
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "avo_file.h"
#include "avo_utf8.h"
#include "gpu.h"
#include "timing.h"

/* The runner's fixed descriptors. Nothing else is open in it but 0-2: in
 * particular not fd 3, the worker's result pipe, which stays with the checker. */
enum { FD_CMD = 10, FD_REPLY = 11, FD_MEM = 12, FD_OBJ = 13, FD_EXE = 14, FD_DEV0 = 15 };
/* Above every fixed number (FD_DEV0 + AVO_PROBLEM_MAX_TENSORS): where the
 * child parks descriptors before moving them into place. */
#define FD_PARK 64
enum { OP_LOAD = 1, OP_PING = 2, OP_RUN = 3, OP_QUIT = 4, OP_PROFILE = 5 };
/* Runner status in a reply. */
enum { ST_OK = 0, ST_NOLOAD = 1, ST_NOSYM = 2, ST_BADCMD = 3, ST_FAULT = 4, ST_NOGPU = 5 };

/* The flags that move data between the host and the device. */
#define RUNNER_COPIES (AVO_GPU_COPY_IN | AVO_GPU_COPY_OUT | AVO_GPU_COPY_INPUTS | AVO_GPU_COPY_OUTPUTS | AVO_GPU_FETCH)

/* An unprivileged uid for the runner when the checker is root: it can then
 * neither ptrace the checker, nor open /proc/<checker>/fd/3 or its memory,
 * nor signal it. */
#define RUNNER_UID 65534
/* Descriptors the candidate may hold (the checker may need more). */
#define RUNNER_NOFILE 64

typedef struct {
    uint32_t op, seq;
    int32_t nsizes, ntensors;
    uint32_t flags, poison_mask; /* CUDA runners: AVO_GPU_* */
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    uint64_t off[AVO_PROBLEM_MAX_TENSORS];
    uint64_t bytes[AVO_PROBLEM_MAX_TENSORS];
    uint64_t aux_off, aux_len; /* OP_PROFILE: where the report goes */
} cmd_msg;

typedef struct {
    uint32_t seq;
    int32_t status, ret;
    uint32_t notes; /* CUDA runners: AVO_GPU_NOTE_* */
    double runner_s;
    double tail_s;          /* CUDA runners: the call's stream end -> end mark */
    double gate_wait_s;     /* CUDA runners: the gate's wait for its SMs */
    double host_s, entry_s; /* CUDA runners: avo_gpu_times, reported only */
    char msg[440];
} reply_msg;

_Static_assert(sizeof(cmd_msg) < PIPE_BUF && sizeof(reply_msg) < PIPE_BUF, "messages must be atomic");

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
    m.notes = t->notes;
    m.runner_s = t->seconds;
    m.tail_s = t->tail_s;
    m.gate_wait_s = t->gate_wait_s;
    m.host_s = t->host_s;
    m.entry_s = t->entry_s;
    if (msg)
        snprintf(m.msg, sizeof m.msg, "%s", msg);
    if (avo_file_write_all(FD_REPLY, &m, sizeof m))
        _exit(0);
}

static void reply(uint32_t seq, int status, int ret, double t, const char *msg)
{
    const avo_gpu_times times = {.seconds = t};
    reply_gpu(seq, status, ret, &times, msg);
}

/* A runner that is still uid 0 (the checker's user namespace maps no
 * other uid, or dropping failed) gives up every capability before any
 * candidate code runs: it can then neither mount, nor ptrace, nor thaw its
 * own group, nor regain them by exec. */
static void drop_capabilities(void)
{
    for (int c = 0; c <= 63; c++)
        prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    syscall(SYS_capset, &h, d);
}

/* The runner's state, shared by its phases: its arguments, the shared
 * region, its GPU and, once loaded, the candidate's entry point. */
typedef struct {
    const char *entry;
    int cuda;
    /* --dev=N:BYTES,BYTES...: the checker's device tensors on fds FD_DEV0.. */
    int ndev, devfd[AVO_PROBLEM_MAX_TENSORS];
    size_t devbytes[AVO_PROBLEM_MAX_TENSORS];
    unsigned char *base;
    size_t bytes;
    avo_gpu *gpu;
    int gpu_failed;
    char gerr[400];
    char copies[200];
    int (*fn)(void *const *, const int64_t *);
} runner_state;

/* --dev=N:BYTES,BYTES... (CUDA runners); a malformed one ends the runner. */
static void runner_parse_dev(int argc, char **argv, runner_state *s)
{
    if (s->cuda && argc > 5 && strncmp(argv[5], "--dev=", 6) == 0) {
        char *p = argv[5] + 6, *end;
        s->ndev = (int)strtol(p, &end, 10);
        if (*end != ':' || s->ndev < 1 || s->ndev > AVO_PROBLEM_MAX_TENSORS)
            _exit(2);
        for (int i = 0; i < s->ndev; i++) {
            s->devbytes[i] = strtoull(end + 1, &end, 10);
            if (*end != (i + 1 < s->ndev ? ',' : '\0'))
                _exit(2);
            s->devfd[i] = FD_DEV0 + i;
        }
    }
}

static void runner_map_shared(runner_state *s)
{
    struct stat st;
    if (fstat(FD_MEM, &st) != 0 || st.st_size <= 0)
        _exit(2);
    s->bytes = (size_t)st.st_size;
    s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, FD_MEM, 0);
    if (s->base == MAP_FAILED)
        _exit(2);
    /* Closed before any candidate code (constructors included) runs. */
    close(FD_MEM);
}

/* The context exists before anything is timed, and before the candidate
 * loads: its creation is in no call, and the checker calibrates both
 * protocols (empty round trips, empty GPU calls) while no candidate code
 * exists to disturb them. Its failure is the machine's, not the candidate's. */
static void runner_open_gpu(runner_state *s)
{
    s->gpu_failed = avo_gpu_open(&s->gpu, s->gerr, sizeof s->gerr) != 0;
    if (!s->gpu_failed && s->ndev) {
        char ierr[300];
        if (avo_gpu_import(s->gpu, s->ndev, s->devfd, s->devbytes, ierr, sizeof ierr) != 0) {
            s->gpu_failed = 1;
            snprintf(s->gerr, sizeof s->gerr, "cannot map the checker's device tensors: %s", ierr);
        }
    }
    for (int i = 0; i < s->ndev; i++)
        close(s->devfd[i]);
    /* With the checker's device tensors the runner copies nothing: its
     * memfd is a small area of its own (the profile report), not the
     * region. Otherwise, page-locked, the region's copies to and from the
     * device run at the link's speed (pageable ones go through the driver's
     * staging buffers: most of an attention evaluation). Never unpinned
     * (the process ends with _exit). */
    if (s->ndev)
        snprintf(s->copies, sizeof s->copies, "none: the checker's, on the device tensors it shares");
    else if (!s->gpu_failed)
        avo_gpu_pin(s->gpu, s->base, s->bytes, s->copies, sizeof s->copies);
}

/* OP_LOAD: the candidate loaded and confined, or the runner ends. */
static void runner_load(runner_state *s, const cmd_msg *c)
{
    if (s->gpu_failed) {
        reply(c->seq, ST_NOGPU, 0, 0, s->gerr);
        _exit(0);
    }
    /* What 0-2 are, and on a GPU which descriptors are open (the
     * runtime's), before any candidate code runs (below). */
    struct stat std0[3];
    for (int k = 0; k < 3; k++)
        if (fstat(k, &std0[k]) != 0)
            std0[k].st_ino = 0;
    avo_fdset before;
    if (s->cuda)
        avo_syscalls_fdset_snapshot(&before);
    void *h = dlopen("/proc/self/fd/13", RTLD_NOW | RTLD_LOCAL);
    close(FD_OBJ);
    if (!h) {
        const char *e = dlerror();
        reply(c->seq, ST_NOLOAD, 0, 0, e ? e : "dlopen failed");
        _exit(0);
    }
    s->fn = (int (*)(void *const *, const int64_t *))(uintptr_t)dlsym(h, s->entry);
    if (!s->fn) {
        reply(c->seq, ST_NOSYM, 0, 0, s->entry);
        _exit(0);
    }
    /* From here on its calls compute, nothing more (syscalls.h;
     * tests/hostile/syscalls.c, tests/hostile/gpu/syscalls.cu). A
     * failure leaves it unfiltered: the checker reads the kernel's
     * word on it. 0-2 stay open under the filter: one the load
     * replaced (a file of its own, read-write) would be a file its
     * calls use after all (tests/hostile/std_fds.c). */
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int k = 0; k < 3 && nul >= 0; k++) {
        struct stat now;
        if (fstat(k, &now) != 0 || now.st_dev != std0[k].st_dev || now.st_ino != std0[k].st_ino)
            dup2(nul, k);
    }
    if (nul >= 0)
        close(nul);
    char serr[160];
    avo_syscalls_confine(FD_CMD, FD_REPLY, s->cuda ? &before : NULL, serr, sizeof serr);
    reply(c->seq, ST_OK, 0, 0, s->cuda ? s->copies : NULL);
}

/* OP_PROFILE (CUDA runners): one profiled call, its report in the shared
 * region at aux_off. */
static void runner_profile(runner_state *s, const cmd_msg *c)
{
    void *ptrs[AVO_PROBLEM_MAX_TENSORS] = {0};
    size_t tb[AVO_PROBLEM_MAX_TENSORS] = {0};
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    int bad = 0;
    memcpy(sizes, c->sizes, sizeof sizes);
    for (int i = 0; i < c->ntensors; i++) {
        tb[i] = c->bytes[i];
        /* On the checker's device tensors, laid out by the checker. */
        if (s->ndev)
            continue;
        if (c->off[i] >= s->bytes || c->bytes[i] > s->bytes - c->off[i])
            bad = 1;
        else
            ptrs[i] = s->base + c->off[i];
    }
    if (bad) {
        reply(c->seq, ST_BADCMD, 0, 0, "tensor outside the shared region");
        return;
    }
    int rc = avo_gpu_profile(s->gpu, (avo_gpu_fn)(uintptr_t)s->fn, s->ndev ? NULL : ptrs, tb, c->ntensors, sizes,
                             (char *)s->base + c->aux_off, c->aux_len, s->gerr, sizeof s->gerr);
    if (rc == AVO_GPU_ESTICKY) {
        reply(c->seq, ST_FAULT, 0, 0, s->gerr);
        _exit(0);
    }
    reply(c->seq, ST_OK, rc, 0, rc ? s->gerr : NULL);
}

/* OP_RUN on a CUDA runner: the tensors' lengths checked, the call made
 * through the GPU protocol (gpu.h). */
static void runner_run_gpu(runner_state *s, const cmd_msg *c, void **ptrs, int64_t *sizes)
{
    size_t tb[AVO_PROBLEM_MAX_TENSORS] = {0};
    int bad = 0;
    for (int i = 0; i < c->ntensors; i++) {
        tb[i] = c->bytes[i];
        if (!s->ndev && c->bytes[i] > s->bytes - c->off[i])
            bad = 1;
    }
    /* With the checker's device tensors every copy is the checker's. */
    if (s->ndev && (c->flags & RUNNER_COPIES))
        bad = 1;
    if (bad) {
        reply(c->seq, ST_BADCMD, 0, 0,
              s->ndev ? "a copy asked of a runner on the checker's device tensors"
                      : "tensor outside the shared region");
        return;
    }
    int ret = 0;
    avo_gpu_times t;
    int rc = avo_gpu_run(s->gpu, (avo_gpu_fn)(uintptr_t)s->fn, ptrs, tb, c->ntensors, sizes, c->flags, c->poison_mask,
                         &ret, &t, s->gerr, sizeof s->gerr);
    if (rc == AVO_GPU_ESTICKY) {
        /* The context is gone: say why and leave. */
        reply(c->seq, ST_FAULT, 0, 0, s->gerr);
        _exit(0);
    }
    if (rc == AVO_GPU_ELAUNCH)
        reply_gpu(c->seq, ST_OK, ret ? ret : -1, &t, s->gerr);
    else if (rc)
        reply(c->seq, ST_NOGPU, 0, 0, s->gerr);
    else
        reply_gpu(c->seq, ST_OK, ret, &t, NULL);
}

/* OP_RUN: one call of the candidate (or, before the load on a GPU, of the
 * protocol around none). */
static void runner_run(runner_state *s, const cmd_msg *c)
{
    /* Fresh arrays on every call, as in the old in-process harness. */
    void *ptrs[AVO_PROBLEM_MAX_TENSORS] = {0};
    int64_t sizes[AVO_PROBLEM_MAX_SIZES];
    memcpy(sizes, c->sizes, sizeof sizes);
    int bad = 0;
    /* A CUDA runner on the checker's device tensors has no host tensors. */
    for (int i = 0; i < c->ntensors && !s->ndev; i++) {
        if (c->off[i] >= s->bytes)
            bad = 1;
        else
            ptrs[i] = s->base + c->off[i];
    }
    if (bad) {
        reply(c->seq, ST_BADCMD, 0, 0, "tensor offset outside the shared region");
        return;
    }
    if (s->cuda) {
        runner_run_gpu(s, c, ptrs, sizes);
        return;
    }
    const double t0 = avo_timing_now();
    int ret = s->fn(ptrs, sizes);
    const double t1 = avo_timing_now();
    reply(c->seq, ST_OK, ret, t1 - t0, NULL);
}

_Noreturn void avo_runner_main(int argc, char **argv)
{
    if (argc < 3)
        _exit(2);
    /* Exec made it dumpable again: no process of its uid (another
     * evaluation's runner) may ptrace it or read its memory. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (geteuid() == 0)
        drop_capabilities();
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    runner_state s = {.entry = argv[2], .cuda = argc > 4 && strcmp(argv[4], "--cuda") == 0};
    runner_parse_dev(argc, argv, &s);
    runner_map_shared(&s);
    if (s.cuda)
        runner_open_gpu(&s);
    cmd_msg c;
    while (read_cmd(&c)) {
        if (c.op == OP_LOAD && !s.fn) {
            runner_load(&s, &c);
            continue;
        }
        /* A GPU that failed is the machine's failure: said, not a crash. */
        if (c.op == OP_RUN && s.cuda && s.gpu_failed) {
            reply(c.seq, ST_NOGPU, 0, 0, s.gerr);
            continue;
        }
        /* Before the load only the calibration's commands: pings, and on a
         * GPU the protocol around no call. */
        if (!s.fn && !(c.op == OP_PING ||
                       (c.op == OP_RUN && s.cuda && !s.gpu_failed && (c.flags & (AVO_GPU_EMPTY | AVO_GPU_PREPARE)))))
            break;
        if (c.op == OP_PING)
            reply(c.seq, ST_OK, 0, 0, NULL);
        else if (c.op == OP_PROFILE && s.cuda && c.ntensors >= 0 && c.ntensors <= AVO_PROBLEM_MAX_TENSORS &&
                 c.aux_off < s.bytes && c.aux_len <= s.bytes - c.aux_off)
            runner_profile(&s, &c);
        else if (c.op == OP_RUN && c.ntensors >= 0 && c.ntensors <= AVO_PROBLEM_MAX_TENSORS)
            runner_run(&s, &c);
        else
            break; /* OP_QUIT or garbage */
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

/* The runner is the first process of its PID namespace, so its death
 * ends everything it started; the group kill is for a host without
 * namespaces. */
void avo_runner_kill(avo_runner *r)
{
    if (r->pid) {
        kill(r->pid, SIGKILL);
        avo_cgroup_kill(&r->cg);
    }
}

void avo_runner_stop(avo_runner *r)
{
    if (r->pid) {
        /* Our kill, not the candidate's end: not reported as its signal. */
        avo_runner_kill(r);
        reap(r, 1);
        r->signal = 0;
        r->exit_code = -1;
    }
    avo_cgroup_destroy(&r->cg);
    if (r->cmd_w > 0)
        close(r->cmd_w);
    if (r->reply_r > 0)
        close(r->reply_r);
    r->cmd_w = r->reply_r = -1;
    r->pid = 0;
}

/* Let the runner (and all it started) run: right before a command. */
static void thaw(avo_runner *r)
{
    if (!r->pid || !r->stopped)
        return;
    if (r->cg.freezer >= 0)
        avo_cgroup_freeze(&r->cg, 0, 0);
    else
        kill(r->pid, SIGCONT);
    r->stopped = 0;
}

/* Wait for one whole answer to seq, until deadline. */
static int wait_reply(avo_runner *r, double deadline, reply_msg *m, char *why, size_t wl)
{
    size_t got = 0;
    while (got < sizeof *m) {
        double left = deadline - avo_timing_now();
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
        /* The runner writes an answer whole (under PIPE_BUF: atomic), so
         * it is read whole: a piece of one was written by the candidate,
         * which could use it to wake the checker while it still works. */
        if (got == 0 && (size_t)n < sizeof *m) {
            snprintf(why, wl, "a partial answer (%zd of %zu bytes) on the protocol pipe (forged answers)", n,
                     sizeof *m);
            return AVO_RUNNER_PROTOCOL;
        }
        got += (size_t)n;
    }
    if (m->seq != r->seq) {
        snprintf(why, wl, "answer %u to command %u: forged or stale answer on the protocol pipe", m->seq, r->seq);
        return AVO_RUNNER_PROTOCOL;
    }
    return AVO_RUNNER_OK;
}

/* Freeze the runner right after its answer: with its group, every thread
 * and process the candidate started; without one, the runner process by
 * SIGSTOP. Nothing of it then runs while the checker reads the outputs or
 * prepares the next call. Returns DIED when it ended instead. */
static int freeze(avo_runner *r, double deadline, char *why, size_t wl)
{
    if (r->cg.freezer >= 0) {
        double left = deadline - avo_timing_now();
        int rc = avo_cgroup_freeze(&r->cg, 1, left > 0 ? left : 0.01);
        reap(r, 0);
        if (!r->pid) {
            describe_end(r, why, wl);
            return AVO_RUNNER_DIED;
        }
        if (rc == -ETIMEDOUT) {
            kill(r->pid, SIGKILL);
            reap(r, 1);
            snprintf(why, wl, "its processes could not be frozen before the harness's deadline; runner killed");
            return AVO_RUNNER_TIMEOUT;
        }
        if (rc) {
            snprintf(why, wl, "cannot freeze the runner's group: %s", strerror(-rc));
            return rc;
        }
        r->stopped = 1;
        r->cpu_s = avo_cgroup_cpu_s(&r->cg);
        return AVO_RUNNER_OK;
    }
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
    if (avo_file_write_all(r->cmd_w, c, sizeof *c)) {
        reap_after_eof(r);
        describe_end(r, why, wl);
        return AVO_RUNNER_DIED;
    }
    return AVO_RUNNER_OK;
}

/* One command, thawed for it and frozen again before its round trip ends
 * (*rt, the checker's own clock). */
static int round_trip(avo_runner *r, cmd_msg *c, reply_msg *m, double deadline, double *rt, char *why, size_t wl)
{
    thaw(r);
    const double t0 = avo_timing_now();
    int rc = send_cmd(r, c, why, wl);
    /* Read after the command is written: a runner that took the CPU at
     * its wake-up has already run by then. */
    const double d0 = rc || r->cuda ? -1 : avo_timing_run_delay();
    if (!rc)
        rc = wait_reply(r, deadline, m, why, wl);
    r->reply_s = avo_timing_now() - t0;
    if (!rc)
        rc = freeze(r, deadline, why, wl);
    const double d1 = d0 >= 0 ? avo_timing_run_delay() : -1;
    if (rt)
        *rt = avo_timing_now() - t0;
    r->wait_s = d1 >= d0 && d0 >= 0 ? d1 - d0 : -1;
    return rc;
}

/* In the child, between fork and exec (async-signal-safe calls only):
 * namespaces of its own when it was cloned into them (a /proc showing only
 * itself, mounts private), its group, then nobody when the checker is root. */
static const char *const runner_private_dirs[] = {"/tmp", "/var/tmp", "/dev/shm", NULL};
/* Tests of what follows a runner without a /tmp of its own (test_serve.sh,
 * AVO_HARNESS_NO_PRIVATE_TMP, read before the clone): the worker's sandbox
 * passes no such variable. */
static int no_private_tmp;

/* The working directory (the evaluation's scratch directory, where TMPDIR
 * and HOME point) read-only for the runner, and the runner in that view of
 * it: a runner of the worker's own uid (a worker that is not root) could
 * otherwise write there, a channel between a candidate and the against it
 * is paired with (tests/fixtures/kernels/paired/collude.c). cwd: "" to
 * leave it ("/", or unknown). */
static void freeze_cwd(const char *cwd)
{
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if (cwd[0] && mount(cwd, cwd, NULL, MS_BIND | MS_REC, NULL) == 0 &&
        syscall(SYS_mount_setattr, AT_FDCWD, cwd, AT_RECURSIVE, &ro, sizeof ro) == 0)
        (void)!chdir(cwd);
}

static _Noreturn void runner_child(int pidns, const avo_runner *r, int cmd_r, int rep_w, int mem_fd, int obj, int exe,
                                   const avo_runner_devmem *dev, rlim_t cpu_s, const char *entry, const char *cand_so,
                                   int cuda, char *dev_arg, const char *cwd)
{
    /* Its group first: the descriptors for joining close below. */
    if (r->cg.freezer >= 0 && avo_cgroup_join(&r->cg) != 0)
        _exit(126);
    /* Move everything above the target numbers first so no dup2 below
     * clobbers a descriptor still to be moved. */
    int a = fcntl(cmd_r, F_DUPFD, FD_PARK), b = fcntl(rep_w, F_DUPFD, FD_PARK), m = fcntl(mem_fd, F_DUPFD, FD_PARK),
        o = fcntl(obj, F_DUPFD, FD_PARK), e = fcntl(exe, F_DUPFD, FD_PARK);
    int d[AVO_PROBLEM_MAX_TENSORS];
    const int nd = dev ? dev->n : 0;
    for (int i = 0; i < nd; i++)
        if ((d[i] = fcntl(dev->fd[i], F_DUPFD, FD_PARK)) < 0)
            _exit(126);
    if (a < 0 || b < 0 || m < 0 || o < 0 || e < 0 || dup2(a, FD_CMD) < 0 || dup2(b, FD_REPLY) < 0 ||
        dup2(m, FD_MEM) < 0 || dup2(o, FD_OBJ) < 0 || dup3(e, FD_EXE, O_CLOEXEC) < 0)
        _exit(126);
    for (int i = 0; i < nd; i++)
        if (dup2(d[i], FD_DEV0 + i) < 0)
            _exit(126);
    /* fd 3 (the worker's result pipe) and everything else: gone. */
    close_range(3, FD_CMD - 1, 0);
    close_range(FD_DEV0 + nd, ~0u, 0);
    struct rlimit rl = {RUNNER_NOFILE, RUNNER_NOFILE};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > RUNNER_NOFILE) {
        rl.rlim_cur = rl.rlim_max = RUNNER_NOFILE;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(126);
    }
    if (getrlimit(RLIMIT_CPU, &rl) == 0 && (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > cpu_s)) {
        rl.rlim_cur = rl.rlim_max = cpu_s;
        if (setrlimit(RLIMIT_CPU, &rl) != 0)
            _exit(126);
    }
    if (pidns && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) {
        /* A /proc of its own namespace (where a host refuses the mount, the
         * evaluation's own /proc stays: it shows the checker, whose command
         * line holds nothing secret); control-group files read-only, so a
         * runner of the worker's own uid (a worker that is not root) cannot
         * move or thaw itself. Each refusal leaves less isolation, not a
         * broken runner. */
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
        syscall(SYS_mount_setattr, AT_FDCWD, "/sys/fs/cgroup", AT_RECURSIVE, &ro, sizeof ro);
        freeze_cwd(cwd);
        /* Scratch of its own: the evaluation's /tmp and /dev/shm are
         * shared by every runner of it, a channel between a candidate and
         * the against it is paired with (tests/hostile/gpu/pairs). */
        for (int i = 0; runner_private_dirs[i]; i++)
            if (i > 0 || !no_private_tmp)
                mount("tmpfs", runner_private_dirs[i], "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777");
    }
    /* nobody, when it exists here (a user namespace of the checker's own
     * maps no other uid: the runner then keeps uid 0 there and gives up its
     * capabilities in avo_runner_main). */
    if (geteuid() == 0) {
        /* EPERM: setgroups is denied in the checker's own user namespace
         * (no groups to drop); EINVAL: nobody is not mapped there. */
        /* Raw system calls: after a raw clone glibc still counts the
         * checker's threads (CUDA's, the fill's), and its set-id wrappers
         * would signal threads that are not here. */
        if ((syscall(SYS_setgroups, 0, NULL) != 0 && errno != EPERM) ||
            (syscall(SYS_setresgid, RUNNER_UID, RUNNER_UID, RUNNER_UID) != 0 && errno != EINVAL) ||
            (syscall(SYS_setresuid, RUNNER_UID, RUNNER_UID, RUNNER_UID) != 0 && errno != EINVAL))
            _exit(126);
    }
    /* After the uid change, which would clear it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    /* The object path is only for ps (the runner loads fd 13). */
    char *argv[] = {
        "avo-harness", "--runner", (char *)entry, (char *)cand_so, cuda ? "--cuda" : NULL, cuda && nd ? dev_arg : NULL,
        NULL};
    extern char **environ;
    execveat(FD_EXE, "", argv, environ, AT_EMPTY_PATH);
    _exit(127);
}

static int runner_seq;

/* The candidate object goes over as a sealed memfd copy: the runner, as
 * nobody, may not be able to read the cache, and learns no path. *src and
 * *obj stay the caller's to close. */
static int copy_candidate(const char *cand_so, int *src, int *obj, char *why, size_t wl)
{
    if ((*src = open(cand_so, O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(why, wl, "cannot open %s: %s", cand_so, strerror(errno));
        return AVO_RUNNER_LOAD;
    }
    if ((*obj = memfd_create("avo-candidate", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
        int rc = -errno;
        snprintf(why, wl, "memfd_create: %s", strerror(errno));
        return rc;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(*src, buf, sizeof buf)) > 0)
        if (avo_file_write_all(*obj, buf, (size_t)n)) {
            snprintf(why, wl, "cannot copy the candidate object");
            return -EIO;
        }
    fcntl(*obj, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return 0;
}

/* Its own group, inside the checker's (the evaluation's): frozen between
 * calls, its CPU time counted. */
static void create_runner_group(avo_runner *r)
{
    char name[64];
    snprintf(name, sizeof name, "avo-runner-%d-%d", (int)getpid(), ++runner_seq);
    if (avo_cgroup_create(&r->cg, name, 0, r->isolation_note, sizeof r->isolation_note) != 0)
        avo_cgroup_clear(&r->cg);
    r->freezer = r->cg.freezer >= 0 ? avo_cgroup_freezer_name(&r->cg) : "SIGSTOP";
}

/* --dev=N:BYTES,BYTES... for the runner's command line, or "" without
 * device tensors. Built before the fork: the child may only make
 * async-signal-safe calls. */
static void format_dev_arg(const avo_runner_devmem *dev, char *dev_arg, size_t len)
{
    dev_arg[0] = 0;
    if (dev && dev->n > 0) {
        size_t o = (size_t)snprintf(dev_arg, len, "--dev=%d:", dev->n);
        for (int i = 0; i < dev->n && o < len; i++)
            o += (size_t)snprintf(dev_arg + o, len - o, "%s%zu", i ? "," : "", dev->bytes[i]);
    }
}

/* Runners also get IPC and network namespaces of their own (no SysV or
 * abstract-socket channel to another runner of the evaluation; a CUDA
 * runner needs neither: its device tensors come as descriptors); where the
 * host refuses the network namespace, the IPC one still; where it refuses
 * both, the PID and mount namespaces alone. Without any, a plain fork.
 * What it did not get is said in the isolation note. Returns the pid as
 * fork does. */
static pid_t clone_runner(avo_runner *r)
{
    static const unsigned long tries[] = {CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET,
                                          CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC, CLONE_NEWPID | CLONE_NEWNS};
    pid_t pid = -1;
    int first = 0;
    size_t i = 0;
    /* Tests of what follows a runner without an IPC namespace
     * (test_serve.sh): the worker's sandbox passes no such variable. */
    no_private_tmp = getenv("AVO_HARNESS_NO_PRIVATE_TMP") != NULL;
    if (getenv("AVO_HARNESS_NO_IPCNS")) {
        i = 2;
        first = EPERM;
    }
    for (; i < sizeof tries / sizeof *tries && pid < 0; i++) {
        pid = (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD | tries[i], NULL, NULL, NULL, NULL);
        if (pid < 0 && !first)
            first = errno;
    }
    r->pidns = pid >= 0;
    r->ipcns = pid >= 0 && (tries[i - 1] & CLONE_NEWIPC);
    if (pid != 0 && i > 1) {
        size_t nl = strlen(r->isolation_note);
        snprintf(r->isolation_note + nl, sizeof r->isolation_note - nl, "%sno %s namespace: %s", nl ? "; " : "",
                 pid < 0    ? "PID"
                 : r->ipcns ? "network"
                            : "IPC or network",
                 strerror(first));
    }
    if (pid < 0)
        pid = fork();
    return pid;
}

/* Runners spawned by this process without the whole confinement (PID and
 * IPC namespaces and a control group of their own). */
static int unconfined_spawns;

int avo_runner_unconfined(void)
{
    return unconfined_spawns;
}

int avo_runner_spawn(avo_runner *r, const char *cand_so, const char *entry, int cuda, int mem_fd,
                     const avo_runner_devmem *dev, double deadline, char *why, size_t wl)
{
    memset(r, 0, sizeof *r);
    avo_cgroup_clear(&r->cg);
    r->cmd_w = r->reply_r = -1;
    r->exit_code = -1;
    r->cpu_s = -1;
    r->wait_s = -1;
    r->cuda = cuda;
    int rc = 0, obj = -1, src = -1, exe = -1, p_cmd[2] = {-1, -1}, p_rep[2] = {-1, -1};

    if ((rc = copy_candidate(cand_so, &src, &obj, why, wl)) != 0)
        goto cleanup;
    if ((exe = open("/proc/self/exe", O_PATH | O_CLOEXEC)) < 0 || pipe2(p_cmd, O_CLOEXEC) || pipe2(p_rep, O_CLOEXEC)) {
        rc = -errno;
        snprintf(why, wl, "cannot set up the runner: %s", strerror(errno));
        goto cleanup;
    }
    create_runner_group(r);

    /* The candidate's CPU time: the wall time left plus 5 s, as the worker
     * gives a process (the harness's own limit is that times its CPUs, for
     * its fill and compare threads, and must not pass on to the candidate). */
    const double left = deadline - avo_timing_now();
    const rlim_t cpu_s = (rlim_t)(left > 0 ? left : 0) + 5;
    char dev_arg[32 + 21 * AVO_PROBLEM_MAX_TENSORS];
    format_dev_arg(dev, dev_arg, sizeof dev_arg);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, "/") == 0)
        cwd[0] = 0;
    pid_t pid = clone_runner(r);
    if (pid < 0) {
        rc = -errno;
        snprintf(why, wl, "fork: %s", strerror(errno));
        goto cleanup;
    }
    if (pid == 0)
        runner_child(r->pidns, r, p_cmd[0], p_rep[1], mem_fd, obj, exe, dev, cpu_s, entry, cand_so, cuda, dev_arg, cwd);
    r->pid = pid;
    if (!(r->pidns && r->ipcns && r->cg.freezer >= 0))
        unconfined_spawns++;
    r->uid = geteuid() == 0 ? RUNNER_UID : (int)geteuid(); /* until the load reads it */
    r->cmd_w = p_cmd[1];
    r->reply_r = p_rep[0];
    p_cmd[1] = p_rep[0] = -1;
    /* The child's ends close now: a runner that dies at any point is EOF
     * at once, not a silence until the deadline. */
    close(p_cmd[0]);
    close(p_rep[1]);
    p_cmd[0] = p_rep[1] = -1;
    /* Until its first command the runner waits: nothing to freeze yet. */
    r->stopped = 0;

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
    if (rc && r->pid)
        avo_runner_stop(r);
    else if (rc)
        avo_cgroup_destroy(&r->cg);
    return rc;
}

/* Whether the runner's mount namespace has what runner_child asked for:
 * a tmpfs of its own on each private directory, and the working directory
 * read-only. Each is asked for without a check in the child (a host that
 * refuses leaves less isolation, not a broken runner); read here from its
 * mountinfo, the last entry of a mount point being the one on top. A runner
 * without them may leave files a kept checker would carry to the next
 * evaluation. 1 when all hold; else 0 with what is missing in miss. */
static int private_mounts_hold(pid_t pid, char *miss, size_t ml)
{
    char path[64], line[4096], cwd[PATH_MAX] = "";
    int tmpfs[3] = {0, 0, 0}, cwd_ro = 0;
    if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, "/") == 0)
        cwd[0] = 0;
    snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(miss, ml, "its mounts cannot be read: %s", strerror(errno));
        return 0;
    }
    while (fgets(line, sizeof line, f)) {
        /* "id parent dev root mountpoint options [optional...] - fstype source superoptions" */
        char mnt[PATH_MAX], opts[256], fstype[64];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s %255s", mnt, opts) != 2 ||
            sscanf(dash + 3, "%63s", fstype) != 1)
            continue;
        for (int i = 0; runner_private_dirs[i]; i++)
            if (strcmp(mnt, runner_private_dirs[i]) == 0)
                tmpfs[i] = strcmp(fstype, "tmpfs") == 0;
        if (cwd[0] && strcmp(mnt, cwd) == 0)
            cwd_ro = strncmp(opts, "ro", 2) == 0 && (opts[2] == ',' || opts[2] == 0);
    }
    fclose(f);
    size_t n = 0;
    miss[0] = 0;
    for (int i = 0; runner_private_dirs[i]; i++)
        if (!tmpfs[i])
            n += (size_t)snprintf(miss + n, n < ml ? ml - n : 0, "%sno %s of its own", n ? ", " : "",
                                  runner_private_dirs[i]);
    if (cwd[0] && !cwd_ro)
        snprintf(miss + (n < ml ? n : ml - 1), n < ml ? ml - n : 1, "%sits working directory writable", n ? ", " : "");
    return miss[0] == 0;
}

int avo_runner_load(avo_runner *r, double deadline, char *why, size_t wl)
{
    cmd_msg c;
    memset(&c, 0, sizeof c);
    c.op = OP_LOAD;
    reply_msg m;
    int rc = round_trip(r, &c, &m, deadline, NULL, why, wl);
    if (rc)
        return rc;
    m.msg[sizeof m.msg - 1] = 0;
    avo_utf8_scrub(m.msg);
    if (m.status == ST_NOGPU) {
        snprintf(why, wl, "the runner has no usable GPU: %s", m.msg);
        avo_runner_stop(r);
        return -ENODEV;
    }
    if (m.status != ST_OK) {
        if (m.status == ST_NOSYM)
            snprintf(why, wl, "the candidate does not export the entry point");
        else
            snprintf(why, wl, "cannot load the candidate: %s", m.msg);
        avo_runner_stop(r);
        return AVO_RUNNER_LOAD;
    }
    /* Which uid it runs as and whether a system-call filter holds it
     * (2: a filter), from the kernel (not predicted). */
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)r->pid);
    FILE *f = fopen(path, "re");
    r->seccomp = 0;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "Uid: %*d %d", &r->uid);
        sscanf(line, "Seccomp: %d", &r->seccomp);
    }
    if (f)
        fclose(f);
    char miss[200];
    if (r->pidns && !private_mounts_hold(r->pid, miss, sizeof miss)) {
        /* Counted as a runner not wholly confined (a kept checker keeps
         * nothing after it), and said in the isolation note. */
        unconfined_spawns++;
        size_t nl = strlen(r->isolation_note);
        snprintf(r->isolation_note + nl, sizeof r->isolation_note - nl, "%s%s", nl ? "; " : "", miss);
    }
    /* Sent after the candidate loaded, so only its form is checked: the
     * result labels it as the runner's report. */
    if (strcmp(m.msg, "pinned") == 0 || strncmp(m.msg, "pageable: ", 10) == 0)
        snprintf(r->host_copies, sizeof r->host_copies, "%.150s", m.msg);
    else if (m.msg[0])
        snprintf(r->host_copies, sizeof r->host_copies, "unknown (malformed report)");
    return AVO_RUNNER_OK;
}

int avo_runner_ping(avo_runner *r, double deadline, double *round_trip_s, char *why, size_t wl)
{
    cmd_msg c;
    reply_msg m;
    memset(&c, 0, sizeof c);
    c.op = OP_PING;
    return round_trip(r, &c, &m, deadline, round_trip_s, why, wl);
}

int avo_runner_idle(avo_runner *r, double seconds, double *cpu_s, char *why, size_t wl)
{
    *cpu_s = -1;
    if (!r->pid)
        return AVO_RUNNER_DIED;
    const double before = r->stopped ? r->cpu_s : -1;
    thaw(r);
    usleep((useconds_t)(seconds * 1e6));
    int rc = freeze(r, avo_timing_now() + 1.0, why, wl);
    if (rc)
        return rc;
    if (before >= 0 && r->cpu_s >= 0)
        *cpu_s = r->cpu_s - before;
    return AVO_RUNNER_OK;
}

/* An answer's status, its message made a C string and valid UTF-8 first
 * (the runner's text is the candidate's): AVO_RUNNER_OK, FAULT (the
 * context is gone: reaped), PROTOCOL, or -EIO (the GPU failed). */
static int answer_status(avo_runner *r, reply_msg *m, char *why, size_t wl)
{
    m->msg[sizeof m->msg - 1] = 0;
    avo_utf8_scrub(m->msg);
    if (m->status == ST_FAULT) {
        snprintf(why, wl, "sticky CUDA error, GPU context lost: %s", m->msg);
        reap_after_eof(r);
        return AVO_RUNNER_FAULT;
    }
    if (m->status == ST_NOGPU) {
        snprintf(why, wl, "GPU failure in the runner: %s", m->msg);
        return -EIO;
    }
    if (m->status != ST_OK) {
        snprintf(why, wl, "runner refused the command (status %d)", m->status);
        return AVO_RUNNER_PROTOCOL;
    }
    return AVO_RUNNER_OK;
}

int avo_runner_call(avo_runner *r, const int64_t *sizes, int nsizes, const uint64_t *offs, const uint64_t *bytes,
                    int ntensors, unsigned flags, unsigned poison_mask, double deadline, int *ret, double *round_trip_s,
                    avo_gpu_times *claimed, char *why, size_t wl)
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
    int rc = round_trip(r, &c, &m, deadline, round_trip_s, why, wl);
    if (rc || (rc = answer_status(r, &m, why, wl)))
        return rc;
    if (m.ret != 0 && m.msg[0])
        snprintf(why, wl, "%s", m.msg);
    if (extra_bytes(r)) {
        snprintf(why, wl, "extra bytes after the answer on the protocol pipe (forged answers)");
        return AVO_RUNNER_PROTOCOL;
    }
    *ret = m.ret;
    claimed->seconds = m.runner_s;
    claimed->tail_s = m.tail_s;
    claimed->gate_wait_s = m.gate_wait_s;
    claimed->host_s = m.host_s;
    claimed->entry_s = m.entry_s;
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
    int rc = round_trip(r, &c, &m, deadline, NULL, why, wl);
    if (rc || (rc = answer_status(r, &m, why, wl)))
        return rc;
    *status = m.ret;
    if (m.ret)
        snprintf(why, wl, "%s", m.msg);
    return AVO_RUNNER_OK;
}
