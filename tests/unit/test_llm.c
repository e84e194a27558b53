/* The provider codecs: both wire formats built and parsed exactly as the
 * public API references describe them, keys kept private, the retry policy. */
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

#include "daemon/avod/llm.h"

static avo_llm_provider prov(const char *kind)
{
    char err[256];
    avo_llm_provider p;
    json_t *c = json_pack("{s:s,s:s,s:s,s:{s:f,s:f,s:f}}", "kind", kind, "model", "m1", "base_url",
                          "http://127.0.0.1:9/x/", "price_per_mtok", "input", 3.0, "output", 15.0, "cached_input", 0.3);
    assert_int_equal(avo_llm_provider_parse(c, &p, err, sizeof err), 0);
    json_decref(c);
    return p;
}

/* A conversation with every kind of message: a system prompt, a user turn,
 * an assistant turn calling two tools, their two results, a user text. */
static json_t *conversation(void)
{
    json_error_t e;
    json_t *c = json_loads("[{\"role\":\"system\",\"text\":\"You optimise kernels.\"},"
                           "{\"role\":\"user\",\"text\":\"Make sgemm faster.\"},"
                           "{\"role\":\"assistant\",\"text\":\"Reading.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":"
                           "\"problem\",\"arguments\":{}},"
                           "{\"id\":\"c2\",\"name\":\"read_candidate\",\"arguments\":{\"id\":7}}]},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"text\":\"sgemm: C = A B\"},"
                           "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"text\":\"no candidate 7\",\"is_error\":true},"
                           "{\"role\":\"user\",\"text\":\"Go on.\"}]",
                           0, &e);
    assert_non_null(c);
    return c;
}

static json_t *tools(void)
{
    return json_pack("[{s:s,s:s,s:{s:s}},{s:s,s:s,s:{s:s}}]", "name", "problem", "description", "the problem", "schema",
                     "type", "object", "name", "read_candidate", "description", "a source", "schema", "type", "object");
}

static int has_header(const avo_llm_request *r, const char *h)
{
    for (int i = 0; r->headers[i]; i++)
        if (!strcmp(r->headers[i], h))
            return 1;
    return 0;
}

static void test_provider_config(void **state)
{
    (void)state;
    char err[256];
    avo_llm_provider p = prov("anthropic");
    assert_int_equal(p.kind, AVO_LLM_ANTHROPIC);
    assert_int_equal(p.max_tokens, 4096);
    assert_true(p.temperature < 0);
    json_t *bad = json_pack("{s:s,s:s}", "kind", "gemini", "model", "m");
    assert_int_equal(avo_llm_provider_parse(bad, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "kind: 'gemini'"));
    json_decref(bad);
    bad = json_pack("{s:s}", "kind", "openai");
    assert_int_equal(avo_llm_provider_parse(bad, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "model: required"));
    json_decref(bad);
    bad = json_pack("{s:s,s:s,s:s}", "model", "m", "api_key_env", "A", "api_key_file", "/k");
    assert_int_equal(avo_llm_provider_parse(bad, &p, err, sizeof err), -EINVAL);
    json_decref(bad);
}

static void test_keys_stay_private(void **state)
{
    (void)state;
    char key[128], err[512];
    avo_llm_provider p = prov("openai");
    snprintf(p.key_env, sizeof p.key_env, "AVO_TEST_KEY_UNSET");
    unsetenv("AVO_TEST_KEY_UNSET");
    assert_int_equal(avo_llm_load_key(&p, key, sizeof key, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "AVO_TEST_KEY_UNSET is not set"));
    setenv("AVO_TEST_KEY_UNSET", "sk-secret-1", 1);
    assert_int_equal(avo_llm_load_key(&p, key, sizeof key, err, sizeof err), 0);
    assert_string_equal(key, "sk-secret-1");

    char path[] = "/tmp/avo-key-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "sk-file-2\n", 10), 10);
    close(fd);
    p.key_env[0] = '\0';
    snprintf(p.key_file, sizeof p.key_file, "%s", path);
    chmod(path, 0644);
    err[0] = '\0';
    assert_int_equal(avo_llm_load_key(&p, key, sizeof key, err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "chmod 600"));
    assert_null(strstr(err, "sk-file-2")); /* the message never carries the key */
    chmod(path, 0600);
    assert_int_equal(avo_llm_load_key(&p, key, sizeof key, err, sizeof err), 0);
    assert_string_equal(key, "sk-file-2"); /* trailing newline dropped */
    /* the check at start, reload and submission says the same, keeps nothing */
    assert_int_equal(avo_llm_key_check(&p, err, sizeof err), 0);
    chmod(path, 0640);
    assert_int_equal(avo_llm_key_check(&p, err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "mode 640"));
    unlink(path);
    assert_true(avo_llm_key_check(&p, err, sizeof err) < 0);
    assert_non_null(strstr(err, "cannot open"));
}

