/* LLM provider wire formats, keys, retry policy and cost, without I/O (llm.h). */
#include "llm.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tune.h"

static int get_str(json_t *o, const char *k, char *out, size_t outlen, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= outlen) {
        snprintf(err, errlen, "%s: must be a string of at most %zu characters", k, outlen - 1);
        return -EINVAL;
    }
    snprintf(out, outlen, "%s", json_string_value(v));
    return 0;
}

static int get_num(json_t *o, const char *k, double lo, double hi, double *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        snprintf(err, errlen, "%s: must be a number in [%g, %g]", k, lo, hi);
        return -EINVAL;
    }
    *out = json_number_value(v);
    return 0;
}

/* OpenAI's own API refuses max_tokens for its reasoning models and takes
 * max_completion_tokens for all; compatible servers (vLLM, llama.cpp, ...)
 * know max_tokens for sure. Anthropic's Messages API has only max_tokens. */
static int output_limit_field(avo_llm_provider *p, char *err, size_t errlen)
{
    char *f = p->max_tokens_field;
    if (!f[0]) {
        const int openai_itself = p->kind == AVO_LLM_OPENAI && strstr(p->base_url, "://api.openai.com");
        snprintf(f, sizeof p->max_tokens_field, "%s", openai_itself ? "max_completion_tokens" : "max_tokens");
        return 0;
    }
    if (strcmp(f, "max_tokens") != 0 && strcmp(f, "max_completion_tokens") != 0) {
        snprintf(err, errlen, "max_tokens_field: '%s' is not max_tokens or max_completion_tokens", f);
        return -EINVAL;
    }
    if (p->kind == AVO_LLM_ANTHROPIC && strcmp(f, "max_tokens") != 0) {
        snprintf(err, errlen, "max_tokens_field: the anthropic Messages API takes max_tokens only");
        return -EINVAL;
    }
    return 0;
}

int avo_llm_provider_parse(json_t *cfg, avo_llm_provider *p, char *err, size_t errlen)
{
    int rc;
    char kind[32] = "openai";
    double max_tokens = 4096, retries = 5, context = 128000;
    memset(p, 0, sizeof *p);
    p->temperature = -1;
    p->timeout_s = 120;
    p->price_cached_in = -1;
    if (!json_is_object(cfg)) {
        snprintf(err, errlen, "provider: must be a JSON object");
        return -EINVAL;
    }
    json_t *price = json_object_get(cfg, "price_per_mtok");
    if ((rc = get_str(cfg, "name", p->name, sizeof p->name, err, errlen)) ||
        (rc = get_str(cfg, "kind", kind, sizeof kind, err, errlen)) ||
        (rc = get_str(cfg, "base_url", p->base_url, sizeof p->base_url, err, errlen)) ||
        (rc = get_str(cfg, "model", p->model, sizeof p->model, err, errlen)) ||
        (rc = get_str(cfg, "api_key_env", p->key_env, sizeof p->key_env, err, errlen)) ||
        (rc = get_str(cfg, "api_key_file", p->key_file, sizeof p->key_file, err, errlen)) ||
        (rc = get_num(cfg, "temperature", 0, 2, &p->temperature, err, errlen)) ||
        (rc = get_num(cfg, "max_tokens", 1, 1000000, &max_tokens, err, errlen)) ||
        (rc = get_str(cfg, "max_tokens_field", p->max_tokens_field, sizeof p->max_tokens_field, err, errlen)) ||
        (rc = get_num(cfg, "timeout_s", 1, 3600, &p->timeout_s, err, errlen)) ||
        (rc = get_num(cfg, "max_retries", 0, 20, &retries, err, errlen)) ||
        (rc = get_num(cfg, "context_tokens", 1000, 1e8, &context, err, errlen)) ||
        (rc = get_num(price, "input", 0, 1e4, &p->price_in, err, errlen)) ||
        (rc = get_num(price, "output", 0, 1e4, &p->price_out, err, errlen)) ||
        (rc = get_num(price, "cached_input", 0, 1e4, &p->price_cached_in, err, errlen)))
        return rc;
    p->max_tokens = (int)max_tokens;
    p->max_retries = (int)retries;
    p->context_tokens = (long)context;
    if (!strcmp(kind, "openai"))
        p->kind = AVO_LLM_OPENAI;
    else if (!strcmp(kind, "anthropic"))
        p->kind = AVO_LLM_ANTHROPIC;
    else {
        snprintf(err, errlen, "kind: '%s' is not openai (Chat Completions) or anthropic (Messages)", kind);
        return -EINVAL;
    }
    if (!p->base_url[0])
        snprintf(p->base_url, sizeof p->base_url, "%s",
                 p->kind == AVO_LLM_ANTHROPIC ? "https://api.anthropic.com" : "https://api.openai.com/v1");
    if ((rc = output_limit_field(p, err, errlen)) < 0)
        return rc;
    if (!p->model[0]) {
        snprintf(err, errlen, "model: required");
        return -EINVAL;
    }
    if (p->key_env[0] && p->key_file[0]) {
        snprintf(err, errlen, "api_key_env, api_key_file: give one");
        return -EINVAL;
    }
    return 0;
}

