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
int avo_llmcall_start(avo_llmcall **out, uv_loop_t *loop, avo_llmhttp *http, const avo_llm_provider *p,
                      const char *key, json_t *conversation, json_t *tools, avo_llmcall_cb cb, void *arg, char *err,
                      size_t errlen);

/* Stops the call: the request in flight is aborted (its connection closed)
 * and the callback runs now, with -ECANCELED; so too while waiting for a
 * retry. Only when the answer has begun to arrive (it is generated and
 * billed already) is it let finish: the callback then runs when it has
 * come, with rc 0 and the answer if it is one, else -ECANCELED. */
void avo_llmcall_cancel(avo_llmcall *c);

#endif
