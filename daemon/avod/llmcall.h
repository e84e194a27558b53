/* One provider call, as the agent step makes it: build the request, post
 * it on the loop (llmhttp), retry what is worth retrying (llm.h's policy,
 * Retry-After honoured) and parse the answer. Never blocks. */
#ifndef AVO_LLMCALL_H
#define AVO_LLMCALL_H

#include <jansson.h>
#include <uv.h>

#include "llm.h"
#include "llmhttp.h"

typedef struct avo_llmcall avo_llmcall;

/* rc 0: *reply holds the answer (owned by the callee; valid during the
 * callback only). rc < 0: reason says why in words fit for a transcript and
 * a step's end (the provider's status and message; never the key).
 * attempts: requests made, retries included. */
typedef void (*avo_llmcall_cb)(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts);

/* conversation and tools are referenced until the callback. Returns 0 (the
 * callback runs later, exactly once) or a negative int with err (no
 * callback). *out (may be NULL) lets the caller cancel. */
int avo_llmcall_start(avo_llmcall **out, uv_loop_t *loop, avo_llmhttp *http, const avo_llm_provider *p, const char *key,
                      json_t *conversation, json_t *tools, avo_llmcall_cb cb, void *arg, char *err, size_t errlen);

/* Told of each retry before its wait begins, so the waiting is visible:
 * attempt is the request that failed (1, 2, ...), status its HTTP status or
 * a negative errno for a transport failure, msg the provider's message or
 * the transport error, wait_s the seconds until the next request. */
typedef void (*avo_llmcall_retry_cb)(void *arg, int attempt, long status, const char *msg, double wait_s);

/* Sets (or clears, with NULL) the retry callback; it gets the arg of
 * avo_llmcall_start. */
void avo_llmcall_on_retry(avo_llmcall *c, avo_llmcall_retry_cb cb);

/* Stops the call: the request in flight is aborted (its connection closed)
 * and the callback runs now, with -ECANCELED; so too while waiting for a
 * retry. Only when the answer has begun to arrive (it is generated and
 * billed already) is it let finish: the callback then runs when it has
 * come, with rc 0 and the answer if it is one, else -ECANCELED. */
void avo_llmcall_cancel(avo_llmcall *c);

#endif
