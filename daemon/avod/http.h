/* HTTP/1.1 server on a unix socket: libmicrohttpd in external-epoll mode,
 * driven from the libuv loop (a uv_poll on MHD's epoll fd plus a uv_timer for
 * MHD's timeouts). Handlers may answer at once or later: a request that has
 * no answer when its handler returns is suspended and resumed by the reply,
 * so a slow database never blocks the loop. Streams (server-sent events) pull
 * data through a callback and are suspended while they have none. */
#ifndef AVO_HTTP_H
#define AVO_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

typedef struct avo_http avo_http;
typedef struct avo_http_req avo_http_req;

typedef void (*avo_http_handler)(void *arg, avo_http_req *req);
/* A stream has sent everything it had; produce more now or later with
 * avo_http_stream_write/_end. */
typedef void (*avo_http_pull_cb)(avo_http_req *req);
/* The request is finished (answered, or the client went away). */
typedef void (*avo_http_close_cb)(avo_http_req *req);

#define AVO_HTTP_MAX_BODY (1 << 20)

int avo_http_start(avo_http **out, uv_loop_t *loop, const char *socket_path, avo_http_handler handler, void *arg,
                   char *err, size_t errlen);
#include <sys/types.h>

#include "avo_tokens.h"

/* Bearer tokens of a TCP listener (proto/avo_tokens.h reads them). */
#define AVO_HTTP_MAX_TOKENS AVO_TOKENS_MAX
#define AVO_PEER_MAX_GROUPS 256

/* Who sent a request, as the transport knows it: on the unix socket the
 * peer's credentials (SO_PEERCRED, SO_PEERGROUPS), on TCP the attributes of
 * the token it presented. ident.h turns this into a principal. */
typedef struct {
    int tcp;
    /* TCP: the token's line (avo_tokens.h); principal "" = a bare line */
    char principal[AVO_PRINCIPAL_MAX + 1];
    char team[AVO_PRINCIPAL_MAX + 1];
    int admin;
    /* unix socket: have_cred 0 when the kernel would not say */
    int have_cred;
    uid_t uid;
    gid_t gid;
    int ngroups; /* -1: the kernel would not give them */
    gid_t groups[AVO_PEER_MAX_GROUPS];
} avo_peer;

/* A TCP listener on HOST:PORT ("127.0.0.1:7460", "[::]:7460"): the same
 * handler, but every request must carry "Authorization: Bearer TOKEN" with
 * one of the tokens, or gets 401 unauthorized (the token is never logged). */
int avo_http_start_tcp(avo_http **out, uv_loop_t *loop, const char *addr, const avo_token *tokens, int ntokens,
                       avo_http_handler handler, void *arg, char *err, size_t errlen);
/* Replace the tokens (a reload: rotation). 0 or -EINVAL for none. */
int avo_http_set_tokens(avo_http *h, const avo_token *tokens, int n);
/* The unix socket's group (chgrp): whoever is in it may connect (0660). */
int avo_http_socket_group(avo_http *h, gid_t gid, char *err, size_t errlen);

/* Ends streams, drops pending requests and closes the socket. */
void avo_http_stop(avo_http *h);

const char *avo_http_method(const avo_http_req *r);
const char *avo_http_path(const avo_http_req *r);
const char *avo_http_query(const avo_http_req *r, const char *key);
const char *avo_http_header(const avo_http_req *r, const char *key);
const char *avo_http_body(const avo_http_req *r, size_t *len);
/* The sender, read when the request arrived. */
const avo_peer *avo_http_peer(const avo_http_req *r);

/* Per-request user data and close notification. */
void avo_http_set_data(avo_http_req *r, void *data, avo_http_close_cb on_close);
void *avo_http_data(const avo_http_req *r);
/* Keep the request object alive across asynchronous work; an unref'd request
 * whose client has gone is freed. */
void avo_http_ref(avo_http_req *r);
void avo_http_unref(avo_http_req *r);
int avo_http_gone(const avo_http_req *r);

/* Answer with JSON; body is stolen. */
void avo_http_reply_json(avo_http_req *r, int status, json_t *body);
/* Answer with text of the given content type (copied). */
void avo_http_reply_text(avo_http_req *r, int status, const char *content_type, const char *text);
/* A header on the answer just given (e.g. Allow beside a 405), called
 * before the handler returns; nothing once the answer is on its way. */
void avo_http_reply_header(avo_http_req *r, const char *name, const char *value);
/* Answer {"error":{"code","message"}}. */
void avo_http_reply_error(avo_http_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

int avo_http_stream_start(avo_http_req *r, const char *content_type, avo_http_pull_cb pull);
void avo_http_stream_write(avo_http_req *r, const char *data, size_t len);
void avo_http_stream_end(avo_http_req *r);

#endif
