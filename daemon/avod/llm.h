/* LLM providers for the agent operator: the two wire formats (OpenAI-compatible
 * Chat Completions, Anthropic Messages) translated to and from one neutral
 * conversation, API keys, the retry policy and cost. Pure: no I/O but
 * reading a key; the transport is llmhttp.
 *
 * The neutral conversation is a JSON array of messages:
 *   {"role": "system"|"user", "text": "..."}
 *   {"role": "assistant", "text": "..." (may be absent),
 *    "tool_calls": [{"id": "...", "name": "...", "arguments": {...}}]}
 *   {"role": "tool", "tool_call_id": "...", "text": "...", "is_error": bool}
 * and tools are [{"name", "description", "schema": {JSON schema}}]. */
#ifndef AVO_LLM_H
#define AVO_LLM_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { AVO_LLM_OPENAI, AVO_LLM_ANTHROPIC } avo_llm_kind;

typedef struct {
    char name[64];
    avo_llm_kind kind;
    char base_url[512]; /* "https://api.openai.com/v1", "https://api.anthropic.com", "http://127.0.0.1:8000/v1" */
    char model[128];
    char key_env[128];          /* the key is read from this environment variable, */
    char key_file[PATH_MAX];    /* or from this file (mode 0600 or stricter, owned by us) */
    double temperature;         /* < 0: the provider's default */
    int max_tokens;             /* output tokens per response */
    double timeout_s;           /* per request */
    double price_in, price_out; /* USD per million input / output tokens */
    double price_cached_in;     /* USD per million cached input tokens (< 0: as price_in) */
    int max_retries;            /* on 429, 5xx, timeouts */
    long context_tokens;        /* the model's context window; a step's conversation is compacted near it */
    char max_tokens_field[32];  /* the body field that carries max_tokens: "max_tokens" or (newer OpenAI
                                * models refuse the former) "max_completion_tokens" */
} avo_llm_provider;

/* Fill defaults, then read a provider from its JSON config:
 * {"name","kind":"openai"|"anthropic","base_url","model","api_key_env"|"api_key_file",
 *  "temperature","max_tokens","max_tokens_field","timeout_s","price_per_mtok":{"input","output","cached_input"},
 *  "max_retries","context_tokens"}.
 * max_tokens_field defaults to "max_completion_tokens" for OpenAI's own API
 * and "max_tokens" elsewhere (Anthropic accepts nothing else). 
 * Returns 0 or a negative int with "FIELD: reason" in err. */
int avo_llm_provider_parse(json_t *cfg, avo_llm_provider *p, char *err, size_t errlen);

/* The key, from the environment variable or the file. A file readable or
 * writable by group or others, or owned by someone else, is refused: a key
 * must not be one chmod away from every user of the machine. Never logged.
 * Returns 0, or a negative int with a message that names the variable or
 * file but never contains the key. */
int avo_llm_load_key(const avo_llm_provider *p, char *key, size_t keylen, char *err, size_t errlen);
/* Whether the key can be loaded now (read, then wiped): the check at start,
 * reload and submission, so a bad key file is found before a step needs it.
 * 0, or a negative int with err as avo_llm_load_key gives it. */
int avo_llm_key_check(const avo_llm_provider *p, char *err, size_t errlen);

/* The request: URL, headers (NULL-terminated, "Name: value", the key in the
 * auth header) and JSON body. Anthropic gets cache_control breakpoints on
 * the system prompt and the tool list (prompt caching); OpenAI-compatible
 * servers cache long prefixes on their own. An assistant message with
 * neither text nor tool calls is left out: both services refuse an empty
 * assistant turn. Caller frees with avo_llm_request_free. */
typedef struct {
    char url[640];
    char *headers[6];
    char *body;
} avo_llm_request;
int avo_llm_request_build(const avo_llm_provider *p, const char *key, json_t *conversation, json_t *tools,
                          avo_llm_request *out, char *err, size_t errlen);
void avo_llm_request_free(avo_llm_request *r);

/* A response, neutral. stop: "end" (the model finished its turn), "tool_use"
 * (it wants tool results), "max_tokens" (cut off by the output limit),
 * "other". message: the assistant message to append to the conversation. */
typedef struct {
    json_t *message; /* owned */
    char stop[16];
    long in_tokens, out_tokens, cached_tokens;
    double cost_usd;
} avo_llm_reply;

/* Parse a 2xx body. A tool call whose arguments are not a JSON object is
 * kept, with "arguments_error" saying why, so the agent can be told.
 * Returns 0 or a negative int with err. */
int avo_llm_reply_parse(const avo_llm_provider *p, const char *body, size_t len, avo_llm_reply *out, char *err,
                        size_t errlen);
void avo_llm_reply_free(avo_llm_reply *r);

/* The provider's error message from an error body (both formats), or the
 * body's start; for failure reasons. */
void avo_llm_error_message(const char *body, size_t len, char *out, size_t outlen);

/* Retry policy: a 429, 408, 409, 5xx (529 included) or a transport timeout
 * is worth retrying; 4xx otherwise is not (the request itself is wrong). */
int avo_llm_retryable(long status);

/* Seconds to wait before retry `attempt` (1, 2, ...): Retry-After when the
 * server sent one (capped at 120 s), else exponential from 1 s, capped at
 * 60 s, with full jitter from *rng. */
double avo_llm_retry_delay(int attempt, double retry_after_s, uint64_t *rng);

#endif
