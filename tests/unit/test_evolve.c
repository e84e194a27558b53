/* The evolution step: AVO's commit rule, a broken seed failing the job at
 * once, budgets finishing it, and proposals parented on the lineage head. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/commit.h"
#include "daemon/avod/evolve.h"

static avo_problem prob;

static int setup(void **state)
{
    (void)state;
    char err[512];
    int rc = avo_problem_load(&prob, "kernels/cpu/sgemm", err, sizeof err);
    if (rc < 0)
        print_error("%s\n", err);
    return rc < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    avo_problem_free(&prob);
    return 0;
}

static json_t *snap(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        print_error("bad test JSON: %s\n", e.text);
    return j;
}

static json_t *decide(const char *text)
{
    char err[256];
    json_t *s = snap(text);
    json_t *d = avo_evolve_decide(s, &prob, "int sgemm(void);\n", err, sizeof err);
    json_decref(s);
    assert_non_null(d);
    return d;
}

static void test_commit_rule(void **state)
{
    (void)state;
    assert_true(avo_evolve_commit_rule(10.0, 10.0, 0.0)); /* ties commit (>=) */
    assert_false(avo_evolve_commit_rule(9.99, 10.0, 0.0));
    assert_true(avo_evolve_commit_rule(9.8, 10.0, 0.03)); /* within epsilon */
    assert_false(avo_evolve_commit_rule(9.6, 10.0, 0.03));
    assert_false(avo_evolve_commit_rule(0.0, 0.0, 0.0));       /* a zero score never commits */
    assert_false(avo_evolve_commit_rule(0.0 / 0.0, 1.0, 0.0)); /* NaN never commits */
}

static void test_queued_job_starts_with_the_seed(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"queued\",\"spec\":{},\"budget\":5,\"total\":0,\"inflight\":0}");
    assert_true(json_is_true(json_object_get(d, "start")));
    json_t *p = json_object_get(d, "propose");
    assert_int_equal(json_array_size(p), 1);
    json_t *seed = json_array_get(p, 0);
    assert_true(json_is_true(json_object_get(seed, "seed")));
    /* the seed carries the spec's default knob values */
    for (int i = 0; i < prob.nknobs; i++)
        assert_int_equal(json_integer_value(json_object_get(json_object_get(seed, "knobs"), prob.knobs[i].name)),
                         prob.knobs[i].dflt);
    assert_int_equal(strlen(json_string_value(json_object_get(seed, "sha256"))), 64);
    json_decref(d);
}

static void test_broken_seed_fails_the_job_with_evidence(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":5,\"total\":1,\"inflight\":0,"
                       "\"seed_candidate\":7,\"finished\":[{\"eval\":3,\"candidate\":7,\"outcome\":\"wrong_result\","
                       "\"aggregate\":0,\"detail\":\"C[3] off by 2\"}],\"tried\":[]}");
    json_t *fin = json_object_get(d, "finish");
    assert_string_equal(json_string_value(json_object_get(fin, "state")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(fin, "reason")), "C[3] off by 2"));
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
}

static void test_commit_and_new_best(void **state)
{
    (void)state;
    json_t *d = decide(
        "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":2,\"epsilon\":0},\"budget\":10,\"total\":4,"
        "\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":2,\"best_aggregate\":10,\"seed_aggregate\":5,"
        "\"finished\":[{\"eval\":3,\"candidate\":3,\"parent\":2,\"outcome\":\"ok\",\"aggregate\":9},"
        "{\"eval\":4,\"candidate\":4,\"parent\":2,\"outcome\":\"ok\",\"aggregate\":12},"
        "{\"eval\":5,\"candidate\":5,\"parent\":2,\"outcome\":\"timeout\",\"aggregate\":50}],\"tried\":[]}");
    json_t *c = json_object_get(d, "consume");
    assert_int_equal(json_array_size(c), 3);
    assert_false(json_is_true(json_object_get(json_array_get(c, 0), "commit"))); /* 9 < 10 */
    assert_true(json_is_true(json_object_get(json_array_get(c, 1), "commit")));  /* 12 >= 10 */
    assert_true(json_is_true(json_object_get(json_array_get(c, 1), "new_best")));
    assert_true(json_real_value(json_object_get(json_array_get(c, 1), "speedup")) > 2.39);
    /* a failed outcome scores zero whatever it claimed */
    assert_false(json_is_true(json_object_get(json_array_get(c, 2), "commit")));
    assert_true(json_real_value(json_object_get(json_array_get(c, 2), "aggregate")) == 0.0);
    /* two islands, nothing in flight: two proposals, parented on the new head */
    json_t *p = json_object_get(d, "propose");
    assert_int_equal(json_array_size(p), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(p, 0), "parent")), 4);
    json_decref(d);
}

static void test_budget_finishes_when_nothing_is_in_flight(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":3,\"total\":3,\"inflight\":1,"
                       "\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_true(json_is_null(json_object_get(d, "finish")));
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":3,\"total\":3,\"inflight\":0,"
               "\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "reason")),
                        "evaluation budget reached");
    json_decref(d);
    /* a job with no committed seed (evaluations queued by hand) still ends */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":2,\"total\":2,\"inflight\":0,"
               "\"finished\":[{\"eval\":1,\"candidate\":9,\"outcome\":\"ok\",\"aggregate\":3}],\"tried\":[]}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "reason")),
                        "evaluation budget reached");
    json_decref(d);
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{\"budget\":{\"wall_seconds\":60}},\"budget\":30,"
               "\"total\":3,\"inflight\":1,\"elapsed_s\":61,\"seed_candidate\":1,\"best_candidate\":1,"
               "\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "reason")),
                        "wall-time budget reached");
    json_decref(d);
}

static void test_same_snapshot_same_decision(void **state)
{
    (void)state;
    const char *s = "{\"id\":9,\"state\":\"running\",\"spec\":{\"islands\":3,\"operator_params\":{\"seed\":77}},"
                    "\"budget\":30,\"total\":1,\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":1,"
                    "\"best_aggregate\":5,\"finished\":[],\"tried\":[]}";
    json_t *a = decide(s), *b = decide(s);
    assert_true(json_equal(a, b)); /* a replayed step after a crash proposes the same candidates */
    json_decref(a);
    json_decref(b);
}

static json_t *find_in(json_t *events, const char *kind)
{
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) if (!strcmp(json_string_value(json_object_get(e, "kind")),
                                                 kind)) return json_object_get(e, "data");
    return NULL;
}