int avo_llm_load_key(const avo_llm_provider *p, char *key, size_t keylen, char *err, size_t errlen)
{
    key[0] = '\0';
    if (p->key_env[0]) {
        const char *v = getenv(p->key_env);
        if (!v || !*v) {
            snprintf(err, errlen, "API key: environment variable %s is not set", p->key_env);
            return -ENOENT;
        }
        if (strlen(v) >= keylen) {
            snprintf(err, errlen, "API key: %s is longer than %zu bytes", p->key_env, keylen - 1);
            return -E2BIG;
        }
        snprintf(key, keylen, "%s", v);
        return 0;
    }
    if (!p->key_file[0])
        return 0; /* a local server that wants no key */
    int fd = open(p->key_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        snprintf(err, errlen, "API key: cannot open %s: %s", p->key_file, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(err, errlen,
                 "API key: %s must be owned by uid %u and readable by its owner only (chmod 600); it is "
                 "uid %u, mode %03o",
                 p->key_file, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        close(fd);
        return -EPERM;
    }
    ssize_t n = read(fd, key, keylen - 1);
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "API key: cannot read %s: %s", p->key_file, strerror(errno));
        return -EIO;
    }
    key[n] = '\0';
    while (n > 0 && (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' '))
        key[--n] = '\0';
    if (!n) {
        snprintf(err, errlen, "API key: %s is empty", p->key_file);
        return -ENOENT;
    }
    return 0;
}

int avo_llm_key_check(const avo_llm_provider *p, char *err, size_t errlen)
{
    char key[4096];
    int rc = avo_llm_load_key(p, key, sizeof key, err, errlen);
    explicit_bzero(key, sizeof key);
    return rc;
}

static const char *text_of(json_t *m)
{
    const char *t = json_string_value(json_object_get(m, "text"));
    return t ? t : "";
}

/* An assistant message with nothing in it: sending it back is a 400 from
 * both services (Anthropic: empty content; OpenAI: null content without
 * tool_calls), so it never goes on the wire. */
static int empty_turn(json_t *m)
{
    return !*text_of(m) && json_array_size(json_object_get(m, "tool_calls")) == 0;
}

/* Chat Completions: system/user/assistant/tool messages, tool arguments as
 * JSON text. */
static json_t *openai_body(const avo_llm_provider *p, json_t *conv, json_t *tools)
{
    json_t *msgs = json_array(), *m;
    size_t i;
    json_array_foreach(conv, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role)
            continue;
        if (!strcmp(role, "tool")) {
            json_array_append_new(msgs, json_pack("{s:s,s:O?,s:s}", "role", "tool", "tool_call_id",
                                                  json_object_get(m, "tool_call_id"), "content", text_of(m)));
        } else if (!strcmp(role, "assistant")) {
            if (empty_turn(m))
                continue;
            json_t *a = json_pack("{s:s}", "role", "assistant");
            json_t *t = json_object_get(m, "text");
            json_object_set(a, "content", json_is_string(t) ? t : json_null());
            json_t *calls = json_object_get(m, "tool_calls"), *c;
            size_t k;
            if (json_array_size(calls)) {
                json_t *out = json_array();
                json_array_foreach(calls, k, c)
                {
                    char *args = json_dumps(json_object_get(c, "arguments") ? json_object_get(c, "arguments")
                                                                            : json_object(),
                                            JSON_COMPACT);
                    json_array_append_new(out, json_pack("{s:O?,s:s,s:{s:O?,s:s}}", "id", json_object_get(c, "id"),
                                                         "type", "function", "function", "name",
                                                         json_object_get(c, "name"), "arguments", args ? args : "{}"));
                    free(args);
                }
                json_object_set_new(a, "tool_calls", out);
            }
            json_array_append_new(msgs, a);
        } else {
            json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", role, "content", text_of(m)));
        }
    }
    json_t *body = json_pack("{s:s,s:o,s:i}", "model", p->model, "messages", msgs,
                             p->max_tokens_field[0] ? p->max_tokens_field : "max_tokens", p->max_tokens);
    if (p->temperature >= 0)
        json_object_set_new(body, "temperature", json_real(p->temperature));
    if (json_array_size(tools)) {
        json_t *ts = json_array(), *t;
        json_array_foreach(tools, i, t) json_array_append_new(
            ts,
            json_pack("{s:s,s:{s:O?,s:O?,s:O?}}", "type", "function", "function", "name", json_object_get(t, "name"),
                      "description", json_object_get(t, "description"), "parameters", json_object_get(t, "schema")));
        json_object_set_new(body, "tools", ts);
    }
    return body;
}

