/* The LLM HTTP client against a real loopback server (tests/fakes/fake_llm.py):
 * statuses and bodies, Retry-After, timeouts, refused connections, what reached
 * the server, cancellation on close, and concurrent requests; then one
 * provider call on top of it (llmcall: retries, giving up, refusals, bad
 * answers). Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/avod/llmcall.h"
#include "daemon/avod/llmhttp.h"

#define FAKE "tests/fakes/fake_llm.py"

struct res {
    int calls;
    int *total; /* when set: counts calls across requests */
    int order;  /* the value of *total after this call: 1 = first */
    long status;
    char *body;
    size_t len;
    double retry;
    char terr[256];
    int has_terr;
    avo_llmhttp *repost; /* when set: post again from the callback */
    int repost_rc;
};

/* Results live here, not on a test's stack: after a failed assertion the
 * teardown's close still runs their callbacks. */
struct ctx {
    struct res r[2];
    int total;
    uv_loop_t loop;
    avo_llmhttp *h;
    pid_t pid;
    int port;
    char dir[64];
    char script[128];
    char log[128];
    char events[128];
};

static void on_done(void *arg, long status, const char *body, size_t len, double retry_after_s,
                    const char *transport_error)
{
    struct res *r = arg;
    r->calls++;
    if (r->total)
        r->order = ++*r->total;
    r->status = status;
    free(r->body);
    r->body = malloc(len + 1);
    memcpy(r->body, body, len + 1); /* len + 1: the NUL must be there */
    r->len = len;
    r->retry = retry_after_s;
    r->has_terr = transport_error != NULL;
    snprintf(r->terr, sizeof r->terr, "%s", transport_error ? transport_error : "");
    if (r->repost)
        r->repost_rc = avo_llmhttp_post(r->repost, "http://127.0.0.1:1/", NULL, "", 0, 1.0, on_done, r, NULL);
}

static void res_free(struct res *r)
{
    free(r->body);
    r->body = NULL;
}

static void on_deadline(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Run the loop until *count reaches want or seconds pass; returns *count. */
static int run_until(uv_loop_t *loop, const int *count, int want, double seconds)
{
    uv_timer_t t;
    int expired = 0;
    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, on_deadline, (uint64_t)(seconds * 1000), 0);
    while (*count < want && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return *count;
}

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->pid = -1;
    snprintf(c->dir, sizeof c->dir, "/tmp/avo-llmhttp-XXXXXX");
    if (!mkdtemp(c->dir) || uv_loop_init(&c->loop) != 0 || avo_llmhttp_open(&c->h, &c->loop) != 0) {
        free(c);
        return -1;
    }
    snprintf(c->script, sizeof c->script, "%s/script.json", c->dir);
    snprintf(c->log, sizeof c->log, "%s/requests.jsonl", c->dir);
    snprintf(c->events, sizeof c->events, "%s/events.jsonl", c->dir);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    int rc = 0;
    if (c->h)
        avo_llmhttp_close(c->h);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    /* UV_EBUSY here means a handle was left open: a leak */
    if (uv_loop_close(&c->loop) != 0) {
        fprintf(stderr, "loop still has handles after avo_llmhttp_close\n");
        rc = -1;
    }
    if (c->pid > 0) {
        kill(c->pid, SIGTERM);
        waitpid(c->pid, NULL, 0);
    }
    res_free(&c->r[0]);
    res_free(&c->r[1]);
    unlink(c->script);
    unlink(c->log);
    unlink(c->events);
    rmdir(c->dir);
    free(c);
    return rc;
}

