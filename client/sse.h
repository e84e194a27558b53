/* Incremental parser for a text/event-stream body (the WHATWG server-sent
 * events format). It is pure: bytes in, events out through a callback, no
 * I/O, so it can be fed whatever chunking the transport produces and tested
 * without a server. */
#ifndef AVOCTL_SSE_H
#define AVOCTL_SSE_H

#include <stddef.h>

#include "buf.h"

typedef struct {
    const char *id;    /* last event id seen on this stream, "" if none */
    const char *event; /* event type, "message" when the stream named none */
    const char *data;  /* data lines joined by '\n', NUL-terminated */
    size_t data_len;
} avoctl_sse_event;

/* Return 0 to go on, anything else to stop: avoctl_sse_feed() then returns
 * that value at once and the rest of the chunk is not parsed. */
typedef int (*avoctl_sse_cb)(const avoctl_sse_event *ev, void *arg);

typedef struct {
    avoctl_buf line; /* the line being read (may span chunks) */
    avoctl_buf data;
    avoctl_buf event;
    avoctl_buf id;
    long retry_ms; /* last "retry:" value, -1 if none */
    int after_cr;  /* the previous chunk ended in CR: a leading LF is its pair */
    size_t limit;  /* max bytes for one line or one event's data */
} avoctl_sse;

#define AVOCTL_SSE_LIMIT (16u << 20)

void avoctl_sse_init(avoctl_sse *p);
/* Parse len bytes. Returns 0, the callback's nonzero value, -E2BIG when a
 * line or an event exceeds the limit, or -ENOMEM. */
int avoctl_sse_feed(avoctl_sse *p, const char *buf, size_t len, avoctl_sse_cb cb, void *arg);
void avoctl_sse_free(avoctl_sse *p);

#endif