/* The step's own events, then those each applied result caused. */
static json_t *find_event(json_t *d, const char *kind)
{
    json_t *e = find_in(json_object_get(d, "events"), kind), *c;
    if (!e)
        e = find_in(json_object_get(d, "recheck_events"), kind);
    size_t i;
    json_array_foreach(json_object_get(d, "consume"), i, c) if (!e) e = find_in(json_object_get(c, "events"), kind);
    return e;
}

/* Why the search ended: in "finish", or, where a best other than the seed
 * is first measured against the seed, in "final". */
static const char *reason(json_t *d)
{
    json_t *f = json_object_get(d, "finish");
    return json_string_value(json_object_get(json_is_object(f) ? f : json_object_get(d, "final"), "reason"));
}

/* Four islands right after the seed: one proposal each, parented on the
 * seed, carrying its island, a diff and the island rows. */
static void test_islands_each_propose_from_their_head(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":4},\"budget\":20,\"total\":1,"
                       "\"inflight\":0,\"seed_candidate\":1,\"finished\":[{\"eval\":1,\"candidate\":1,"
                       "\"island\":0,\"outcome\":\"ok\",\"aggregate\":5,\"knobs\":{\"ORDER\":0,\"BM\":32,\"BN\":32,"
                       "\"BK\":32,\"UNROLL\":1}}],\"tried\":[{\"candidate\":1,\"island\":0,\"knobs\":{\"ORDER\":0,"
                       "\"BM\":32,\"BN\":32,\"BK\":32,\"UNROLL\":1}}]}");
    json_t *p = json_object_get(d, "propose");
    assert_int_equal(json_array_size(p), 4);
    for (int k = 0; k < 4; k++) {
        json_t *x = json_array_get(p, (size_t)k);
        assert_int_equal(json_integer_value(json_object_get(x, "island")), k);
        assert_int_equal(json_integer_value(json_object_get(x, "parent")), 1);
        const char *diff = json_string_value(json_object_get(x, "diff"));
        assert_non_null(diff);
        assert_non_null(strstr(diff, "+#define"));
        assert_non_null(strstr(diff, "-#define"));
        assert_non_null(strstr(json_string_value(json_object_get(x, "notes")), "tune: "));
    }
    /* the seed applied in this same step is already a parent to select */
    int from_seed = 0;
    for (size_t k = 0; k < 4; k++) {
        json_t *par = json_object_get(json_array_get(p, k), "parents");
        from_seed += json_array_size(par) > 0 && json_integer_value(json_array_get(par, 0)) == 1;
    }
    assert_true(from_seed >= 1);
    json_t *isl = json_object_get(d, "islands");
    assert_int_equal(json_array_size(isl), 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(isl, (size_t)k), "head")), 1);
    assert_int_equal(json_integer_value(json_object_get(d, "commits")), 1);
    json_decref(d);
}

/* operator_params.inflight 3, one island, right after the seed: three
 * proposals at once, all of island 0, no two the same point; with one of
 * them in flight, two more; with the default (1) and one in flight, none. */
static void test_inflight_depth(void **state)
{
    (void)state;
    static const char seeded[] =
        "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":1,\"operator_params\":{\"seed\":5,\"inflight\":3}},"
        "\"budget\":20,\"total\":1,\"inflight\":0,\"seed_candidate\":1,\"finished\":[{\"eval\":1,\"candidate\":1,"
        "\"island\":0,\"outcome\":\"ok\",\"aggregate\":5,\"knobs\":{\"ORDER\":0,\"BM\":32,\"BN\":32,\"BK\":32,"
        "\"UNROLL\":1}}],\"tried\":[{\"candidate\":1,\"island\":0,\"knobs\":{\"ORDER\":0,\"BM\":32,\"BN\":32,"
        "\"BK\":32,\"UNROLL\":1}}]}";
    json_t *d = decide(seeded);
    json_t *p = json_object_get(d, "propose");
    assert_int_equal(json_array_size(p), 3);
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(json_integer_value(json_object_get(json_array_get(p, k), "island")), 0);
        for (size_t m = 0; m < k; m++)
            assert_false(json_equal(json_object_get(json_array_get(p, k), "knobs"),
                                    json_object_get(json_array_get(p, m), "knobs")));
    }
    json_decref(d);
    const char *running = "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":1,\"operator_params\":{\"seed\":5%s}},"
                          "\"budget\":20,\"total\":2,\"inflight\":1,\"seed_candidate\":1,\"best_candidate\":1,"
                          "\"best_aggregate\":5,\"islands\":[{\"idx\":0,\"head\":1,\"best_candidate\":1,\"best\":5,"
                          "\"commits\":1,\"stale\":0,\"level\":0,\"inflight\":1}],\"finished\":[],"
                          "\"tried\":[{\"candidate\":1,\"island\":0,\"outcome\":\"ok\",\"aggregate\":5,\"knobs\":"
                          "{\"ORDER\":0,\"BM\":32,\"BN\":32,\"BK\":32,\"UNROLL\":1}},{\"candidate\":2,\"island\":0,"
                          "\"knobs\":{\"ORDER\":1,\"BM\":64,\"BN\":32,\"BK\":32,\"UNROLL\":1}}]}";
    char text[2048];
    snprintf(text, sizeof text, running, ",\"inflight\":3");
    d = decide(text);
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 2);
    json_decref(d);
    snprintf(text, sizeof text, running, "");
    d = decide(text);
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
}

#define ISL(i, head, best)                                                                                             \
    "{\"idx\":" #i ",\"head\":" #head ",\"best_candidate\":" #head ",\"best\":" #best                                  \
    ",\"commits\":1,\"stale\":0,\"level\":0,\"inflight\":1}"

/* migrate_every 2: the job's second commit makes the islands behind the
 * global best adopt it. */
static void test_migration_every_k_commits(void **state)
{
    (void)state;
    json_t *d = decide(
        "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":3,\"migrate_every\":2},"
        "\"budget\":50,\"total\":6,\"inflight\":2,\"seed_candidate\":1,\"best_candidate\":4,"
        "\"best_aggregate\":8,\"seed_aggregate\":5,\"commits\":1,\"stale\":0,\"islands\":[" ISL(0, 4, 8) "," ISL(
            1, 1,
            5) "," ISL(2, 1,
                       5) "],"
                          "\"finished\":[{\"eval\":6,\"candidate\":6,\"island\":1,\"parent\":1,\"outcome\":\"ok\","
                          "\"aggregate\":9}],\"tried\":[{\"candidate\":6,\"island\":1}]}");
    /* carried by the result that caused it, so it is stored in its place */
    json_t *m = find_in(json_object_get(json_array_get(json_object_get(d, "consume"), 0), "events"), "island_migrated");
    assert_non_null(m);
    /* island 1 now leads with 9; islands 0 (8) and 2 (5) adopt candidate 6 */
    json_t *isl = json_object_get(d, "islands");
    for (int k = 0; k < 3; k++) {
        json_t *x = json_array_get(isl, (size_t)k);
        assert_int_equal(json_integer_value(json_object_get(x, "head")), 6);
        assert_true(json_real_value(json_object_get(x, "best")) == 9.0);
    }
    assert_int_equal(json_integer_value(json_object_get(json_array_get(isl, 0), "migrations")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(isl, 1), "migrations")), 0);
    assert_int_equal(json_integer_value(json_object_get(d, "commits")), 2);
    json_decref(d);
}

