/* One asynchronous libpq connection driven by the libuv loop: queries, LISTEN, reconnects (db.h). */
#include "db.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "avo_log.h"

enum { DB_DOWN = 0, DB_CONNECTING, DB_READY };

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 5000

struct avo_db_query {
    struct avo_db_query *next;
    char *sql;
    int nparams;
    char **params;
    avo_db_cb cb;
    void *arg;
};

static void on_poll(uv_poll_t *h, int status, int events);
static void db_pump(avo_db *db);

static void query_free(struct avo_db_query *q)
{
    for (int i = 0; i < q->nparams; i++)
        free(q->params[i]);
    free(q->params);
    free(q->sql);
    free(q);
}

static void poll_closed(uv_handle_t *h)
{
    free(h);
}

/* libpq may hand back a different socket after any PQconnectPoll, so the
 * watcher is rebuilt whenever the descriptor changes. */
static void db_watch(avo_db *db, int events)
{
    int fd = db->conn ? PQsocket(db->conn) : -1;
    if (db->poll && (db->poll_fd != fd || fd < 0)) {
        uv_poll_stop(db->poll);
        uv_close((uv_handle_t *)db->poll, poll_closed);
        db->poll = NULL;
    }
    if (fd < 0)
        return;
    if (!db->poll) {
        db->poll = calloc(1, sizeof *db->poll);
        if (!db->poll || uv_poll_init(db->loop, db->poll, fd) < 0) {
            free(db->poll);
            db->poll = NULL;
            return;
        }
        db->poll->data = db;
        db->poll_fd = fd;
        db->poll_events = 0;
    }
    if (db->poll_events != events) {
        uv_poll_start(db->poll, events, on_poll);
        db->poll_events = events;
    }
}

static void db_unwatch(avo_db *db)
{
    if (db->poll) {
        uv_poll_stop(db->poll);
        uv_close((uv_handle_t *)db->poll, poll_closed);
        db->poll = NULL;
    }
}

static void fail_queries(avo_db *db, const char *why)
{
    /* Detach the queue first: a callback may try to queue again, which is
     * refused while the connection is down. */
    struct avo_db_query *q = db->head;
    db->head = db->tail = NULL;
    db->sent = 0;
    if (db->last) {
        PQclear(db->last);
        db->last = NULL;
    }
    while (q) {
        struct avo_db_query *next = q->next;
        if (q->cb)
            q->cb(q->arg, NULL, why);
        query_free(q);
        q = next;
    }
}

static void on_retry(uv_timer_t *t)
{
    avo_db *db = t->data;
    avo_db_connect(db);
}

static void db_fail(avo_db *db, const char *why)
{
    int was_ready = db->state == DB_READY;
    char msg[512];
    snprintf(msg, sizeof msg, "database connection lost: %s", why && *why ? why : "unknown error");
    /* strip libpq's trailing newline */
    size_t l = strlen(msg);
    while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' '))
        msg[--l] = 0;

    db_unwatch(db);
    if (db->conn) {
        PQfinish(db->conn);
        db->conn = NULL;
    }
    db->state = DB_DOWN;
    fail_queries(db, msg);
    if (db->closing)
        return;
    avo_log(was_ready ? AVO_LOG_WARN : AVO_LOG_DEBUG, "db", "%s: %s; retrying in %u ms", db->name, msg, db->retry_ms);
    if (was_ready && db->on_state)
        db->on_state(db->cb_arg, 0);
    uv_timer_start(&db->retry_timer, on_retry, db->retry_ms, 0);
    db->retry_ms = db->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : db->retry_ms * 2;
}

static void drain_notifies(avo_db *db)
{
    PGnotify *n;
    while (db->conn && (n = PQnotifies(db->conn))) {
        if (db->on_notify)
            db->on_notify(db->cb_arg, n->relname, n->extra);
        PQfreemem(n);
    }
}

static void complete_head(avo_db *db, PGresult *res, const char *err)
{
    struct avo_db_query *q = db->head;
    db->head = q->next;
    if (!db->head)
        db->tail = NULL;
    db->sent = 0;
    if (q->cb)
        q->cb(q->arg, res, err);
    query_free(q);
}