/* The Messages API wants user and assistant turns to alternate and tool
 * results inside a user turn: consecutive tool results (and a user text
 * after them) become blocks of one user message. */
static void append_user_block(json_t *msgs, json_t *block)
{
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (role && !strcmp(role, "user"))
        json_array_append_new(json_object_get(last, "content"), block);
    else
        json_array_append_new(msgs, json_pack("{s:s,s:[o]}", "role", "user", "content", block));
}

static json_t *anthropic_body(const avo_llm_provider *p, json_t *conv, json_t *tools)
{
    json_t *msgs = json_array(), *m;
    char *system = NULL;
    size_t syslen = 0, i;
    FILE *sf = open_memstream(&system, &syslen);
    json_array_foreach(conv, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role)
            continue;
        if (!strcmp(role, "system")) {
            if (sf)
                fprintf(sf, "%s%s", syslen || ftell(sf) ? "\n\n" : "", text_of(m));
        } else if (!strcmp(role, "tool")) {
            append_user_block(msgs, json_pack("{s:s,s:O?,s:s,s:b}", "type", "tool_result", "tool_use_id",
                                              json_object_get(m, "tool_call_id"), "content", text_of(m), "is_error",
                                              json_is_true(json_object_get(m, "is_error"))));
        } else if (!strcmp(role, "assistant")) {
            if (empty_turn(m))
                continue;
            json_t *blocks = json_array(), *c;
            size_t k;
            if (*text_of(m))
                json_array_append_new(blocks, json_pack("{s:s,s:s}", "type", "text", "text", text_of(m)));
            json_array_foreach(json_object_get(m, "tool_calls"), k, c) json_array_append_new(
                blocks, json_pack("{s:s,s:O?,s:O?,s:O}", "type", "tool_use", "id", json_object_get(c, "id"), "name",
                                  json_object_get(c, "name"), "input",
                                  json_is_object(json_object_get(c, "arguments")) ? json_object_get(c, "arguments")
                                                                                  : json_object()));
            json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "assistant", "content", blocks));
        } else {
            append_user_block(msgs, json_pack("{s:s,s:s}", "type", "text", "text", text_of(m)));
        }
    }
    if (sf)
        fclose(sf);
    json_t *body = json_pack("{s:s,s:o,s:i}", "model", p->model, "messages", msgs, "max_tokens", p->max_tokens);
    /* Prompt caching: the system prompt and the tools are the same on
     * every turn of a step; a breakpoint after each caches that prefix. */
    if (system && *system)
        json_object_set_new(
            body, "system",
            json_pack("[{s:s,s:s,s:{s:s}}]", "type", "text", "text", system, "cache_control", "type", "ephemeral"));
    free(system);
    if (p->temperature >= 0)
        json_object_set_new(body, "temperature", json_real(p->temperature));
    if (json_array_size(tools)) {
        json_t *ts = json_array(), *t;
        json_array_foreach(tools, i, t) json_array_append_new(
            ts, json_pack("{s:O?,s:O?,s:O?}", "name", json_object_get(t, "name"), "description",
                          json_object_get(t, "description"), "input_schema", json_object_get(t, "schema")));
        json_object_set_new(json_array_get(ts, json_array_size(ts) - 1), "cache_control",
                            json_pack("{s:s}", "type", "ephemeral"));
        json_object_set_new(body, "tools", ts);
    }
    return body;
}