/* patience 2: the second miss in a row on an island raises its level and
 * says so; limit 3: the third miss across the job ends it. */
static void test_stagnation_tells_the_operator_then_stops(void **state)
{
    (void)state;
    const char *head = "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":1,\"stagnation\":{\"patience\":2,"
                       "\"limit\":3}},\"budget\":50,\"total\":4,\"inflight\":0,\"seed_candidate\":1,"
                       "\"best_candidate\":1,\"best_aggregate\":5,\"seed_aggregate\":5,\"commits\":1,";
    char buf[2048];
    snprintf(buf, sizeof buf,
             "%s\"stale\":1,\"islands\":[{\"idx\":0,\"head\":1,\"best_candidate\":1,\"best\":5,"
             "\"stale\":1,\"level\":0}],\"finished\":[{\"eval\":3,\"candidate\":3,\"island\":0,\"outcome\":\"ok\","
             "\"aggregate\":4}],\"tried\":[]}",
             head);
    json_t *d = decide(buf);
    json_t *e = find_event(d, "stagnation");
    assert_non_null(e);
    assert_int_equal(json_integer_value(json_object_get(e, "level")), 1);
    assert_string_equal(json_string_value(json_object_get(e, "action")), "mutation raised");
    assert_true(json_is_null(json_object_get(d, "finish")));
    json_decref(d);

    snprintf(buf, sizeof buf,
             "%s\"stale\":2,\"islands\":[{\"idx\":0,\"head\":1,\"best_candidate\":1,\"best\":5,"
             "\"stale\":2,\"level\":1}],\"finished\":[{\"eval\":4,\"candidate\":4,\"island\":0,"
             "\"outcome\":\"timeout\",\"aggregate\":0}],\"tried\":[]}",
             head);
    d = decide(buf);
    assert_string_equal(reason(d), "stagnation limit reached: 3 evaluations without a commit");
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
}

/* Candidate 3 (7.5) reaches the target score 7 of a job whose best was the seed 1 (5). */
static const char target_reached[] =
    "{\"id\":1,\"state\":\"running\",\"spec\":{\"target_score\":7},\"budget\":50,\"total\":3,"
    "\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,"
    "\"seed_aggregate\":5,\"finished\":[{\"eval\":3,\"candidate\":3,\"island\":0,"
    "\"outcome\":\"ok\",\"aggregate\":7.5}],\"tried\":[]}";

static void test_target_score_and_resource_budgets_end_the_job(void **state)
{
    (void)state;
    json_t *d = decide(target_reached);
    assert_non_null(strstr(reason(d), "target score reached"));
    json_decref(d);
    /* GPU-seconds: 9.5 applied + 1 in this step reach the 10 s budget */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{\"budget\":{\"gpu_seconds\":10}},\"budget\":50,"
               "\"total\":3,\"inflight\":1,\"gpu_seconds\":9.5,\"seed_candidate\":1,\"best_candidate\":1,"
               "\"best_aggregate\":5,\"finished\":[{\"eval\":3,\"candidate\":3,\"outcome\":\"ok\","
               "\"aggregate\":1,\"gpu_s\":1.0}],\"tried\":[]}");
    assert_string_equal(reason(d), "GPU-seconds budget reached");
    json_t *b = find_event(d, "budget_reached");
    assert_string_equal(json_string_value(json_object_get(b, "budget")), "gpu_seconds");
    assert_true(json_real_value(json_object_get(b, "used")) >= 10.0);
    json_decref(d);
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{\"budget\":{\"energy_joules\":100}},\"budget\":50,"
               "\"total\":3,\"inflight\":0,\"energy_j\":100,\"seed_candidate\":1,\"best_candidate\":1,"
               "\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_string_equal(reason(d), "energy budget reached");
    json_decref(d);
}

/* A seed from a file: its text (from the snapshot) with the start knobs,
 * numbered as its own file. */
static void test_custom_seed_and_start_knobs(void **state)
{
    (void)state;
    json_t *d = decide("{\"id\":1,\"state\":\"queued\",\"spec\":{\"seed\":{\"file\":\"mine.c\","
                       "\"knobs\":{\"BM\":64}}},\"seed_source\":\"int mine(void);\\n\",\"budget\":5,\"total\":0,"
                       "\"inflight\":0}");
    json_t *seed = json_array_get(json_object_get(d, "propose"), 0);
    const char *src = json_string_value(json_object_get(seed, "source"));
    assert_non_null(strstr(src, "#define BM 64\n"));
    assert_non_null(strstr(src, "#line 1 \"mine.c\"\nint mine(void);"));
    assert_null(strstr(src, "int sgemm(void);"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(seed, "knobs"), "BM")), 64);
    json_decref(d);
}

/* One result of candidate 3 on island 0, whose best is candidate 2 (10.0),
 * with the job's commit {min_gain 0.005, confidence 0.95}. */
static json_t *consume_one(const char *result_tail, const char *spec_extra)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"id\":1,\"state\":\"running\",\"spec\":{\"commit\":{\"min_gain\":0.005,\"confidence\":0.95}%s},"
             "\"budget\":10,\"total\":3,\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":2,"
             "\"best_aggregate\":10,\"seed_aggregate\":5,\"islands\":[{\"idx\":0,\"head\":2,\"best_candidate\":2,"
             "\"best\":10}],\"finished\":[{\"eval\":3,\"candidate\":3,\"parent\":2,\"island\":0,\"outcome\":\"ok\","
             "%s}],\"tried\":[]}",
             spec_extra, result_tail);
    return decide(text);
}

static json_t *event_of(json_t *consume_entry, const char *kind)
{
    size_t i;
    json_t *e;
    json_array_foreach(
        json_object_get(consume_entry, "events"), i,
        e) if (!strcmp(json_string_value(json_object_get(e, "kind")), kind)) return json_object_get(e, "data");
    return NULL;
}