static void read_results(avo_db *db)
{
    while (db->conn && db->sent && !PQisBusy(db->conn)) {
        PGresult *r = PQgetResult(db->conn);
        if (r) {
            if (db->last)
                PQclear(db->last);
            db->last = r;
            continue;
        }
        /* NULL: the query is complete; report its last result. */
        PGresult *last = db->last;
        db->last = NULL;
        if (!last) {
            complete_head(db, NULL, "no result");
        } else {
            ExecStatusType st = PQresultStatus(last);
            if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
                char msg[1024];
                const char *m = PQresultErrorField(last, PG_DIAG_MESSAGE_PRIMARY);
                snprintf(msg, sizeof msg, "%s", m ? m : PQresultErrorMessage(last));
                complete_head(db, NULL, msg);
            } else {
                complete_head(db, last, NULL);
            }
            PQclear(last);
        }
        db_pump(db);
    }
}

/* What the socket holds: notifications, then results. */
static void db_read(avo_db *db)
{
    if (!PQconsumeInput(db->conn)) {
        db_fail(db, PQerrorMessage(db->conn));
        return;
    }
    drain_notifies(db);
    read_results(db);
    if (db->conn && PQstatus(db->conn) == CONNECTION_BAD)
        db_fail(db, PQerrorMessage(db->conn));
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    avo_db *db = h->data;
    if (db->state == DB_CONNECTING) {
        PostgresPollingStatusType st = PQconnectPoll(db->conn);
        switch (st) {
        case PGRES_POLLING_OK:
            PQsetnonblocking(db->conn, 1);
            db->state = DB_READY;
            db->retry_ms = RETRY_MIN_MS;
            avo_debug("db", "%s: connected", db->name);
            for (int i = 0; i < db->nchannels; i++) {
                char sql[160];
                snprintf(sql, sizeof sql, "LISTEN %s", db->channels[i]);
                /* Only memory can fail here; the channel then stays
                 * silent until the next reconnect, and avod's timers
                 * still drive the work: said, not fatal. */
                if (avo_db_query(db, sql, 0, NULL, NULL, NULL) < 0)
                    avo_warn("db", "%s: cannot LISTEN %s: out of memory", db->name, db->channels[i]);
            }
            db_watch(db, UV_READABLE);
            if (db->on_state)
                db->on_state(db->cb_arg, 1);
            db_pump(db);
            return;
        case PGRES_POLLING_READING:
            db_watch(db, UV_READABLE);
            return;
        case PGRES_POLLING_WRITING:
            db_watch(db, UV_WRITABLE);
            return;
        default:
            db_fail(db, PQerrorMessage(db->conn));
            return;
        }
    }
    if (db->state != DB_READY)
        return;
    if (status < 0) {
        /* libuv reports POLLERR as EBADF: the server closed the connection,
         * often after saying why (pg_terminate_backend, a shutdown) while
         * a query of ours lay unread. Read what it sent, then meet the
         * error in libpq, so the failure names that cause, not the poll's. */
        db_read(db);
        if (db->conn)
            db_fail(db, PQconsumeInput(db->conn) ? uv_strerror(status) : PQerrorMessage(db->conn));
        return;
    }
    if (events & UV_WRITABLE) {
        int r = PQflush(db->conn);
        if (r < 0) {
            db_fail(db, PQerrorMessage(db->conn));
            return;
        }
        if (r == 0)
            db_watch(db, UV_READABLE);
    }
    if (events & UV_READABLE)
        db_read(db);
}

static void db_pump(avo_db *db)
{
    if (db->state != DB_READY || db->sent || !db->head)
        return;
    struct avo_db_query *q = db->head;
    if (!PQsendQueryParams(db->conn, q->sql, q->nparams, NULL, (const char *const *)q->params, NULL, NULL, 0)) {
        db_fail(db, PQerrorMessage(db->conn));
        return;
    }
    db->sent = 1;
    int r = PQflush(db->conn);
    if (r < 0) {
        db_fail(db, PQerrorMessage(db->conn));
        return;
    }
    db_watch(db, r == 1 ? (UV_READABLE | UV_WRITABLE) : UV_READABLE);
}

