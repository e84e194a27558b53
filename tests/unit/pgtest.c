/* The unit tests' throwaway PostgreSQL and loop helpers (pgtest.h): avod's embedded-cluster code in a temporary directory. */
#include "pgtest.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/avod/migrate.h"
#include "daemon/avod/pin.h"
#include "proto/avo_jobspec.h"
#include "proto/avo_problem.h"

/* A blocking connection, or NULL with the reason in err. */
static PGconn *open_conn(const pgtest *t, char *err, size_t errlen)
{
    PGconn *c = PQconnectdb(t->pg.dsn);
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(err, errlen, "cannot connect to the test PostgreSQL (%s): %s", t->pg.dsn, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

static int migrate(pgtest *t)
{
    char err[1900];
    const char *dir = getenv("AVO_SQL_DIR") ? getenv("AVO_SQL_DIR") : "sql";
    PGconn *c = open_conn(t, err, sizeof err);
    int rc = c ? avo_migrate(c, dir, err, sizeof err) : -1;
    PQfinish(c);
    if (rc < 0)
        snprintf(t->why, sizeof t->why, "migrations from %s failed: %s", dir, err);
    return rc;
}

static int start_server(pgtest *t)
{
    char bindir[1024];
    if (avo_pgembed_find_bindir(bindir, sizeof bindir) < 0) {
        snprintf(t->why, sizeof t->why,
                 "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql "
                 "or on PATH: install the 'postgresql' package (make deps)");
        t->absent = 1;
        return -1;
    }
    snprintf(t->dir, sizeof t->dir, "/tmp/avo-unit-pg.XXXXXX");
    if (!mkdtemp(t->dir)) {
        snprintf(t->why, sizeof t->why, "mkdtemp %s failed", t->dir);
        t->dir[0] = 0;
        return -1;
    }
    /* Under root the server runs as postgres, who must reach the cluster. */
    if (chmod(t->dir, 0755) < 0) {
        snprintf(t->why, sizeof t->why, "chmod %s failed", t->dir);
        return -1;
    }
    if (avo_pgembed_start(&t->pg, t->dir, bindir, "", t->why, sizeof t->why) < 0)
        return -1;
    t->started = 1;
    return 0;
}

int pgtest_start(pgtest *t, int with_schema)
{
    memset(t, 0, sizeof *t);
    if (start_server(t) < 0 || (with_schema && migrate(t) < 0)) {
        print_message("# no test PostgreSQL: %s\n", t->why);
        pgtest_stop(t);
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void pgtest_stop(pgtest *t)
{
    if (t->started)
        avo_pgembed_stop(&t->pg);
    t->started = 0;
    if (t->dir[0])
        nftw(t->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    t->dir[0] = 0;
}

pgtest pgtest_server;

int pgtest_group_start(void **state)
{
    (void)state;
    return pgtest_start(&pgtest_server, 0);
}

int pgtest_group_start_migrated(void **state)
{
    (void)state;
    return pgtest_start(&pgtest_server, 1);
}

int pgtest_group_stop(void **state)
{
    (void)state;
    pgtest_stop(&pgtest_server);
    return 0;
}

void pgtest_need(const pgtest *t)
{
    if (t->started)
        return;
    if (t->absent) {
        print_message("# skipped: %s\n", t->why);
        skip();
    }
    fail_msg("the test PostgreSQL is not ready: %s", t->why);
}

PGconn *pgtest_connect(const pgtest *t)
{
    char err[1500];
    PGconn *c = open_conn(t, err, sizeof err);
    if (!c)
        fail_msg("%s", err);
    return c;
}

long long pgtest_valuef(PGconn *c, const char *fmt, ...)
{
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return pgtest_value(c, sql);
}

long long pgtest_value(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", PQresultErrorMessage(r));
        PQclear(r);
        fail_msg("%s: %s", sql, msg);
    }
    long long v = st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)
                      ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
                      : 0;
    PQclear(r);
    return v;
}

void pgtest_run_until(uv_loop_t *loop, const int *v, int want, const char *what)
{
    while (*v < want)
        if (uv_run(loop, UV_RUN_ONCE) == 0 && *v < want) {
            print_message("# the loop ran out of work before %s\n", what);
            fail();
        }
}

static void on_closed(avo_db *db)
{
    pgtest_db *t = (pgtest_db *)((char *)db - offsetof(pgtest_db, db));
    t->closed++;
}

void pgtest_db_close(pgtest_db *t)
{
    avo_db_close(&t->db, on_closed);
}

static void print_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    print_message("# still open: a %s handle (active %d, closing %d)\n", uv_handle_type_name(h->type), uv_is_active(h),
                  uv_is_closing(h));
}

void pgtest_finish(uv_loop_t *loop, pgtest_db *t, int close)
{
    if (close)
        pgtest_db_close(t);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(t->closed, 1);
    int rc = uv_loop_close(loop);
    if (rc != 0)
        uv_walk(loop, print_handle, NULL);
    assert_int_equal(rc, 0);
}

long long pgtest_submit(PGconn *c, const char *kernels, const char *spec_text)
{
    char err[1024], dir[2048];
    avo_jobspec s;
    json_t *norm = NULL;
    json_t *in = json_loads(spec_text, 0, NULL);
    assert_non_null(in);
    avo_problem p;
    json_t *pin = NULL;
    if (avo_jobspec_parse(in, &s, &norm, err, sizeof err) < 0 ||
        avo_problem_resolve(kernels, s.problem, dir, sizeof dir, err, sizeof err) < 0 ||
        avo_problem_load(&p, dir, err, sizeof err) < 0 || avo_problem_use_seed(&p, s.seed_name, err, sizeof err) < 0 ||
        !(pin = avo_pin_make(&p, err, sizeof err)))
        fail_msg("the job cannot be made: %s", err);
    json_decref(in);
    snprintf(s.target, sizeof s.target, "cpu");
    json_object_set_new(norm, "target", json_string(s.target));
    avo_jobspec_commit_resolve(&s, norm, 0);
    json_object_set_new(json_object_get(norm, "operator_params"), "seed", json_integer(7));
    char *spec = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    char *pin_text = json_dumps(pin, JSON_COMPACT);
    char prio[16], budget[16];
    snprintf(prio, sizeof prio, "%d", s.priority);
    snprintf(budget, sizeof budget, "%d", s.evaluations);
    const char *params[] = {spec, s.problem, s.op, s.target, prio, budget, NULL, "12345", pin_text, "tester", NULL};
    PGresult *r = PQexecParams(c,
                               "SELECT (avo_job_submit($1::jsonb, $2, $3, $4, $5::int, $6::int, $7, $8::bigint, "
                               "$9::jsonb, $10, $11)->>'id')::bigint",
                               11, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("avo_job_submit: %s", PQresultErrorMessage(r));
    long long id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    free(spec);
    free(pin_text);
    json_decref(pin);
    json_decref(norm);
    avo_problem_free(&p);
    avo_jobspec_clear(&s);
    return id;
}
