/* proto/: the job spec (fields, defaults, errors naming the field) and the
 * shared route table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "avo_jobspec.h"
#include "avo_routes.h"
#include "avo_tokens.h"

static int parse(const char *text, avo_jobspec *s, json_t **norm, char *err, size_t errlen)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    int rc = avo_jobspec_parse(j, s, norm, err, errlen);
    json_decref(j);
    return rc;
}

static void test_defaults_are_filled(void **state)
{
    (void)state;
    avo_jobspec s;
    json_t *n = NULL;
    char err[256];
    assert_int_equal(parse("{\"problem\":\"cpu/sgemm\"}", &s, &n, err, sizeof err), 0);
    assert_string_equal(s.op, "tune");
    assert_string_equal(s.target, ""); /* filled in from the problem's backend at submission */
    assert_int_equal(s.evaluations, 30);
    assert_int_equal(s.islands, 1);
    assert_true(s.epsilon == 0.0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(n, "budget"), "evaluations")), 30);
    json_decref(n);
}

static void test_full_spec(void **state)
{
    (void)state;
    avo_jobspec s;
    char err[256];
    assert_int_equal(parse("{\"problem\":\"cpu/sgemm\",\"operator\":\"tune\",\"budget\":{\"evaluations\":7,"
                           "\"wall_seconds\":60},\"islands\":4,\"epsilon\":0.02,\"priority\":-3,"
                           "\"operator_params\":{\"seed\":99}}",
                           &s, NULL, err, sizeof err),
                     0);
    assert_int_equal(s.evaluations, 7);
    assert_true(s.wall_seconds == 60.0);
    assert_int_equal(s.islands, 4);
    assert_int_equal(s.priority, -3);
    assert_int_equal((int)s.rng_seed, 99);
}

static void test_seed_budgets_and_stops(void **state)
{
    (void)state;
    avo_jobspec s;
    json_t *n = NULL;
    char err[256];
    assert_int_equal(parse("{\"problem\":\"cpu/sgemm\",\"seed\":{\"file\":\"mine.c\",\"source\":\"int x;\","
                           "\"knobs\":{\"BM\":64}},\"budget\":{\"gpu_seconds\":30,\"energy_joules\":5000},"
                           "\"target_score\":12.5,\"stagnation\":{\"patience\":3,\"limit\":9},\"migrate_every\":2}",
                           &s, &n, err, sizeof err),
                     0);
    assert_string_equal(s.seed_file, "mine.c");
    assert_string_equal(s.seed_source, "int x;");
    assert_true(s.gpu_seconds == 30.0 && s.energy_joules == 5000.0 && s.target_score == 12.5);
    assert_int_equal(s.patience, 3);
    assert_int_equal(s.stagnation_limit, 9);
    assert_int_equal(s.migrate_every, 2);
    assert_string_equal(s.gpu, "");
    /* the stored spec keeps the seed's name and knobs, never its text */
    json_t *sd = json_object_get(n, "seed");
    assert_string_equal(json_string_value(json_object_get(sd, "file")), "mine.c");
    assert_null(json_object_get(sd, "source"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sd, "knobs"), "BM")), 64);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(n, "stagnation"), "limit")), 9);
    json_decref(n);
    avo_jobspec_clear(&s);
    assert_null(s.seed_source);

    assert_int_equal(
        parse("{\"problem\":\"cpu/sgemm\",\"gpu\":\"H200\",\"seed\":{\"candidate\":42}}", &s, &n, err, sizeof err), 0);
    assert_string_equal(s.gpu, "H200");
    assert_string_equal(json_string_value(json_object_get(n, "gpu")), "H200");
    json_decref(n);
    assert_int_equal(s.seed_candidate, 42);
    assert_null(s.seed_source);
    assert_int_equal(s.patience, 8); /* default */
    assert_int_equal(s.stagnation_limit, 0);
    avo_jobspec_clear(&s);

    /* an agent job: its provider and limits, and the LLM budgets, in the stored spec */
    assert_int_equal(parse("{\"problem\":\"cpu/sgemm\",\"operator\":\"agent\",\"agent\":{\"provider\":\"claude\"},"
                           "\"budget\":{\"tokens\":5000,\"cost_usd\":2.5}}",
                           &s, &n, err, sizeof err),
                     0);
    assert_string_equal(s.agent_provider, "claude");
    assert_int_equal(s.agent_max_turns, 40);
    json_t *ag = json_object_get(n, "agent");
    assert_string_equal(json_string_value(json_object_get(ag, "provider")), "claude");
    assert_int_equal(json_integer_value(json_object_get(ag, "step_tokens")), 500000);
    /* the failure rule's defaults, stored so the steps read them */
    assert_int_equal(json_integer_value(json_object_get(ag, "failed_steps")), 3);
    assert_int_equal(json_integer_value(json_object_get(ag, "backoff_s")), 2);
    assert_int_equal(json_integer_value(json_object_get(ag, "backoff_max_s")), 60);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(n, "budget"), "tokens")), 5000);
    assert_true(json_real_value(json_object_get(json_object_get(n, "budget"), "cost_usd")) == 2.5);
    json_decref(n);
    avo_jobspec_clear(&s);

    /* one of the package's named seeds, kept in the stored spec */
    assert_int_equal(parse("{\"problem\":\"gemm_bf16\",\"seed\":{\"name\":\"sm90\",\"knobs\":{\"BN\":128}}}", &s, &n,
                           err, sizeof err),
                     0);
    assert_string_equal(s.seed_name, "sm90");
    sd = json_object_get(n, "seed");
    assert_string_equal(json_string_value(json_object_get(sd, "name")), "sm90");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sd, "knobs"), "BN")), 128);
    json_decref(n);
    avo_jobspec_clear(&s);
}

