/* The worker's kept checker (served.h). */
#include "served.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "avo_file.h"
#include "avo_hash.h"
#include "avo_log.h"
#include "avo_paths.h"

struct avo_served {
    char key[65];
    avo_sandbox_proc *proc;
    int sock;           /* the worker's end of the request socket */
    int evals;          /* requests sent */
    char dir[PATH_MAX]; /* its scratch directory (removed at close) */
    char run[PATH_MAX]; /* and its working directory inside */
};

void avo_served_key(char out[65], const char *harness, const char *problem_dir, const char *ref_so, uint64_t job_seed,
                    const char *cache_dir, uint64_t cache_bytes)
{
    /* The spec's text too: a package updated in place is another problem. */
    char spec_path[PATH_MAX], *spec = NULL;
    size_t spec_len = 0;
    if (avo_paths_join(spec_path, sizeof spec_path, problem_dir, "problem.json") == 0)
        spec = avo_file_read(spec_path, &spec_len);
    size_t cap = 4 * PATH_MAX + spec_len + 96;
    char *text = malloc(cap);
    if (!text) {
        snprintf(out, 65, "%s", "");
        free(spec);
        return;
    }
    int n = snprintf(text, cap, "%s\n%s\n%s\n%llu\n%s\n%llu\n", harness, problem_dir, ref_so,
                     (unsigned long long)job_seed, cache_dir ? cache_dir : "", (unsigned long long)cache_bytes);
    if (spec && n > 0 && (size_t)n + spec_len < cap) {
        memcpy(text + n, spec, spec_len);
        n += (int)spec_len;
    }
    avo_hash_sha256_hex(text, n > 0 ? (size_t)n : 0, out);
    explicit_bzero(text, cap); /* the job's seed */
    free(text);
    free(spec);
}

/* The checker told to end (its socket closed), given a moment, then
 * killed; its directory removed. NULL: nothing. */
static void served_close(avo_served *sv)
{
    if (!sv)
        return;
    if (sv->sock >= 0)
        close(sv->sock);
    /* End of file on its socket ends it; a moment for that, then the kill. */
    avo_sandbox_result r;
    if (avo_sandbox_proc_alive(sv->proc) && avo_sandbox_next_line(sv->proc, 2.0, NULL, NULL, &r) >= 0)
        avo_sandbox_result_free(&r);
    avo_sandbox_stop(sv->proc);
    if (sv->dir[0])
        avo_sandbox_rmtree(sv->dir);
    free(sv);
}

/* A checker started for st: its directory, its socket pair (the child's
 * end passed after the caller's descriptors), its sandbox. */
static int start(const avo_served_start *st, avo_served **out, char *err, size_t errlen)
{
    avo_served *sv = calloc(1, sizeof *sv);
    if (!sv) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    sv->sock = -1;
    snprintf(sv->key, sizeof sv->key, "%s", st->key);
    int pair[2] = {-1, -1}, rc = 0;
    if (snprintf(sv->dir, sizeof sv->dir, "%s/avo-serve-XXXXXX", st->scratch_root) >= (int)sizeof sv->dir ||
        !mkdtemp(sv->dir)) {
        rc = errno ? -errno : -ENAMETOOLONG;
        snprintf(err, errlen, "cannot create the kept checker's directory under %s: %s", st->scratch_root,
                 strerror(-rc));
        sv->dir[0] = 0;
        goto fail;
    }
    chmod(sv->dir, 0711);
    if ((rc = avo_paths_join(sv->run, sizeof sv->run, sv->dir, "run")) ||
        (rc = avo_file_mkdirs(sv->run, 0700, NULL, 0))) {
        snprintf(err, errlen, "cannot create %s/run: %s", sv->dir, strerror(-rc));
        goto fail;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        rc = -errno;
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        goto fail;
    }
    int pass[16];
    const int npass = st->so.npass;
    if (npass + 1 > (int)(sizeof pass / sizeof *pass)) {
        rc = -E2BIG;
        snprintf(err, errlen, "too many descriptors for the kept checker");
        goto fail;
    }
    memcpy(pass, st->so.pass_fds, (size_t)npass * sizeof *pass);
    pass[npass] = pair[1];
    char fdarg[16], *argv[48];
    snprintf(fdarg, sizeof fdarg, "%d", 5 + npass);
    int argc = 0;
    for (int i = 0; st->so.argv[i] && argc < 40; i++)
        argv[argc++] = st->so.argv[i];
    argv[argc++] = "--serve";
    argv[argc++] = fdarg;
    for (int i = 0; st->argv_tail && st->argv_tail[i] && argc < 47; i++)
        argv[argc++] = st->argv_tail[i];
    argv[argc] = NULL;
    avo_sandbox_opts so = st->so;
    so.argv = argv;
    so.cwd = sv->run;
    so.pass_fds = pass;
    so.npass = npass + 1;
    so.stdin_data = NULL;
    so.result_fd = 1;
    if ((rc = avo_sandbox_start(&so, &sv->proc, err, errlen)))
        goto fail;
    close(pair[1]);
    sv->sock = pair[0];
    *out = sv;
    return 0;
fail:
    if (pair[0] >= 0)
        close(pair[0]);
    if (pair[1] >= 0)
        close(pair[1]);
    served_close(sv);
    return rc;
}

