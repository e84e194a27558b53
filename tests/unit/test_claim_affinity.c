/* Which evaluation a worker claims when it holds state for some jobs
 * (sql/028_claim_affinity.sql), against a migrated throwaway PostgreSQL
 * (tests/unit/pgtest.h): its resident jobs' work before older work of
 * other jobs; not before a higher priority, nor once the queue's head has
 * waited a minute; not across teams (the fair share picks the team); the
 * three-argument claim in plain queue order; the head is what the worker
 * may claim. Each test has a target of its
 * own, so their queues never mix. */
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
                 "SELECT avo_worker_register('claim-affinity', 4243, '%s', '[]'::jsonb, "
                 "'{\"versions\": {\"cc\": \"12\"}}'::jsonb)",
                 target);
}

/* A running job on target of team (NULL: none) and priority. */
static long long new_job(PGconn *c, const char *target, const char *team, int priority)
{
    char t[64];
    snprintf(t, sizeof t, team ? "'%s'" : "NULL", team);
    return value(c,
                 "INSERT INTO jobs (problem, operator, spec, target, eval_budget, state, team, priority) "
                 "VALUES ('cpu/sgemm', 'none', '{}', '%s', 10, 'running', %s, %d) RETURNING id",
                 target, t, priority);
}

/* A queued evaluation of job, created age_s seconds ago. */
static long long queue_eval(PGconn *c, long long job, const char *target, int age_s)
{
    static int n;
    n++;
    long long cand = value(c,
                           "WITH s AS (INSERT INTO sources (sha256, body) VALUES ('claim-affinity-%lld-%d', 'int x;') "
                           "           ON CONFLICT (sha256) DO UPDATE SET body = 'int x;' RETURNING sha256) "
                           "INSERT INTO candidates (job_id, sha256, operator) SELECT %lld, s.sha256, 'none' FROM s "
                           "RETURNING id",
                           job, n, job);
    return value(c,
                 "INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, created_at) "
                 "SELECT %lld, %lld, 'cpu/sgemm', '%s', j.priority, now() - make_interval(secs => %d) "
                 "FROM jobs j WHERE j.id = %lld RETURNING id",
                 job, cand, target, age_s, job);
}

/* The evaluation a claim returns (0: none); resident: an array literal, or
 * NULL for the three-argument form. */
static long long claim(PGconn *c, long long worker, const char *target, const char *resident)
{
    if (!resident)
        return value(c, "SELECT COALESCE((SELECT id FROM avo_claim(%lld, '%s', 60)), 0)", worker, target);
    return value(c, "SELECT COALESCE((SELECT id FROM avo_claim(%lld, '%s', 60, '%s'::bigint[])), 0)", worker, target,
                 resident);
}

static void test_resident_first(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "aff-a");
    long long a = new_job(c, "aff-a", NULL, 0), b = new_job(c, "aff-a", NULL, 0);
    long long ea = queue_eval(c, a, "aff-a", 5), eb = queue_eval(c, b, "aff-a", 1);
    char res[64];
    snprintf(res, sizeof res, "{%lld}", b);
    /* b's, though a's waited longer */
    assert_int_equal(claim(c, w, "aff-a", res), eb);
    /* nothing of b's left: the queue's order */
    assert_int_equal(claim(c, w, "aff-a", res), ea);
    assert_int_equal(claim(c, w, "aff-a", res), 0);
    /* a job resident but with nothing queued, or none at all: the order */
    long long ea2 = queue_eval(c, a, "aff-a", 3), ea3 = queue_eval(c, a, "aff-a", 2);
    assert_int_equal(claim(c, w, "aff-a", "{}"), ea2);
    assert_int_equal(claim(c, w, "aff-a", res), ea3);
    PQfinish(c);
}

