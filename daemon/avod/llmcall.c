/* One LLM provider call on the loop: build, post, retry, parse (llmcall.h). */
#include "llmcall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct avo_llmcall {
    uv_timer_t timer; /* the wait before a retry */
    avo_llmhttp *http;
    avo_llm_provider p;
    avo_llm_request req;
    avo_llmcall_cb cb;
    avo_llmcall_retry_cb on_retry;
    void *arg;
    int attempts;
    avo_llmhttp_req *rq; /* the request in flight, if any */
    int cancelled;
    int done;
    uint64_t rng;
};

static void on_closed(uv_handle_t *h)
{
    avo_llmcall *c = h->data;
    avo_llm_request_free(&c->req);
    free(c);
}

static void finish(avo_llmcall *c, int rc, avo_llm_reply *reply, const char *reason)
{
    if (c->done)
        return;
    c->done = 1;
    c->cb(c->arg, rc, reply, reason, c->attempts);
    uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void on_response(void *arg, long status, const char *body, size_t len, double retry_after_s,
                        const char *transport_error);

static int post(avo_llmcall *c)
{
    c->attempts++;
    int rc = avo_llmhttp_post(c->http, c->req.url, (const char *const *)c->req.headers, c->req.body,
                              strlen(c->req.body), c->p.timeout_s, on_response, c, &c->rq);
    return rc;
}

static void on_retry(uv_timer_t *t)
{
    avo_llmcall *c = t->data;
    char reason[768];
    int rc = post(c);
    if (rc < 0) {
        snprintf(reason, sizeof reason, "cannot send the request to %s: %s", c->p.name[0] ? c->p.name : c->req.url,
                 strerror(-rc));
        finish(c, rc, NULL, reason);
    }
}

static void on_response(void *arg, long status, const char *body, size_t len, double retry_after_s,
                        const char *transport_error)
{
    avo_llmcall *c = arg;
    char reason[768], msg[512];
    c->rq = NULL;
    /* A cancelled call still hands over an answer that came (see
     * avo_llmcall_cancel); anything else ends it, retries included. */
    if (status == -ECANCELED || (c->cancelled && !(status >= 200 && status < 300))) {
        finish(c, -ECANCELED, NULL, "cancelled");
        return;
    }
    if (status >= 200 && status < 300) {
        avo_llm_reply reply;
        char err[256];
        if (avo_llm_reply_parse(&c->p, body, len, &reply, err, sizeof err) < 0) {
            snprintf(reason, sizeof reason, "%s answered %ld but %s", c->p.name[0] ? c->p.name : "the provider", status,
                     err);
            finish(c, -EPROTO, NULL, reason);
            return;
        }
        finish(c, 0, &reply, NULL);
        avo_llm_reply_free(&reply);
        return;
    }
    if (status < 0)
        snprintf(msg, sizeof msg, "%s", transport_error && *transport_error ? transport_error : strerror((int)-status));
    else
        avo_llm_error_message(body, len, msg, sizeof msg);
    if (avo_llm_retryable(status) && c->attempts <= c->p.max_retries) {
        double wait = avo_llm_retry_delay(c->attempts, retry_after_s, &c->rng);
        uv_timer_start(&c->timer, on_retry, (uint64_t)(wait * 1000), 0);
        if (c->on_retry)
            c->on_retry(c->arg, c->attempts, status, msg, wait);
        return;
    }
    const char *who = c->p.name[0] ? c->p.name : "the provider";
    if (status < 0)
        snprintf(reason, sizeof reason, "%s unreachable after %d attempt%s: %s", who, c->attempts,
                 c->attempts == 1 ? "" : "s", msg);
    else if (avo_llm_retryable(status))
        snprintf(reason, sizeof reason, "%s answered %ld after %d attempts: %s", who, status, c->attempts, msg);
    else
        snprintf(reason, sizeof reason, "%s refused the request (%ld): %s", who, status, msg);
    finish(c, status < 0 ? (int)status : -EIO, NULL, reason);
}

int avo_llmcall_start(avo_llmcall **out, uv_loop_t *loop, avo_llmhttp *http, const avo_llm_provider *p, const char *key,
                      json_t *conversation, json_t *tools, avo_llmcall_cb cb, void *arg, char *err, size_t errlen)
{
    avo_llmcall *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = avo_llm_request_build(p, key, conversation, tools, &c->req, err, errlen);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->http = http;
    c->p = *p;
    c->cb = cb;
    c->arg = arg;
    c->rng = (uint64_t)(uintptr_t)c ^ uv_hrtime();
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    if ((rc = post(c)) < 0) {
        snprintf(err, errlen, "cannot send the request: %s", strerror(-rc));
        c->done = 1;
        uv_close((uv_handle_t *)&c->timer, on_closed);
        return rc;
    }
    if (out)
        *out = c;
    return 0;
}

void avo_llmcall_on_retry(avo_llmcall *c, avo_llmcall_retry_cb cb)
{
    c->on_retry = cb;
}

void avo_llmcall_cancel(avo_llmcall *c)
{
    if (!c || c->done)
        return;
    c->cancelled = 1;
    if (!c->rq) {
        uv_timer_stop(&c->timer);
        finish(c, -ECANCELED, NULL, "cancelled");
    } else if (!avo_llmhttp_answering(c->rq)) {
        avo_llmhttp_abort(c->rq); /* on_response runs now, and finishes */
    }
    /* else the answer is arriving: the provider has generated it and bills
     * it, so it is read and handed over rather than thrown away, and the
     * caller can account for it. */
}
