/* avoctl's side of the avod API: libcurl over the unix socket, JSON bodies
 * (jansson) and streamed responses. Paths come from the shared route table
 * (proto/avo_routes.h), so the client cannot ask for a route avod lacks. */
#ifndef AVOCTL_HTTP_H
#define AVOCTL_HTTP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "avo_routes.h"

typedef struct avoctl_http avoctl_http;

typedef struct {
    long status;     /* HTTP status; 0 when no answer was received */
    json_t *body;    /* parsed JSON body, owned; NULL if empty or not JSON */
    char error[256]; /* transport failure or why the body is not JSON */
} avoctl_response;

void avoctl_http_response_free(avoctl_response *r);

/* Return 0 to continue, 1 to end the transfer early (not an error), or a
 * negative int to abort it; that value is returned by avoctl_http_stream(). */
typedef int (*avoctl_stream_cb)(const char *data, size_t len, void *arg);

/* To avod on its unix socket, or (base_url set, e.g. "http://host:7460") on
 * its TCP listener with "Authorization: Bearer token". */
int avoctl_http_open(avoctl_http **h, const char *socket_path, const char *base_url, const char *token);
void avoctl_http_close(avoctl_http *h);

/* A flag (set by a signal handler) that ends a stream within about a
 * second: avoctl_http_stream then returns -EINTR. NULL: none. */
void avoctl_http_set_stop(avoctl_http *h, volatile sig_atomic_t *stop);

/* "/v1/jobs/7/events?after=3" from a route, its {id} and an optional query
 * (without '?'). Returns 0 or -ENAMETOOLONG. */
int avoctl_http_route_path(avo_route_id route, int64_t id, const char *query, char *out, size_t len);

/* The same for a route ending in "{name}" (/v1/problems/{name}): name is
 * percent-encoded except for its slashes, which the route keeps. */
int avoctl_http_route_path_name(avo_route_id route, const char *name, char *out, size_t len);

/* One request with the route's method; body may be NULL. Returns 0 when an
 * HTTP answer arrived (whatever its status; see r->status, r->body), or
 * -ECONNREFUSED when avod could not be reached and -EIO when the transfer
 * failed later, with curl's reason in r->error. */
int avoctl_http_call(avoctl_http *h, avo_route_id route, int64_t id, const char *query, const json_t *body,
                     avoctl_response *r);

/* A GET of a "{name}" route (avoctl_http_route_path_name), as avoctl_http_call. */
int avoctl_http_get_name(avoctl_http *h, avo_route_id route, const char *name, avoctl_response *r);

/* A GET whose 2xx body is handed to cb as it arrives (no overall timeout).
 * A non-2xx body is collected and parsed into r->body instead. Returns 0
 * when the server ended the body or cb returned 1, cb's negative value, or
 * the errors of avoctl_http_call(); r->status != 0 tells whether the
 * connection was made before a failure. */
int avoctl_http_stream(avoctl_http *h, avo_route_id route, int64_t id, const char *query, avoctl_stream_cb cb,
                       void *arg, avoctl_response *r);

#endif
