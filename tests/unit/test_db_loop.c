/* db.c on a real libuv loop against a throwaway PostgreSQL (tests/unit/pgtest.h):
 * connect, results, errors, FIFO order, LISTEN/NOTIFY, reconnect after the
 * server kills the connection, close with queries pending. Every test ends
 * as libuv's own tests do: the loop run until it has nothing left, then
 * uv_loop_close() == 0, so a handle db.c forgot to close fails the test. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/db.h"
#include "tests/unit/pgtest.h"

/* One test's loop and connection, with what the callbacks saw. */
typedef struct {
    uv_loop_t loop;
    uv_loop_t *l; /* &loop, or another fixture's loop */
    pgtest_db d;  /* the connection, and its close seen */
    int ups, downs;
    int notifies;
    char channel[64], payload[256];
    int completed; /* queries whose callback ran, in order */
} fx;

/* What one query's callback saw. */
typedef struct {
    fx *f;
    int done;
    int order; /* f->completed when it ran */
    int had_res;
    int ntuples;
    char value[256];  /* row 0, column 0 */
    char value2[256]; /* row 1, column 1, when there is one */
    char err[1024];
    int requery_rc; /* set by on_result_requery */
    int close_db;   /* on_result closes the connection from inside the callback */
} qres;

static void on_state(void *arg, int up)
{
    fx *f = arg;
    if (up)
        f->ups++;
    else
        f->downs++;
}

static void on_notify(void *arg, const char *channel, const char *payload)
{
    fx *f = arg;
    f->notifies++;
    snprintf(f->channel, sizeof f->channel, "%s", channel);
    snprintf(f->payload, sizeof f->payload, "%s", payload ? payload : "");
}

static void on_result(void *arg, PGresult *res, const char *err)
{
    qres *q = arg;
    q->done++;
    q->order = q->f->completed++;
    q->had_res = res != NULL;
    if (err)
        snprintf(q->err, sizeof q->err, "%s", err);
    if (res) {
        q->ntuples = PQntuples(res);
        if (q->ntuples > 0 && PQnfields(res) > 0)
            snprintf(q->value, sizeof q->value, "%s", PQgetvalue(res, 0, 0));
        if (q->ntuples > 1 && PQnfields(res) > 1)
            snprintf(q->value2, sizeof q->value2, "%s", PQgetvalue(res, 1, 1));
    }
    if (q->close_db)
        pgtest_db_close(&q->f->d);
}

/* A callback of a query failed by a lost or closing connection queues
 * again, as a careless caller would: it must be refused. */
static void on_result_requery(void *arg, PGresult *res, const char *err)
{
    qres *q = arg;
    on_result(arg, res, err);
    q->requery_rc = avo_db_query(&q->f->d.db, "SELECT 1", 0, NULL, on_result, q);
}

static void fx_init(fx *f, const char *dsn)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->l = &f->loop;
    assert_int_equal(avo_db_open(&f->d.db, f->l, dsn, "test"), 0);
    avo_db_set_callbacks(&f->d.db, on_notify, on_state, f);
}

/* A second connection on f's loop. */
static void fx_init_beside(fx *g, fx *f, const char *dsn)
{
    memset(g, 0, sizeof *g);
    g->l = f->l;
    assert_int_equal(avo_db_open(&g->d.db, g->l, dsn, "test2"), 0);
    avo_db_set_callbacks(&g->d.db, on_notify, on_state, g);
}

static void run_until(fx *f, const int *v, int want, const char *what)
{
    pgtest_run_until(f->l, v, want, what);
}

/* A round trip on f's connection: the server sends a notification that
 * committed before the round trip ahead of its answer, so after this one
 * has arrived or never will (no waiting on a clock). */
static void barrier(fx *f)
{
    qres b;
    memset(&b, 0, sizeof b);
    b.f = f;
    assert_int_equal(avo_db_query(&f->d.db, "SELECT 1", 0, NULL, on_result, &b), 0);
    run_until(f, &b.done, 1, "a round trip completed");
    assert_string_equal(b.err, "");
}

static void fx_connect(fx *f)
{
    assert_int_equal(avo_db_connect(&f->d.db), 0);
    run_until(f, &f->ups, 1, "the connection came up");
    assert_true(avo_db_is_up(&f->d.db));
}

