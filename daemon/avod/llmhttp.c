/* Non-blocking HTTP POSTs for LLM calls: libcurl multi driven by the libuv loop (llmhttp.h). */
#include "llmhttp.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BODY ((size_t)16 << 20)

/* One socket curl asked us to watch. Heap-allocated because uv_close
 * finishes later than curl forgets the socket. */
struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    int events;
    avo_llmhttp *h;
    struct sock *prev, *next;
};

struct avo_llmhttp_req {
    avo_llmhttp *h;
    CURL *easy;
    struct curl_slist *hdrs;
    char *buf;
    size_t len, cap;
    int too_large;
    char errbuf[CURL_ERROR_SIZE];
    avo_llmhttp_cb cb;
    void *arg;
    int done; /* its callback has started (or is about to): abort leaves it */
    avo_llmhttp_req *prev, *next;
};

struct avo_llmhttp {
    uv_loop_t *loop;
    CURLM *multi; /* NULL once closed */
    uv_timer_t timer;
    struct sock *socks;    /* being watched (not those already closing) */
    avo_llmhttp_req *reqs; /* added to the multi handle, callback not yet run */
    int open_handles;      /* uv handles not yet through their close callback */
    int closing;
};

static void maybe_free(avo_llmhttp *h)
{
    if (h->closing && h->open_handles == 0)
        free(h);
}

static void sock_closed(uv_handle_t *hd)
{
    struct sock *s = hd->data;
    avo_llmhttp *h = s->h;
    free(s);
    h->open_handles--;
    maybe_free(h);
}

static void sock_close(avo_llmhttp *h, struct sock *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        h->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    /* Stopping now (not in the close callback) matters: curl closes the fd
     * right after CURL_POLL_REMOVE and may get the same number back for a new
     * connection before libuv runs the close callback; libuv refuses a second
     * watcher on an fd that is still registered. */
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, sock_closed);
}

static void timer_closed(uv_handle_t *hd)
{
    avo_llmhttp *h = hd->data;
    h->open_handles--;
    maybe_free(h);
}

static void req_unlink(avo_llmhttp *h, avo_llmhttp_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void req_free(avo_llmhttp_req *r)
{
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->hdrs);
    free(r->buf);
    free(r);
}

static size_t on_write(char *data, size_t size, size_t n, void *ud)
{
    avo_llmhttp_req *r = ud;
    size_t add = size * n;
    if (add > MAX_BODY - r->len) {
        r->too_large = 1;
        return 0; /* anything but add aborts the transfer */
    }
    if (r->len + add + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + add + 1)
            cap *= 2;
        char *nb = realloc(r->buf, cap);
        if (!nb)
            return 0;
        r->buf = nb;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, add);
    r->len += add;
    r->buf[r->len] = 0;
    return add;
}

/* Retry-After is delta-seconds or an HTTP-date (RFC 9110 10.2.3). */
static double retry_after(CURL *e)
{
    struct curl_header *hd = NULL;
    /* request -1: the last response, not a 100 Continue or a redirect */
    if (curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1, &hd) != CURLHE_OK || !hd || !hd->value)
        return -1;
    const char *v = hd->value;
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v >= '0' && *v <= '9') {
        char *end;
        double d = strtod(v, &end);
        while (*end == ' ' || *end == '\t')
            end++;
        return *end ? -1 : d;
    }
    time_t t = curl_getdate(v, NULL);
    if (t == -1)
        return -1;
    double d = difftime(t, time(NULL));
    return d < 0 ? 0 : d;
}

static void complete(avo_llmhttp_req *r, CURLcode rc)
{
    long status = -EIO;
    const char *terr = NULL;
    double ra = -1;

    if (rc == CURLE_OK) {
        long code = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code > 0) {
            status = code;
            ra = retry_after(r->easy);
        } else {
            terr = "no HTTP status in the response";
        }
    } else if (r->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
        terr = "response too large";
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        status = -ETIMEDOUT;
    } else if (rc == CURLE_COULDNT_CONNECT) {
        long oserr = 0;
        curl_easy_getinfo(r->easy, CURLINFO_OS_ERRNO, &oserr);
        if (oserr == ECONNREFUSED)
            status = -ECONNREFUSED;
    }
    if (status < 0 && !terr)
        terr = r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc);
    if (status < 0)
        r->cb(r->arg, status, "", 0, -1, terr);
    else
        r->cb(r->arg, status, r->buf ? r->buf : "", r->len, ra, NULL);
}

