/* The order in which a worker claims profiles (sql/027_profile_order.sql)
 * against a migrated throwaway PostgreSQL (tests/unit/pgtest.h): the
 * profiles someone waits for before evaluations, a new best's only when
 * the worker has no evaluation; a new best's whose candidate is no longer
 * an island's best closed as superseded, never claimed; a request taking
 * a queued new best's task over; the three-argument claim as before. */
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

static long long new_worker(PGconn *c, const char *target)
{
    return value(c,
                 "SELECT avo_worker_register('profile-order', 4242, '%s', '[]'::jsonb, "
                 "'{\"versions\": {\"cc\": \"12\"}}'::jsonb)",
                 target);
}

/* A running job on target with one island and n candidates of its own
 * (cand[0..n-1]); the island's best is none yet. Returns the job. */
static long long new_job(PGconn *c, const char *target, long long *cand, int n)
{
    long long job = value(c,
                          "INSERT INTO jobs (problem, operator, spec, target, eval_budget, state) "
                          "VALUES ('cpu/sgemm', 'none', '{}', '%s', 10, 'running') RETURNING id",
                          target);
    value(c, "INSERT INTO islands (job_id, idx) VALUES (%lld, 0) RETURNING idx", job);
    for (int i = 0; i < n; i++)
        cand[i] = value(c,
                        "WITH s AS (INSERT INTO sources (sha256, body) VALUES ('profile-order-%lld-%d', 'int x;') "
                        "           ON CONFLICT (sha256) DO UPDATE SET body = 'int x;' RETURNING sha256) "
                        "INSERT INTO candidates (job_id, sha256, operator) SELECT %lld, s.sha256, 'none' FROM s "
                        "RETURNING id",
                        job, i, job);
    return job;
}

static void set_best(PGconn *c, long long job, long long cand)
{
    value(c, "UPDATE islands SET best_candidate = %lld WHERE job_id = %lld AND idx = 0 RETURNING idx", cand, job);
}

/* The profile a claim returns (0: none). */
static long long claim(PGconn *c, long long worker, const char *target, const char *background)
{
    return value(c, "SELECT COALESCE((SELECT id FROM avo_claim_profile(%lld, '%s', 60%s%s)), 0)", worker, target,
                 background ? ", " : "", background ? background : "");
}

static void test_waited_for_first_new_best_in_background(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "order-a"), cand[3];
    long long job = new_job(c, "order-a", cand, 3);
    /* The trigger queues the first best's profile. */
    set_best(c, job, cand[0]);
    long long nb = value(c, "SELECT id FROM profiles WHERE candidate_id = %lld AND why = 'new_best'", cand[0]);
    assert_true(nb > 0);
    long long user = value(c, "SELECT avo_profile_request(%lld, NULL, 'user')", cand[1]);
    assert_true(user > nb);
    /* Before an evaluation: the user's only, though it is the later one. */
    assert_int_equal(claim(c, w, "order-a", "false"), user);
    assert_int_equal(claim(c, w, "order-a", "false"), 0);
    assert_int_equal(value(c, "SELECT count(*) FROM profiles WHERE id = %lld AND state = 'queued'", nb), 1);
    /* With no evaluation to run: the new best's, still the island's best. */
    assert_int_equal(claim(c, w, "order-a", "true"), nb);
    assert_int_equal(
        value(c, "SELECT count(*) FROM profiles WHERE id = %lld AND state = 'running' AND attempts = 1", nb), 1);
    PQfinish(c);
}