/* A test's start: the server there, a loop, a connection up on it. */
static void fx_up(fx *f)
{
    pgtest_need(&pgtest_server);
    fx_init(f, pgtest_server.pg.dsn);
    fx_connect(f);
}

static void query(fx *f, qres *q, const char *sql, int n, const char *const *params)
{
    memset(q, 0, sizeof *q);
    q->f = f;
    assert_int_equal(avo_db_query(&f->d.db, sql, n, params, on_result, q), 0);
}

static void test_connect_and_results(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    fx f;
    fx_init(&f, pgtest_server.pg.dsn);
    /* Before the connection is up a query is refused and its callback never runs. */
    qres early = {.f = &f};
    assert_false(avo_db_is_up(&f.d.db));
    assert_int_equal(avo_db_query(&f.d.db, "SELECT 1", 0, NULL, on_result, &early), -ENOTCONN);
    fx_connect(&f);
    assert_int_equal(f.downs, 0);

    qres rows, param, null;
    query(&f, &rows, "SELECT g, 'row ' || g FROM generate_series(1, 3) g", 0, NULL);
    const char *p1[] = {"41"};
    query(&f, &param, "SELECT $1::int + 1", 1, p1);
    const char *p2[] = {NULL};
    query(&f, &null, "SELECT $1::text IS NULL", 1, p2);
    run_until(&f, &null.done, 1, "the third query completed");
    assert_int_equal(rows.done, 1);
    assert_true(rows.had_res);
    assert_string_equal(rows.err, "");
    assert_int_equal(rows.ntuples, 3);
    assert_string_equal(rows.value, "1");
    assert_string_equal(rows.value2, "row 2");
    assert_string_equal(param.value, "42");
    assert_string_equal(null.value, "t");
    assert_int_equal(early.done, 0);
    pgtest_finish(f.l, &f.d, 1);
}

static void test_query_error(void **state)
{
    (void)state;
    fx f;
    fx_up(&f);
    qres missing, bad, after;
    query(&f, &missing, "SELECT * FROM avo_no_such_table", 0, NULL);
    const char *p[] = {"twelve"};
    query(&f, &bad, "SELECT $1::int", 1, p);
    query(&f, &after, "SELECT 7", 0, NULL);
    run_until(&f, &after.done, 1, "the query after the errors completed");
    /* The error names its cause, with no result handed over. */
    assert_int_equal(missing.done, 1);
    assert_false(missing.had_res);
    assert_non_null(strstr(missing.err, "avo_no_such_table"));
    assert_non_null(strstr(missing.err, "does not exist"));
    assert_non_null(strstr(bad.err, "twelve"));
    /* ...and the connection carries on. */
    assert_string_equal(after.err, "");
    assert_string_equal(after.value, "7");
    assert_true(avo_db_is_up(&f.d.db));
    assert_int_equal(f.downs, 0);
    pgtest_finish(f.l, &f.d, 1);
}

#define NQUEUED 40

static void test_queued_in_order(void **state)
{
    (void)state;
    fx f;
    fx_up(&f);
    qres q[NQUEUED];
    char num[NQUEUED][16];
    for (int i = 0; i < NQUEUED; i++) {
        snprintf(num[i], sizeof num[i], "%d", i);
        const char *p[] = {num[i]};
        /* one failing query in the middle does not disturb the order */
        query(&f, &q[i], i == NQUEUED / 2 ? "SELECT $1::int / 0" : "SELECT $1::int", 1, p);
    }
    run_until(&f, &f.completed, NQUEUED, "every queued query completed");
    for (int i = 0; i < NQUEUED; i++) {
        assert_int_equal(q[i].done, 1);
        assert_int_equal(q[i].order, i);
        if (i == NQUEUED / 2) {
            assert_non_null(strstr(q[i].err, "division by zero"));
        } else {
            assert_string_equal(q[i].err, "");
            assert_string_equal(q[i].value, num[i]);
        }
    }
    pgtest_finish(f.l, &f.d, 1);
}

/* g sends a notification on channel; f, listening, has it after a round trip. */
static void notify(fx *g, fx *f, const char *channel, const char *payload)
{
    qres sent;
    const char *p[] = {channel, payload};
    query(g, &sent, "SELECT pg_notify($1, $2)", 2, p);
    run_until(g, &sent.done, 1, "the notification was sent");
    assert_string_equal(sent.err, "");
    barrier(f);
    assert_string_equal(f->channel, channel);
    assert_string_equal(f->payload, payload);
}