static void test_priority_and_wait_bound(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "aff-b");
    long long hi = new_job(c, "aff-b", NULL, 5), lo = new_job(c, "aff-b", NULL, 0);
    long long ehi = queue_eval(c, hi, "aff-b", 1), elo = queue_eval(c, lo, "aff-b", 1);
    char res[64];
    snprintf(res, sizeof res, "{%lld}", lo);
    /* a higher priority goes first, resident or not */
    assert_int_equal(claim(c, w, "aff-b", res), ehi);
    assert_int_equal(claim(c, w, "aff-b", res), elo);
    /* the head has waited over a minute: it goes first */
    long long a = new_job(c, "aff-b", NULL, 0);
    long long old = queue_eval(c, a, "aff-b", 61), mine = queue_eval(c, lo, "aff-b", 0);
    assert_int_equal(claim(c, w, "aff-b", res), old);
    assert_int_equal(claim(c, w, "aff-b", res), mine);
    PQfinish(c);
}

static void test_teams_keep_their_order(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "aff-c");
    /* two teams with no usage: the fair share takes aff-t1 first */
    long long t1 = new_job(c, "aff-c", "aff-t1", 0), t2 = new_job(c, "aff-c", "aff-t2", 0);
    long long t1b = new_job(c, "aff-c", "aff-t1", 0);
    long long e1 = queue_eval(c, t1, "aff-c", 5), e1b = queue_eval(c, t1b, "aff-c", 1);
    long long e2 = queue_eval(c, t2, "aff-c", 1);
    char res[64];
    snprintf(res, sizeof res, "{%lld,%lld}", t2, t1b);
    /* the first team's, and of its jobs the resident one, not its older
     * evaluation nor the other team's resident job */
    long long first = claim(c, w, "aff-c", res);
    assert_int_equal(first, e1b);
    long long second = claim(c, w, "aff-c", res);
    long long third = claim(c, w, "aff-c", res);
    assert_true((second == e1 && third == e2) || (second == e2 && third == e1));
    assert_int_equal(first + second + third, e1 + e1b + e2);
    PQfinish(c);
}

/* The queue's head that decides for or against the preference is the head
 * of what this worker may claim: an evaluation pinned to another GPU model
 * or backing off (available_at ahead) is not its head. Before
 * sql/029_claim_head.sql such an evaluation, a minute old or of a higher
 * priority, switched the preference off, and the worker took another
 * job's older work instead of its resident job's. */
static void test_head_is_what_the_worker_may_claim(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "aff-e");
    long long a = new_job(c, "aff-e", NULL, 0), b = new_job(c, "aff-e", NULL, 0);
    long long pinned = queue_eval(c, a, "aff-e", 120);
    value(c, "UPDATE evaluations SET gpu_model = 'H200' WHERE id = %lld RETURNING id", pinned);
    long long later = queue_eval(c, a, "aff-e", 90);
    value(c,
          "UPDATE evaluations SET priority = 9, available_at = now() + interval '1 hour' WHERE id = %lld RETURNING id",
          later);
    long long ea = queue_eval(c, a, "aff-e", 5), eb = queue_eval(c, b, "aff-e", 1);
    char res[64];
    snprintf(res, sizeof res, "{%lld}", b);
    /* this worker has no GPU: neither the pinned nor the later one is its
     * head; ea is, 5 s old and of b's priority: b's first */
    assert_int_equal(claim(c, w, "aff-e", res), eb);
    assert_int_equal(claim(c, w, "aff-e", res), ea);
    assert_int_equal(claim(c, w, "aff-e", res), 0);
    PQfinish(c);
}

static void test_three_argument_claim(void **state)
{
    (void)state;
    pgtest_need(&pgtest_server);
    PGconn *c = pgtest_connect(&pgtest_server);
    long long w = new_worker(c, "aff-d");
    long long a = new_job(c, "aff-d", NULL, 0), b = new_job(c, "aff-d", NULL, 0);
    long long ea = queue_eval(c, a, "aff-d", 5), eb = queue_eval(c, b, "aff-d", 1);
    assert_int_equal(claim(c, w, "aff-d", NULL), ea);
    assert_int_equal(claim(c, w, "aff-d", NULL), eb);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resident_first),
        cmocka_unit_test(test_priority_and_wait_bound),
        cmocka_unit_test(test_teams_keep_their_order),
        cmocka_unit_test(test_three_argument_claim),
        cmocka_unit_test(test_head_is_what_the_worker_may_claim),
    };
    return cmocka_run_group_tests(tests, pgtest_group_start_migrated, pgtest_group_stop);
}