/* Start the fake provider with this script; fails the test when it cannot. */
static void fake_start(struct ctx *c, const char *script)
{
    assert_int_equal(access(FAKE, R_OK), 0); /* tests run from the repository root */
    FILE *f = fopen(c->script, "w");
    assert_non_null(f);
    fputs(script, f);
    assert_int_equal(fclose(f), 0);

    int p[2];
    assert_int_equal(pipe(p), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execlp("python3", "python3", FAKE, "--port", "0", "--script", c->script, "--log", c->log, "--events", c->events,
               (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *out = fdopen(p[0], "r");
    assert_non_null(out);
    char line[32] = "";
    char *got = fgets(line, sizeof line, out);
    fclose(out);
    assert_non_null(got);
    c->port = atoi(line);
    assert_true(c->port > 0);
}

static void url(const struct ctx *c, const char *path, char *buf, size_t n)
{
    snprintf(buf, n, "http://127.0.0.1:%d%s", c->port, path);
}

static void test_ok_json(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0];
    char u[128];
    fake_start(c, "[{\"status\": 200, \"body\": {\"id\": \"msg_1\", \"n\": 7}}]");
    url(c, "/v1/messages", u, sizeof u);
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    assert_int_equal(avo_llmhttp_post(c->h, u, hdrs, "{}", 2, 5.0, on_done, r, NULL), 0);
    assert_int_equal(r->calls, 0); /* never from inside post */
    assert_int_equal(run_until(&c->loop, &r->calls, 1, 10), 1);
    assert_int_equal(r->status, 200);
    assert_false(r->has_terr);
    assert_true(r->retry == -1);
    assert_int_equal(strlen(r->body), r->len);
    json_t *j = json_loads(r->body, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "msg_1");
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 7);
    json_decref(j);
}

static void test_request_reaches_server(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0];
    char u[128];
    fake_start(c, "[{\"status\": 200, \"body\": {}}]");
    url(c, "/v1/chat/completions", u, sizeof u);
    const char *hdrs[] = {"Authorization: Bearer sk-test-secret", "x-api-key: sk-ant-secret",
                          "anthropic-version: 2023-06-01", "Content-Type: application/json", NULL};
    /* over 1 KiB, so a waiting "Expect: 100-continue" would show up too */
    char body[2048];
    int n = snprintf(body, sizeof body, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"");
    memset(body + n, 'x', 1500);
    strcpy(body + n + 1500, "\"}]}");
    size_t len = strlen(body);
    assert_int_equal(avo_llmhttp_post(c->h, u, hdrs, body, len, 5.0, on_done, r, NULL), 0);
    assert_int_equal(run_until(&c->loop, &r->calls, 1, 10), 1);
    assert_int_equal(r->status, 200);

    json_error_t err;
    json_t *j = json_load_file(c->log, JSON_DISABLE_EOF_CHECK, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "method")), "POST");
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/v1/chat/completions");
    assert_string_equal(json_string_value(json_object_get(j, "body")), body);
    json_t *h = json_object_get(j, "headers");
    const char *k;
    json_t *v;
    int seen = 0;
    json_object_foreach(h, k, v)
    {
        const char *s = json_string_value(v);
        if (!strcasecmp(k, "authorization") || !strcasecmp(k, "x-api-key")) {
            assert_string_equal(s, "REDACTED");
            seen++;
        } else if (!strcasecmp(k, "anthropic-version")) {
            assert_string_equal(s, "2023-06-01");
            seen++;
        } else if (!strcasecmp(k, "content-type")) {
            assert_string_equal(s, "application/json");
            seen++;
        }
        assert_null(strstr(s, "secret"));
    }
    assert_int_equal(seen, 4);
    json_decref(j);
}

static void test_retry_after(void **state)
{
    struct ctx *c = *state;
    struct res *a = &c->r[0], *b = &c->r[1];
    char u[128], date[64], script[512];
    time_t later = time(NULL) + 100;
    struct tm tm;
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&later, &tm));
    snprintf(script, sizeof script,
             "[{\"status\": 429, \"headers\": {\"Retry-After\": \"2\"}, \"body\": {\"error\": \"rate\"}},"
             " {\"status\": 503, \"headers\": {\"Retry-After\": \"%s\"}, \"body\": {}}]",
             date);
    fake_start(c, script);
    url(c, "/", u, sizeof u);
    /* one after the other: the script hands responses out in arrival order */
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 5.0, on_done, a, NULL), 0);
    assert_int_equal(run_until(&c->loop, &a->calls, 1, 10), 1);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 5.0, on_done, b, NULL), 0);
    assert_int_equal(run_until(&c->loop, &b->calls, 1, 10), 1);
    assert_int_equal(a->status, 429);
    assert_true(a->retry == 2.0);
    assert_string_equal(a->body, "{\"error\": \"rate\"}");
    assert_int_equal(b->status, 503);
    assert_true(b->retry > 90 && b->retry <= 100);
}