/* Runs only outside curl calls, so a callback may post or close. */
static void check_done(avo_llmhttp *h)
{
    CURLMsg *m;
    int left;
    while (h->multi && (m = curl_multi_info_read(h->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        /* m is invalid once the handle is removed: copy what is needed */
        CURL *e = m->easy_handle;
        CURLcode rc = m->data.result;
        char *priv = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, &priv);
        avo_llmhttp_req *r = (avo_llmhttp_req *)priv;
        curl_multi_remove_handle(h->multi, e);
        req_unlink(h, r);
        r->done = 1;
        complete(r, rc);
        req_free(r);
    }
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct sock *s = p->data;
    avo_llmhttp *h = s->h;
    int flags = 0, running;
    if (!h->multi)
        return;
    if (status < 0)
        flags |= CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(h->multi, s->fd, flags, &running);
    check_done(h);
}

static void on_timer(uv_timer_t *t)
{
    avo_llmhttp *h = t->data;
    int running;
    if (!h->multi)
        return;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(h);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    avo_llmhttp *h = userp;
    if (h->closing)
        return 0;
    if (timeout_ms < 0)
        uv_timer_stop(&h->timer);
    else
        /* even 0 goes through the loop: socket_action must not be called
         * from inside this callback */
        uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static int on_curl_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)e;
    avo_llmhttp *h = userp;
    struct sock *s = socketp;

    if (what == CURL_POLL_REMOVE) {
        /* curl forgets socketp itself after REMOVE */
        if (s)
            sock_close(h, s);
        return 0;
    }
    if (h->closing)
        return 0;
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        if (uv_poll_init_socket(h->loop, &s->poll, fd) < 0) {
            free(s);
            return -1;
        }
        s->poll.data = s;
        s->fd = fd;
        s->h = h;
        s->next = h->socks;
        if (h->socks)
            h->socks->prev = s;
        h->socks = s;
        h->open_handles++;
        curl_multi_assign(h->multi, fd, s);
    }
    int ev = 0;
    if (what & CURL_POLL_IN)
        ev |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        ev |= UV_WRITABLE;
    if (ev != s->events) {
        int rc = ev ? uv_poll_start(&s->poll, ev, on_poll) : uv_poll_stop(&s->poll);
        if (rc < 0)
            return -1;
        s->events = ev;
    }
    return 0;
}

int avo_llmhttp_open(avo_llmhttp **out, uv_loop_t *loop)
{
    /* curl_global_init is not thread-safe; avod creates clients on the main thread */
    static int curl_ready;
    int rc = -ENOMEM;
    avo_llmhttp *h = NULL;

    if (!out || !loop)
        return -EINVAL;
    *out = NULL;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return -EIO;
        curl_ready = 1;
    }
    h = calloc(1, sizeof *h);
    if (!h)
        goto cleanup;
    h->loop = loop;
    h->multi = curl_multi_init();
    if (!h->multi)
        goto cleanup;
    if (curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK) {
        rc = -EIO;
        goto cleanup;
    }
    rc = uv_timer_init(loop, &h->timer);
    if (rc < 0)
        goto cleanup;
    h->timer.data = h;
    h->open_handles = 1;
    *out = h;
    return 0;

cleanup:
    if (h && h->multi)
        curl_multi_cleanup(h->multi);
    free(h);
    return rc;
}