static void test_paired_noise_is_never_committed(void **state)
{
    (void)state;
    /* A/A-like: the same speed, the interval straddling 1, even with a higher absolute figure */
    json_t *d = consume_one("\"aggregate\":10.4,\"against\":2,\"paired\":{\"against\":2,\"method\":"
                            "\"bootstrap-percentile\",\"ratio\":1.001,\"low\":0.998,\"ci\":[0.996,1.006]}",
                            "");
    json_t *c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    assert_false(json_is_true(json_object_get(c, "new_best")));
    json_t *ns = event_of(c, "not_significant");
    assert_non_null(ns);
    assert_int_equal(json_integer_value(json_object_get(ns, "candidate")), 3);
    assert_int_equal(json_integer_value(json_object_get(ns, "island")), 0);
    assert_int_equal(json_integer_value(json_object_get(ns, "against")), 2);
    assert_true(json_real_value(json_object_get(ns, "ratio")) == 1.001);
    assert_true(json_real_value(json_object_get(ns, "low")) == 0.998);
    assert_true(json_real_value(json_array_get(json_object_get(ns, "ci"), 1)) == 1.006);
    assert_true(json_real_value(json_object_get(ns, "min_gain")) == 0.005);
    assert_true(json_real_value(json_object_get(ns, "confidence")) == 0.95);
    assert_string_equal(json_string_value(json_object_get(ns, "reason")), "not a significant gain");
    /* the consume entry says the rule was paired */
    assert_true(json_is_true(json_object_get(json_object_get(c, "rule"), "paired")));
    json_decref(d);

    /* faster beyond noise (low above 1) but below min_gain: still no commit, and said so */
    d = consume_one("\"aggregate\":10.3,\"paired\":{\"against\":2,\"ratio\":1.01,\"low\":1.003,\"ci\":[1.002,1.02]}",
                    "");
    c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    assert_string_equal(json_string_value(json_object_get(event_of(c, "not_significant"), "reason")),
                        "faster beyond noise, but below commit.min_gain");
    json_decref(d);
}

static void test_paired_significant_gain_commits(void **state)
{
    (void)state;
    /* low above 1 + min_gain against the island's best: committed, and it
     * becomes the best although its absolute figure drifted below */
    json_t *d = consume_one("\"aggregate\":9.9,\"paired\":{\"against\":2,\"ratio\":1.034,\"low\":1.012,"
                            "\"ci\":[1.008,1.061]}",
                            "");
    json_t *c = json_array_get(json_object_get(d, "consume"), 0);
    assert_true(json_is_true(json_object_get(c, "commit")));
    assert_true(json_is_true(json_object_get(c, "new_best")));
    assert_null(event_of(c, "not_significant"));
    json_t *isl = json_array_get(json_object_get(d, "islands"), 0);
    assert_int_equal(json_integer_value(json_object_get(isl, "best_candidate")), 3);
    assert_int_equal(json_integer_value(json_object_get(isl, "head")), 3);
    /* the next proposal is measured against the new best */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(d, "propose"), 0), "against")),
                     3);
    json_decref(d);
    /* exactly at the bound: not above it */
    d = consume_one("\"aggregate\":11,\"paired\":{\"against\":2,\"ratio\":1.02,\"low\":1.005,\"ci\":[1.005,1.03]}", "");
    assert_false(json_is_true(json_object_get(json_array_get(json_object_get(d, "consume"), 0), "commit")));
    json_decref(d);
}

/* An against that slows itself when paired (it can tell it is the
 * against): a large paired gain with the candidate's own score well under
 * the best's record is not committed. */
static void test_paired_anchor(void **state)
{
    (void)state;
    /* ratio 2 against a best recorded at 10.0, the candidate itself at 9.0:
     * 10% under the record, beyond the 2% anchor */
    json_t *d = consume_one("\"aggregate\":9.0,\"paired\":{\"against\":2,\"ratio\":2.0,\"low\":1.9,"
                            "\"ci\":[1.9,2.1]}",
                            "");
    json_t *c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    assert_non_null(strstr(json_string_value(json_object_get(event_of(c, "not_significant"), "reason")),
                           "the against ran slower than its record"));
    json_decref(d);
    /* within the anchor (1.5% under): committed */
    d = consume_one("\"aggregate\":9.85,\"paired\":{\"against\":2,\"ratio\":1.03,\"low\":1.01,"
                    "\"ci\":[1.01,1.05]}",
                    "");
    assert_true(json_is_true(json_object_get(json_array_get(json_object_get(d, "consume"), 0), "commit")));
    json_decref(d);
}

static void test_paired_against_an_old_best(void **state)
{
    (void)state;
    /* measured against candidate 1, but the island's best is now 2 (10.0) */
    json_t *d = consume_one("\"aggregate\":9.5,\"paired\":{\"against\":1,\"ratio\":1.9,\"low\":1.8,"
                            "\"ci\":[1.8,2.0]}",
                            "");
    json_t *c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    json_t *ns = event_of(c, "not_significant");
    assert_int_equal(json_integer_value(json_object_get(ns, "against")), 1);
    assert_non_null(strstr(json_string_value(json_object_get(ns, "reason")), "no longer the island's best"));
    json_decref(d);
    /* ... unless it also beats the new best outright */
    d = consume_one("\"aggregate\":10.5,\"paired\":{\"against\":1,\"ratio\":2.1,\"low\":2.0,\"ci\":[2.0,2.2]}", "");
    c = json_array_get(json_object_get(d, "consume"), 0);
    assert_true(json_is_true(json_object_get(c, "commit")));
    assert_true(json_is_true(json_object_get(c, "new_best")));
    json_decref(d);
}