/* The request sent with its descriptors. 0, or a negative errno. */
static int send_request(int sock, const char *request, const int *fds, int nfds)
{
    union {
        char b[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    if (nfds > 4)
        return -E2BIG;
    struct iovec iov = {.iov_base = (void *)request, .iov_len = strlen(request)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&ctl, 0, sizeof ctl);
        m.msg_control = ctl.b;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)iov.iov_len ? 0 : n < 0 ? -errno : -EIO;
}

/* One try on *sv (started when it holds none: *fresh 1 then). 0 with r
 * (a line, or how the checker ended: *sv NULL then), or a negative int
 * with err. */
static int try_eval(avo_served **sv, const avo_served_start *st, const char *request, const int *fds, int nfds,
                    double timeout_s, int (*should_cancel)(void *), void *arg, avo_sandbox_result *r, int *fresh,
                    char *err, size_t errlen)
{
    *fresh = 0;
    memset(r, 0, sizeof *r);
    avo_served *s = *sv;
    if (s && (strcmp(s->key, st->key) != 0 || !avo_sandbox_proc_alive(s->proc) || s->evals >= AVO_SERVED_MAX_EVALS)) {
        served_close(s);
        *sv = s = NULL;
    }
    int rc;
    if (!s) {
        /* Fresh even when it cannot be started: a start that failed is not
         * a kept checker's end, and is not tried again. */
        *fresh = 1;
        if ((rc = start(st, &s, err, errlen)))
            return rc;
        *sv = s;
    }
    s->evals++;
    if ((rc = send_request(s->sock, request, fds, nfds))) {
        /* A checker that cannot take a request has ended: how, and what it
         * said. */
        const int line = avo_sandbox_next_line(s->proc, 2.0, NULL, NULL, r);
        served_close(s);
        *sv = NULL;
        if (!line && (r->exited || r->signal))
            return 0;
        avo_sandbox_result_free(r);
        snprintf(err, errlen, "cannot send the request to the kept checker: %s", strerror(-rc));
        return rc;
    }
    int line = avo_sandbox_next_line(s->proc, timeout_s, should_cancel, arg, r);
    if (line == 1) {
        /* A checker that says it ends after this answer (serve.h) is not
         * asked again. */
        json_t *j = json_loads(r->result, 0, NULL);
        line = !json_is_string(json_object_get(json_object_get(j, "served"), "ends"));
        json_decref(j);
    }
    if (line != 1) {
        served_close(s);
        *sv = NULL;
    }
    return 0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The pool's slot for key: its checker's, else a free one, else the least
 * recently used (whose checker try_eval replaces: another key). */
static int pool_slot(const avo_served_pool *pool, const char *key)
{
    const int n = pool->n < 1 ? 1 : pool->n > AVO_SERVED_SLOTS_MAX ? AVO_SERVED_SLOTS_MAX : pool->n;
    int free_slot = -1, lru = 0;
    for (int i = 0; i < n; i++) {
        if (pool->sv[i] && strcmp(pool->sv[i]->key, key) == 0)
            return i;
        if (!pool->sv[i] && free_slot < 0)
            free_slot = i;
        if (pool->used[i] < pool->used[lru])
            lru = i;
    }
    return free_slot >= 0 ? free_slot : lru;
}

/* The pool's checkers but the one in slot keep closed; how many there were. */
static int close_others(avo_served_pool *pool, int keep)
{
    int n = 0;
    for (int i = 0; i < AVO_SERVED_SLOTS_MAX; i++)
        if (i != keep && pool->sv[i]) {
            served_close(pool->sv[i]);
            pool->sv[i] = NULL;
            n++;
        }
    return n;
}

void avo_served_pool_idle(avo_served_pool *pool, double idle_s)
{
    const double now = mono_now();
    for (int i = 0; i < AVO_SERVED_SLOTS_MAX; i++)
        if (pool->sv[i] && (idle_s < 0 || now - pool->used[i] > idle_s)) {
            served_close(pool->sv[i]);
            pool->sv[i] = NULL;
        }
}

void avo_served_pool_close(avo_served_pool *pool)
{
    avo_served_pool_idle(pool, -1);
}

int avo_served_pool_count(const avo_served_pool *pool)
{
    int c = 0;
    for (int i = 0; i < AVO_SERVED_SLOTS_MAX; i++)
        c += pool->sv[i] != NULL;
    return c;
}

int avo_served_eval(avo_served_pool *pool, const avo_served_start *st, const char *request, const int *fds, int nfds,
                    double timeout_s, int (*should_cancel)(void *), void *arg, avo_sandbox_result *r, int *started,
                    char *err, size_t errlen)
{
    const int slot = pool_slot(pool, st->key);
    avo_served **sv = &pool->sv[slot];
    int fresh = 0;
    int rc = try_eval(sv, st, request, fds, nfds, timeout_s, should_cancel, arg, r, &fresh, err, errlen);
    *started = fresh;
    /* A kept checker that ended without an answer (not past the time, not
     * cancelled) may have ended for an earlier evaluation's sake (its kept
     * state unusable): the evaluation once more, on a fresh one. */
    const int ended = rc == 0 ? !*sv && !r->timed_out && !r->cancelled && !r->result : rc != -ENOMEM;
    if (!fresh && ended) {
        if (rc == 0) {
            avo_warn("worker",
                     "the kept checker ended without an answer (%s %d): the evaluation once more on a "
                     "fresh one",
                     r->signal ? "signal" : "exit code", r->signal ? r->signal : r->exit_code);
            avo_sandbox_result_free(r);
        } else {
            avo_warn("worker",
                     "the kept checker could not take the request (%s): the evaluation once more on a "
                     "fresh one",
                     err);
        }
        /* The whole time again: the request's deadline is the checker's
         * from its receipt, and the checker's end was not the candidate's
         * doing (as far as anyone can tell). */
        rc = try_eval(sv, st, request, fds, nfds, timeout_s, should_cancel, arg, r, &fresh, err, errlen);
        *started = fresh;
    } else if (fresh && rc == 0 && ended && close_others(pool, slot)) {
        /* A fresh checker that ended without an answer beside other kept
         * ones may have lacked the GPU memory they hold (a checker that
         * cannot allocate exits as a one-shot would, and that would be the
         * candidate's crash): once more, alone. */
        avo_warn("worker",
                 "a fresh checker ended without an answer (%s %d) beside other kept checkers: they are closed, "
                 "the evaluation once more",
                 r->signal ? "signal" : "exit code", r->signal ? r->signal : r->exit_code);
        avo_sandbox_result_free(r);
        rc = try_eval(sv, st, request, fds, nfds, timeout_s, should_cancel, arg, r, &fresh, err, errlen);
        *started = fresh;
    }
    pool->used[slot] = mono_now();
    return rc;
}
