/* libFuzzer target for the parsing paths avod and avoctl run on what comes
 * over the wire: the route table (method and path of every request), job
 * specs (POST /v1/jobs bodies), LLM provider answers in both wire formats,
 * the server-sent event stream avoctl reads, and the candidate policy's
 * scanners (daemon/worker/policy.c: C and CUDA sources, assembler, PTX),
 * which read a candidate's text inside the worker. The first input byte
 * picks the parser (below 0xF0: the wire parsers, by its value mod 5; from
 * 0xF0: the scanners, by its low two bits); the rest is its input. Built with clang -fsanitize=fuzzer,
 * address,undefined (`make fuzz`); tests/integration/test_fuzz.sh runs it
 * for a bounded time from tests/fuzz/corpus. Any crash, leak or undefined
 * behaviour the sanitizers see is a failure. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/sse.h"
#include "daemon/avod/llm.h"
#include "daemon/worker/policy.h"
#include "proto/avo_jobspec.h"
#include "proto/avo_routes.h"

static int on_event(const avoctl_sse_event *ev, void *arg)
{
    (void)ev;
    (void)arg;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned which = data[0] >= 0xF0 ? 5 + (data[0] & 3u) : data[0] % 5u;
    const char *in = (const char *)data + 1;
    const size_t n = size - 1;
    char err[512];
    switch (which) {
    case 0: { /* "METHOD /path" */
        char *s = strndup(in, n);
        if (!s)
            return 0;
        char *sp = strchr(s, ' ');
        if (sp) {
            *sp = 0;
            int64_t id = 0;
            (void)avo_routes_match(s, sp + 1, &id);
        }
        free(s);
        break;
    }
    case 1: { /* a job spec */
        json_t *j = json_loadb(in, n, 0, NULL);
        if (j) {
            avo_jobspec spec;
            json_t *norm = NULL;
            memset(&spec, 0, sizeof spec);
            if (avo_jobspec_parse(j, &spec, &norm, err, sizeof err) == 0)
                avo_jobspec_clear(&spec);
            json_decref(norm);
            json_decref(j);
        }
        break;
    }
    case 2:
    case 3: { /* a provider's answer: OpenAI Chat Completions, Anthropic Messages */
        avo_llm_provider p;
        json_t *cfg = json_pack("{s:s,s:s,s:s,s:s,s:s}", "name", "f", "kind", which == 2 ? "openai" : "anthropic",
                                "base_url", "http://127.0.0.1:9", "model", "m", "api_key_env", "K");
        if (cfg && avo_llm_provider_parse(cfg, &p, err, sizeof err) == 0) {
            avo_llm_reply r;
            memset(&r, 0, sizeof r);
            if (avo_llm_reply_parse(&p, in, n, &r, err, sizeof err) == 0)
                avo_llm_reply_free(&r);
        }
        json_decref(cfg);
        break;
    }
    case 4: { /* an event stream, in chunks cut where the input says */
        avoctl_sse p;
        avoctl_sse_init(&p);
        p.limit = 1 << 16;
        size_t off = 0;
        while (off < n) {
            size_t chunk = 1 + (unsigned char)in[off] % 64;
            if (chunk > n - off)
                chunk = n - off;
            if (avoctl_sse_feed(&p, in + off, chunk, on_event, NULL) < 0)
                break;
            off += chunk;
        }
        avoctl_sse_free(&p);
        break;
    }
    default: { /* candidate text: the policy's scanners (5 C, 6 CUDA, 7 assembler, 8 PTX) */
        avo_policy_findings f;
        memset(&f, 0, sizeof f);
        if (which <= 6)
            avo_policy_scan_source(in, n, which == 5 ? "cand.c" : "cand.cu", which == 6, &f);
        else if (which == 7)
            avo_policy_scan_asm(in, n, "cand.s", &f);
        else
            avo_policy_scan_ptx(in, n, "cand.ptx", &f);
        break;
    }
    }
    return 0;
}
