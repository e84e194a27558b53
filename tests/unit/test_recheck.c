/* A best that keeps failing as the against, through the real schema
 * (sql/026_recheck.sql) on a throwaway PostgreSQL: the engine's decisions
 * (daemon/avod/evolve.c) applied by avo_job_apply from avo_job_snapshot,
 * each evaluation completed by hand with the result a worker would send.
 * Three pairing failures against the best queue it alone (purpose
 * 'recheck', outside the budget); its failure retires it: the island and
 * the job go back to the version it was measured against, later proposals
 * are paired against that one, and the recheck is consumed. A recheck
 * that passes keeps the best. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/evolve.h"
#include "proto/avo_problem.h"
#include "tests/unit/pgtest.h"

static const char *SPEC = "{\"problem\": \"cpu/sgemm\", \"operator\": \"tune\", \"budget\": {\"evaluations\": 40}, "
                          "\"islands\": 1}";

static avo_problem prob;
static char *seed_src;

static int group_start(void **state)
{
    char err[512];
    if (avo_problem_load(&prob, "kernels/cpu/sgemm", err, sizeof err) < 0) {
        print_error("%s\n", err);
        return -1;
    }
    FILE *f = fopen("kernels/cpu/sgemm/seed.c", "r");
    size_t len = 0;
    if (!f)
        return -1;
    FILE *m = open_memstream(&seed_src, &len);
    int ch;
    while ((ch = fgetc(f)) != EOF)
        fputc(ch, m);
    fclose(f);
    fclose(m);
    return pgtest_group_start_migrated(state);
}

static int group_stop(void **state)
{
    avo_problem_free(&prob);
    free(seed_src);
    return pgtest_group_stop(state);
}

static PGresult *exec(PGconn *c, const char *sql, int n, const char *const *params)
{
    PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    return r;
}

/* One engine step as engine.c takes it: snapshot, decide, apply. */
static void step(PGconn *c, long long job)
{
    char id[32], err[256];
    snprintf(id, sizeof id, "%lld", job);
    const char *p1[] = {id};
    PGresult *r = exec(c, "SELECT avo_job_snapshot($1::bigint)", 1, p1);
    json_t *snap = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    PQclear(r);
    assert_non_null(snap);
    json_t *d = avo_evolve_decide(snap, &prob, seed_src, err, sizeof err);
    json_decref(snap);
    if (!d)
        fail_msg("no decision: %s", err);
    char *text = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    const char *p2[] = {id, text};
    PQclear(exec(c, "SELECT avo_job_apply($1::bigint, $2::jsonb)", 2, p2));
    free(text);
}

/* The job's one queued evaluation of a purpose; fails when there is none. */
static long long queued(PGconn *c, long long job, const char *purpose)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT COALESCE(max(id), 0) FROM evaluations WHERE job_id = %lld AND state = 'queued' AND purpose = '%s'",
             job, purpose);
    long long e = pgtest_value(c, sql);
    if (!e)
        fail_msg("no %s evaluation queued for job %lld", purpose, job);
    return e;
}

/* An evaluation finished as a worker would report it. */
static void complete(PGconn *c, long long eval, const char *outcome, double aggregate, const char *paired)
{
    char id[32], agg[32], result[600];
    snprintf(id, sizeof id, "%lld", eval);
    snprintf(agg, sizeof agg, "%g", aggregate);
    snprintf(result, sizeof result, "{\"outcome\":\"%s\",\"aggregate\":%g,\"unit\":\"GFLOP/s\",\"detail\":\"%s\"%s%s}",
             outcome, aggregate, strcmp(outcome, "ok") ? "config 256: max abs error 3.1" : "ok",
             paired ? ",\"paired\":" : "", paired ? paired : "");
    const char *p[] = {id, outcome, agg, result};
    PQclear(exec(c,
                 "UPDATE evaluations SET state = 'done', outcome = $2, aggregate = $3::float8, result = $4::jsonb, "
                 "claimed_at = now(), finished_at = now() WHERE id = $1::bigint",
                 4, p));
}

static long long value(PGconn *c, const char *fmt, long long a)
{
    char sql[600];
    snprintf(sql, sizeof sql, fmt, a);
    return pgtest_value(c, sql);
}

