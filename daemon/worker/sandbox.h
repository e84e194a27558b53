/* Run one untrusted program (the compiler, avo-harness) in a child process:
 * own process group, rlimits, fresh working directory, network namespace
 * where permitted, minimal environment, captured and capped output, an
 * optional result pipe on fd 3, a wall-clock timeout and cancellation that
 * kill the whole group. Never runs anything in the calling process. */
#ifndef AVO_SANDBOX_H
#define AVO_SANDBOX_H

#include <stddef.h>

typedef struct {
    char *const *argv;          /* argv[0] is looked up in PATH */
    const char *cwd;            /* the child chdirs here */
    double timeout_s;           /* wall clock; <= 0 means none */
    double cpu_s;               /* RLIMIT_CPU; 0 = timeout_s + 5 */
    unsigned long long as_bytes;    /* RLIMIT_AS; 0 = 4 GiB */
    int no_as_limit;            /* CUDA: no RLIMIT_AS at all */
    unsigned long long fsize_bytes; /* RLIMIT_FSIZE; 0 = 64 MiB */
    int nofile;                 /* RLIMIT_NOFILE; 0 = 64 */
    int nproc;                  /* RLIMIT_NPROC; 0 = 256 */
    int netns;                  /* try unshare(CLONE_NEWNET) */
    int netns_required;         /* and do not run the program without it (fail at setup) */
    int drop_uid;               /* when root: run as nobody (uid/gid 65534, no groups) */
    int result_fd;              /* give the child a pipe on fd 3 */
    size_t result_cap;          /* bytes kept from fd 3; 0 = 1 MiB */
    size_t out_cap;             /* bytes kept of stdout and of stderr; 0 = 4 KiB */
    int keep_head;              /* keep the first out_cap bytes, not the last */
    int (*should_cancel)(void *arg);
    void *cancel_arg;
} avo_sandbox_opts;

typedef struct {
    int exited;                 /* exit status valid */
    int exit_code;
    int signal;                 /* terminating signal, 0 if none */
    int timed_out;
    int cancelled;
    double wall_s;
    int netns;                  /* the child runs without network */
    char netns_note[160];       /* why not, when netns was wanted but failed */
    char *out, *err;            /* NUL-terminated captures (capped) */
    size_t out_len, err_len;
    char *result;               /* what came on fd 3 (capped), NUL-terminated */
    size_t result_len;
    int result_truncated;
} avo_sandbox_result;

/* Returns 0 when the child ran (whatever it did), or a negative int with a
 * message in err when it could not be started (pipe, fork, exec failed). */
int avo_sandbox_run(const avo_sandbox_opts *o, avo_sandbox_result *r, char *err, size_t errlen);
void avo_sandbox_result_free(avo_sandbox_result *r);

/* Remove a directory tree without following symlinks (scratch cleanup). */
int avo_sandbox_rmtree(const char *path);

#endif
