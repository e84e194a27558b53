/* avod's HTTP server: libmicrohttpd in external-epoll mode on the libuv loop (http.h). */
#include "http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "avo_list.h"
#include "avo_log.h"

struct avo_http {
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    int listen_fd;
    char path[sizeof((struct sockaddr_un *)0)->sun_path]; /* checked against it in avo_http_start */
    uv_poll_t poll;
    uv_timer_t timer;
    avo_http_handler handler;
    void *arg;
    int tcp; /* a TCP listener: every request needs a bearer token */
    avo_token tokens[AVO_HTTP_MAX_TOKENS];
    int ntokens;
    int stopping;
    int closing_handles;
    avo_list reqs; /* every live request (avo_http_req), for shutdown */
};

struct avo_http_req {
    avo_http *http;
    struct MHD_Connection *conn;
    avo_list link; /* on avo_http.reqs */
    char *method, *path;
    char *body;
    size_t body_len;
    int too_large;
    int unauthorized; /* TCP without a valid token: its body is not even kept */
    avo_peer peer;
    int dispatched;
    int suspended;
    int completed; /* MHD is done with it */
    int refs;
    struct MHD_Response *response;
    unsigned status;
    /* streaming */
    int streaming;
    avo_http_pull_cb pull;
    char *sbuf;
    size_t slen, soff;
    int sended;
    void *data;
    avo_http_close_cb on_close;
};

static void http_kick(avo_http *h);

static void req_free(avo_http_req *r)
{
    if (r->response)
        MHD_destroy_response(r->response);
    free(r->method);
    free(r->path);
    free(r->body);
    free(r->sbuf);
    free(r);
}

static void req_maybe_free(avo_http_req *r)
{
    if (r->completed && r->refs == 0)
        req_free(r);
}

void avo_http_ref(avo_http_req *r)
{
    r->refs++;
}

void avo_http_unref(avo_http_req *r)
{
    r->refs--;
    req_maybe_free(r);
}

int avo_http_gone(const avo_http_req *r)
{
    return r->completed || r->http->stopping;
}

static void req_resume(avo_http_req *r)
{
    if (r->suspended && !r->completed) {
        r->suspended = 0;
        MHD_resume_connection(r->conn);
        http_kick(r->http);
    }
}

static void set_response(avo_http_req *r, unsigned status, struct MHD_Response *resp)
{
    if (r->completed || r->response) {
        MHD_destroy_response(resp);
        return;
    }
    r->status = status;
    r->response = resp;
    req_resume(r);
}

void avo_http_reply_json(avo_http_req *r, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");
    json_decref(body);
    if (!text)
        text = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}");
    size_t len = strlen(text);
    /* Newline-terminated so curl and shells print it cleanly. */
    char *withnl = realloc(text, len + 2);
    if (withnl) {
        withnl[len] = '\n';
        withnl[len + 1] = 0;
        text = withnl;
        len++;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    set_response(r, (unsigned)status, resp);
}

void avo_http_reply_text(avo_http_req *r, int status, const char *content_type, const char *text)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(resp, "Content-Type", content_type);
    set_response(r, (unsigned)status, resp);
}

void avo_http_reply_error(avo_http_req *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    avo_http_reply_json(r, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
}

void avo_http_reply_header(avo_http_req *r, const char *name, const char *value)
{
    if (r->response && !r->completed)
        MHD_add_response_header(r->response, name, value);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    avo_http_req *r = cls;
    (void)pos;
    if (r->slen == r->soff && !r->sended && !r->http->stopping && r->pull)
        r->pull(r);
    if (r->slen > r->soff) {
        size_t n = r->slen - r->soff;
        if (n > max)
            n = max;
        memcpy(buf, r->sbuf + r->soff, n);
        r->soff += n;
        if (r->soff == r->slen)
            r->soff = r->slen = 0;
        return (ssize_t)n;
    }
    if (r->sended || r->http->stopping)
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* Nothing to send yet: park the connection until a write resumes it. */
    r->suspended = 1;
    MHD_suspend_connection(r->conn);
    return 0;
}

int avo_http_stream_start(avo_http_req *r, const char *content_type, avo_http_pull_cb pull)
{
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, r, NULL);
    if (!resp)
        return -ENOMEM;
    MHD_add_response_header(resp, "Content-Type", content_type);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    r->streaming = 1;
    r->pull = pull;
    set_response(r, 200, resp);
    return 0;
}