int avo_db_open(avo_db *db, uv_loop_t *loop, const char *conninfo, const char *name)
{
    memset(db, 0, sizeof *db);
    db->loop = loop;
    db->name = name;
    db->conninfo = strdup(conninfo);
    if (!db->conninfo)
        return -ENOMEM;
    db->retry_ms = RETRY_MIN_MS;
    uv_timer_init(loop, &db->retry_timer);
    db->retry_timer.data = db;
    return 0;
}

void avo_db_set_callbacks(avo_db *db, avo_db_notify_cb on_notify, avo_db_state_cb on_state, void *arg)
{
    db->on_notify = on_notify;
    db->on_state = on_state;
    db->cb_arg = arg;
}

int avo_db_connect(avo_db *db)
{
    if (db->closing || db->state != DB_DOWN)
        return 0;
    db->conn = PQconnectStart(db->conninfo);
    if (!db->conn) {
        db_fail(db, "out of memory");
        return -ENOMEM;
    }
    if (PQstatus(db->conn) == CONNECTION_BAD) {
        db_fail(db, PQerrorMessage(db->conn));
        return 0;
    }
    db->state = DB_CONNECTING;
    db_watch(db, UV_WRITABLE);
    if (!db->poll) {
        db_fail(db, "no socket");
        return 0;
    }
    return 0;
}

int avo_db_is_up(const avo_db *db)
{
    return db->state == DB_READY;
}

int avo_db_query(avo_db *db, const char *sql, int nparams, const char *const *params, avo_db_cb cb, void *arg)
{
    if (db->state != DB_READY || db->closing)
        return -ENOTCONN;
    struct avo_db_query *q = calloc(1, sizeof *q);
    if (!q)
        return -ENOMEM;
    q->sql = strdup(sql);
    q->nparams = nparams;
    q->params = nparams ? calloc((size_t)nparams, sizeof *q->params) : NULL;
    if (!q->sql || (nparams && !q->params))
        goto oom;
    for (int i = 0; i < nparams; i++)
        if (params[i] && !(q->params[i] = strdup(params[i])))
            goto oom;
    q->cb = cb;
    q->arg = arg;
    if (db->tail)
        db->tail->next = q;
    else
        db->head = q;
    db->tail = q;
    db_pump(db);
    return 0;
oom:
    query_free(q);
    return -ENOMEM;
}

int avo_db_listen(avo_db *db, const char *channel)
{
    char **c = realloc(db->channels, (size_t)(db->nchannels + 1) * sizeof *c);
    if (!c)
        return -ENOMEM;
    db->channels = c;
    if (!(c[db->nchannels] = strdup(channel)))
        return -ENOMEM;
    db->nchannels++;
    if (db->state == DB_READY) {
        char sql[160];
        snprintf(sql, sizeof sql, "LISTEN %s", channel);
        return avo_db_query(db, sql, 0, NULL, NULL, NULL);
    }
    return 0;
}

static void timer_closed(uv_handle_t *h)
{
    avo_db *db = h->data;
    for (int i = 0; i < db->nchannels; i++)
        free(db->channels[i]);
    free(db->channels);
    free(db->conninfo);
    db->channels = NULL;
    db->conninfo = NULL;
    if (db->on_closed)
        db->on_closed(db);
}

void avo_db_close(avo_db *db, void (*on_closed)(avo_db *))
{
    db->closing = 1;
    db->on_closed = on_closed;
    db_unwatch(db);
    if (db->conn) {
        PQfinish(db->conn);
        db->conn = NULL;
    }
    db->state = DB_DOWN;
    fail_queries(db, "daemon shutting down");
    uv_timer_stop(&db->retry_timer);
    uv_close((uv_handle_t *)&db->retry_timer, timer_closed);
}