int avo_llm_request_build(const avo_llm_provider *p, const char *key, json_t *conversation, json_t *tools,
                          avo_llm_request *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char base[sizeof p->base_url];
    snprintf(base, sizeof base, "%s", p->base_url);
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        base[--bl] = '\0';
    const int anth = p->kind == AVO_LLM_ANTHROPIC;
    snprintf(out->url, sizeof out->url, "%s%s", base, anth ? "/v1/messages" : "/chat/completions");
    json_t *body = anth ? anthropic_body(p, conversation, tools) : openai_body(p, conversation, tools);
    out->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    int n = 0;
    if (asprintf(&out->headers[n++], "Content-Type: application/json") < 0)
        out->headers[--n] = NULL;
    if (anth) {
        if (asprintf(&out->headers[n++], "anthropic-version: 2023-06-01") < 0)
            out->headers[--n] = NULL;
        if (key && *key && asprintf(&out->headers[n++], "x-api-key: %s", key) < 0)
            out->headers[--n] = NULL;
    } else if (key && *key && asprintf(&out->headers[n++], "Authorization: Bearer %s", key) < 0) {
        out->headers[--n] = NULL;
    }
    if (!out->body || !out->headers[0]) {
        avo_llm_request_free(out);
        snprintf(err, errlen, "out of memory building the request");
        return -ENOMEM;
    }
    return 0;
}

void avo_llm_request_free(avo_llm_request *r)
{
    for (size_t i = 0; i < sizeof r->headers / sizeof r->headers[0]; i++) {
        if (r->headers[i])
            explicit_bzero(r->headers[i], strlen(r->headers[i])); /* may hold the key */
        free(r->headers[i]);
        r->headers[i] = NULL;
    }
    free(r->body);
    r->body = NULL;
}

static long int_of(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : 0;
}

static json_t *tool_call(json_t *id, json_t *name, json_t *args_obj, const char *args_text)
{
    json_t *c = json_pack("{s:O?,s:O?}", "id", id, "name", name);
    if (args_obj) {
        json_object_set(c, "arguments", args_obj);
        return c;
    }
    json_error_t je;
    json_t *a = args_text ? json_loads(args_text, JSON_DECODE_ANY, &je) : NULL;
    if (json_is_object(a)) {
        json_object_set_new(c, "arguments", a);
        return c;
    }
    /* Kept, so the agent can be told what was wrong with its call. */
    char why[256];
    if (!a)
        snprintf(why, sizeof why, "arguments are not valid JSON: %s", args_text ? je.text : "missing");
    else
        snprintf(why, sizeof why, "arguments must be a JSON object");
    json_decref(a);
    json_object_set_new(c, "arguments", json_object());
    json_object_set_new(c, "arguments_error", json_string(why));
    return c;
}