/* A pairing failure of the queued proposal against cand. */
static void fail_pairing(PGconn *c, long long job, long long against)
{
    char paired[200];
    snprintf(paired, sizeof paired, "{\"against\":%lld,\"error\":\"the against's runner, loading: killed by SIGSEGV\"}",
             against);
    complete(c, queued(c, job, "search"), "ok", 6.5, paired);
    step(c, job);
}

/* Seed (5.0), then a version committed over it (6.0, paired gain): the
 * job's best and its island's. Returns that version's candidate id. */
static long long start_job(PGconn *c, long long *job)
{
    *job = pgtest_submit(c, "kernels", SPEC);
    step(c, *job);
    complete(c, queued(c, *job, "search"), "ok", 5.0, NULL);
    step(c, *job);
    const long long seed = value(c, "SELECT seed_candidate FROM jobs WHERE id = %lld", *job);
    long long e = queued(c, *job, "search");
    char paired[200];
    snprintf(paired, sizeof paired, "{\"against\":%lld,\"ratio\":1.2,\"low\":1.1,\"ci\":[1.1,1.3]}", seed);
    complete(c, e, "ok", 6.0, paired);
    step(c, *job);
    const long long best = value(c, "SELECT candidate_id FROM evaluations WHERE id = %lld", e);
    assert_int_equal(value(c, "SELECT best_candidate FROM jobs WHERE id = %lld", *job), best);
    return best;
}

/* A job whose best has had three pairings fail in a row: its recheck's
 * evaluation id (queued). *c: a connection the caller closes. */
static long long rechecked_job(PGconn **c, long long *job, long long *best)
{
    pgtest_need(&pgtest_server);
    *c = pgtest_connect(&pgtest_server);
    *best = start_job(*c, job);
    for (int i = 0; i < 3; i++)
        fail_pairing(*c, *job, *best);
    return queued(*c, *job, "recheck");
}

static void test_failing_best_retired(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long job;
    const long long best = start_job(c, &job);
    const long long seed = value(c, "SELECT seed_candidate FROM jobs WHERE id = %lld", job);
    /* the next proposal is paired against it */
    assert_int_equal(value(c, "SELECT against_id FROM evaluations WHERE id = %lld", queued(c, job, "search")), best);
    const long long total = value(c, "SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = 'search'",
                                  job);

    fail_pairing(c, job, best);
    fail_pairing(c, job, best);
    assert_int_equal(value(c, "SELECT pair_fails FROM islands WHERE job_id = %lld AND idx = 0", job), 2);
    assert_int_equal(value(c, "SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = 'recheck'", job), 0);
    fail_pairing(c, job, best);
    /* the third: queued alone, unpaired, counted nowhere in the budget */
    const long long rc = queued(c, job, "recheck");
    assert_int_equal(value(c, "SELECT candidate_id FROM evaluations WHERE id = %lld", rc), best);
    assert_int_equal(value(c, "SELECT count(*) FROM evaluations WHERE id = %lld AND against_id IS NULL", rc), 1);
    assert_int_equal(value(c, "SELECT pair_fails FROM islands WHERE job_id = %lld AND idx = 0", job), 0);
    assert_int_equal(value(c, "SELECT count(*) FROM events WHERE job_id = %lld AND kind = 'best_recheck'", job), 1);
    assert_int_equal(value(c, "SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = 'search'", job),
                     total + 3);
    /* three more failures while it is queued: not queued twice */
    fail_pairing(c, job, best);
    fail_pairing(c, job, best);
    fail_pairing(c, job, best);
    assert_int_equal(value(c, "SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = 'recheck'", job), 1);

    /* it fails alone: retired, the island and the job back to the seed; a
     * search result applied in the same step comes after the retirement
     * in the event stream */
    complete(c, rc, "wrong_result", 0, NULL);
    const long long late = queued(c, job, "search");
    char paired[200];
    snprintf(paired, sizeof paired, "{\"against\":%lld,\"error\":\"the against crashed\"}", best);
    complete(c, late, "ok", 6.5, paired);
    step(c, job);
    char sql[600];
    snprintf(sql, sizeof sql,
             "SELECT ((SELECT min(id) FROM events WHERE job_id = %lld AND kind = 'best_retired') < "
             "(SELECT min(id) FROM events WHERE job_id = %lld AND kind = 'candidate_evaluated' AND "
             "(data->>'candidate')::bigint = (SELECT candidate_id FROM evaluations WHERE id = %lld)))::int",
             job, job, late);
    assert_int_equal(pgtest_value(c, sql), 1);
    /* the recheck's verdict is not one of the search's outcomes */
    assert_int_equal(value(c, "SELECT (avo_job_json(%lld)->'evaluations'->'by_outcome' ? 'wrong_result')::int", job),
                     0);
    assert_int_equal(value(c, "SELECT consumed::int FROM evaluations WHERE id = %lld", rc), 1);
    assert_int_equal(
        value(
            c,
            "SELECT (retired LIKE 're-checked alone: wrong_result: config 256%%')::int FROM candidates WHERE id = %lld",
            best),
        1);
    assert_int_equal(value(c, "SELECT best_candidate FROM jobs WHERE id = %lld", job), seed);
    assert_int_equal(value(c, "SELECT best_candidate FROM islands WHERE job_id = %lld AND idx = 0", job), seed);
    assert_int_equal(value(c, "SELECT head FROM islands WHERE job_id = %lld AND idx = 0", job), seed);
    assert_int_equal(value(c, "SELECT count(*) FROM events WHERE job_id = %lld AND kind = 'best_retired'", job), 1);
    /* the search goes on, paired against the seed again */
    fail_pairing(c, job, best);
    assert_int_equal(value(c, "SELECT against_id FROM evaluations WHERE id = %lld", queued(c, job, "search")), seed);
    assert_int_equal(value(c, "SELECT (state = 'running')::int FROM jobs WHERE id = %lld", job), 1);
    pgtest_value(c, "SELECT count(avo_job_cancel(id)) FROM jobs WHERE state IN ('queued','running')");
    PQfinish(c);
}