static void test_timeout(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0];
    char u[128];
    fake_start(c, "[{\"status\": 200, \"body\": {}, \"delay_s\": 3}]");
    url(c, "/", u, sizeof u);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 0.5, on_done, r, NULL), 0);
    assert_int_equal(run_until(&c->loop, &r->calls, 1, 10), 1);
    assert_int_equal(r->status, -ETIMEDOUT);
    assert_true(r->has_terr);
    assert_int_equal(r->len, 0);
}

static void test_refused(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0];
    /* a port that was just free: bound, never listened on, closed */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    char u[128];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", ntohs(sa.sin_port));
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 5.0, on_done, r, NULL), 0);
    assert_int_equal(run_until(&c->loop, &r->calls, 1, 10), 1);
    assert_int_equal(r->status, -ECONNREFUSED);
    assert_true(r->has_terr);
}

static void test_too_large(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0];
    char u[128];
    size_t big = ((size_t)16 << 20) + 1;
    char *script = malloc(big + 64);
    assert_non_null(script);
    int n = sprintf(script, "[{\"status\": 200, \"raw\": \"");
    memset(script + n, 'a', big);
    strcpy(script + n + big, "\"}]");
    fake_start(c, script);
    free(script);
    url(c, "/", u, sizeof u);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 20.0, on_done, r, NULL), 0);
    assert_int_equal(run_until(&c->loop, &r->calls, 1, 30), 1);
    assert_int_equal(r->status, -EIO);
    assert_string_equal(r->terr, "response too large");
}

static void test_bad_args(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0];
    assert_int_equal(avo_llmhttp_post(c->h, NULL, NULL, "{}", 2, 1.0, on_done, r, NULL), -EINVAL);
    assert_int_equal(avo_llmhttp_post(c->h, "http://127.0.0.1:1/", NULL, "{}", 2, 0, on_done, r, NULL), -EINVAL);
    assert_int_equal(avo_llmhttp_post(c->h, "http://127.0.0.1:1/", NULL, NULL, 2, 1.0, on_done, r, NULL), -EINVAL);
    assert_int_equal(avo_llmhttp_post(c->h, "http://127.0.0.1:1/", NULL, "{}", 2, 1.0, NULL, r, NULL), -EINVAL);
    run_until(&c->loop, &r->calls, 1, 0.2);
    assert_int_equal(r->calls, 0);
}

static void test_close_cancels(void **state)
{
    struct ctx *c = *state;
    struct res *started = &c->r[0], *queued = &c->r[1];
    char u[128];
    fake_start(c, "[{\"status\": 200, \"body\": {}, \"delay_s\": 5}]");
    url(c, "/", u, sizeof u);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 30.0, on_done, started, NULL), 0);
    /* let the first connect and send, so it is waiting on the server */
    int never = 0;
    run_until(&c->loop, &never, 1, 0.5);
    assert_int_equal(started->calls, 0);
    /* the second has not been started by curl yet */
    queued->repost = c->h;
    queued->repost_rc = 1;
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 30.0, on_done, queued, NULL), 0);
    avo_llmhttp_close(c->h);
    c->h = NULL;
    /* callbacks ran inside close, before it returned */
    assert_int_equal(started->calls, 1);
    assert_int_equal(started->status, -ECANCELED);
    assert_int_equal(queued->calls, 1);
    assert_int_equal(queued->status, -ECANCELED);
    assert_int_equal(queued->repost_rc, -ECANCELED); /* no new work while closing */
    /* teardown checks that the loop ends with no handle left */
}

