/* Compile-checks a submitted seed through `avo-worker eval --compile-only` (seedcheck.h). */
#include "seedcheck.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "avo_list.h"
#include "avo_paths.h"

#define CHECK_TIMEOUT_MS (180 * 1000)
/* A disassembly is capped at 2 MiB by the worker; JSON escaping adds to it. */
#define OUTPUT_CAP (8 << 20)

typedef struct check check;
struct check {
    avo_list link; /* on `running`, for avo_seedcheck_stop_all */
    uv_process_t proc;
    uv_pipe_t out;
    uv_timer_t timer;
    int open_handles;
    int exited, eof, timed_out;
    int64_t exit_status;
    char path[PATH_MAX];
    char *buf;
    size_t len;
    avo_seedcheck_cb cb;
    void *arg;
};

static avo_list running = AVO_LIST_INIT(running);

static void on_closed(uv_handle_t *h)
{
    check *c = h->data;
    if (--c->open_handles == 0) {
        free(c->buf);
        free(c);
    }
}

static void finish(check *c)
{
    if (!c->exited || !c->eof)
        return;
    avo_list_remove(&c->link);
    unlink(c->path);
    json_t *r = c->buf ? json_loadb(c->buf, c->len, 0, NULL) : NULL;
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    const char *detail = json_string_value(json_object_get(r, "detail"));
    const char *log = json_string_value(json_object_get(json_object_get(r, "compile"), "log"));
    char why[1200];
    if (c->timed_out || (outcome && !strcmp(outcome, "timeout"))) {
        /* Slow is not broken: a loaded host must not refuse a good seed. */
        c->cb(c->arg, -1, "the compile check ran past its time limit", "", NULL);
    } else if (outcome && !strcmp(outcome, "ok")) {
        c->cb(c->arg, 1, detail ? detail : "", log ? log : "", json_object_get(r, "disassembly"));
    } else if (outcome && !strcmp(outcome, "policy_violation")) {
        /* refused by the candidate policy, not by the compiler: the
         * callers say so (AVO_SEEDCHECK_POLICY) */
        snprintf(why, sizeof why, "%s%.1100s", AVO_SEEDCHECK_POLICY, detail ? detail : "");
        c->cb(c->arg, 0, why, log ? log : "", NULL);
    } else if (outcome) {
        c->cb(c->arg, 0, detail ? detail : outcome, log ? log : "", NULL);
    } else {
        /* Exit 2: it could not be checked here (no compiler for the
         * target, say); the seed's first evaluation will tell. */
        snprintf(why, sizeof why, "avo-worker eval --compile-only exited %lld without a result",
                 (long long)c->exit_status);
        c->cb(c->arg, -1, why, "", NULL);
    }
    json_decref(r);
    uv_close((uv_handle_t *)&c->out, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
    uv_close((uv_handle_t *)&c->proc, on_closed);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    check *c = p->data;
    (void)sig;
    c->exited = 1;
    c->exit_status = status;
    uv_timer_stop(&c->timer);
    finish(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    check *c = h->data;
    (void)suggested;
    size_t want = c->len + 65536;
    char *n = c->len < OUTPUT_CAP ? realloc(c->buf, want) : NULL;
    if (!n) {
        *b = uv_buf_init(NULL, 0);
        return;
    }
    c->buf = n;
    *b = uv_buf_init(c->buf + c->len, 65536);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    check *c = s->data;
    (void)b;
    if (n > 0) {
        c->len += (size_t)n;
        return;
    }
    if (n < 0) {
        uv_read_stop(s);
        c->eof = 1;
        finish(c);
    }
}

static void on_timeout(uv_timer_t *t)
{
    check *c = t->data;
    c->timed_out = 1;
    uv_process_kill(&c->proc, SIGKILL);
}

int avo_seedcheck_start(uv_loop_t *loop, const char *worker_bin, const char *cache_dir, const char *problem_dir,
                        const char *target, const char *src, int disassemble, avo_seedcheck_cb cb, void *arg)
{
    check *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    const char *tmp = getenv("TMPDIR");
    if (avo_paths_join(c->path, sizeof c->path, tmp && *tmp ? tmp : "/tmp", "avo-seed-XXXXXX") < 0) {
        free(c);
        return -ENAMETOOLONG;
    }
    int fd = mkstemp(c->path);
    if (fd < 0) {
        free(c);
        return -errno;
    }
    size_t len = strlen(src);
    ssize_t w = write(fd, src, len);
    close(fd);
    if (w != (ssize_t)len) {
        unlink(c->path);
        free(c);
        return -EIO;
    }
    /* The worker compiles for sm_XYa on Hopper and later (wgmma,
     * setmaxnreg), as it does for its own GPU. */
    char arch[32] = "";
    if (strncmp(target, "sm_", 3) == 0)
        snprintf(arch, sizeof arch, "%s%s", target, atoi(target + 3) >= 90 ? "a" : "");
    char *args[12] = {(char *)worker_bin, "eval",   (char *)problem_dir, c->path,
                      "--compile-only",   "--json", "--cache",           (char *)cache_dir};
    int na = 8;
    if (disassemble)
        args[na++] = "--disassemble";
    if (arch[0]) {
        args[na++] = "--gpu-arch";
        args[na++] = arch;
    }
    args[na] = NULL;
    c->cb = cb;
    c->arg = arg;
    uv_pipe_init(loop, &c->out, 0);
    uv_timer_init(loop, &c->timer);
    c->out.data = c->timer.data = c->proc.data = c;
    c->open_handles = 2;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&c->out},
        {.flags = UV_IGNORE},
    };
    uv_process_options_t po = {
        .exit_cb = on_exit_cb, .file = worker_bin, .args = args, .stdio_count = 3, .stdio = stdio};
    int rc = uv_spawn(loop, &c->proc, &po);
    if (rc < 0) {
        /* libuv still wants the failed process handle closed. */
        c->open_handles = 3;
        unlink(c->path);
        uv_close((uv_handle_t *)&c->proc, on_closed);
        uv_close((uv_handle_t *)&c->out, on_closed);
        uv_close((uv_handle_t *)&c->timer, on_closed);
        return rc;
    }
    c->open_handles = 3;
    avo_list_push(&running, &c->link);
    uv_read_start((uv_stream_t *)&c->out, on_alloc, on_read);
    uv_timer_start(&c->timer, on_timeout, CHECK_TIMEOUT_MS, 0);
    return 0;
}

void avo_seedcheck_stop_all(void)
{
    avo_list_each (node, &running) {
        check *c = avo_list_entry(node, check, link);
        c->timed_out = 1;
        uv_timer_stop(&c->timer);
        uv_process_kill(&c->proc, SIGKILL);
    }
}