/* The search ends (its final measurement starts) with a recheck queued:
 * the recheck is cancelled with the search's queued work, and no new one
 * is queued while the final measurement runs. */
static void test_recheck_cancelled_at_the_end(void **state)
{
    (void)state;
    PGconn *c;
    long long job, best;
    const long long rc = rechecked_job(&c, &job, &best);
    value(c,
          "UPDATE jobs SET eval_budget = (SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = "
          "'search') RETURNING 1",
          job);
    fail_pairing(c, job, best);
    assert_int_equal(value(c, "SELECT (finishing IS NOT NULL)::int FROM jobs WHERE id = %lld", job), 1);
    assert_int_equal(value(c, "SELECT (state = 'cancelled')::int FROM evaluations WHERE id = %lld", rc), 1);
    assert_int_equal(value(c,
                           "SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = 'recheck' AND "
                           "state = 'queued'",
                           job),
                     0);
    pgtest_value(c, "SELECT count(avo_job_cancel(id)) FROM jobs WHERE state IN ('queued','running')");
    PQfinish(c);
}

static void test_passing_recheck_keeps_the_best(void **state)
{
    (void)state;
    PGconn *c;
    long long job, best;
    const long long rc = rechecked_job(&c, &job, &best);
    complete(c, rc, "ok", 5.9, NULL);
    step(c, job);
    assert_int_equal(value(c, "SELECT consumed::int FROM evaluations WHERE id = %lld", rc), 1);
    assert_int_equal(value(c, "SELECT (retired IS NULL)::int FROM candidates WHERE id = %lld", best), 1);
    assert_int_equal(value(c, "SELECT best_candidate FROM jobs WHERE id = %lld", job), best);
    assert_int_equal(value(c, "SELECT count(*) FROM events WHERE job_id = %lld AND kind = 'best_rechecked'", job), 1);
    assert_int_equal(value(c, "SELECT against_id FROM evaluations WHERE id = %lld", queued(c, job, "search")), best);
    /* having passed one, it is queued again only after six failures in a row */
    const char *count = "SELECT count(*) FROM evaluations WHERE job_id = %lld AND purpose = 'recheck'";
    for (int i = 0; i < 5; i++)
        fail_pairing(c, job, best);
    assert_int_equal(value(c, count, job), 1);
    fail_pairing(c, job, best);
    assert_int_equal(value(c, count, job), 2);
    pgtest_value(c, "SELECT count(avo_job_cancel(id)) FROM jobs WHERE state IN ('queued','running')");
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failing_best_retired),
        cmocka_unit_test(test_passing_recheck_keeps_the_best),
        cmocka_unit_test(test_recheck_cancelled_at_the_end),
    };
    return cmocka_run_group_tests(tests, group_start, group_stop);
}
