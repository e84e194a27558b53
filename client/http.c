/* avoctl's HTTP client for the avod API: libcurl on the unix socket or TCP (http.h). */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>

#include "buf.h"

/* Plenty for any job list; a larger answer means something is wrong. */
#define BODY_LIMIT (64u << 20)
#define CONNECT_TIMEOUT_MS 5000L
#define CALL_TIMEOUT_S 120L

struct avoctl_http {
    CURL *curl;
    char *socket;
    char base[512]; /* "http://avod" on the socket, else the TCP listener's URL */
    char auth[300]; /* "Authorization: Bearer ..." or "" */
    int tcp;
    char errbuf[CURL_ERROR_SIZE];
    volatile sig_atomic_t *stop; /* set by a signal handler: end a stream */
};

typedef struct {
    avoctl_http *h;
    avoctl_buf body;
    avoctl_stream_cb cb; /* NULL: collect everything */
    void *arg;
    int cb_rc; /* why the transfer was cut short by us */
    int too_large;
} transfer;

void avoctl_http_response_free(avoctl_response *r)
{
    json_decref(r->body);
    r->body = NULL;
}

int avoctl_http_open(avoctl_http **out, const char *socket_path, const char *base_url, const char *token)
{
    avoctl_http *h = NULL;

    /* curl_global_init is reference counted; the matching cleanup is in close. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -ENOMEM;
    h = calloc(1, sizeof *h);
    if (!h)
        goto fail;
    h->socket = strdup(socket_path ? socket_path : "");
    h->tcp = base_url && *base_url;
    snprintf(h->base, sizeof h->base, "%s", h->tcp ? base_url : "http://avod");
    for (size_t n = strlen(h->base); n > 0 && h->base[n - 1] == '/'; n--)
        h->base[n - 1] = 0;
    if (token && *token)
        snprintf(h->auth, sizeof h->auth, "Authorization: Bearer %s", token);
    h->curl = curl_easy_init();
    if (!h->socket || !h->curl)
        goto fail;
    *out = h;
    return 0;
fail:
    if (h) {
        free(h->socket);
        if (h->curl)
            curl_easy_cleanup(h->curl);
        free(h);
    }
    curl_global_cleanup();
    return -ENOMEM;
}

void avoctl_http_close(avoctl_http *h)
{
    if (!h)
        return;
    curl_easy_cleanup(h->curl);
    free(h->socket);
    memset(h->auth, 0, sizeof h->auth);
    free(h);
    curl_global_cleanup();
}

int avoctl_http_route_path(avo_route_id route, int64_t id, const char *query, char *out, size_t len)
{
    const char *pat = avo_routes[route].pattern;
    const char *slot = strstr(pat, "{id}");
    int n;

    if (slot)
        n = snprintf(out, len, "%.*s%lld%s", (int)(slot - pat), pat, (long long)id, slot + 4);
    else
        n = snprintf(out, len, "%s", pat);
    if (n >= 0 && (size_t)n < len && query && *query)
        n += snprintf(out + n, len - (size_t)n, "?%s", query);
    return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int avoctl_http_route_path_name(avo_route_id route, const char *name, char *out, size_t len)
{
    const char *pat = avo_routes[route].pattern;
    const char *slot = strstr(pat, "{name}");
    size_t n = slot ? (size_t)(slot - pat) : strlen(pat);
    if (n >= len)
        return -ENAMETOOLONG;
    memcpy(out, pat, n);
    for (const unsigned char *c = (const unsigned char *)(slot ? name : ""); *c; c++) {
        const int keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                         strchr("/-_.~", *c);
        if (n + (keep ? 1 : 3) >= len)
            return -ENAMETOOLONG;
        n += keep ? (size_t)snprintf(out + n, len - n, "%c", *c) : (size_t)snprintf(out + n, len - n, "%%%02X", *c);
    }
    out[n] = 0;
    return 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    transfer *t = userdata;
    size_t n = size * nmemb;
    long status = 0;

    curl_easy_getinfo(t->h->curl, CURLINFO_RESPONSE_CODE, &status);
    if (t->cb && status >= 200 && status < 300) {
        int rc = t->cb(ptr, n, t->arg);
        if (rc != 0) {
            t->cb_rc = rc;
            return CURL_WRITEFUNC_ERROR; /* any count != n makes curl stop */
        }
        return n;
    }
    if (avoctl_buf_append(&t->body, ptr, n, BODY_LIMIT) < 0) {
        t->too_large = 1;
        return CURL_WRITEFUNC_ERROR;
    }
    return n;
}

