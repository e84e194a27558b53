/* avo-harness --serve (serve.h). */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "avo_file.h"
#include "runner.h"

/* What a request names: the three objects (-1: absent) and the options. */
typedef struct {
    int fd[3]; /* candidate, against, baseline */
    char path[3][32];
    avo_harness_opts o;
} serve_req;

static const char *const object_names[3] = {"candidate", "against", "baseline"};

static void req_close(serve_req *q)
{
    for (int i = 0; i < 3; i++)
        if (q->fd[i] >= 0)
            close(q->fd[i]);
}

/* A seed member: in [lo, 2^63), or absent when `optional`. */
static int get_seed(json_t *j, const char *key, uint64_t lo, int optional, uint64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(j, key);
    if (!v && optional)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo) {
        snprintf(err, errlen, "\"%s\" wants an integer in [%llu, 2^63)", key, (unsigned long long)lo);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* The request's options on top of base. 0, or -1 with err. */
static int parse_options(json_t *j, serve_req *q, char *err, size_t errlen)
{
    if (get_seed(j, "seed", 0, 0, &q->o.seed, err, errlen) ||
        get_seed(j, "job_seed", 1, 1, &q->o.job_seed, err, errlen))
        return -1;
    json_t *d = json_object_get(j, "deadline"), *c = json_object_get(j, "confidence");
    if (d && !(json_is_number(d) && json_number_value(d) > 0)) {
        snprintf(err, errlen, "\"deadline\" wants seconds > 0");
        return -1;
    }
    if (c && !(json_is_number(c) && json_number_value(c) > 0 && json_number_value(c) < 1)) {
        snprintf(err, errlen, "\"confidence\" wants a number in (0, 1)");
        return -1;
    }
    q->o.deadline_s = d ? json_number_value(d) : 0;
    q->o.confidence = c ? json_number_value(c) : 0.95;
    q->o.screen = json_is_true(json_object_get(j, "screen"));
    q->o.counters = json_is_true(json_object_get(j, "counters"));
    return 0;
}

/* The attached descriptors matched to the names in "objects". */
static int match_objects(json_t *j, const int *fds, int nfds, serve_req *q, char *err, size_t errlen)
{
    json_t *names = json_object_get(j, "objects");
    if (!json_is_array(names) || (int)json_array_size(names) != nfds) {
        snprintf(err, errlen, "\"objects\" must name each of the %d attached descriptors", nfds);
        return -1;
    }
    for (int k = 0; k < nfds; k++) {
        const char *n = json_string_value(json_array_get(names, (size_t)k));
        int i = 0;
        while (i < 3 && !(n && strcmp(n, object_names[i]) == 0))
            i++;
        if (i == 3 || q->fd[i] >= 0) {
            snprintf(err, errlen, "\"objects\"[%d]: '%s' is not one of candidate, against, baseline, or named twice", k,
                     n ? n : "(not a string)");
            return -1;
        }
        q->fd[i] = fds[k];
        snprintf(q->path[i], sizeof q->path[i], "/proc/self/fd/%d", fds[k]);
    }
    if (q->fd[0] < 0) {
        snprintf(err, errlen, "no candidate object attached");
        return -1;
    }
    if (q->o.screen && q->fd[1] < 0) {
        snprintf(err, errlen, "\"screen\" times paired: it needs an against");
        return -1;
    }
    q->o.against_so = q->fd[1] >= 0 ? q->path[1] : NULL;
    q->o.base_so = q->fd[2] >= 0 ? q->path[2] : NULL;
    return 0;
}

/* One request read. 1 with q filled, 0 at end of file, -1 with err (the
 * request is refused; its descriptors closed). */
static int read_request(int sock, serve_req *q, char *err, size_t errlen)
{
    char buf[AVO_SERVE_REQUEST_MAX + 1];
    union {
        char b[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf - 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return 0;
    int fds[4], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
                if (nfds < 4)
                    fds[nfds++] = fd;
                else
                    close(fd);
            }
    if (n < 0) {
        const int e = errno;
        snprintf(err, errlen, "reading a request: %s", strerror(e));
        for (int k = 0; k < nfds; k++)
            close(fds[k]);
        /* Only a request that came and was bad is answered: a socket that
         * fails is the end. */
        return 0;
    }
    buf[n] = 0;
    json_error_t je;
    json_t *j = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? NULL : json_loads(buf, 0, &je);
    int rc = -1;
    if (!j)
        snprintf(err, errlen, "%s",
                 (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? "request too long, or too many descriptors"
                                                          : "request is not JSON");
    else if (!json_is_object(j))
        snprintf(err, errlen, "request is not a JSON object");
    else if (nfds > 3)
        snprintf(err, errlen, "more than 3 descriptors attached");
    else if (parse_options(j, q, err, errlen) == 0 && match_objects(j, fds, nfds, q, err, errlen) == 0)
        rc = 1;
    json_decref(j);
    memset(buf, 0, sizeof buf); /* the seeds */
    if (rc < 0) {
        for (int k = 0; k < nfds; k++)
            close(fds[k]);
        q->fd[0] = q->fd[1] = q->fd[2] = -1;
    }
    return rc;
}

static int write_line(int out, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT);
    int rc = !text || avo_file_write_all(out, text, strlen(text)) || avo_file_write_all(out, "\n", 1) ? -1 : 0;
    free(text);
    return rc;
}

int avo_serve_main(const char *problem_dir, const char *ref_so, const avo_harness_opts *base, int sock, int out)
{
    avo_problem p;
    char err[1024];
    if (avo_problem_load(&p, problem_dir, err, sizeof err)) {
        fprintf(stderr, "avo-harness: %s\n", err);
        return 2;
    }
    avo_harness_keep *keep = avo_harness_keep_new();
    if (!keep) {
        fprintf(stderr, "avo-harness: out of memory\n");
        return 2;
    }
    int code = 0;
    for (int n = 1;; n++) {
        serve_req q = {.fd = {-1, -1, -1}, .o = *base};
        q.o.keep = keep;
        int got = read_request(sock, &q, err, sizeof err);
        if (got == 0)
            break;
        json_t *result = NULL;
        const int reused = avo_harness_keep_reused(keep);
        int rc = got < 0 ? 0 : avo_harness_run(&p, q.path[0], ref_so, &q.o, &result, err, sizeof err);
        q.o.seed = q.o.job_seed = 0;
        req_close(&q);
        if (rc) {
            fprintf(stderr, "avo-harness: %s\n", err);
            code = rc == AVO_HARNESS_EREFERENCE ? AVO_HARNESS_EXIT_REFERENCE : 2;
            break;
        }
        if (got < 0)
            result = json_pack("{s:s}", "error", err);
        json_t *served = json_pack("{s:i,s:b}", "evaluation", n, "kept", avo_harness_keep_reused(keep) > reused);
        /* A runner without its own PID and IPC namespaces, control group
         * and private scratch mounts may leave something (a SysV object, a
         * process, a file) in this checker's sandbox: nothing is kept
         * after it, and the checker ends so that its sandbox goes too. */
        const int ends = avo_runner_unconfined() > 0;
        if (ends) {
            avo_harness_keep_free(keep);
            keep = NULL;
            json_object_set_new(served, "ends",
                                json_string("a runner lacked its own PID or IPC namespace, control group or "
                                            "private scratch mounts: this checker keeps nothing and ends"));
        }
        json_object_set_new(result, "served", served);
        const int wrc = write_line(out, result);
        json_decref(result);
        if (wrc) {
            fprintf(stderr, "avo-harness: cannot write the result\n");
            code = 2;
            break;
        }
        if (ends)
            break;
    }
    avo_harness_keep_free(keep);
    return code;
}