static void test_unpaired_fallback(void **state)
{
    (void)state;
    /* no paired member: absolute, needing best * (1 + min_gain) = 10.05 */
    json_t *d = consume_one("\"aggregate\":10.04", "");
    json_t *c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    assert_null(event_of(c, "not_significant"));
    json_t *rule = json_object_get(c, "rule");
    assert_true(json_is_false(json_object_get(rule, "paired")));
    assert_string_equal(json_string_value(json_object_get(rule, "why")), "the result has no paired measurement");
    assert_true(fabs(json_real_value(json_object_get(rule, "threshold")) - 10.05) < 1e-9);
    json_decref(d);
    d = consume_one("\"aggregate\":10.06", "");
    assert_true(json_is_true(json_object_get(json_array_get(json_object_get(d, "consume"), 0), "commit")));
    json_decref(d);
    /* epsilon (the exploration slack) lowers the fallback's bar: 10 * (1 + 0.005 - 0.03) */
    d = consume_one("\"aggregate\":9.8", ",\"epsilon\":0.03");
    assert_true(json_is_true(json_object_get(json_array_get(json_object_get(d, "consume"), 0), "commit")));
    json_decref(d);
    /* a paired measurement that failed never falls back (the candidate can
     * make it fail): not committed, whatever its absolute score, saying why */
    d = consume_one("\"aggregate\":20,\"paired\":{\"against\":2,\"error\":\"the against did not compile\"}",
                    ",\"epsilon\":0.03");
    c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(c, "rule"), "why")),
                        "the paired measurement failed (the against did not compile): no gain shown");
    assert_true(json_is_null(json_object_get(json_object_get(c, "rule"), "threshold")));
    /* ... and says so as an event of its own, naming the against (an
     * island whose best keeps failing as the against stalls visibly) */
    json_t *pf = event_of(c, "pairing_failed");
    assert_non_null(pf);
    assert_int_equal(json_integer_value(json_object_get(pf, "against")), 2);
    assert_int_equal(json_integer_value(json_object_get(pf, "candidate")), 3);
    assert_string_equal(json_string_value(json_object_get(pf, "reason")),
                        "the paired measurement failed (the against did not compile): no gain shown");
    assert_null(event_of(c, "not_significant"));
    json_decref(d);
    /* ... but never a paired one: a paired loss with the same slack stays out */
    d = consume_one("\"aggregate\":10.2,\"paired\":{\"against\":2,\"ratio\":0.99,\"low\":0.98,\"ci\":[0.98,1.0]}",
                    ",\"epsilon\":0.03");
    assert_false(json_is_true(json_object_get(json_array_get(json_object_get(d, "consume"), 0), "commit")));
    json_decref(d);
}

static void test_commit_explain_says_by_how_much(void **state)
{
    (void)state;
    avo_commit_params p = {.min_gain = 0.005, .confidence = 0.95};
    avo_commit_verdict v;
    char msg[512];
    json_t *paired = json_pack("{s:i,s:f,s:f,s:[f,f]}", "against", 2, "ratio", 1.003, "low", 0.997, "ci", 0.996, 1.011);
    avo_commit_judge(&p, paired, 10.03, 10.0, 2, &v);
    assert_false(v.commit);
    avo_commit_explain(&p, &v, 12, 10.03, 10.0, msg, sizeof msg);
    assert_string_equal(msg, "candidate 12 is 0.3% faster than the island's best (95% interval -0.4% .. +1.1%, "
                             "one-sided lower bound -0.30%): not a significant gain; a commit needs a lower bound "
                             "above +0.5%");
    json_decref(paired);
}

/* Screening (docs/evaluation.md, "Screening"): a result the screen stopped
 * is never committed, whatever its figures say, emits screened_out (not
 * not_significant), and leaves no aggregate on its candidate (its figure
 * covers the screen's configurations only). */
static void test_screened_out_is_never_committed(void **state)
{
    (void)state;
    json_t *d = consume_one("\"aggregate\":30,\"paired\":{\"against\":2,\"ratio\":0.93,\"low\":0.915,"
                            "\"ci\":[0.91,0.95],\"confidence\":0.95,\"scope\":\"screen\",\"screened_out\":true,"
                            "\"configs\":[{\"config\":\"256\"},{\"config\":\"512\"}]}",
                            "");
    json_t *c = json_array_get(json_object_get(d, "consume"), 0);
    assert_false(json_is_true(json_object_get(c, "commit")));
    assert_false(json_is_true(json_object_get(c, "new_best")));
    assert_true(json_is_null(json_object_get(c, "aggregate")));
    assert_null(event_of(c, "not_significant"));
    json_t *so = event_of(c, "screened_out");
    assert_non_null(so);
    assert_int_equal(json_integer_value(json_object_get(so, "candidate")), 3);
    assert_int_equal(json_integer_value(json_object_get(so, "against")), 2);
    assert_true(json_real_value(json_object_get(so, "ratio")) == 0.93);
    assert_true(json_real_value(json_array_get(json_object_get(so, "ci"), 1)) == 0.95);
    assert_int_equal(json_array_size(json_object_get(so, "configs")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(so, "configs"), 1)), "512");
    json_t *rule = json_object_get(c, "rule");
    assert_true(json_is_true(json_object_get(rule, "screened_out")));
    assert_non_null(strstr(json_string_value(json_object_get(rule, "why")), "screened out"));
    json_decref(d);

    /* figures that would commit an unscreened result (a forged or partial
     * lower bound above the bar): a screened-out result still never does */
    avo_commit_params p = {.min_gain = 0.005, .confidence = 0.95};
    avo_commit_verdict v;
    char msg[512];
    json_t *paired = json_pack("{s:i,s:f,s:f,s:[f,f],s:b,s:[{s:s},{s:s}]}", "against", 2, "ratio", 1.3, "low", 1.2,
                               "ci", 1.1, 1.4, "screened_out", 1, "configs", "config", "256", "config", "512");
    avo_commit_judge(&p, paired, 13, 10, 2, &v);
    assert_false(v.commit);
    assert_true(v.screened);
    json_decref(paired);

    /* what the agent's evaluate and commit tools say: screened out, by how much */
    paired = json_pack("{s:i,s:f,s:f,s:[f,f],s:b,s:[{s:s},{s:s}]}", "against", 2, "ratio", 0.93, "low", 0.915, "ci",
                       0.91, 0.95, "screened_out", 1, "configs", "config", "256", "config", "512");
    avo_commit_judge(&p, paired, 30, 10, 2, &v);
    avo_commit_explain(&p, &v, 12, 30, 10, msg, sizeof msg);
    assert_string_equal(msg, "candidate 12 was screened out: 7.0% slower than the island's best on the screen's 2 "
                             "configurations (95% interval -9.0% .. -5.0%), beyond noise, so it was not timed on the "
                             "others and cannot be committed");
    json_decref(paired);

    /* a screen with two looks takes each at a higher confidence: the
     * interval is named by its own */
    paired = json_pack("{s:i,s:f,s:f,s:[f,f],s:f,s:b,s:[{s:s}]}", "against", 2, "ratio", 0.93, "low", 0.915, "ci", 0.91,
                       0.95, "confidence", 0.975, "screened_out", 1, "configs", "config", "256");
    avo_commit_judge(&p, paired, 30, 10, 2, &v);
    avo_commit_explain(&p, &v, 12, 30, 10, msg, sizeof msg);
    assert_non_null(strstr(msg, "(97.5% interval -9.0% .. -5.0%)"));
    json_decref(paired);
}

/* The end of a search whose best is not the seed: one final evaluation,
 * then the job ends with that paired ratio as its speedup. */