void avo_http_stream_write(avo_http_req *r, const char *data, size_t len)
{
    if (r->completed || r->sended)
        return;
    char *nb = realloc(r->sbuf, r->slen + len);
    if (!nb)
        return;
    memcpy(nb + r->slen, data, len);
    r->sbuf = nb;
    r->slen += len;
    req_resume(r);
}

void avo_http_stream_end(avo_http_req *r)
{
    r->sended = 1;
    req_resume(r);
}

const char *avo_http_method(const avo_http_req *r)
{
    return r->method;
}
const char *avo_http_path(const avo_http_req *r)
{
    return r->path;
}

const char *avo_http_query(const avo_http_req *r, const char *key)
{
    return r->completed ? NULL : MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *avo_http_header(const avo_http_req *r, const char *key)
{
    return r->completed ? NULL : MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

const char *avo_http_body(const avo_http_req *r, size_t *len)
{
    if (len)
        *len = r->body_len;
    return r->body ? r->body : "";
}

void avo_http_set_data(avo_http_req *r, void *data, avo_http_close_cb on_close)
{
    r->data = data;
    r->on_close = on_close;
}

void *avo_http_data(const avo_http_req *r)
{
    return r->data;
}

static enum MHD_Result queue_pending(avo_http_req *r)
{
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, r->response);
    MHD_destroy_response(r->response);
    r->response = NULL;
    return ret;
}

const avo_peer *avo_http_peer(const avo_http_req *r)
{
    return &r->peer;
}

/* "Bearer TOKEN" against each configured token, in constant time for
 * equal lengths (a token's length is not a secret worth the complexity).
 * The matching token's attributes become the request's peer. */
static int authorized(const avo_http *h, const char *value, avo_peer *peer)
{
    if (!value || strncasecmp(value, "Bearer ", 7) != 0) /* the scheme is case-insensitive (RFC 7235) */
        return 0;
    const char *t = value + 7;
    size_t n = strlen(t);
    int ok = -1;
    for (int i = 0; i < h->ntokens; i++)
        if (strlen(h->tokens[i].token) == n && n > 0 && CRYPTO_memcmp(h->tokens[i].token, t, n) == 0)
            ok = i;
    if (ok < 0)
        return 0;
    peer->tcp = 1;
    memcpy(peer->principal, h->tokens[ok].principal, sizeof peer->principal);
    memcpy(peer->team, h->tokens[ok].team, sizeof peer->team);
    peer->admin = h->tokens[ok].admin;
    return 1;
}

/* The unix peer's credentials as the kernel has them (not as it claims):
 * the uid and gid from SO_PEERCRED, the supplementary groups from
 * SO_PEERGROUPS (Linux 4.13), both taken at connect(). */
static void unix_peer(struct MHD_Connection *conn, avo_peer *peer)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        return;
    peer->have_cred = 1;
    peer->uid = cr.uid;
    peer->gid = cr.gid;
    len = sizeof peer->groups;
    if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERGROUPS, peer->groups, &len) == 0)
        peer->ngroups = (int)(len / sizeof(gid_t));
    else
        peer->ngroups = -1; /* too many, or an old kernel: ident.c asks the group database */
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    avo_http *h = cls;
    avo_http_req *r = *con_cls;
    (void)version;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->http = h;
        r->conn = conn;
        r->method = strdup(method);
        r->path = strdup(url);
        avo_list_push(&h->reqs, &r->link);
        *con_cls = r;
        /* Headers are all here on the first call: decide before any body is
         * read into memory on a stranger's behalf. */
        if (h->tcp)
            r->unauthorized = !authorized(h, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
                                          &r->peer);
        else
            unix_peer(conn, &r->peer);
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->unauthorized) {
            /* discarded */
        } else if (r->body_len + *upload_size > AVO_HTTP_MAX_BODY) {
            r->too_large = 1;
        } else if (!r->too_large) {
            char *nb = realloc(r->body, r->body_len + *upload_size + 1);
            if (!nb)
                return MHD_NO;
            memcpy(nb + r->body_len, upload, *upload_size);
            r->body = nb;
            r->body_len += *upload_size;
            r->body[r->body_len] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->response)
        return queue_pending(r);
    if (h->stopping)
        return MHD_NO;
    if (!r->dispatched) {
        r->dispatched = 1;
        if (r->unauthorized) {
            avo_http_reply_error(r, 401, "unauthorized",
                                 "this listener needs 'Authorization: Bearer TOKEN' with a token from avod's "
                                 "token file");
            MHD_add_response_header(r->response, "WWW-Authenticate", "Bearer realm=\"avod\"");
        } else if (r->too_large)
            avo_http_reply_error(r, 413, "too_large", "request body over %d bytes", AVO_HTTP_MAX_BODY);
        else
            h->handler(h->arg, r);
        if (r->response)
            return queue_pending(r);
    }
    /* The handler answers later. */
    r->suspended = 1;
    MHD_suspend_connection(conn);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    avo_http_req *r = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (!r)
        return;
    *con_cls = NULL;
    avo_list_remove(&r->link);
    r->completed = 1;
    /* The close callback may drop the owner's last reference. */
    r->refs++;
    if (r->on_close)
        r->on_close(r);
    r->refs--;
    req_maybe_free(r);
}

