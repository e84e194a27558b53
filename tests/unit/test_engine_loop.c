/* engine.c on a real libuv loop against a migrated throwaway PostgreSQL
 * (tests/unit/pgtest.h): a submitted CPU job gets its seed evaluation
 * queued by one engine pass, and stopping the engine (idle, with a pass
 * waiting on its timer, or with a query in flight, the database closed in
 * the same turn as avod does or later) leaves no handle open and no freed
 * engine behind a callback: each test ends with uv_loop_close() == 0. */
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/db.h"
#include "daemon/avod/engine.h"
#include "tests/unit/pgtest.h"

static const char *KERNELS = "kernels";

typedef struct {
    uv_loop_t loop;
    pgtest_db d;
    avo_engine *engine;
    int ups;
} fx;

static void on_state(void *arg, int up)
{
    fx *f = arg;
    f->ups += up;
}

/* The engine on a loop with its connection up. Its tick is long: the
 * tests drive it with kicks, as the API and NOTIFY do. */
static void fx_start(fx *f)
{
    pgtest_need(&pgtest_server);
    memset(f, 0, sizeof *f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(avo_db_open(&f->d.db, &f->loop, pgtest_server.pg.dsn, "test"), 0);
    avo_db_set_callbacks(&f->d.db, NULL, on_state, f);
    assert_int_equal(avo_engine_start(&f->engine, &f->loop, &f->d.db, KERNELS, 600000), 0);
    assert_int_equal(avo_db_connect(&f->d.db), 0);
    pgtest_run_until(&f->loop, &f->ups, 1, "the database connection came up");
}

/* Turn the loop until the engine has a query queued on the connection (a
 * kick's debounce timer fires, the pass asks for the active jobs). */
static void run_until_query(fx *f)
{
    while (avo_list_empty(&f->d.db.queries))
        if (uv_run(&f->loop, UV_RUN_ONCE) == 0) {
            print_message("# the loop ran out of work before the engine queued a query\n");
            fail();
        }
}

/* Turn the loop until the connection's queue is empty: each query of a
 * pass is queued from the callback of the one before, so an empty queue
 * after a turn is a pass that has ended. */
static void run_until_no_query(fx *f)
{
    while (!avo_list_empty(&f->d.db.queries))
        if (uv_run(&f->loop, UV_RUN_ONCE) == 0) {
            print_message("# the loop ran out of work with a query still queued\n");
            fail();
        }
}

static const char *SPEC = "{\"problem\": \"cpu/sgemm\", \"operator\": \"tune\", \"budget\": {\"evaluations\": 4}, "
                          "\"islands\": 1}";

/* The seed's evaluations of a job: queued, for the job's seed candidate. */
static long long seed_evaluations(PGconn *c, long long job)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id "
             "WHERE e.job_id = %lld AND e.state = 'queued' AND e.candidate_id = j.seed_candidate",
             job);
    return pgtest_value(c, sql);
}

/* No job left active for the next test's passes. */
static void cancel_all(PGconn *c)
{
    pgtest_value(c, "SELECT count(avo_job_cancel(id)) FROM jobs WHERE state IN ('queued','running')");
}

static void test_seed_evaluation_queued(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    fx f;
    fx_start(&f);
    long long job = pgtest_submit(c, KERNELS, SPEC);
    assert_true(job > 0);
    assert_int_equal(seed_evaluations(c, job), 0);
    /* As the API does after a submission. */
    avo_engine_kick(f.engine);
    run_until_query(&f);
    run_until_no_query(&f);
    /* One pass: the job listed, snapshot, decided, applied. */
    assert_int_equal(seed_evaluations(c, job), 1);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT (state = 'running')::int FROM jobs WHERE id = %lld", job);
    assert_int_equal(pgtest_value(c, sql), 1);
    avo_engine_stop(f.engine);
    pgtest_finish(&f.loop, &f.d, 1);
    cancel_all(c);
    PQfinish(c);
}

/* Stopped before it ever ran a pass, and with a kick's timer pending. */
static void test_stop_idle(void **state)
{
    (void)state;
    fx f;
    fx_start(&f);
    avo_engine_stop(f.engine);
    pgtest_finish(&f.loop, &f.d, 1);

    fx_start(&f);
    avo_engine_kick(f.engine);
    avo_engine_stop(f.engine);
    pgtest_finish(&f.loop, &f.d, 1);
    /* Never started: stopping nothing is allowed (avod's failure path). */
    avo_engine_stop(NULL);
}

/* A job submitted, then the engine stopped while its pass waits for the
 * answer to its first query (the active jobs). With lock, the jobs table
 * is locked from c first (a transaction left open), so the answer waits
 * for c's COMMIT whatever the machine's speed. */
static long long stop_in_flight(fx *f, PGconn *c, int lock)
{
    long long job = pgtest_submit(c, KERNELS, SPEC);
    fx_start(f);
    if (lock) {
        pgtest_value(c, "BEGIN");
        pgtest_value(c, "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE");
    }
    avo_engine_kick(f->engine);
    run_until_query(f);
    avo_engine_stop(f->engine);
    return job;
}

/* A stopped engine started nothing: the job has no evaluation. */
static void end_not_started(PGconn *c, long long job)
{
    assert_int_equal(seed_evaluations(c, job), 0);
    cancel_all(c);
    PQfinish(c);
}

/* avod's order (main.c shutdown_daemon): the engine stops and the
 * database closes in the same turn, failing the engine's query in flight. */
static void test_stop_in_flight_db_closed(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    fx f;
    long long job = stop_in_flight(&f, c, 0);
    pgtest_db_close(&f.d);
    pgtest_finish(&f.loop, &f.d, 0);
    end_not_started(c, job);
}

/* The engine stops while its query is in flight and the connection stays
 * up: the answer comes back to a stopped engine, which must still be
 * there to take it, start nothing, and free itself after. One turn of
 * the loop runs the engine's timers' close callbacks while the answer
 * waits on the lock. */
static void test_stop_in_flight_db_open(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    fx f;
    long long job = stop_in_flight(&f, c, 1);
    assert_int_not_equal(uv_run(&f.loop, UV_RUN_ONCE), 0);
    assert_false(avo_list_empty(&f.d.db.queries)); /* still waiting on the lock */
    pgtest_value(c, "COMMIT");
    run_until_no_query(&f);
    pgtest_finish(&f.loop, &f.d, 1);
    end_not_started(c, job);
}

int main(void)
{
    /* Freed memory is overwritten at once, so a callback that reaches an
     * engine already freed fails here rather than by luck. */
    mallopt(M_PERTURB, 0xa5);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_evaluation_queued),
        cmocka_unit_test(test_stop_idle),
        cmocka_unit_test(test_stop_in_flight_db_closed),
        cmocka_unit_test(test_stop_in_flight_db_open),
    };
    return cmocka_run_group_tests(tests, pgtest_group_start_migrated, pgtest_group_stop);
}