static void test_listen_notify(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    fx f, g;
    fx_init(&f, pgtest_server.pg.dsn);
    /* Before the connection: issued when it comes up (and after every reconnect). */
    assert_int_equal(avo_db_listen(&f.d.db, "avo_loop_a"), 0);
    fx_connect(&f);
    /* While up: issued now. */
    assert_int_equal(avo_db_listen(&f.d.db, "avo_loop_b"), 0);
    qres listened;
    query(&f, &listened, "SELECT 1", 0, NULL); /* FIFO: both LISTENs are done when it is */
    run_until(&f, &listened.done, 1, "the LISTENs were done");

    /* The notification comes from another connection on the same loop. */
    fx_init_beside(&g, &f, pgtest_server.pg.dsn);
    fx_connect(&g);
    notify(&g, &f, "avo_loop_a", "first");
    assert_int_equal(f.notifies, 1);
    notify(&g, &f, "avo_loop_b", "second");
    assert_int_equal(f.notifies, 2);
    assert_int_equal(g.notifies, 0);

    pgtest_db_close(&g.d);
    pgtest_finish(f.l, &f.d, 1);
    assert_int_equal(g.d.closed, 1);
}

/* Kill the connection's server process from a second connection. */
static void terminate(PGconn *c, const char *pid)
{
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%s)::int", pid);
    assert_int_equal(pgtest_value(c, sql), 1);
}

#define KILL_ROUNDS 6

/* One round of test_reconnect: the connection's server process killed
 * while a query runs and another waits; then the connection's ups-th up. */
static void kill_in_flight(fx *f, PGconn *admin, int ups)
{
    qres pid, sleeping, queued, after;
    query(f, &pid, "SELECT pg_backend_pid()", 0, NULL);
    run_until(f, &pid.done, 1, "the backend pid came");
    query(f, &sleeping, "SELECT pg_sleep(60)", 0, NULL);
    memset(&queued, 0, sizeof queued);
    queued.f = f;
    assert_int_equal(avo_db_query(&f->d.db, "SELECT 2", 0, NULL, on_result_requery, &queued), 0);
    terminate(admin, pid.value);
    run_until(f, &queued.done, 1, "the queries of the killed connection failed");
    assert_int_equal(sleeping.done, 1);
    assert_false(sleeping.had_res);
    if (!strstr(sleeping.err, "terminating connection due to administrator command"))
        fail_msg("the query in flight failed without the server's reason: %s", sleeping.err);
    assert_non_null(strstr(queued.err, "database connection lost"));
    assert_int_equal(queued.requery_rc, -ENOTCONN);
    assert_int_equal(queued.done, 1);
    run_until(f, &f->ups, ups, "the connection came back after the kill");
    query(f, &after, "SELECT pg_backend_pid()", 0, NULL);
    run_until(f, &after.done, 1, "a query after the reconnect completed");
    assert_string_equal(after.err, "");
    assert_string_not_equal(after.value, pid.value);
}

static void test_reconnect(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    fx f;
    fx_init(&f, pgtest_server.pg.dsn);
    assert_int_equal(avo_db_listen(&f.d.db, "avo_loop_r"), 0);
    fx_connect(&f);
    PGconn *admin = pgtest_connect(&pgtest_server);

    /* Killed while idle: down, then up again by itself. */
    qres pid1, pid2;
    query(&f, &pid1, "SELECT pg_backend_pid()", 0, NULL);
    run_until(&f, &pid1.done, 1, "the first backend pid came");
    terminate(admin, pid1.value);
    run_until(&f, &f.downs, 1, "the killed connection was seen down");
    run_until(&f, &f.ups, 2, "the connection came back");
    query(&f, &pid2, "SELECT pg_backend_pid()", 0, NULL);
    run_until(&f, &pid2.done, 1, "a query after the reconnect completed");
    assert_string_equal(pid2.err, "");
    assert_string_not_equal(pid2.value, pid1.value);
    /* The LISTEN came back with it (queued before pid2, so done by now). */
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT pg_notify('avo_loop_r', 'after %s')", pid2.value);
    pgtest_value(admin, sql);
    barrier(&f);
    assert_int_equal(f.notifies, 1);
    assert_string_equal(f.channel, "avo_loop_r");

    /* Killed with a query in flight and one queued: both fail with the
     * server's reason; the callback that queues again is refused; the
     * connection comes back. Several rounds: the server may die before or
     * after it has read the query, and libuv reports the first as a poll
     * error (EBADF), the second as an end of file; either way the reason
     * must be the server's. */
    for (int round = 0; round < KILL_ROUNDS; round++)
        kill_in_flight(&f, admin, 3 + round);
    PQfinish(admin);
    pgtest_finish(f.l, &f.d, 1);
}