static void on_timer(uv_timer_t *t);

static void http_run(avo_http *h)
{
    if (!h->mhd)
        return;
    MHD_run(h->mhd);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->mhd, &ms) == MHD_YES)
        uv_timer_start(&h->timer, on_timer, ms > 60000 ? 60000 : ms, 0);
    else
        uv_timer_start(&h->timer, on_timer, 1000, 0);
}

static void on_timer(uv_timer_t *t)
{
    http_run(t->data);
}

/* A resumed connection is only served by the next MHD_run. */
static void http_kick(avo_http *h)
{
    if (h->mhd)
        uv_timer_start(&h->timer, on_timer, 0, 0);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    http_run(p->data);
}

/* MHD on the listening socket in h->listen_fd, driven from the loop. */
static int serve(avo_http *h, const char *what, char *err, size_t errlen)
{
    h->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_access, h,
                              MHD_OPTION_LISTEN_SOCKET, h->listen_fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
                              MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "cannot start the HTTP server on %s", what);
        return -EIO;
    }
    h->listen_fd = -1; /* MHD's now: stopping it closes the socket */
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info) {
        snprintf(err, errlen, "libmicrohttpd has no epoll support");
        return -EIO;
    }
    uv_poll_init(h->loop, &h->poll, info->epoll_fd);
    h->poll.data = h;
    uv_poll_start(&h->poll, UV_READABLE, on_poll);
    uv_timer_init(h->loop, &h->timer);
    h->timer.data = h;
    http_kick(h);
    return 0;
}

/* Undo a failed start: MHD closes the socket when it had it, we otherwise. */
static void start_failed(avo_http *h)
{
    if (h->mhd)
        MHD_stop_daemon(h->mhd);
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    OPENSSL_cleanse(h->tokens, sizeof h->tokens);
    free(h);
}