void avoctl_http_set_stop(avoctl_http *h, volatile sig_atomic_t *stop)
{
    h->stop = stop;
}

/* curl calls this about once a second even on an idle stream, so a stop
 * asked for by a signal ends the transfer without waiting for data. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    const avoctl_http *h = arg;
    return h->stop && *h->stop;
}

static int perform(avoctl_http *h, avo_route_id route, int64_t id, const char *name, const char *query,
                   const json_t *body, avoctl_stream_cb cb, void *arg, avoctl_response *r)
{
    transfer t = {.h = h, .cb = cb, .arg = arg};
    struct curl_slist *hdrs = NULL;
    char *payload = NULL;
    char url[1024];
    const char *method = avo_routes[route].method;
    int rc = 0;
    CURLcode cc;

    memset(r, 0, sizeof *r);
    snprintf(url, sizeof url, "%s", h->base);
    if ((name ? avoctl_http_route_path_name(route, name, url + strlen(url), sizeof url - strlen(url))
              : avoctl_http_route_path(route, id, query, url + strlen(url), sizeof url - strlen(url))) < 0) {
        snprintf(r->error, sizeof r->error, "request path too long");
        return -ENAMETOOLONG;
    }

    CURL *c = h->curl;
    curl_easy_reset(c);
    h->errbuf[0] = 0;
    if (!h->tcp)
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, h->socket);
    if (h->auth[0])
        hdrs = curl_slist_append(hdrs, h->auth);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "avoctl");
    if (!cb)
        curl_easy_setopt(c, CURLOPT_TIMEOUT, CALL_TIMEOUT_S);
    if (cb && h->stop) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
    }

    hdrs = curl_slist_append(hdrs, cb ? "Accept: text/event-stream" : "Accept: application/json");
    /* Expect: 100-continue would stall large specs for a second. */
    hdrs = hdrs ? curl_slist_append(hdrs, "Expect:") : NULL;
    if (strcmp(method, "POST") == 0) {
        payload = body ? json_dumps(body, JSON_COMPACT) : strdup("");
        hdrs = hdrs ? curl_slist_append(hdrs, "Content-Type: application/json") : NULL;
        if (!payload || !hdrs) {
            rc = -ENOMEM;
            goto cleanup;
        }
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    if (!hdrs) {
        rc = -ENOMEM;
        goto cleanup;
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);

    cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (t.cb_rc) {
        rc = t.cb_rc > 0 ? 0 : t.cb_rc;
        goto cleanup;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK && h->stop && *h->stop) {
        snprintf(r->error, sizeof r->error, "interrupted");
        rc = -EINTR;
        goto cleanup;
    }
    if (cc != CURLE_OK) {
        long os_errno = 0;
        curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
        if (t.too_large)
            snprintf(r->error, sizeof r->error, "answer too large");
        else if (cc == CURLE_COULDNT_CONNECT && os_errno)
            /* curl's own text names a TCP port, which misleads for a socket file. */
            snprintf(r->error, sizeof r->error, "%s (%s)", curl_easy_strerror(cc), strerror((int)os_errno));
        else
            snprintf(r->error, sizeof r->error, "%s", h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
        if (t.too_large)
            rc = -E2BIG;
        else if (r->status == 0 && (cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT))
            rc = -ECONNREFUSED;
        else
            rc = -EIO;
        if (r->status == 0 || rc == -E2BIG)
            goto cleanup;
        /* An answer arrived and then broke off: keep what was parsed below. */
    }
    if (t.body.len) {
        json_error_t je;
        r->body = json_loadb(t.body.p, t.body.len, 0, &je);
        if (!r->body)
            snprintf(r->error, sizeof r->error, "answer is not JSON: %s (line %d)", je.text, je.line);
    }

cleanup:
    curl_slist_free_all(hdrs);
    free(payload);
    avoctl_buf_free(&t.body);
    return rc;
}

int avoctl_http_call(avoctl_http *h, avo_route_id route, int64_t id, const char *query, const json_t *body,
                     avoctl_response *r)
{
    return perform(h, route, id, NULL, query, body, NULL, NULL, r);
}

int avoctl_http_get_name(avoctl_http *h, avo_route_id route, const char *name, avoctl_response *r)
{
    return perform(h, route, 0, name, NULL, NULL, NULL, NULL, r);
}

int avoctl_http_stream(avoctl_http *h, avo_route_id route, int64_t id, const char *query, avoctl_stream_cb cb,
                       void *arg, avoctl_response *r)
{
    return perform(h, route, id, NULL, query, NULL, cb, arg, r);
}