static void test_close_with_pending(void **state)
{
    (void)state;
    fx f;
    fx_up(&f);
    /* One in flight, two queued; the second queues again from its callback. */
    qres q[3];
    query(&f, &q[0], "SELECT 1", 0, NULL);
    memset(&q[1], 0, sizeof q[1]);
    q[1].f = &f;
    assert_int_equal(avo_db_query(&f.d.db, "SELECT 2", 0, NULL, on_result_requery, &q[1]), 0);
    query(&f, &q[2], "SELECT 3", 0, NULL);
    pgtest_db_close(&f.d);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(q[i].done, 1);
        assert_int_equal(q[i].order, i);
        assert_false(q[i].had_res);
        assert_string_equal(q[i].err, "daemon shutting down");
    }
    assert_int_equal(q[1].requery_rc, -ENOTCONN);
    /* After the close: refused, no callback. */
    qres late = {.f = &f};
    assert_int_equal(avo_db_query(&f.d.db, "SELECT 4", 0, NULL, on_result, &late), -ENOTCONN);
    assert_int_equal(f.d.closed, 0); /* on_closed runs from the loop */
    pgtest_finish(f.l, &f.d, 0);
    assert_int_equal(late.done, 0);
    assert_int_equal(f.completed, 3);
}

static void test_close_from_callback(void **state)
{
    (void)state;
    fx f;
    fx_up(&f);
    qres first, second;
    query(&f, &first, "SELECT 1", 0, NULL);
    first.close_db = 1;
    query(&f, &second, "SELECT 2", 0, NULL);
    run_until(&f, &second.done, 1, "the query queued behind the closing one failed");
    assert_string_equal(first.value, "1");
    assert_string_equal(second.err, "daemon shutting down");
    pgtest_finish(f.l, &f.d, 0);
}

static void test_close_while_down(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    /* Never connected. */
    fx f;
    fx_init(&f, pgtest_server.pg.dsn);
    pgtest_finish(f.l, &f.d, 1);

    /* No server there: the connection fails and a retry is pending on its
     * timer; each failed retry doubles the wait; the close stops it. */
    char dsn[512];
    snprintf(dsn, sizeof dsn, "host=%s/no-such-dir dbname=avo user=avo", pgtest_server.dir);
    fx_init(&f, dsn);
    assert_int_equal(avo_db_connect(&f.d.db), 0);
    for (int i = 0; i < 2 && !uv_is_active((uv_handle_t *)&f.d.db.retry_timer); i++)
        assert_int_not_equal(uv_run(&f.loop, UV_RUN_ONCE), 0);
    assert_true(uv_is_active((uv_handle_t *)&f.d.db.retry_timer));
    unsigned wait = f.d.db.retry_ms;
    while (f.d.db.retry_ms == wait)
        assert_int_not_equal(uv_run(&f.loop, UV_RUN_ONCE), 0);
    assert_int_equal(f.d.db.retry_ms, wait * 2);
    assert_false(avo_db_is_up(&f.d.db));
    assert_int_equal(f.ups, 0);
    assert_int_equal(f.downs, 0); /* never up, so never reported down */
    pgtest_finish(f.l, &f.d, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_and_results), cmocka_unit_test(test_query_error),
        cmocka_unit_test(test_queued_in_order),     cmocka_unit_test(test_listen_notify),
        cmocka_unit_test(test_reconnect),           cmocka_unit_test(test_close_with_pending),
        cmocka_unit_test(test_close_from_callback), cmocka_unit_test(test_close_while_down),
    };
    return cmocka_run_group_tests(tests, pgtest_group_start, pgtest_group_stop);
}