int avo_http_start(avo_http **out, uv_loop_t *loop, const char *socket_path, avo_http_handler handler, void *arg,
                   char *err, size_t errlen)
{
    avo_http *h = calloc(1, sizeof *h);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!h)
        return -ENOMEM;
    avo_list_init(&h->reqs);
    h->loop = loop;
    h->handler = handler;
    h->arg = arg;
    h->listen_fd = -1;
    if (strlen(socket_path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "socket path %s is longer than %zu bytes; choose a shorter AVO_HOME", socket_path,
                 sizeof sa.sun_path - 1);
        free(h);
        return -ENAMETOOLONG;
    }
    snprintf(h->path, sizeof h->path, "%s", socket_path);
    strcpy(sa.sun_path, socket_path);

    /* The state-directory lock is held, so a socket file here is stale. */
    unlink(socket_path);
    h->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (h->listen_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(socket_path, 0660) < 0 ||
        listen(h->listen_fd, 128) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", socket_path, strerror(errno));
        goto fail;
    }
    if (serve(h, socket_path, err, errlen) < 0)
        goto fail;
    *out = h;
    return 0;
fail:
    start_failed(h);
    unlink(socket_path);
    return -EIO;
}

int avo_http_set_tokens(avo_http *h, const avo_token *tokens, int n)
{
    if (n < 1 || n > AVO_HTTP_MAX_TOKENS)
        return -EINVAL;
    OPENSSL_cleanse(h->tokens, sizeof h->tokens);
    memcpy(h->tokens, tokens, (size_t)n * sizeof *tokens);
    h->ntokens = n;
    return 0;
}

int avo_http_socket_group(avo_http *h, gid_t gid, char *err, size_t errlen)
{
    if (h->tcp || chown(h->path, (uid_t)-1, gid) < 0) {
        int e = h->tcp ? EINVAL : errno;
        snprintf(err, errlen, "socket-group: cannot give %s to group %u: %s", h->path, (unsigned)gid,
                 h->tcp ? "not a unix socket" : strerror(e));
        return -e;
    }
    return 0;
}

int avo_http_start_tcp(avo_http **out, uv_loop_t *loop, const char *addr, const avo_token *tokens, int ntokens,
                       avo_http_handler handler, void *arg, char *err, size_t errlen)
{
    char host[256], port[16];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host || strlen(colon + 1) >= sizeof port ||
        !colon[1]) {
        snprintf(err, errlen, "listen: '%s' is not HOST:PORT (e.g. 127.0.0.1:7460, [::1]:7460)", addr);
        return -EINVAL;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    snprintf(port, sizeof port, "%s", colon + 1);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    if (ntokens < 1) {
        snprintf(err, errlen, "listen %s: a TCP listener needs a token file (--token-file) with at least one token",
                 addr);
        return -EINVAL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "listen %s: %s", addr, gai_strerror(gai));
        return -EINVAL;
    }
    avo_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return -ENOMEM;
    }
    avo_list_init(&h->reqs);
    h->loop = loop;
    h->handler = handler;
    h->arg = arg;
    h->tcp = 1;
    avo_http_set_tokens(h, tokens, ntokens);
    int one = 1;
    h->listen_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (h->listen_fd < 0 || setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(h->listen_fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(h->listen_fd, 128) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(errno));
        freeaddrinfo(ai);
        goto fail;
    }
    freeaddrinfo(ai);
    if (serve(h, addr, err, errlen) < 0)
        goto fail;
    *out = h;
    return 0;
fail:
    start_failed(h);
    return -EIO;
}

static void handle_closed(uv_handle_t *hd)
{
    avo_http *h = hd->data;
    if (--h->closing_handles == 0)
        free(h);
}

void avo_http_stop(avo_http *h)
{
    if (!h)
        return;
    h->stopping = 1;
    /* MHD must not be stopped with suspended connections: wake them, let one
     * pass of MHD_run close them, then stop. */
    avo_list_each (node, &h->reqs) {
        req_resume(avo_list_entry(node, avo_http_req, link));
    }
    MHD_run(h->mhd);
    /* Quiesced, MHD hands the listening socket back instead of closing it. */
    MHD_socket lfd = MHD_quiesce_daemon(h->mhd);
    MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    if (!h->tcp)
        unlink(h->path);
    OPENSSL_cleanse(h->tokens, sizeof h->tokens);
    h->closing_handles = 2;
    uv_poll_stop(&h->poll);
    uv_close((uv_handle_t *)&h->poll, handle_closed);
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, handle_closed);
}