/* The body field of the output limit: max_completion_tokens for OpenAI's own
 * API (its reasoning models refuse max_tokens), max_tokens for compatible
 * servers and Anthropic; either when the config says so. */
static void test_output_limit_field(void **state)
{
    (void)state;
    char err[256];
    avo_llm_provider p;
    json_t *c = conversation();
    avo_llm_request r;
    const struct {
        const char *cfg, *field, *absent;
    } cases[] = {
        {"{\"kind\":\"openai\",\"model\":\"o3\"}", "max_completion_tokens", "max_tokens"},
        {"{\"kind\":\"openai\",\"model\":\"q\",\"base_url\":\"http://127.0.0.1:8000/v1\"}", "max_tokens",
         "max_completion_tokens"},
        {"{\"kind\":\"openai\",\"model\":\"q\",\"base_url\":\"http://127.0.0.1:8000/v1\","
         "\"max_tokens_field\":\"max_completion_tokens\"}",
         "max_completion_tokens", "max_tokens"},
        {"{\"kind\":\"openai\",\"model\":\"g\",\"max_tokens_field\":\"max_tokens\"}", "max_tokens",
         "max_completion_tokens"},
        {"{\"kind\":\"anthropic\",\"model\":\"c\"}", "max_tokens", "max_completion_tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *cfg = json_loads(cases[i].cfg, 0, NULL);
        assert_int_equal(avo_llm_provider_parse(cfg, &p, err, sizeof err), 0);
        json_decref(cfg);
        p.max_tokens = 777;
        assert_int_equal(avo_llm_request_build(&p, "k", c, NULL, &r, err, sizeof err), 0);
        json_t *b = json_loads(r.body, 0, NULL);
        assert_int_equal(json_integer_value(json_object_get(b, cases[i].field)), 777);
        assert_null(json_object_get(b, cases[i].absent));
        json_decref(b);
        avo_llm_request_free(&r);
    }
    json_t *bad = json_pack("{s:s,s:s,s:s}", "kind", "anthropic", "model", "c", "max_tokens_field",
                            "max_completion_tokens");
    assert_int_equal(avo_llm_provider_parse(bad, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "max_tokens_field: the anthropic Messages API takes max_tokens only"));
    json_decref(bad);
    bad = json_pack("{s:s,s:s,s:s}", "kind", "openai", "model", "c", "max_tokens_field", "max_output_tokens");
    assert_int_equal(avo_llm_provider_parse(bad, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "max_tokens_field: 'max_output_tokens' is not max_tokens or max_completion_tokens"));
    json_decref(bad);
    json_decref(c);
}

/* An assistant turn with neither text nor tool calls never goes on the wire:
 * Anthropic refuses "content": [], OpenAI a null content without tool_calls. */
static void test_no_empty_assistant_turn(void **state)
{
    (void)state;
    char err[256];
    const char *kinds[] = {"openai", "anthropic"};
    for (int k = 0; k < 2; k++) {
        avo_llm_provider p = prov(kinds[k]);
        json_t *c = json_loads("[{\"role\":\"system\",\"text\":\"s\"},{\"role\":\"user\",\"text\":\"go\"},"
                               "{\"role\":\"assistant\"},{\"role\":\"assistant\",\"text\":\"\",\"tool_calls\":[]},"
                               "{\"role\":\"user\",\"text\":\"Your answer was empty\"}]",
                               0, NULL);
        avo_llm_request r;
        assert_int_equal(avo_llm_request_build(&p, "k", c, NULL, &r, err, sizeof err), 0);
        json_t *b = json_loads(r.body, 0, NULL), *m;
        size_t i;
        json_array_foreach(json_object_get(b, "messages"), i, m)
            assert_string_not_equal(json_string_value(json_object_get(m, "role")), "assistant");
        json_decref(b);
        avo_llm_request_free(&r);
        json_decref(c);
    }
}

static void test_openai_request(void **state)
{
    (void)state;
    char err[256];
    avo_llm_provider p = prov("openai");
    json_t *c = conversation(), *t = tools();
    avo_llm_request r;
    assert_int_equal(avo_llm_request_build(&p, "sk-1", c, t, &r, err, sizeof err), 0);
    assert_string_equal(r.url, "http://127.0.0.1:9/x/chat/completions");
    assert_true(has_header(&r, "Authorization: Bearer sk-1"));
    assert_true(has_header(&r, "Content-Type: application/json"));
    json_t *b = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(b, "model")), "m1");
    json_t *msgs = json_object_get(b, "messages");
    assert_int_equal(json_array_size(msgs), 6);
    json_t *a = json_array_get(msgs, 2);
    json_t *call = json_array_get(json_object_get(a, "tool_calls"), 1);
    assert_string_equal(json_string_value(json_object_get(call, "type")), "function");
    /* arguments travel as JSON text in this format */
    assert_string_equal(json_string_value(json_object_get(json_object_get(call, "function"), "arguments")),
                        "{\"id\":7}");
    json_t *tool = json_array_get(msgs, 4);
    assert_string_equal(json_string_value(json_object_get(tool, "role")), "tool");
    assert_string_equal(json_string_value(json_object_get(tool, "tool_call_id")), "c2");
    json_t *t0 = json_array_get(json_object_get(b, "tools"), 0);
    assert_string_equal(json_string_value(json_object_get(t0, "type")), "function");
    assert_non_null(json_object_get(json_object_get(t0, "function"), "parameters"));
    json_decref(b);
    avo_llm_request_free(&r);
    json_decref(c);
    json_decref(t);
}