static void test_final_measurement(void **state)
{
    (void)state;
    /* the target is reached by candidate 3: no finish yet, a final of 3 against the seed 1 */
    json_t *d = decide(target_reached);
    assert_true(json_is_null(json_object_get(d, "finish")));
    json_t *fin = json_object_get(d, "final");
    assert_int_equal(json_integer_value(json_object_get(fin, "candidate")), 3);
    assert_int_equal(json_integer_value(json_object_get(fin, "against")), 1);
    assert_string_equal(json_string_value(json_object_get(fin, "state")), "succeeded");
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);

    const char *waiting = "{\"id\":1,\"state\":\"running\",\"spec\":{\"commit\":{\"confidence\":0.9}},\"budget\":5,"
                          "\"total\":5,\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":3,"
                          "\"best_aggregate\":7.5,\"seed_aggregate\":5,\"finishing\":{\"state\":\"succeeded\","
                          "\"reason\":\"evaluation budget reached\"},\"final\":{\"eval\":9,\"candidate\":3,"
                          "\"against\":1,\"state\":\"%s\",\"outcome\":%s,\"aggregate\":7.4%s},"
                          "\"finished\":[{\"eval\":8,\"candidate\":4,\"island\":0,\"outcome\":\"ok\","
                          "\"aggregate\":99}],\"tried\":[]}";
    char text[2048];
    /* while it runs: nothing happens, late search results are not consumed */
    snprintf(text, sizeof text, waiting, "running", "null", "");
    d = decide(text);
    assert_true(json_is_true(json_object_get(d, "finishing")));
    assert_true(json_is_null(json_object_get(d, "finish")));
    assert_int_equal(json_array_size(json_object_get(d, "consume")), 0);
    assert_int_equal(json_array_size(json_object_get(d, "propose")), 0);
    json_decref(d);
    /* paired: the speedup is its ratio with the interval */
    snprintf(text, sizeof text, waiting, "done", "\"ok\"",
             ",\"paired\":{\"against\":1,\"method\":\"bootstrap-percentile\",\"ratio\":1.46,\"low\":1.41,"
             "\"ci\":[1.40,1.52],\"confidence\":0.9}");
    d = decide(text);
    assert_string_equal(reason(d), "evaluation budget reached");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "state")), "succeeded");
    json_t *sp = json_object_get(d, "speedup");
    assert_true(json_real_value(json_object_get(sp, "ratio")) == 1.46);
    assert_true(json_real_value(json_object_get(sp, "low")) == 1.41);
    assert_true(json_real_value(json_array_get(json_object_get(sp, "ci"), 0)) == 1.40);
    assert_true(json_real_value(json_object_get(sp, "confidence")) == 0.9);
    assert_true(json_is_true(json_object_get(sp, "paired")));
    assert_int_equal(json_integer_value(json_object_get(sp, "evaluation")), 9);
    assert_string_equal(json_string_value(json_object_get(sp, "method")), "bootstrap-percentile");
    json_t *ev = find_event(d, "final_measurement");
    assert_string_equal(json_string_value(json_object_get(ev, "status")), "finished");
    assert_int_equal(json_array_size(json_object_get(d, "consume")), 0);
    json_decref(d);
    /* unpaired: the search's ratio of aggregates, saying why */
    snprintf(text, sizeof text, waiting, "done", "\"ok\"", "");
    d = decide(text);
    sp = json_object_get(d, "speedup");
    assert_true(json_real_value(json_object_get(sp, "ratio")) == 1.5);
    assert_true(json_is_false(json_object_get(sp, "paired")));
    assert_string_equal(json_string_value(json_object_get(sp, "reason")),
                        "the final evaluation has no paired measurement");
    json_decref(d);
    snprintf(text, sizeof text, waiting, "done", "\"ok\"", ",\"paired\":{\"against\":1,\"error\":\"seed crashed\"}");
    d = decide(text);
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "speedup"), "reason")),
                        "the paired measurement failed: seed crashed");
    json_decref(d);
    snprintf(text, sizeof text, waiting, "failed", "\"timeout\"", "");
    d = decide(text);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(d, "speedup"), "reason")),
                           "the final evaluation failed: timeout"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "state")), "succeeded");
    json_decref(d);

    /* the seed stayed the best: no measurement, ratio 1 with a note */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":3,\"total\":3,\"inflight\":0,"
               "\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,\"finished\":[],\"tried\":[]}");
    assert_true(json_is_object(json_object_get(d, "finish")));
    assert_null(json_object_get(d, "final"));
    assert_true(json_real_value(json_object_get(json_object_get(d, "speedup"), "ratio")) == 1.0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "speedup"), "note")),
                        "no version beat the seed");
    json_decref(d);
    /* a failed job ends at once, without one */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":5,\"total\":1,\"inflight\":0,"
               "\"seed_candidate\":7,\"finished\":[{\"eval\":3,\"candidate\":7,\"outcome\":\"crash\","
               "\"aggregate\":0}],\"tried\":[]}");
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "finish"), "state")), "failed");
    assert_null(json_object_get(d, "final"));
    assert_null(json_object_get(d, "speedup"));
    json_decref(d);
}

/* A best that keeps failing as the against (docs/jobs.md, "When the best
 * fails as the against"). Island 0's best is candidate 4 (12.0), committed
 * over 2 (10.0), itself committed over the seed 1 (5.0); island 1 migrated
 * 4 too. pair_fails: island 0's count so far; results: the finished list's
 * entries; rechecked, rechecking: the snapshot's. */
static int snap_kept; /* candidate 4's rechecks passed */

static json_t *recheck_snap(int pair_fails, const char *results, const char *rechecked, const char *rechecking)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"id\":1,\"state\":\"running\",\"spec\":{\"islands\":2,\"commit\":{\"min_gain\":0.005}},"
             "\"budget\":50,\"total\":9,\"inflight\":0,\"seed_candidate\":1,\"best_candidate\":4,"
             "\"best_aggregate\":12,\"seed_aggregate\":5,\"islands\":[{\"idx\":0,\"head\":4,\"best_candidate\":4,"
             "\"best\":12,\"pair_fails\":%d},{\"idx\":1,\"head\":4,\"best_candidate\":4,\"best\":12}],"
             "\"finished\":[%s],\"rechecked\":[%s],\"rechecking\":[%s],"
             "\"tried\":[{\"candidate\":1,\"aggregate\":5,\"island\":0,\"outcome\":\"ok\"},"
             "{\"candidate\":2,\"aggregate\":10,\"island\":0,\"outcome\":\"ok\",\"against\":1,\"committed\":true},"
             "{\"candidate\":3,\"aggregate\":9,\"island\":0,\"outcome\":\"ok\",\"against\":2},"
             "{\"candidate\":4,\"aggregate\":12,\"island\":0,\"outcome\":\"ok\",\"against\":2,\"committed\":true,"
             "\"rechecks_kept\":%d}]}",
             pair_fails, results, rechecked, rechecking, snap_kept);
    return decide(text);
}