static void expect_error(const char *text, const char *needle)
{
    avo_jobspec s;
    char err[256] = "";
    assert_true(parse(text, &s, NULL, err, sizeof err) < 0);
    if (!strstr(err, needle))
        print_error("error '%s' does not contain '%s'\n", err, needle);
    assert_non_null(strstr(err, needle));
}

static void test_name_and_labels(void **state)
{
    (void)state;
    avo_jobspec s;
    json_t *norm = NULL;
    char err[256];
    assert_int_equal(parse("{\"problem\":\"p\",\"name\":\"gemm try 2\",\"labels\":{\"exp\":\"a1\",\"team.io/x\":\"\"}}",
                           &s, &norm, err, sizeof err),
                     0);
    assert_string_equal(s.name, "gemm try 2");
    assert_string_equal(json_string_value(json_object_get(norm, "name")), "gemm try 2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(norm, "labels"), "exp")), "a1");
    json_decref(norm);
    avo_jobspec_clear(&s);
    expect_error("{\"problem\":\"p\",\"name\":\"\"}", "name: must be a string of 1 to 64 characters");
    expect_error("{\"problem\":\"p\",\"name\":\"a\\nb\"}", "name: must be a string of 1 to 64 characters");
    expect_error("{\"problem\":\"p\",\"labels\":[]}", "labels: must be an object of strings");
    expect_error("{\"problem\":\"p\",\"labels\":{\"Exp\":\"a\"}}", "labels.Exp: a label key is");
    expect_error("{\"problem\":\"p\",\"labels\":{\"exp\":1}}", "labels.exp: a label value is a string");
    assert_int_equal(avo_jobspec_label_key_ok("a.b/c-d_e"), 1);
    assert_int_equal(avo_jobspec_label_key_ok("-a"), 0);
    assert_int_equal(avo_jobspec_label_key_ok("a=b"), 0);
}

static void test_errors_name_the_field(void **state)
{
    (void)state;
    expect_error("{}", "problem: required");
    expect_error("{\"problem\":3}", "problem: must be a non-empty string");
    expect_error("{\"problem\":\"p\",\"colour\":1}", "colour: unknown field");
    expect_error("{\"problem\":\"p\",\"budget\":{\"evals\":1}}", "budget.evals: unknown field");
    expect_error("{\"problem\":\"p\",\"budget\":{\"evaluations\":0}}", "budget.evaluations: 0 is outside");
    expect_error("{\"problem\":\"p\",\"budget\":{\"evaluations\":1.5}}", "budget.evaluations: must be an integer");
    expect_error("{\"problem\":\"p\",\"budget\":5}", "budget: must be an object");
    expect_error("{\"problem\":\"p\",\"operator\":\"magic\"}", "operator: unknown operator 'magic'");
    expect_error("{\"problem\":\"p\",\"islands\":0}", "islands: 0 is outside");
    expect_error("{\"problem\":\"p\",\"epsilon\":2}", "epsilon: 2 is outside");
    expect_error("{\"problem\":\"p\",\"target\":\"tpu\"}", "target: unknown target 'tpu'");
    expect_error("{\"problem\":\"p\",\"budget\":{\"tokens\":10}}", "budget.tokens: applies to agent jobs only");
    expect_error("{\"problem\":\"p\",\"gpu\":\"\"}", "gpu: must be a non-empty string");
    expect_error("{\"problem\":\"p\",\"budget\":{\"gpu_seconds\":0}}", "budget.gpu_seconds: 0 is outside");
    expect_error("{\"problem\":\"p\",\"stagnation\":{\"limit\":0}}", "stagnation.limit: 0 is outside");
    expect_error("{\"problem\":\"p\",\"stagnation\":{\"after\":3}}", "stagnation.after: unknown field");
    expect_error("{\"problem\":\"p\",\"target_score\":-1}", "target_score: -1 is outside");
    expect_error("{\"problem\":\"p\",\"seed\":{\"candidate\":1,\"source\":\"x\"}}", "seed: give either source");
    expect_error("{\"problem\":\"p\",\"seed\":{\"file\":\"a.c\"}}", "seed.file: needs seed.source");
    expect_error("{\"problem\":\"p\",\"seed\":{\"name\":\"\"}}", "seed.name: must be a non-empty string");
    expect_error("{\"problem\":\"p\",\"operator\":\"agent\"}", "agent: an agent job needs {\"provider\": NAME}");
    expect_error("{\"problem\":\"p\",\"operator\":\"agent\",\"agent\":{\"provider\":\"c\",\"turns\":3}}",
                 "agent.turns: unknown field (expected one of: provider, max_turns, step_tokens, supervise_after, "
                 "supervise_failures, failed_steps, backoff_s, backoff_max_s)");
    expect_error("{\"problem\":\"p\",\"operator\":\"agent\",\"agent\":{\"provider\":\"c\",\"failed_steps\":0}}",
                 "agent.failed_steps: 0 is outside");
    expect_error("{\"problem\":\"p\",\"operator\":\"agent\",\"agent\":{\"provider\":\"c\",\"backoff_s\":3601}}",
                 "agent.backoff_s: 3601 is outside");
    expect_error("{\"problem\":\"p\",\"operator\":\"agent\",\"agent\":{\"provider\":\"c\",\"backoff_s\":10,"
                 "\"backoff_max_s\":5}}",
                 "agent.backoff_max_s: 5 is under agent.backoff_s (10)");
    expect_error("{\"problem\":\"p\",\"operator\":\"agent\",\"agent\":{\"provider\":\"c\",\"max_turns\":0}}",
                 "agent.max_turns: 0 is outside");
    expect_error("{\"problem\":\"p\",\"agent\":{\"provider\":\"c\"}}", "agent: applies to agent jobs only");
    expect_error("{\"problem\":\"p\",\"operator\":\"genetic\"}",
                 "operator: unknown operator 'genetic' (available: tune, agent)");
    expect_error("{\"problem\":\"p\",\"seed\":{\"name\":7}}", "seed.name: must be a non-empty string");
    expect_error("{\"problem\":\"p\",\"seed\":{\"source\":\"\"}}", "seed.source: must be");
    expect_error("{\"problem\":\"p\",\"seed\":{\"candidate\":0}}", "seed.candidate: must be a candidate id");
    expect_error("{\"problem\":\"p\",\"seed\":{\"knobs\":{\"BM\":\"big\"}}}", "seed.knobs.BM: must be an integer");
    expect_error("{\"problem\":\"p\",\"target\":\"sm_9x\"}", "target: unknown target 'sm_9x'");
    assert_true(avo_jobspec_target_valid("sm_90"));
    assert_true(avo_jobspec_target_valid("cpu"));
    assert_false(avo_jobspec_target_valid("sm_"));
    expect_error("[1]", "must be a JSON object");
}

/* commit: each bad field refused by name; defaults resolved by backend. */
static void test_commit_spec(void **state)
{
    (void)state;
    expect_error("{\"problem\":\"p\",\"commit\":{\"min_gain\":1}}", "commit.min_gain must be in [0, 1)");
    expect_error("{\"problem\":\"p\",\"commit\":{\"min_gain\":-0.01}}", "commit.min_gain must be in [0, 1)");
    expect_error("{\"problem\":\"p\",\"commit\":{\"min_gain\":\"1%\"}}", "commit.min_gain: must be a number");
    expect_error("{\"problem\":\"p\",\"commit\":{\"confidence\":1}}", "commit.confidence must be in (0, 1)");
    expect_error("{\"problem\":\"p\",\"commit\":{\"confidence\":0}}", "commit.confidence must be in (0, 1)");
    expect_error("{\"problem\":\"p\",\"commit\":{\"confidence\":95}}", "commit.confidence must be in (0, 1)");
    expect_error("{\"problem\":\"p\",\"commit\":{\"confidence\":null}}", "commit.confidence: must be a number");
    expect_error("{\"problem\":\"p\",\"commit\":{\"gain\":0.1}}",
                 "commit.gain: unknown field (expected one of: min_gain, confidence)");
    expect_error("{\"problem\":\"p\",\"commit\":0.01}", "commit: must be an object");

    avo_jobspec s;
    json_t *n = NULL;
    char err[256];
    /* unset: the backend decides, and the stored spec says what applied */
    assert_int_equal(parse("{\"problem\":\"p\"}", &s, &n, err, sizeof err), 0);
    assert_null(json_object_get(json_object_get(n, "commit"), "min_gain"));
    avo_jobspec_commit_resolve(&s, n, 1);
    assert_true(s.min_gain == AVO_COMMIT_MIN_GAIN_CUDA);
    assert_true(json_real_value(json_object_get(json_object_get(n, "commit"), "min_gain")) == 0.005);
    assert_true(json_real_value(json_object_get(json_object_get(n, "commit"), "confidence")) == 0.95);
    json_decref(n);
    assert_int_equal(parse("{\"problem\":\"p\"}", &s, &n, err, sizeof err), 0);
    avo_jobspec_commit_resolve(&s, n, 0);
    assert_true(json_real_value(json_object_get(json_object_get(n, "commit"), "min_gain")) == 0.02);
    json_decref(n);
    /* given: kept whatever the backend, 0 included */
    assert_int_equal(
        parse("{\"problem\":\"p\",\"commit\":{\"min_gain\":0,\"confidence\":0.99}}", &s, &n, err, sizeof err), 0);
    avo_jobspec_commit_resolve(&s, n, 0);
    assert_true(json_real_value(json_object_get(json_object_get(n, "commit"), "min_gain")) == 0.0);
    assert_true(json_real_value(json_object_get(json_object_get(n, "commit"), "confidence")) == 0.99);
    json_decref(n);
}

static void test_routes(void **state)
{
    (void)state;
    int64_t id = 0;
    assert_int_equal(avo_routes_match("GET", "/v1/health", &id), AVO_ROUTE_HEALTH);
    assert_int_equal(avo_routes_match("POST", "/v1/jobs", &id), AVO_ROUTE_JOB_SUBMIT);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs", &id), AVO_ROUTE_JOB_LIST);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs/42", &id), AVO_ROUTE_JOB_GET);
    assert_int_equal(id, 42);
    assert_int_equal(avo_routes_match("POST", "/v1/jobs/7/cancel", &id), AVO_ROUTE_JOB_CANCEL);
    assert_int_equal(id, 7);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs/7/events", &id), AVO_ROUTE_JOB_EVENTS);
    assert_int_equal(avo_routes_match("DELETE", "/v1/jobs/7", &id), -405);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs/0", &id), -404);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs/x", &id), -404);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs/-1", &id), -404);
    assert_int_equal(avo_routes_match("GET", "/v1/jobs/7/events/x", &id), -404);
    assert_int_equal(avo_routes_match("GET", "/v2/health", &id), -404);
    /* a 405's Allow header: every method the path is served under */
    char allow[64];
    avo_routes_allow("/v1/jobs/7", allow, sizeof allow);
    assert_string_equal(allow, "GET");
    avo_routes_allow("/v1/jobs", allow, sizeof allow);
    assert_string_equal(allow, "POST, GET");
    avo_routes_allow("/v1/kb/", allow, sizeof allow);
    assert_string_equal(allow, "POST, GET");
    avo_routes_allow("/v1/nowhere", allow, sizeof allow);
    assert_string_equal(allow, "");
    /* a problem's name is the rest of the path, slashes and all */
    assert_int_equal(avo_routes_match("GET", "/v1/problems", &id), AVO_ROUTE_PROBLEMS);
    assert_int_equal(avo_routes_match("GET", "/v1/problems/", &id), AVO_ROUTE_PROBLEMS);
    assert_int_equal(avo_routes_match("GET", "/v1/problems/cpu/sgemm", &id), AVO_ROUTE_PROBLEM);
    assert_int_equal(avo_routes_match("POST", "/v1/problems/cpu/sgemm", &id), -405);
    /* every route in the table matches itself */
    for (int i = 0; i < AVO_ROUTE_COUNT; i++) {
        char path[128];
        const char *p = avo_routes[i].pattern, *b = strstr(p, "{id}");
        if (b)
            snprintf(path, sizeof path, "%.*s5%s", (int)(b - p), p, b + 4);
        else
            snprintf(path, sizeof path, "%s", p);
        assert_int_equal(avo_routes_match(avo_routes[i].method, path, &id), (int)avo_routes[i].id);
    }
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_token_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/avo-tokens-XXXXXX", path[64], err[256];
    avo_token tokens[AVO_TOKENS_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t", dir);
    write_file(path, "# rotation\n\n  0123456789abcdef0123  \nfedcba9876543210fedc\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 1, err, sizeof err), 2);
    assert_string_equal(tokens[0].token, "0123456789abcdef0123");
    assert_string_equal(tokens[1].token, "fedcba9876543210fedc");
    assert_string_equal(tokens[0].principal, ""); /* a bare line: anonymous */
    assert_int_equal(tokens[1].line, 4);
    /* principals: attributes after the token, in any order */
    write_file(path,
               "0123456789abcdef0123 principal=alice team=ml\n"
               "fedcba9876543210fedc\tadmin principal=ops.root\n",
               0600);
    assert_int_equal(avo_tokens_load(path, tokens, 1, err, sizeof err), 2);
    assert_string_equal(tokens[0].token, "0123456789abcdef0123");
    assert_string_equal(tokens[0].principal, "alice");
    assert_string_equal(tokens[0].team, "ml");
    assert_int_equal(tokens[0].admin, 0);
    assert_string_equal(tokens[1].principal, "ops.root");
    assert_string_equal(tokens[1].team, "");
    assert_int_equal(tokens[1].admin, 1);
    write_file(path, "0123456789abcdef0123 principal=alice\n\n0123456789abcdef0999 principal=bob tem=ml\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 3: unknown attribute 'tem'"));
    assert_null(strstr(err, "0999"));
    write_file(path, "0123456789abcdef0123 team=ml\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 1: team= needs principal=NAME"));
    write_file(path, "0123456789abcdef0123 principal=al/ice\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 1: principal=: a name is"));
    write_file(path, "0123456789abcdef0123 principal=a\n0123456789abcdef0123 principal=b\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 2: the same token as line 1"));
    write_file(path, "0123456789abcdef0123\n", 0644);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "not readable by others"));
    write_file(path, "# only a comment\nshort\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 2: a token is 16 to 255 characters"));
    assert_null(strstr(err, "short")); /* never the token itself */
    write_file(path, "# nothing\n", 0600);
    assert_int_equal(avo_tokens_load(path, tokens, 0, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no token in it"));
    unlink(path);
    assert_true(avo_tokens_load(path, tokens, 0, err, sizeof err) < 0);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_filled),
        cmocka_unit_test(test_full_spec),
        cmocka_unit_test(test_seed_budgets_and_stops),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_name_and_labels),
        cmocka_unit_test(test_commit_spec),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_token_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