static void test_two_in_flight(void **state)
{
    struct ctx *c = *state;
    struct res *a = &c->r[0], *b = &c->r[1];
    char u[128];
    /* The first request to arrive is answered after 2 s, the second at once:
     * only if both are in flight together does the 201 come back first. */
    fake_start(c, "[{\"status\": 200, \"body\": {\"n\": 1}, \"delay_s\": 2},"
                  " {\"status\": 201, \"body\": {\"n\": 2}}]");
    url(c, "/", u, sizeof u);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{\"a\": 1}", 8, 10.0, on_done, a, NULL), 0);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{\"b\": 2}", 8, 10.0, on_done, b, NULL), 0);
    a->total = b->total = &c->total;
    /* either may finish first */
    assert_int_equal(run_until(&c->loop, &c->total, 2, 20), 2);
    assert_int_equal(a->calls, 1);
    assert_int_equal(b->calls, 1);
    assert_true((a->status == 200 && b->status == 201) || (a->status == 201 && b->status == 200));
    const char *want_a = a->status == 200 ? "{\"n\": 1}" : "{\"n\": 2}";
    const char *want_b = b->status == 200 ? "{\"n\": 1}" : "{\"n\": 2}";
    assert_string_equal(a->body, want_a);
    assert_string_equal(b->body, want_b);
    assert_int_equal((a->order == 1 ? a : b)->status, 201);
}

/* How many requests the fake has received. */
static int log_lines(const struct ctx *c)
{
    int n = 0, ch;
    FILE *f = fopen(c->log, "r");
    while (f && (ch = fgetc(f)) != EOF)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}

/* How many events of this kind the fake has logged. */
static int fake_events(const struct ctx *c, const char *kind)
{
    char want[64], line[512];
    int n = 0;
    snprintf(want, sizeof want, "\"event\": \"%s\"", kind);
    FILE *f = fopen(c->events, "r");
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, want) != NULL;
    if (f)
        fclose(f);
    return n;
}

/* Run the loop until the fake has logged `want` events of this kind, or
 * seconds pass; returns how many it has. */
static int wait_event(struct ctx *c, const char *kind, int want, double seconds)
{
    int n = 0;
    for (int i = 0; i < (int)(seconds * 50) && (n = fake_events(c, kind)) < want; i++) {
        uv_run(&c->loop, UV_RUN_NOWAIT);
        usleep(20000);
    }
    return n;
}

static void test_abort(void **state)
{
    struct ctx *c = *state;
    struct res *r = &c->r[0], *next = &c->r[1];
    avo_llmhttp_req *rq = NULL;
    char u[128];
    fake_start(c, "[{\"status\": 200, \"body\": {\"n\": 1}, \"delay_s\": 20},"
                  " {\"status\": 200, \"body\": {\"n\": 2}}]");
    url(c, "/", u, sizeof u);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 30.0, on_done, r, &rq), 0);
    assert_non_null(rq);
    int never = 0;
    run_until(&c->loop, &never, 1, 0.5); /* sent; the server is sitting on it */
    assert_int_equal(r->calls, 0);
    assert_false(avo_llmhttp_answering(rq));
    avo_llmhttp_abort(rq);
    /* the callback ran inside abort, once */
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->status, -ECANCELED);
    assert_true(r->has_terr);
    /* the connection is closed: the server sees it at once, not after its 20 s */
    assert_int_equal(wait_event(c, "disconnected", 1, 2.0), 1);
    assert_int_equal(fake_events(c, "served"), 0);
    assert_int_equal(r->calls, 1);
    /* the transport carries on: the next request is answered */
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 10.0, on_done, next, NULL), 0);
    assert_int_equal(run_until(&c->loop, &next->calls, 1, 10), 1);
    assert_int_equal(next->status, 200);
    assert_string_equal(next->body, "{\"n\": 2}");
    assert_int_equal(r->calls, 1);
}

/* A request aborted from inside another's callback, while its own answer
 * may be queued in the same pass: it gets exactly one callback. */
struct abort_other {
    struct res *r;
    avo_llmhttp_req *victim;
};

static void on_done_abort(void *arg, long status, const char *body, size_t len, double retry_after_s,
                          const char *transport_error)
{
    struct abort_other *o = arg;
    on_done(o->r, status, body, len, retry_after_s, transport_error);
    avo_llmhttp_abort(o->victim);
}

