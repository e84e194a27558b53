/* The worker's state changes in sql/024_worker_states.sql against a migrated
 * throwaway PostgreSQL (tests/unit/pgtest.h): registration, the registry
 * state and heartbeat, lease renewal (only the running rows the renewing
 * worker holds, and only those are returned) and giving a prefetched claim
 * back (only by its holder, with the claim's attempt returned). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/pgtest.h"

#define value pgtest_valuef

static long long new_worker(PGconn *c, const char *host)
{
    return value(c,
                 "SELECT avo_worker_register('%s', 4242, 'cpu', '[]'::jsonb, "
                 "'{\"versions\": {\"cc\": \"12\"}}'::jsonb)",
                 host);
}

/* An evaluation of a job of its own in the given state, held by worker
 * (0: none), its lease an hour gone, one attempt spent. */
static long long new_evaluation(PGconn *c, const char *state, long long worker)
{
    long long cand = value(c,
                           "WITH s AS (INSERT INTO sources (sha256, body) VALUES ('worker-states', '') "
                           "           ON CONFLICT (sha256) DO UPDATE SET body = '' RETURNING sha256), "
                           "     j AS (INSERT INTO jobs (problem, operator, spec, target, eval_budget, state) "
                           "           VALUES ('cpu/sgemm', 'none', '{}', 'cpu', 1, 'running') RETURNING id) "
                           "INSERT INTO candidates (job_id, sha256, operator) SELECT j.id, s.sha256, 'none' FROM j, s "
                           "RETURNING id");
    char w[32] = "NULL";
    if (worker)
        snprintf(w, sizeof w, "%lld", worker);
    return value(c,
                 "INSERT INTO evaluations (job_id, candidate_id, problem, target, state, worker_id, attempts, "
                 "lease_expires) SELECT job_id, id, 'cpu/sgemm', 'cpu', '%s', %s, 1, now() - interval '1 hour' "
                 "FROM candidates WHERE id = %lld RETURNING id",
                 state, w, cand);
}

static void test_register_and_states(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long id = new_worker(c, "states-host");
    assert_true(id > 0);
    assert_int_equal(value(c,
                           "SELECT count(*) FROM workers WHERE id = %lld AND state = 'idle' AND pid = 4242 "
                           "AND host = 'states-host' AND toolchain->'versions'->>'cc' = '12'",
                           id),
                     1);
    const char *states[] = {"busy", "draining", "unhealthy", "idle", "gone"};
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        value(c, "UPDATE workers SET last_seen = now() - interval '1 hour' WHERE id = %lld", id);
        value(c, "SELECT avo_worker_set_state(%lld, '%s')", id, states[i]);
        assert_int_equal(value(c,
                               "SELECT count(*) FROM workers WHERE id = %lld AND state = '%s' "
                               "AND last_seen > now() - interval '1 minute'",
                               id, states[i]),
                         1);
    }
    /* The heartbeat refreshes last_seen and leaves the state alone. */
    value(c, "SELECT avo_worker_set_state(%lld, 'busy')", id);
    value(c, "UPDATE workers SET last_seen = now() - interval '1 hour' WHERE id = %lld", id);
    value(c, "SELECT avo_worker_seen(%lld)", id);
    assert_int_equal(value(c,
                           "SELECT count(*) FROM workers WHERE id = %lld AND state = 'busy' "
                           "AND last_seen > now() - interval '1 minute'",
                           id),
                     1);
    /* A state the registry does not know is refused by the table. */
    PGresult *r = PQexec(c, "SELECT avo_worker_set_state(1, 'asleep')");
    assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
    PQclear(r);
    PQfinish(c);
}

/* True when the evaluation's lease now lies ahead: it was renewed. */
static int renewed(PGconn *c, long long eval)
{
    return (int)value(
        c, "SELECT (lease_expires > now() + interval '500 seconds')::int FROM evaluations WHERE id = %lld", eval);
}

static void test_renew_leases_holder_only(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long a = new_worker(c, "renew-a"), b = new_worker(c, "renew-b");
    long long mine = new_evaluation(c, "running", a), mine2 = new_evaluation(c, "running", a);
    long long theirs = new_evaluation(c, "running", b), queued = new_evaluation(c, "queued", 0);
    long long done = new_evaluation(c, "done", a), cancelled = new_evaluation(c, "cancelled", a);
    /* The ids the call returns: exactly the two running under a. */
    assert_int_equal(value(c,
                           "SELECT count(*) * 1000 + sum(CASE WHEN id IN (%lld, %lld) THEN 1 ELSE 0 END) "
                           "FROM avo_renew_leases(ARRAY[%lld, %lld, %lld, %lld, %lld, %lld]::bigint[], %lld, 600) id",
                           mine, mine2, mine, mine2, theirs, queued, done, cancelled, a),
                     2002);
    assert_true(renewed(c, mine));
    assert_true(renewed(c, mine2));
    assert_false(renewed(c, theirs)); /* another worker's lease is never extended */
    assert_false(renewed(c, queued));
    assert_false(renewed(c, done));
    assert_false(renewed(c, cancelled)); /* a cancelled one: the heartbeat must learn it is gone */
    /* Asked for only one no longer its own, the worker gets nothing back:
     * that is how its heartbeat stops the evaluation. */
    assert_int_equal(value(c, "SELECT count(*) FROM avo_renew_leases(ARRAY[%lld]::bigint[], %lld, 600)", theirs, a), 0);
    assert_int_equal(value(c, "SELECT count(*) FROM avo_renew_leases('{}'::bigint[], %lld, 600)", a), 0);
    PQfinish(c);
}

static void test_give_back(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long a = new_worker(c, "give-a"), b = new_worker(c, "give-b");
    long long e = new_evaluation(c, "running", a);
    /* Not by another worker. */
    assert_int_equal(value(c, "SELECT avo_give_back(%lld, %lld)::int", e, b), 0);
    assert_int_equal(value(c,
                           "SELECT count(*) FROM evaluations WHERE id = %lld AND state = 'running' "
                           "AND worker_id = %lld AND attempts = 1",
                           e, a),
                     1);
    assert_int_equal(value(c, "SELECT avo_give_back(%lld, %lld)::int", e, a), 1);
    assert_int_equal(value(c,
                           "SELECT count(*) FROM evaluations WHERE id = %lld AND state = 'queued' "
                           "AND worker_id IS NULL AND lease_expires IS NULL AND attempts = 0",
                           e),
                     1);
    /* Once only: queued now, it is no longer the worker's to give. */
    assert_int_equal(value(c, "SELECT avo_give_back(%lld, %lld)::int", e, a), 0);
    assert_int_equal(value(c, "SELECT attempts FROM evaluations WHERE id = %lld", e), 0);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_and_states),
        cmocka_unit_test(test_renew_leases_holder_only),
        cmocka_unit_test(test_give_back),
    };
    return cmocka_run_group_tests(tests, pgtest_group_start_migrated, pgtest_group_stop);
}