static void test_superseded_closed_not_claimed(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "order-b"), cand[3];
    long long job = new_job(c, "order-b", cand, 3);
    set_best(c, job, cand[0]);
    set_best(c, job, cand[1]);
    long long old = value(c, "SELECT id FROM profiles WHERE candidate_id = %lld AND why = 'new_best'", cand[0]);
    long long cur = value(c, "SELECT id FROM profiles WHERE candidate_id = %lld AND why = 'new_best'", cand[1]);
    assert_true(old > 0 && cur > old);
    /* Not before an evaluation, and nothing is closed then. */
    assert_int_equal(claim(c, w, "order-b", "false"), 0);
    assert_int_equal(value(c, "SELECT count(*) FROM profiles WHERE id IN (%lld, %lld) AND state = 'queued'", old, cur),
                     2);
    /* In the background: the replaced best's closed, the current one's claimed. */
    assert_int_equal(claim(c, w, "order-b", "true"), cur);
    assert_int_equal(
        value(c,
              "SELECT count(*) FROM profiles WHERE id = %lld AND state = 'done' AND attempts = 0 "
              "AND worker_id IS NULL AND result->>'outcome' = 'superseded' AND result->>'mode' = 'profile' "
              "AND jsonb_array_length(result->'configs') = 0 "
              "AND result->>'detail' LIKE 'not profiled: candidate %lld was no longer an island''s best%%'",
              old, cand[0]),
        1);
    /* Its island goes back to it (a retired best): queued again, as its
     * task was closed without counters. */
    set_best(c, job, cand[0]);
    assert_int_equal(value(c,
                           "SELECT count(*) FROM profiles WHERE candidate_id = %lld AND why = 'new_best' "
                           "AND state = 'queued'",
                           cand[0]),
                     1);
    /* The agent does not take the superseded task for a finished profile:
     * it takes the queued one over. */
    long long agent = value(c, "SELECT avo_profile_request(%lld, NULL, 'agent')", cand[0]);
    assert_true(agent != old);
    assert_int_equal(
        value(c, "SELECT count(*) FROM profiles WHERE id = %lld AND why = 'agent' AND state = 'queued'", agent), 1);
    /* Another job's superseded profile of another target is left alone. */
    long long cand2[2];
    long long job2 = new_job(c, "order-other", cand2, 2);
    set_best(c, job2, cand2[0]);
    set_best(c, job2, cand2[1]);
    assert_int_equal(claim(c, w, "order-b", "true"), agent);
    assert_int_equal(
        value(c, "SELECT count(*) FROM profiles WHERE job_id = %lld AND why = 'new_best' AND state = 'queued'", job2),
        2);
    PQfinish(c);
}

static void test_request_takes_over_queued_new_best(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "order-c"), cand[2];
    long long job = new_job(c, "order-c", cand, 2);
    set_best(c, job, cand[0]);
    long long nb = value(c, "SELECT id FROM profiles WHERE candidate_id = %lld AND why = 'new_best'", cand[0]);
    /* A person asks for it: the same task, now theirs, and claimed before
     * an evaluation; replaced as the island's best, it is still run. */
    assert_int_equal(value(c, "SELECT avo_profile_request(%lld, NULL, 'user')", cand[0]), nb);
    assert_int_equal(value(c, "SELECT count(*) FROM profiles WHERE id = %lld AND why = 'user'", nb), 1);
    set_best(c, job, cand[1]);
    assert_int_equal(claim(c, w, "order-c", "false"), nb);
    /* Best again: the task a person took over stands for it, no second. */
    set_best(c, job, cand[0]);
    assert_int_equal(value(c, "SELECT count(*) FROM profiles WHERE candidate_id = %lld", cand[0]), 1);
    /* A request racing a background claim that closes the task: the
     * closed task is not returned (the request queues its own). */
    set_best(c, job, cand[1]);
    long long nb1 = value(c, "SELECT id FROM profiles WHERE candidate_id = %lld AND why = 'new_best'", cand[1]);
    set_best(c, job, cand[0]);
    assert_int_equal(claim(c, w, "order-c", "true"), 0);
    assert_int_equal(
        value(c, "SELECT count(*) FROM profiles WHERE id = %lld AND result->>'outcome' = 'superseded'", nb1), 1);
    long long req = value(c, "SELECT avo_profile_request(%lld, NULL, 'user')", cand[1]);
    assert_true(req != nb1);
    PQfinish(c);
}

static void test_three_argument_claim(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "order-d"), cand[2];
    long long job = new_job(c, "order-d", cand, 2);
    set_best(c, job, cand[0]);
    long long nb = value(c, "SELECT id FROM profiles WHERE candidate_id = %lld AND why = 'new_best'", cand[0]);
    /* A worker from before sql/027: it claims a new best's profile as it did. */
    assert_int_equal(claim(c, w, "order-d", NULL), nb);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waited_for_first_new_best_in_background),
        cmocka_unit_test(test_superseded_closed_not_claimed),
        cmocka_unit_test(test_request_takes_over_queued_new_best),
        cmocka_unit_test(test_three_argument_claim),
    };
    return cmocka_run_group_tests(tests, pgtest_group_start_migrated, pgtest_group_stop);
}