static void test_abort_from_callback(void **state)
{
    struct ctx *c = *state;
    struct res *a = &c->r[0], *b = &c->r[1];
    avo_llmhttp_req *rb = NULL;
    char u[128];
    fake_start(c,
               "[{\"status\": 200, \"body\": {}, \"delay_s\": 1}, {\"status\": 200, \"body\": {}, \"delay_s\": 20}]");
    url(c, "/", u, sizeof u);
    struct abort_other o = {a, NULL};
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 10.0, on_done_abort, &o, NULL), 0);
    /* the first must reach the server first, to get the quick answer */
    for (int i = 0; i < 250 && !log_lines(c); i++) {
        uv_run(&c->loop, UV_RUN_NOWAIT);
        usleep(20000);
    }
    assert_int_equal(log_lines(c), 1);
    assert_int_equal(avo_llmhttp_post(c->h, u, NULL, "{}", 2, 30.0, on_done, b, &rb), 0);
    o.victim = rb;
    assert_int_equal(run_until(&c->loop, &a->calls, 1, 10), 1);
    assert_int_equal(b->calls, 1);
    assert_int_equal(b->status, -ECANCELED);
    int never = 0;
    run_until(&c->loop, &never, 1, 0.3);
    assert_int_equal(a->calls, 1);
    assert_int_equal(b->calls, 1);
}

/* ---- llmcall ---- */

struct call_res {
    int done;
    int rc;
    int attempts;
    char stop[16];
    char reason[768];
};

static void on_call(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts)
{
    struct call_res *r = arg;
    r->done++;
    r->rc = rc;
    r->attempts = attempts;
    if (reply)
        snprintf(r->stop, sizeof r->stop, "%s", reply->stop);
    snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
}

/* The fake as a provider of this kind. */
static void provider(const struct ctx *c, const char *kind, int retries, avo_llm_provider *p)
{
    char base[96], err[256];
    url(c, "/v1", base, sizeof base);
    json_t *cfg = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i}", "name", "fake", "kind", kind, "model", "m", "base_url", base,
                            "max_retries", retries, "timeout_s", 10);
    assert_int_equal(avo_llm_provider_parse(cfg, p, err, sizeof err), 0);
    json_decref(cfg);
}

static struct call_res call(struct ctx *c, const char *kind, int retries)
{
    char err[256];
    static struct call_res r;
    memset(&r, 0, sizeof r);
    avo_llm_provider p;
    provider(c, kind, retries, &p);
    json_t *conv = json_pack("[{s:s,s:s}]", "role", "user", "text", "hello");
    assert_int_equal(
        avo_llmcall_start(NULL, &c->loop, c->h, &p, "secret-key", conv, NULL, on_call, &r, err, sizeof err), 0);
    assert_int_equal(r.done, 0); /* never from inside start */
    run_until(&c->loop, &r.done, 1, 30);
    json_decref(conv);
    assert_int_equal(r.done, 1);
    return r;
}

static void test_call_retries_then_succeeds(void **state)
{
    struct ctx *c = *state;
    fake_start(
        c, "[{\"status\": 429, \"headers\": {\"Retry-After\": \"0\"}, \"body\": {\"error\": {\"message\": \"slow "
           "down\"}}},"
           " {\"status\": 503, \"headers\": {\"Retry-After\": \"0\"}, \"body\": {\"error\": {\"message\": \"busy\"}}},"
           " {\"status\": 200, \"body\": {\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": null,"
           " \"tool_calls\": [{\"id\": \"t1\", \"type\": \"function\", \"function\": {\"name\": \"compile\","
           " \"arguments\": \"{}\"}}]}, \"finish_reason\": \"tool_calls\"}], \"usage\": {\"prompt_tokens\": 10,"
           " \"completion_tokens\": 2}}}]");
    struct call_res r = call(c, "openai", 3);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.attempts, 3);
    assert_string_equal(r.stop, "tool_use");
}

static void test_call_gives_up(void **state)
{
    struct ctx *c = *state;
    fake_start(
        c, "[{\"status\": 500, \"headers\": {\"Retry-After\": \"0\"}, \"body\": {\"error\": {\"message\": \"boom\"}}},"
           " {\"status\": 500, \"headers\": {\"Retry-After\": \"0\"}, \"body\": {\"error\": {\"message\": \"boom\"}}},"
           " {\"status\": 500, \"headers\": {\"Retry-After\": \"0\"}, \"body\": {\"error\": {\"message\": \"boom\"}}},"
           " {\"status\": 200, \"body\": {}}]");
    struct call_res r = call(c, "openai", 2);
    assert_int_equal(r.rc, -EIO);
    assert_int_equal(r.attempts, 3); /* the first try and two retries, not the fourth answer */
    assert_non_null(strstr(r.reason, "fake answered 500 after 3 attempts: boom"));
}

