/* A throwaway PostgreSQL for unit tests that need a real server (the loop
 * tests of db.c and engine.c), and the loop helpers those tests share: a
 * private cluster started the way avod starts its embedded one
 * (daemon/avod/pgembed.c: initdb, pg_ctl, database "avo", as user postgres
 * under root) in a fresh directory under /tmp, stopped and removed at the
 * end. Tests skip, saying why, where no PostgreSQL server binaries are
 * installed. */
#ifndef AVO_PGTEST_H
#define AVO_PGTEST_H

#include <libpq-fe.h>
#include <stddef.h>
#include <uv.h>

#include "daemon/avod/db.h"
#include "daemon/avod/pgembed.h"

typedef struct {
    char dir[256]; /* the cluster's home: /tmp/avo-unit-pg.XXXXXX */
    avo_pgembed pg;
    int started;
    char why[2048]; /* why there is no server (absent or failed) */
    int absent;     /* no server binaries: skip, not fail */
} pgtest;

/* For a cmocka group setup: starts the server, then applies sql/NNN_*.sql
 * with avod's migrator (AVO_SQL_DIR, default "sql") when migrate is set.
 * Always 0: a test without its server says why through pgtest_need. */
int pgtest_start(pgtest *t, int migrate);
/* Stops the server and removes its directory; safe after a failed start. */
void pgtest_stop(pgtest *t);
/* A test file's one server, and the cmocka group setup (bare or migrated)
 * and teardown that start and stop it: cmocka_run_group_tests(tests,
 * pgtest_group_start_migrated, pgtest_group_stop). */
extern pgtest pgtest_server;
int pgtest_group_start(void **state);
int pgtest_group_start_migrated(void **state);
int pgtest_group_stop(void **state);
/* At the start of a test: skips it where PostgreSQL is not installed,
 * fails it where the server did not start. */
void pgtest_need(const pgtest *t);
/* A blocking connection for the test's own checks and actions. */
PGconn *pgtest_connect(const pgtest *t);
/* One statement on a blocking connection: its first value as a long long
 * (0 when it returns no row), or fails the test naming the statement and
 * the server's message. */
long long pgtest_value(PGconn *c, const char *sql);
/* pgtest_value of the SQL printf formats from fmt (at most 2 KiB). */
long long pgtest_valuef(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Submit a job as avod's API does (api.c submit_finish and submit_insert):
 * the spec parsed and normalised, the package (under kernels) pinned, the
 * 11-argument avo_job_submit, target "cpu". Returns the job's id; fails
 * the test when the job cannot be made. */
long long pgtest_submit(PGconn *c, const char *kernels, const char *spec_text);

/* Turn the loop until *v reaches want. A loop with nothing left to do
 * before that fails the test, saying what did not happen (no clock: the
 * machine is shared). */
void pgtest_run_until(uv_loop_t *loop, const int *v, int want, const char *what);

/* A connection whose close the test sees. */
typedef struct {
    avo_db db;
    int closed; /* times on_closed ran */
} pgtest_db;

/* avo_db_close with a callback that counts into t->closed. */
void pgtest_db_close(pgtest_db *t);
/* How a loop test ends, as libuv's own tests do: the connection closed
 * (when close is set; else the test closed it), the loop run until it has
 * nothing left, the close callback run once, and uv_loop_close() == 0;
 * a handle still open is named before the test fails. */
void pgtest_finish(uv_loop_t *loop, pgtest_db *t, int close);

#endif
