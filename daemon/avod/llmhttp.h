/* HTTP POST for LLM provider calls, driven by the libuv loop: one libcurl
 * multi handle per loop in socket mode (CURLMOPT_SOCKETFUNCTION/TIMERFUNCTION,
 * a uv_poll_t per socket, one uv_timer_t), so a slow or stalled provider never
 * blocks the loop. Requests run concurrently and share curl's connection cache.
 * Header values are never logged: they carry API keys. */
#ifndef AVO_LLMHTTP_H
#define AVO_LLMHTTP_H

#include <stddef.h>
#include <uv.h>

typedef struct avo_llmhttp avo_llmhttp;         /* one per loop: a curl multi handle driven by uv */
typedef struct avo_llmhttp_req avo_llmhttp_req; /* one request, valid until its callback starts */

/* Returns 0 or a negative int. The first call also runs curl_global_init,
 * which is not thread-safe: make it from the main thread. */
int avo_llmhttp_open(avo_llmhttp **out, uv_loop_t *loop);

/* Aborts pending requests (their callbacks run first, with status -ECANCELED,
 * and their connections are closed),
 * then frees everything once libuv has closed its handles (the loop must run
 * once more for that). Safe to call from inside a request callback. */
void avo_llmhttp_close(avo_llmhttp *h);

/* status: the HTTP status (any, 1xx-5xx), or a negative int when no response
 * came: -ETIMEDOUT (the request's timeout), -ECONNREFUSED, -ECANCELED (closed),
 * -EIO (other transport errors; transport_error says which, from curl's error
 * buffer). transport_error is NULL when an HTTP status came back.
 * body/len: the response body (NUL-terminated, may be empty; valid only during
 * the call). retry_after_s: the Retry-After header in seconds (delta-seconds or
 * an HTTP date), or -1 when absent. Called exactly once per successful
 * avo_llmhttp_post, never from inside avo_llmhttp_post; from the loop, or
 * from inside avo_llmhttp_abort or avo_llmhttp_close. */
typedef void (*avo_llmhttp_cb)(void *arg, long status, const char *body, size_t len, double retry_after_s,
                               const char *transport_error);

/* headers: NULL-terminated "Name: value" strings (copied); may be NULL.
 * body copied. timeout_s > 0: the whole request. Returns 0 or a negative int
 * (then no callback). Response bodies are capped at 16 MiB (more: -EIO
 * "response too large"). *out (may be NULL) names the request for
 * avo_llmhttp_abort until its callback starts; forget it there. */
int avo_llmhttp_post(avo_llmhttp *h, const char *url, const char *const *headers, const char *body, size_t len,
                     double timeout_s, avo_llmhttp_cb cb, void *arg, avo_llmhttp_req **out);

/* Stops one request: curl lets go of it and closes its connection (the
 * server sees the client leave, so a provider can stop generating), and its
 * callback runs now, before this returns, with -ECANCELED. Safe from inside
 * another request's callback; a request whose callback has started is left
 * alone. */
void avo_llmhttp_abort(avo_llmhttp_req *r);

/* 1 once the response has begun to arrive (its status line is in): a
 * non-streamed answer is then generated, and billed, already. */
int avo_llmhttp_answering(const avo_llmhttp_req *r);

#endif