#define PAIR_FAIL(EVAL, CAND)                                                                                          \
    "{\"eval\":" #EVAL ",\"candidate\":" #CAND ",\"parent\":4,\"island\":0,\"outcome\":\"ok\",\"aggregate\":13,"       \
    "\"paired\":{\"against\":4,\"error\":\"the against's runner, loading: killed by SIGSEGV\"}}"

static void test_failing_best_is_rechecked(void **state)
{
    (void)state;
    /* two failures in a row: counted, nothing queued */
    json_t *d = recheck_snap(0, PAIR_FAIL(10, 5) "," PAIR_FAIL(11, 6), "", "");
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 0);
    json_t *isl = json_array_get(json_object_get(d, "islands"), 0);
    assert_int_equal(json_integer_value(json_object_get(isl, "pair_fails")), 2);
    /* nothing is committed or retired on pairing failures alone */
    assert_null(json_object_get(d, "best_candidate"));
    assert_int_equal(json_integer_value(json_object_get(isl, "best_candidate")), 4);
    json_decref(d);
    /* the third: the best queued alone, once, said by an event in the
     * result's place; the count starts again */
    d = recheck_snap(2, PAIR_FAIL(12, 7), "", "");
    json_t *rq = json_object_get(d, "recheck");
    assert_int_equal(json_array_size(rq), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rq, 0), "candidate")), 4);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rq, 0), "island")), 0);
    json_t *br = event_of(json_array_get(json_object_get(d, "consume"), 0), "best_recheck");
    assert_non_null(br);
    assert_int_equal(json_integer_value(json_object_get(br, "pairing_failures")), 3);
    assert_non_null(strstr(json_string_value(json_object_get(br, "last_reason")), "killed by SIGSEGV"));
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "pair_fails")), 0);
    json_decref(d);
    /* a best that passed one recheck already needs twice as many (6) */
    snap_kept = 1;
    d = recheck_snap(2, PAIR_FAIL(12, 7), "", "");
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 0);
    json_decref(d);
    d = recheck_snap(5, PAIR_FAIL(12, 7), "", "");
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 1);
    json_decref(d);
    snap_kept = 0;
    /* already being re-checked: not queued twice */
    d = recheck_snap(2, PAIR_FAIL(12, 7), "", "4");
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 0);
    json_decref(d);
    /* a pairing that worked against the best clears the count */
    d = recheck_snap(2,
                     "{\"eval\":12,\"candidate\":7,\"island\":0,\"outcome\":\"ok\",\"aggregate\":11.9,"
                     "\"paired\":{\"against\":4,\"ratio\":0.99,\"low\":0.98,\"ci\":[0.98,1.0]}}," PAIR_FAIL(13, 8),
                     "", "");
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "pair_fails")), 1);
    json_decref(d);
    /* a failure against an older best counts for nothing */
    d = recheck_snap(2,
                     "{\"eval\":12,\"candidate\":7,\"island\":0,\"outcome\":\"ok\",\"aggregate\":11,"
                     "\"paired\":{\"against\":2,\"error\":\"the against timed out\"}}",
                     "", "");
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "pair_fails")), 2);
    json_decref(d);
}

static void test_failed_recheck_retires_the_best(void **state)
{
    (void)state;
    /* its recheck failed: retired; both islands that held it go back to 2
     * (what 4 was measured against), the job's best too; the result in
     * the same step is judged against 2 */
    json_t *d = recheck_snap(0,
                             "{\"eval\":14,\"candidate\":9,\"parent\":4,\"island\":0,\"outcome\":\"ok\","
                             "\"aggregate\":10.2,\"paired\":{\"against\":4,\"error\":\"the against crashed\"}}",
                             "{\"eval\":13,\"candidate\":4,\"outcome\":\"wrong_result\",\"detail\":\"config n256: "
                             "max abs error 3.1\"}",
                             "4");
    json_t *rd = json_object_get(d, "rechecked");
    assert_int_equal(json_array_size(rd), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rd, 0), "eval")), 13);
    const char *why = json_string_value(json_object_get(json_array_get(rd, 0), "retired"));
    assert_non_null(why);
    assert_string_equal(why, "re-checked alone: wrong_result: config n256: max abs error 3.1");
    for (int k = 0; k < 2; k++) {
        json_t *isl = json_array_get(json_object_get(d, "islands"), (size_t)k);
        assert_int_equal(json_integer_value(json_object_get(isl, "best_candidate")), 2);
        assert_true(json_real_value(json_object_get(isl, "best")) == 10.0);
        assert_int_equal(json_integer_value(json_object_get(isl, "head")), 2);
    }
    assert_int_equal(json_integer_value(json_object_get(d, "best_candidate")), 2);
    json_t *ev = find_event(d, "best_retired");
    assert_non_null(ev);
    assert_int_equal(json_integer_value(json_object_get(ev, "candidate")), 4);
    assert_int_equal(json_integer_value(json_object_get(ev, "replaced_by")), 2);
    assert_int_equal(json_array_size(json_object_get(ev, "islands")), 2);
    /* the result measured against the retired best does not count as a
     * pairing failure of the new one */
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "pair_fails")), 0);
    /* the next proposals are measured against 2 */
    json_t *p;
    size_t i;
    json_array_foreach(json_object_get(d, "propose"), i, p)
        assert_int_equal(json_integer_value(json_object_get(p, "against")), 2);
    assert_true(json_array_size(json_object_get(d, "propose")) > 0);
    json_decref(d);

    /* its predecessor retired too: back to the seed */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":50,\"total\":9,\"inflight\":1,"
               "\"seed_candidate\":1,\"best_candidate\":4,\"best_aggregate\":12,\"seed_aggregate\":5,"
               "\"islands\":[{\"idx\":0,\"head\":4,\"best_candidate\":4,\"best\":12}],\"finished\":[],"
               "\"rechecked\":[{\"eval\":13,\"candidate\":4,\"outcome\":\"crash\"}],"
               "\"tried\":[{\"candidate\":1,\"aggregate\":5},{\"candidate\":2,\"aggregate\":10,\"against\":1,"
               "\"retired\":true},{\"candidate\":4,\"aggregate\":12,\"against\":2,\"recheck_faults\":1}]}");
    assert_int_equal(json_integer_value(json_object_get(d, "best_candidate")), 1);
    assert_true(json_real_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "best")) == 5.0);
    json_decref(d);

    /* a first crash or timeout alone (a wedged GPU ends a call that way
     * too): kept and evaluated once more; the second one retires it (above) */
    d = recheck_snap(0, "", "{\"eval\":13,\"candidate\":4,\"state\":\"done\",\"outcome\":\"timeout\"}", "4");
    assert_null(json_object_get(json_array_get(json_object_get(d, "rechecked"), 0), "retired"));
    assert_null(json_object_get(d, "best_candidate"));
    assert_int_equal(json_array_size(json_object_get(d, "recheck")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(d, "recheck"), 0), "candidate")),
                     4);
    assert_non_null(strstr(json_string_value(json_object_get(find_event(d, "best_rechecked"), "inconclusive")),
                           "timeout alone once"));
    json_decref(d);

    /* the retirement's events come before the step's results' (their own key) */
    d = recheck_snap(0, PAIR_FAIL(14, 9), "{\"eval\":13,\"candidate\":4,\"outcome\":\"wrong_result\"}", "4");
    assert_null(find_in(json_object_get(d, "events"), "best_retired"));
    assert_non_null(find_in(json_object_get(d, "recheck_events"), "best_retired"));
    json_decref(d);

    /* a seed the search has moved past is retired without failing the job */
    d = recheck_snap(0, "", "{\"eval\":13,\"candidate\":1,\"outcome\":\"wrong_result\"}", "1");
    assert_true(json_is_null(json_object_get(d, "finish")));
    assert_non_null(json_object_get(json_array_get(json_object_get(d, "rechecked"), 0), "retired"));
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "best_candidate")), 4);
    json_decref(d);
}

