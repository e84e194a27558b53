/* One asynchronous PostgreSQL connection driven by the libuv loop: libpq in
 * non-blocking mode (PQconnectStart/PQconnectPoll, PQsendQueryParams,
 * PQconsumeInput, PQgetResult drained until NULL) watched by a uv_poll_t on
 * PQsocket, which is re-read after every poll because libpq may replace the
 * socket. Queries queue FIFO; a lost connection fails the query in flight and
 * those queued (callers retry on their own schedule) and reconnects with
 * exponential backoff, re-issuing LISTEN for every channel. */
#ifndef AVO_DB_H
#define AVO_DB_H

#include "avo_attr.h"
#include <libpq-fe.h>
#include <uv.h>

typedef struct avo_db avo_db;

/* res is the last result of the query (freed after the callback returns), or
 * NULL with err set when the query failed or the connection was lost. */
typedef void (*avo_db_cb)(void *arg, PGresult *res, const char *err);
typedef void (*avo_db_notify_cb)(void *arg, const char *channel, const char *payload);
typedef void (*avo_db_state_cb)(void *arg, int up);

struct avo_db_query;

struct avo_db {
    uv_loop_t *loop;
    char *conninfo;
    const char *name; /* for logs: "main", "listen" */
    PGconn *conn;
    uv_poll_t *poll; /* heap: closed asynchronously */
    int poll_fd;
    int poll_events;
    uv_timer_t retry_timer;
    unsigned retry_ms;
    int state; /* see db.c */
    int closing;
    struct avo_db_query *head, *tail; /* head is in flight when sent */
    int sent;
    PGresult *last;
    char **channels;
    int nchannels;
    avo_db_notify_cb on_notify;
    avo_db_state_cb on_state;
    void *cb_arg;
    void (*on_closed)(avo_db *);
};

int avo_db_open(avo_db *db, uv_loop_t *loop, const char *conninfo, const char *name);
void avo_db_set_callbacks(avo_db *db, avo_db_notify_cb on_notify, avo_db_state_cb on_state, void *arg);
/* Start connecting; progress is reported through on_state. */
int avo_db_connect(avo_db *db);
int avo_db_is_up(const avo_db *db);
/* Queue a query. params are copied. Returns 0, or a negative int (and the
 * callback never runs) when the connection is down. */
AVO_MUSTCHECK int avo_db_query(avo_db *db, const char *sql, int nparams, const char *const *params, avo_db_cb cb,
                               void *arg);
/* LISTEN on a channel now and after every reconnect. */
AVO_MUSTCHECK int avo_db_listen(avo_db *db, const char *channel);
/* Fail queued queries, close the connection; on_closed runs when the handles are gone. */
void avo_db_close(avo_db *db, void (*on_closed)(avo_db *));

#endif
