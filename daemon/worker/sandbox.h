/* Run one untrusted program (the compiler, avo-harness, a microbenchmark)
 * in a child process: own process group, rlimits, fresh working directory,
 * minimal environment, captured and capped output, an optional result pipe
 * on fd 3, a wall-clock timeout and cancellation that kill the whole group.
 * With `isolate`, the child is also the first process of its own PID, mount
 * and IPC namespaces (and of a user namespace when the caller is not root),
 * sees a private size-bounded /tmp, /var/tmp and /dev/shm, a /proc of its
 * own namespace, the rest of the filesystem read-only, and the worker's
 * state hidden; when it ends, everything it started ends with it. With
 * `cgroup`, it runs in a control group of its own (frozen, counted and
 * killed as a whole: avo_cgroup.h). Never runs anything in the calling
 * process. docs/evaluation.md, "Isolation", says what each host gets. */
#ifndef AVO_SANDBOX_H
#define AVO_SANDBOX_H

#include "avo_attr.h"
#include <stddef.h>

typedef struct {
    char *const *argv;              /* argv[0] is looked up in PATH */
    const char *cwd;                /* the child chdirs here */
    double timeout_s;               /* wall clock; <= 0 means none */
    double cpu_s;                   /* RLIMIT_CPU; 0 = timeout_s + 5 */
    unsigned long long as_bytes;    /* RLIMIT_AS; 0 = 4 GiB */
    int no_as_limit;                /* CUDA: no RLIMIT_AS at all */
    unsigned long long fsize_bytes; /* RLIMIT_FSIZE; 0 = 64 MiB */
    int nofile;                     /* RLIMIT_NOFILE; 0 = 64 */
    int nproc;                      /* RLIMIT_NPROC; 0 = 256 */
    int netns;                      /* try unshare(CLONE_NEWNET) */
    int netns_required;             /* and do not run the program without it (fail at setup) */
    int drop_uid;                   /* when root: run as nobody (uid/gid 65534, no groups) */
    int isolate;                    /* own PID, mount, IPC namespaces; private /tmp; read-only rest (above) */
    int isolate_required;           /* and do not run the program without them (fail at setup) */
    unsigned long long tmpfs_bytes; /* size of each private tmpfs; 0 = 256 MiB */
    const char *const *expose; /* NULL-terminated: paths that stay visible (read-only) under a private or hidden dir */
    const char *const *hide;   /* NULL-terminated: directories replaced by an empty read-only tmpfs */
    int cgroup_rw;             /* keep /sys/fs/cgroup writable (the harness freezes its runner there) */
    int cgroup;                /* run in a control group of its own (created and removed here) */
    long pids_max;             /* with cgroup: at most this many processes and threads; 0 = 1024 */
    const char *stdin_data;    /* written to the child's stdin (a pipe), else stdin is /dev/null */
    const int *pass_fds;       /* these descriptors become fds 5, 6, ... in the child */
    int npass;
    int result_fd;     /* give the child a pipe on fd 3 */
    size_t result_cap; /* bytes kept from fd 3; 0 = 1 MiB */
    size_t out_cap;    /* bytes kept of stdout and of stderr; 0 = 4 KiB */
    int keep_head;     /* keep the first out_cap bytes, not the last */
    int (*should_cancel)(void *arg);
    void *cancel_arg;
} avo_sandbox_opts;

typedef struct {
    int exited; /* exit status valid */
    int exit_code;
    int signal; /* terminating signal, 0 if none */
    int timed_out;
    int cancelled;
    double wall_s;
    int netns;                  /* the child runs without network */
    char netns_note[160];       /* why not, when netns was wanted but failed */
    int pidns, mountns, userns; /* isolate: what the child got */
    char isolate_note[240];     /* what it did not get, and why ("" when all of it) */
    char cgroup_kind[16];       /* "cgroup2", "cgroup1" (its freezer) or "" */
    long pids_limit;            /* pids.max in force, 0 when none */
    char cgroup_note[240];      /* why no group, when one was wanted */
    char *out, *err;            /* NUL-terminated captures (capped) */
    size_t out_len, err_len;
    char *result; /* what came on fd 3 (capped), NUL-terminated */
    size_t result_len;
    int result_truncated;
} avo_sandbox_result;

/* What every program that handles candidate input gets (the compiler, the
 * disassembler, avo-harness, a microbenchmark): isolate, its own control
 * group, no network, nobody when the worker is root, and the directories in
 * hide (the compile cache, the worker's state) out of sight. */
void avo_sandbox_confine(avo_sandbox_opts *o, const char *const *hide);

/* The uid untrusted programs run as under a root worker (nobody). */
#define AVO_SANDBOX_UID 65534

/* Returns 0 when the child ran (whatever it did), or a negative int with a
 * message in err when it could not be started (pipe, fork, exec failed). */
AVO_MUSTCHECK int avo_sandbox_run(const avo_sandbox_opts *o, avo_sandbox_result *r, char *err, size_t errlen);
void avo_sandbox_result_free(avo_sandbox_result *r);

/* A child started as avo_sandbox_run starts one (o->result_fd required;
 * o->timeout_s and o->should_cancel unused: each wait has its own) and
 * left running: a server that answers one line on its fd 3 per request
 * (avo-harness --serve). Returns 0 with *out, or a negative int with err
 * (nothing left running). */
typedef struct avo_sandbox_proc avo_sandbox_proc;
AVO_MUSTCHECK int avo_sandbox_start(const avo_sandbox_opts *o, avo_sandbox_proc **out, char *err, size_t errlen);
/* Wait for the child's next line on fd 3. 1: r->result holds it (with its
 * newline), r->exited 1 and exit_code 0, as a run that ended with that
 * result. 0: no line; the child ended (r says how, as avo_sandbox_run
 * would), or ran past timeout_s (> 0) or was cancelled (r->timed_out,
 * r->cancelled) and is killed with its group. Either way r->out and r->err
 * hold what it wrote on stdout and stderr during this wait, r the start's
 * notes (namespaces, control group); free r with avo_sandbox_result_free. */
int avo_sandbox_next_line(avo_sandbox_proc *p, double timeout_s, int (*should_cancel)(void *), void *arg,
                          avo_sandbox_result *r);
/* Whether the child has not ended (nor been killed). */
int avo_sandbox_proc_alive(const avo_sandbox_proc *p);
/* The child killed with its group and reaped, its control group removed,
 * everything freed. NULL: nothing. */
void avo_sandbox_stop(avo_sandbox_proc *p);

/* Remove a directory tree without following symlinks (scratch cleanup). */
int avo_sandbox_rmtree(const char *path);

#endif