static void test_passed_recheck_keeps_the_best(void **state)
{
    (void)state;
    json_t *d = recheck_snap(0, "", "{\"eval\":13,\"candidate\":4,\"outcome\":\"ok\",\"aggregate\":11.8}", "4");
    assert_int_equal(json_array_size(json_object_get(d, "rechecked")), 1);
    assert_null(json_object_get(json_array_get(json_object_get(d, "rechecked"), 0), "retired"));
    assert_null(json_object_get(d, "best_candidate"));
    assert_non_null(find_event(d, "best_rechecked"));
    assert_null(find_event(d, "best_retired"));
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(d, "islands"), 0), "best_candidate")), 4);
    json_decref(d);
    /* a recheck the machine failed (a lost worker: state failed) is no
     * verdict on the best: kept, said inconclusive */
    d = recheck_snap(0, "",
                     "{\"eval\":13,\"candidate\":4,\"state\":\"failed\",\"outcome\":\"crash\",\"detail\":"
                     "\"the worker running it was lost 3 times (lease expired)\"}",
                     "4");
    assert_null(json_object_get(json_array_get(json_object_get(d, "rechecked"), 0), "retired"));
    assert_null(json_object_get(d, "best_candidate"));
    assert_non_null(
        strstr(json_string_value(json_object_get(find_event(d, "best_rechecked"), "inconclusive")), "lost 3 times"));
    json_decref(d);
    /* the seed failing alone fails the job, with the evidence */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":50,\"total\":9,\"inflight\":0,"
               "\"seed_candidate\":1,\"best_candidate\":1,\"best_aggregate\":5,\"seed_aggregate\":5,"
               "\"islands\":[{\"idx\":0,\"head\":1,\"best_candidate\":1,\"best\":5}],"
               "\"finished\":[{\"eval\":14,\"candidate\":9,\"island\":0,\"outcome\":\"ok\",\"aggregate\":6}],"
               "\"rechecked\":[{\"eval\":13,\"candidate\":1,\"outcome\":\"wrong_result\",\"detail\":\"nan\"}],"
               "\"tried\":[{\"candidate\":1,\"aggregate\":5}]}");
    json_t *fin = json_object_get(d, "finish");
    assert_string_equal(json_string_value(json_object_get(fin, "state")), "failed");
    assert_string_equal(json_string_value(json_object_get(fin, "reason")),
                        "the seed failed when re-checked alone: wrong_result: nan");
    /* and no result is applied after it */
    assert_int_equal(json_array_size(json_object_get(d, "consume")), 0);
    json_decref(d);
    /* while the job ends (its final measurement running), a failed
     * recheck is recorded on the candidate and moves nothing */
    d = decide("{\"id\":1,\"state\":\"running\",\"spec\":{},\"budget\":5,\"total\":5,\"inflight\":0,"
               "\"seed_candidate\":1,\"best_candidate\":4,\"best_aggregate\":12,\"seed_aggregate\":5,"
               "\"finishing\":{\"state\":\"succeeded\",\"reason\":\"evaluation budget reached\"},"
               "\"final\":{\"eval\":20,\"candidate\":4,\"against\":1,\"state\":\"running\"},"
               "\"rechecked\":[{\"eval\":13,\"candidate\":4,\"outcome\":\"crash\"}],\"finished\":[],\"tried\":[]}");
    assert_int_equal(json_array_size(json_object_get(d, "rechecked")), 1);
    assert_non_null(json_object_get(json_array_get(json_object_get(d, "rechecked"), 0), "retired"));
    assert_null(json_object_get(d, "best_candidate"));
    assert_true(json_is_null(json_object_get(find_event(d, "best_retired"), "replaced_by")));
    assert_true(json_is_null(json_object_get(d, "finish")));
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_rule),
        cmocka_unit_test(test_inflight_depth),
        cmocka_unit_test(test_queued_job_starts_with_the_seed),
        cmocka_unit_test(test_broken_seed_fails_the_job_with_evidence),
        cmocka_unit_test(test_commit_and_new_best),
        cmocka_unit_test(test_budget_finishes_when_nothing_is_in_flight),
        cmocka_unit_test(test_same_snapshot_same_decision),
        cmocka_unit_test(test_islands_each_propose_from_their_head),
        cmocka_unit_test(test_migration_every_k_commits),
        cmocka_unit_test(test_stagnation_tells_the_operator_then_stops),
        cmocka_unit_test(test_target_score_and_resource_budgets_end_the_job),
        cmocka_unit_test(test_custom_seed_and_start_knobs),
        cmocka_unit_test(test_paired_noise_is_never_committed),
        cmocka_unit_test(test_paired_significant_gain_commits),
        cmocka_unit_test(test_paired_anchor),
        cmocka_unit_test(test_paired_against_an_old_best),
        cmocka_unit_test(test_unpaired_fallback),
        cmocka_unit_test(test_commit_explain_says_by_how_much),
        cmocka_unit_test(test_screened_out_is_never_committed),
        cmocka_unit_test(test_final_measurement),
        cmocka_unit_test(test_failing_best_is_rechecked),
        cmocka_unit_test(test_failed_recheck_retires_the_best),
        cmocka_unit_test(test_passed_recheck_keeps_the_best),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