static void test_anthropic_request(void **state)
{
    (void)state;
    char err[256];
    avo_llm_provider p = prov("anthropic");
    json_t *c = conversation(), *t = tools();
    avo_llm_request r;
    assert_int_equal(avo_llm_request_build(&p, "sk-a", c, t, &r, err, sizeof err), 0);
    assert_string_equal(r.url, "http://127.0.0.1:9/x/v1/messages");
    assert_true(has_header(&r, "x-api-key: sk-a"));
    assert_true(has_header(&r, "anthropic-version: 2023-06-01"));
    json_t *b = json_loads(r.body, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 4096);
    json_t *sys = json_array_get(json_object_get(b, "system"), 0);
    assert_string_equal(json_string_value(json_object_get(sys, "text")), "You optimise kernels.");
    assert_string_equal(json_string_value(json_object_get(json_object_get(sys, "cache_control"), "type")), "ephemeral");
    /* user, assistant, then ONE user turn: both tool results and the text */
    json_t *msgs = json_object_get(b, "messages");
    assert_int_equal(json_array_size(msgs), 3);
    json_t *u = json_object_get(json_array_get(msgs, 2), "content");
    assert_int_equal(json_array_size(u), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(u, 0), "type")), "tool_result");
    assert_string_equal(json_string_value(json_object_get(json_array_get(u, 1), "tool_use_id")), "c2");
    assert_true(json_is_true(json_object_get(json_array_get(u, 1), "is_error")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(u, 2), "type")), "text");
    json_t *a = json_object_get(json_array_get(msgs, 1), "content");
    json_t *use = json_array_get(a, 2);
    assert_string_equal(json_string_value(json_object_get(use, "type")), "tool_use");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(use, "input"), "id")), 7);
    json_t *ts = json_object_get(b, "tools");
    assert_non_null(json_object_get(json_array_get(ts, 0), "input_schema"));
    assert_null(json_object_get(json_array_get(ts, 0), "cache_control"));
    assert_non_null(json_object_get(json_array_get(ts, 1), "cache_control")); /* breakpoint after the tools */
    json_decref(b);
    avo_llm_request_free(&r);
    json_decref(c);
    json_decref(t);
}