void avo_llmhttp_close(avo_llmhttp *h)
{
    if (!h || h->closing)
        return;
    h->closing = 1;
    /* Detach the list first: a callback that posts again is refused, and one
     * that aborts another detached request must find it done. */
    avo_llmhttp_req *r = h->reqs;
    h->reqs = NULL;
    for (avo_llmhttp_req *d = r; d; d = d->next)
        d->done = 1;
    while (r) {
        avo_llmhttp_req *next = r->next;
        curl_multi_remove_handle(h->multi, r->easy);
        r->cb(r->arg, -ECANCELED, "", 0, -1, "request cancelled: client closed");
        req_free(r);
        r = next;
    }
    curl_multi_cleanup(h->multi);
    h->multi = NULL;
    /* Sockets of cached connections may be closed without CURL_POLL_REMOVE. */
    while (h->socks)
        sock_close(h, h->socks);
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, timer_closed);
}

#define SETOPT(opt, val)                                                                                               \
    do {                                                                                                               \
        if (curl_easy_setopt(r->easy, opt, val) != CURLE_OK) {                                                         \
            rc = -EINVAL;                                                                                              \
            goto cleanup;                                                                                              \
        }                                                                                                              \
    } while (0)

int avo_llmhttp_post(avo_llmhttp *h, const char *url, const char *const *headers, const char *body, size_t len,
                     double timeout_s, avo_llmhttp_cb cb, void *arg, avo_llmhttp_req **out)
{
    int rc = -ENOMEM;
    avo_llmhttp_req *r = NULL;

    if (out)
        *out = NULL;
    if (!h || !url || !cb || (!body && len) || !(timeout_s > 0))
        return -EINVAL;
    if (h->closing)
        return -ECANCELED;
    r = calloc(1, sizeof *r);
    if (!r)
        goto cleanup;
    r->h = h;
    r->cb = cb;
    r->arg = arg;
    r->easy = curl_easy_init();
    if (!r->easy)
        goto cleanup;
    /* An empty Expect stops curl waiting up to a second for "100 Continue"
     * before sending bodies over 1 KiB. */
    r->hdrs = curl_slist_append(NULL, "Expect:");
    if (!r->hdrs)
        goto cleanup;
    for (const char *const *p = headers; p && *p; p++) {
        struct curl_slist *n = curl_slist_append(r->hdrs, *p);
        if (!n)
            goto cleanup;
        r->hdrs = n;
    }
    long timeout_ms = timeout_s > 86400.0 * 365 ? 86400L * 365 * 1000 : (long)(timeout_s * 1000.0 + 0.999);
    if (timeout_ms < 1)
        timeout_ms = 1;

    SETOPT(CURLOPT_URL, url);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_PRIVATE, (char *)r);
    SETOPT(CURLOPT_ERRORBUFFER, r->errbuf);
    SETOPT(CURLOPT_HTTPHEADER, r->hdrs);
    /* size first, so COPYPOSTFIELDS copies len bytes, NULs included */
    SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    SETOPT(CURLOPT_COPYPOSTFIELDS, body ? body : "");
    SETOPT(CURLOPT_TIMEOUT_MS, timeout_ms);
    SETOPT(CURLOPT_WRITEFUNCTION, on_write);
    SETOPT(CURLOPT_WRITEDATA, r);
    /* fails early when Content-Length already says too much; on_write caps
     * the rest */
    SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)MAX_BODY);
    SETOPT(CURLOPT_USERAGENT, "avod");
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);

    if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK) {
        rc = -EIO;
        goto cleanup;
    }
    r->next = h->reqs;
    if (h->reqs)
        h->reqs->prev = r;
    h->reqs = r;
    if (out)
        *out = r;
    return 0;

cleanup:
    if (r)
        req_free(r);
    return rc;
}

void avo_llmhttp_abort(avo_llmhttp_req *r)
{
    if (!r || r->done)
        return;
    avo_llmhttp *h = r->h;
    r->done = 1;
    req_unlink(h, r);
    /* Removed before its response completed, the transfer's connection is
     * closed rather than cached (CURL_POLL_REMOVE closes our watcher), and a
     * DONE message it may have queued goes with it, so check_done never sees
     * a freed request. */
    curl_multi_remove_handle(h->multi, r->easy);
    r->cb(r->arg, -ECANCELED, "", 0, -1, "request aborted");
    req_free(r);
}

int avo_llmhttp_answering(const avo_llmhttp_req *r)
{
    long code = 0;
    if (!r || r->done)
        return 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    return code > 0;
}