int avo_llm_reply_parse(const avo_llm_provider *p, const char *body, size_t len, avo_llm_reply *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *r = json_loadb(body, len, 0, &je);
    if (!json_is_object(r)) {
        snprintf(err, errlen, "the provider's answer is not a JSON object: %s", r ? "wrong type" : je.text);
        json_decref(r);
        return -EPROTO;
    }
    json_t *msg = json_pack("{s:s,s:[]}", "role", "assistant", "tool_calls");
    json_t *calls = json_object_get(msg, "tool_calls");
    const char *stop = NULL;
    long cache_write = 0;
    if (p->kind == AVO_LLM_ANTHROPIC) {
        json_t *content = json_object_get(r, "content"), *b;
        size_t i;
        if (!json_is_array(content)) {
            snprintf(err, errlen, "the provider's answer has no content array");
            goto bad;
        }
        char *text = NULL;
        size_t tl = 0;
        FILE *tf = open_memstream(&text, &tl);
        json_array_foreach(content, i, b)
        {
            const char *type = json_string_value(json_object_get(b, "type"));
            if (type && !strcmp(type, "text") && tf)
                fputs(json_string_value(json_object_get(b, "text")) ? json_string_value(json_object_get(b, "text"))
                                                                    : "",
                      tf);
            else if (type && !strcmp(type, "tool_use"))
                json_array_append_new(
                    calls, tool_call(json_object_get(b, "id"), json_object_get(b, "name"),
                                     json_is_object(json_object_get(b, "input")) ? json_object_get(b, "input") : NULL,
                                     json_is_object(json_object_get(b, "input")) ? NULL : "null"));
        }
        if (tf)
            fclose(tf);
        if (text && *text)
            json_object_set_new(msg, "text", json_string(text));
        free(text);
        const char *sr = json_string_value(json_object_get(r, "stop_reason"));
        stop = !sr                                                         ? "other"
               : !strcmp(sr, "tool_use")                                   ? "tool_use"
               : !strcmp(sr, "max_tokens")                                 ? "max_tokens"
               : (!strcmp(sr, "end_turn") || !strcmp(sr, "stop_sequence")) ? "end"
                                                                           : "other";
        json_t *u = json_object_get(r, "usage");
        out->cached_tokens = int_of(u, "cache_read_input_tokens");
        cache_write = int_of(u, "cache_creation_input_tokens");
        out->in_tokens = int_of(u, "input_tokens") + out->cached_tokens + cache_write;
        out->out_tokens = int_of(u, "output_tokens");
    } else {
        json_t *ch = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
        if (!json_is_object(ch)) {
            snprintf(err, errlen, "the provider's answer has no choices[0].message");
            goto bad;
        }
        json_t *t = json_object_get(ch, "content"), *c;
        size_t i;
        if (json_is_string(t) && json_string_length(t))
            json_object_set(msg, "text", t);
        json_array_foreach(json_object_get(ch, "tool_calls"), i, c)
        {
            json_t *fn = json_object_get(c, "function");
            json_array_append_new(calls, tool_call(json_object_get(c, "id"), json_object_get(fn, "name"), NULL,
                                                   json_string_value(json_object_get(fn, "arguments"))));
        }
        const char *fr = json_string_value(
            json_object_get(json_array_get(json_object_get(r, "choices"), 0), "finish_reason"));
        /* Some servers say "stop" while returning tool calls. */
        stop = json_array_size(calls) && (!fr || strcmp(fr, "length")) ? "tool_use"
               : !fr                                                   ? "other"
               : !strcmp(fr, "stop")                                   ? "end"
               : !strcmp(fr, "length")                                 ? "max_tokens"
               : !strcmp(fr, "tool_calls")                             ? "tool_use"
                                                                       : "other";
        json_t *u = json_object_get(r, "usage");
        out->in_tokens = int_of(u, "prompt_tokens");
        out->out_tokens = int_of(u, "completion_tokens");
        out->cached_tokens = int_of(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    }
    if (!json_array_size(calls))
        json_object_del(msg, "tool_calls");
    snprintf(out->stop, sizeof out->stop, "%s", stop);
    double cached_price = p->price_cached_in >= 0 ? p->price_cached_in : p->price_in;
    out->cost_usd = ((double)(out->in_tokens - out->cached_tokens) * p->price_in +
                     (double)out->cached_tokens * cached_price + (double)out->out_tokens * p->price_out) /
                    1e6;
    out->message = msg;
    json_decref(r);
    return 0;
bad:
    json_decref(msg);
    json_decref(r);
    return -EPROTO;
}

void avo_llm_reply_free(avo_llm_reply *r)
{
    json_decref(r->message);
    r->message = NULL;
}

void avo_llm_error_message(const char *body, size_t len, char *out, size_t outlen)
{
    json_t *r = json_loadb(body ? body : "", len, 0, NULL);
    json_t *e = json_object_get(r, "error");
    const char *m = json_string_value(json_object_get(e, "message"));
    if (!m)
        m = json_string_value(e);
    if (m)
        snprintf(out, outlen, "%s", m);
    else
        snprintf(out, outlen, "%.*s", (int)(len < 200 ? len : 200), body ? body : "");
    json_decref(r);
}

int avo_llm_retryable(long status)
{
    if (status < 0)
        return status != -ECANCELED;
    return status == 408 || status == 409 || status == 429 || status >= 500;
}

double avo_llm_retry_delay(int attempt, double retry_after_s, uint64_t *rng)
{
    if (retry_after_s >= 0)
        return retry_after_s < 120 ? retry_after_s : 120;
    double base = ldexp(1.0, attempt > 1 ? (attempt - 1 < 10 ? attempt - 1 : 10) : 0);
    if (base > 60)
        base = 60;
    double u = (double)(avo_tune_rand(rng) >> 11) / 9007199254740992.0;
    return base * (0.5 + 0.5 * u);
}