static void test_call_refused_at_once(void **state)
{
    struct ctx *c = *state;
    fake_start(c, "[{\"status\": 401, \"body\": {\"type\": \"error\", \"error\": {\"type\": \"authentication_error\","
                  " \"message\": \"invalid x-api-key\"}}}]");
    struct call_res r = call(c, "anthropic", 5);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(r.reason, "fake refused the request (401): invalid x-api-key");
    assert_null(strstr(r.reason, "secret-key"));
}

static const char slow_answer[] =
    "[{\"status\": 200, %s, \"body\": {\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": \"late\"},"
    " \"finish_reason\": \"stop\"}], \"usage\": {\"prompt_tokens\": 10, \"completion_tokens\": 2}}}]";

/* One call to the fake, whose answer is held back as `delay` (a field of
 * its script entry) says; *conv must outlive the callback. */
static avo_llmcall *start_slow_call(struct ctx *c, const char *delay, struct call_res *r, json_t **conv)
{
    char script[512], err[256];
    avo_llmcall *call = NULL;
    avo_llm_provider p;
    snprintf(script, sizeof script, slow_answer, delay);
    fake_start(c, script);
    provider(c, "openai", 3, &p);
    *conv = json_pack("[{s:s,s:s}]", "role", "user", "text", "hello");
    assert_int_equal(
        avo_llmcall_start(&call, &c->loop, c->h, &p, "secret-key", *conv, NULL, on_call, r, err, sizeof err), 0);
    return call;
}

static void test_call_cancel_aborts(void **state)
{
    struct ctx *c = *state;
    struct call_res r = {0};
    json_t *conv;
    avo_llmcall *call = start_slow_call(c, "\"delay_s\": 20", &r, &conv);
    int never = 0;
    run_until(&c->loop, &never, 1, 0.5);
    assert_int_equal(r.done, 0);
    avo_llmcall_cancel(call);
    assert_int_equal(r.done, 1); /* at once, not when the answer would have come */
    assert_int_equal(r.rc, -ECANCELED);
    assert_int_equal(wait_event(c, "disconnected", 1, 2.0), 1);
    run_until(&c->loop, &never, 1, 0.3);
    assert_int_equal(r.done, 1);
    assert_int_equal(fake_events(c, "served"), 0);
    json_decref(conv);
}

static void test_call_cancel_keeps_arriving_answer(void **state)
{
    struct ctx *c = *state;
    struct call_res r = {0};
    json_t *conv;
    avo_llmcall *call = start_slow_call(c, "\"body_delay_s\": 1.5", &r, &conv);
    assert_int_equal(wait_event(c, "headers", 1, 5.0), 1);
    int never = 0;
    run_until(&c->loop, &never, 1, 0.3); /* the status line is read */
    avo_llmcall_cancel(call);
    assert_int_equal(r.done, 0); /* generated and billed: it is read, not thrown away */
    assert_int_equal(run_until(&c->loop, &r.done, 1, 10), 1);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.stop, "end");
    /* the fake logs "served" after its flush, which can be after our
     * callback on a loaded machine: wait for it rather than read once */
    assert_int_equal(wait_event(c, "served", 1, 5.0), 1);
    assert_int_equal(fake_events(c, "disconnected"), 0);
    json_decref(conv);
}

static void test_call_bad_answer(void **state)
{
    struct ctx *c = *state;
    fake_start(c, "[{\"status\": 200, \"raw\": \"<html>gateway</html>\"}]");
    struct call_res r = call(c, "anthropic", 5);
    assert_int_equal(r.rc, -EPROTO);
    assert_non_null(strstr(r.reason, "not a JSON object"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ok_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_reaches_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_retries_then_succeeds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_gives_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_refused_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_bad_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_cancel_aborts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_cancel_keeps_arriving_answer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