static void test_openai_reply(void **state)
{
    (void)state;
    char err[256];
    avo_llm_provider p = prov("openai");
    const char *body =
        "{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
        "\"content\":null,\"tool_calls\":[{\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"edit_source\","
        "\"arguments\":\"{\\\"search\\\":\\\"a\\\",\\\"replace\\\":\\\"b\\\"}\"}},{\"id\":\"t2\",\"type\":\"function\","
        "\"function\":{\"name\":\"compile\",\"arguments\":\"{not json\"}}]},\"finish_reason\":\"tool_calls\"}],"
        "\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":100,\"total_tokens\":1100,"
        "\"prompt_tokens_details\":{\"cached_tokens\":800}}}";
    avo_llm_reply r;
    assert_int_equal(avo_llm_reply_parse(&p, body, strlen(body), &r, err, sizeof err), 0);
    assert_string_equal(r.stop, "tool_use");
    json_t *calls = json_object_get(r.message, "tool_calls");
    assert_int_equal(json_array_size(calls), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "arguments"), "replace")), "b");
    assert_non_null(
        strstr(json_string_value(json_object_get(json_array_get(calls, 1), "arguments_error")), "not valid JSON"));
    assert_int_equal(r.in_tokens, 1000);
    assert_int_equal(r.cached_tokens, 800);
    assert_int_equal(r.out_tokens, 100);
    /* 200 x 3 + 800 x 0.3 + 100 x 15, per million */
    assert_true(r.cost_usd > 2.339e-3 && r.cost_usd < 2.341e-3);
    avo_llm_reply_free(&r);
    const char *cut = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"partial\"},"
                      "\"finish_reason\":\"length\"}]}";
    assert_int_equal(avo_llm_reply_parse(&p, cut, strlen(cut), &r, err, sizeof err), 0);
    assert_string_equal(r.stop, "max_tokens");
    assert_string_equal(json_string_value(json_object_get(r.message, "text")), "partial");
    avo_llm_reply_free(&r);
    assert_int_equal(avo_llm_reply_parse(&p, "{\"choices\":[]}", 14, &r, err, sizeof err), -EPROTO);
    assert_non_null(strstr(err, "choices[0].message"));
    assert_int_equal(avo_llm_reply_parse(&p, "<html>", 6, &r, err, sizeof err), -EPROTO);
}

static void test_anthropic_reply(void **state)
{
    (void)state;
    char err[256];
    avo_llm_provider p = prov("anthropic");
    const char *body =
        "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m1\",\"content\":["
        "{\"type\":\"text\",\"text\":\"Compiling "
        "now.\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"compile\","
        "\"input\":{}}],\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":50,"
        "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":950,\"output_tokens\":20}}";
    avo_llm_reply r;
    assert_int_equal(avo_llm_reply_parse(&p, body, strlen(body), &r, err, sizeof err), 0);
    assert_string_equal(r.stop, "tool_use");
    assert_string_equal(json_string_value(json_object_get(r.message, "text")), "Compiling now.");
    json_t *call = json_array_get(json_object_get(r.message, "tool_calls"), 0);
    assert_string_equal(json_string_value(json_object_get(call, "id")), "toolu_1");
    assert_true(json_is_object(json_object_get(call, "arguments")));
    assert_int_equal(r.in_tokens, 1000); /* uncached + cache reads + cache writes */
    assert_int_equal(r.cached_tokens, 950);
    avo_llm_reply_free(&r);
    const char *end = "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"Done.\"}],"
                      "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}";
    assert_int_equal(avo_llm_reply_parse(&p, end, strlen(end), &r, err, sizeof err), 0);
    assert_string_equal(r.stop, "end");
    assert_null(json_object_get(r.message, "tool_calls"));
    avo_llm_reply_free(&r);
}

static void test_errors_and_retries(void **state)
{
    (void)state;
    char m[128];
    const char *oa = "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\"}}";
    avo_llm_error_message(oa, strlen(oa), m, sizeof m);
    assert_string_equal(m, "Rate limit reached");
    const char *an = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
    avo_llm_error_message(an, strlen(an), m, sizeof m);
    assert_string_equal(m, "Overloaded");
    assert_true(avo_llm_retryable(429));
    assert_true(avo_llm_retryable(529));
    assert_true(avo_llm_retryable(500));
    assert_true(avo_llm_retryable(-ETIMEDOUT));
    assert_false(avo_llm_retryable(400));
    assert_false(avo_llm_retryable(401));
    assert_false(avo_llm_retryable(-ECANCELED));
    uint64_t rng = 1;
    assert_true(avo_llm_retry_delay(1, 7, &rng) == 7.0);     /* Retry-After wins */
    assert_true(avo_llm_retry_delay(1, 1e6, &rng) == 120.0); /* but is capped */
    for (int a = 1; a <= 12; a++) {
        double d = avo_llm_retry_delay(a, -1, &rng), base = a > 7 ? 60 : (double)(1 << (a - 1));
        if (base > 60)
            base = 60;
        assert_true(d >= base * 0.5 && d <= base);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_provider_config),
        cmocka_unit_test(test_keys_stay_private),
        cmocka_unit_test(test_openai_request),
        cmocka_unit_test(test_anthropic_request),
        cmocka_unit_test(test_openai_reply),
        cmocka_unit_test(test_anthropic_reply),
        cmocka_unit_test(test_errors_and_retries),
        cmocka_unit_test(test_output_limit_field),
        cmocka_unit_test(test_no_empty_assistant_turn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
