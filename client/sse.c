/* Incremental server-sent events parser for `avoctl watch` streams (sse.h). */
#include "sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void avoctl_sse_init(avoctl_sse *p)
{
    memset(p, 0, sizeof *p);
    p->retry_ms = -1;
    p->limit = AVOCTL_SSE_LIMIT;
}

void avoctl_sse_free(avoctl_sse *p)
{
    avoctl_buf_free(&p->line);
    avoctl_buf_free(&p->data);
    avoctl_buf_free(&p->event);
    avoctl_buf_free(&p->id);
}

static int dispatch(avoctl_sse *p, avoctl_sse_cb cb, void *arg)
{
    int rc = 0;

    /* Per the spec an event without data is not dispatched, and the type
     * does not carry over to the next event either way. */
    if (p->data.len > 0) {
        p->data.len--; /* drop the '\n' appended after the last data line */
        p->data.p[p->data.len] = 0;
        avoctl_sse_event ev = {
            .id = p->id.p ? p->id.p : "",
            .event = p->event.len ? p->event.p : "message",
            .data = p->data.p,
            .data_len = p->data.len,
        };
        rc = cb(&ev, arg);
    }
    avoctl_buf_clear(&p->data);
    avoctl_buf_clear(&p->event);
    return rc;
}

static int field(avoctl_sse *p, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    size_t nlen = colon ? (size_t)(colon - line) : len;
    const char *val = colon ? colon + 1 : line + len;
    size_t vlen = len - (size_t)(val - line);
    int rc;

    if (vlen && *val == ' ') {
        val++;
        vlen--;
    }
#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(line, lit, nlen) == 0)
    if (IS("data")) {
        if ((rc = avoctl_buf_append(&p->data, val, vlen, p->limit)) < 0)
            return rc;
        return avoctl_buf_append(&p->data, "\n", 1, p->limit);
    }
    if (IS("event")) {
        avoctl_buf_clear(&p->event);
        return avoctl_buf_append(&p->event, val, vlen, p->limit);
    }
    if (IS("id")) {
        if (memchr(val, 0, vlen))
            return 0; /* the spec ignores ids containing NUL */
        avoctl_buf_clear(&p->id);
        return avoctl_buf_append(&p->id, val, vlen, p->limit);
    }
    if (IS("retry")) {
        long ms = 0;
        for (size_t i = 0; i < vlen; i++) {
            if (val[i] < '0' || val[i] > '9' || ms > 100000000)
                return 0;
            ms = ms * 10 + (val[i] - '0');
        }
        if (vlen)
            p->retry_ms = ms;
    }
#undef IS
    return 0; /* unknown fields are ignored, so servers can extend the format */
}

static int line_done(avoctl_sse *p, const char *line, size_t len, avoctl_sse_cb cb, void *arg)
{
    if (len == 0)
        return dispatch(p, cb, arg);
    if (line[0] == ':')
        return 0; /* comment: keep-alives */
    return field(p, line, len);
}

int avoctl_sse_feed(avoctl_sse *p, const char *buf, size_t len, avoctl_sse_cb cb, void *arg)
{
    size_t i = 0;
    int rc;

    if (p->after_cr && len > 0) {
        p->after_cr = 0;
        if (buf[0] == '\n')
            i = 1;
    }
    while (i < len) {
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        if (j == len) {
            /* No terminator in this chunk: keep the fragment for the next. */
            return avoctl_buf_append(&p->line, buf + i, j - i, p->limit);
        }
        const char *line = buf + i;
        size_t llen = j - i;
        if (p->line.len) {
            if ((rc = avoctl_buf_append(&p->line, buf + i, j - i, p->limit)) < 0)
                return rc;
            line = p->line.p;
            llen = p->line.len;
        }
        if (buf[j] == '\r') {
            if (j + 1 < len) {
                if (buf[j + 1] == '\n')
                    j++;
            } else {
                p->after_cr = 1;
            }
        }
        i = j + 1;
        rc = line_done(p, line, llen, cb, arg);
        avoctl_buf_clear(&p->line);
        if (rc)
            return rc;
    }
    return 0;
}
