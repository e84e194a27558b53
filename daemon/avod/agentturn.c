/* An agent step's conversation: the system prompt and the first message,
 * each turn's provider call against the step's and the job's LLM budgets,
 * the llm_calls row of every request (late answers billed too), retries as
 * events, and compaction near the model's context window. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "avo_log.h"
#include "avo_utf8.h"

/* Answers without a tool call (empty ones included) the model is reminded
 * about before its step ends as failed. */
#define MAX_NUDGES 2
/* Prompt tokens estimated from bytes before a request is sent: about four
 * bytes a token for English, code and JSON. */
#define BYTES_PER_TOKEN 4

void agent_say(step *s, const char *role, const char *text)
{
    json_array_append_new(s->conv, json_pack("{s:s,s:s}", "role", role, "text", text));
}

static const char system_prompt[] =
    "You are the variation operator of avo, an evolutionary search that makes GPU and CPU kernels faster. "
    "Each step you take one version of a kernel (your working copy, which starts as the island's current "
    "version) and try to produce a version that computes the same result and is faster. Work with the tools: "
    "read the problem and the lineage, search the knowledge base, edit the working copy, evaluate it (workers "
    "check it against a trusted reference on fresh random inputs and time it on every configuration), and "
    "commit the best evaluated version with notes saying what changed and why it is faster. A commit is "
    "accepted only if the version passed every check and is faster than the island's best beyond the noise "
    "(timed paired against it, the lower bound of its speed ratio must clear the job's minimum gain); otherwise "
    "the reason comes back and you may try again. Evaluations are the job's budget: evaluate when you expect a "
    "gain. If you cannot find an improvement, call give_up with the reason. Never try to detect or game the "
    "checker: results are checked after timing too, and suspicious ones are rejected. The candidate policy "
    "refuses, as outcome policy_violation with the offending line and never scored: inline PTX instructions the "
    "installed CUDA toolkit does not document (undocumented or reserved opcodes); embedded ELF, cubin or fatbin "
    "images; loading code at run time (dlopen, cuModuleLoadData, cuLibraryLoadData, cudaLibraryLoadData, NVRTC, "
    "nvJitLink, or a dlsym/cudaGetDriverEntryPoint lookup whose name is not a string literal); and including "
    "host files (.incbin, .include, #embed, #include of an absolute or parent path, a computed #include). Write "
    "the kernel itself in the source, in documented PTX where you need inline assembly; a problem may relax a "
    "rule, and the problem tool says which.";

/* ---- provider turns -------------------------------------------------------- */

/* One transcript row: conv's messages from `from` on (what this request
 * added), the answer or the error, and the step's and job's totals. An
 * answer that comes after its step ended is billed all the same: it counts,
 * flagged late. */
static void record_call(step *s, json_t *conv, size_t from, avo_llm_reply *reply, const char *error, int attempts)
{
    const double latency = uv_now(s->a->loop) / 1e3 - s->call_t0;
    const char *late = reply && s->state == AGENT_ENDED ? "true" : "false";
    json_t *req = json_array();
    for (size_t i = from; i < json_array_size(conv); i++)
        json_array_append(req, json_array_get(conv, i));
    char *rj = json_dumps(req, JSON_COMPACT), *aj = reply ? json_dumps(reply->message, JSON_COMPACT) : NULL;
    json_decref(req);
    char sid[32], job[32], t[16], att[16], lat[32], in[32], out[32], cached[32], cost[32];
    snprintf(sid, sizeof sid, "%lld", s->id);
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(t, sizeof t, "%d", s->turns);
    snprintf(att, sizeof att, "%d", attempts);
    snprintf(lat, sizeof lat, "%.6f", latency);
    snprintf(in, sizeof in, "%ld", reply ? reply->in_tokens : 0);
    snprintf(out, sizeof out, "%ld", reply ? reply->out_tokens : 0);
    snprintf(cached, sizeof cached, "%ld", reply ? reply->cached_tokens : 0);
    snprintf(cost, sizeof cost, "%.9f", reply ? reply->cost_usd : 0);
    const char *p[] = {sid,   job, t,   s->pv->name, s->pv->model, rj ? rj : "[]", aj,   reply ? reply->stop : NULL,
                       error, att, lat, in,          out,          cached,         cost, late};
    agent_query(s,
                "SELECT avo_agent_record_call($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11, $12, $13, "
                "$14, $15, $16)",
                16, p, agent_on_ignored);
    if (reply)
        agent_query(s, "SELECT avo_agent_step_turn($1, $2, $3, $4, $5, $6)", 6,
                    (const char *const[]){sid, job, t, in, out, cost}, agent_on_ignored);
    free(rj);
    free(aj);
}

/* Recorded first, then settled, so the rows of an answer that outlived its
 * step are written before the step goes. */
int agent_answered(step *s, json_t *conv, size_t from, int rc, avo_llm_reply *reply, const char *reason, int attempts,
                   unsigned allowed, const char *where)
{
    s->call = NULL;
    agent_release_hold(s, rc == 0 ? reply : NULL);
    record_call(s, conv, from, rc == 0 ? reply : NULL, rc == 0 ? NULL : reason, attempts);
    return agent_arrive(s, allowed, where);
}

static size_t json_bytes(json_t *j)
{
    return j ? json_dumpb(j, NULL, 0, JSON_COMPACT) : 0;
}

/* The next prompt in tokens: its bytes, or (larger, once the provider has
 * counted this conversation) its last count plus what was added since. */
static long estimate_prompt(step *s, json_t *conv, json_t *tools)
{
    const size_t bytes = json_bytes(conv) + json_bytes(tools);
    long est = (long)(bytes / BYTES_PER_TOKEN);
    if (conv == s->conv && s->last_prompt > 0) {
        const size_t added = bytes > s->last_bytes ? bytes - s->last_bytes : 0;
        if (s->last_prompt + (long)(added / BYTES_PER_TOKEN) > est)
            est = s->last_prompt + (long)(added / BYTES_PER_TOKEN);
    }
    return est;
}

/* The job ends on its LLM budget before a request that could overrun it
 * goes out (the engine would see the overrun only after it was spent). */
static void finish_on_budget(step *s, const char *budget, double used, double limit, double next, const char *why)
{
    json_t *ev = json_pack("[{s:s,s:{s:s,s:f,s:f,s:f}}]", "kind", "budget_reached", "data", "budget", budget, "used",
                           used, "limit", limit, "next_request", next);
    agent_finish_job(s, "succeeded", why, ev);
}

/* Budgets before every request, its output counted at the provider's
 * maximum and its prompt estimated: the step's token limit, then the job's
 * token and cost budgets less what the job's requests in flight may still
 * use. 0, or -EDQUOT with why (the job is finished when its budget is the
 * one). need and cost: what this request may use. */
static int check_budgets(step *s, long prompt, long long *need, double *cost, char *why, size_t len)
{
    const avo_llm_provider *p = s->pv;
    *need = prompt + p->max_tokens;
    *cost = ((double)prompt * p->price_in + (double)p->max_tokens * p->price_out) / 1e6;
    if (s->tokens + *need > s->max_tokens) {
        snprintf(why, len,
                 "the step's token limit would be exceeded: the next request could use up to %lld tokens "
                 "(a prompt of about %ld, up to %d of output), %lld of %lld are left; not sent",
                 *need, prompt, p->max_tokens, s->max_tokens - s->tokens, s->max_tokens);
        return -EDQUOT;
    }
    job_state *js = agent_job_find(s->a, s->job, 1);
    if (!js)
        return 0;
    const double left = js->budget_tokens - (double)(js->spent_tokens + js->held_tokens);
    if (js->budget_tokens > 0 && (double)*need > left) {
        snprintf(why, len,
                 "token budget reached: the next request could use up to %lld tokens (a prompt of about "
                 "%ld, up to %d of output), %.0f of %.0f are left; not sent",
                 *need, prompt, p->max_tokens, left > 0 ? left : 0, js->budget_tokens);
        finish_on_budget(s, "tokens", (double)js->spent_tokens, js->budget_tokens, (double)*need, why);
        return -EDQUOT;
    }
    const double cleft = js->budget_cost - js->spent_cost - js->held_cost;
    if (js->budget_cost > 0 && *cost > cleft) {
        snprintf(why, len,
                 "cost budget reached: the next request could cost up to %.4f USD, %.4f of %.4f are "
                 "left; not sent",
                 *cost, cleft > 0 ? cleft : 0, js->budget_cost);
        finish_on_budget(s, "cost_usd", js->spent_cost, js->budget_cost, *cost, why);
        return -EDQUOT;
    }
    return 0;
}

/* A provider request failed and will be sent again: an "llm_retry" event,
 * so a watcher sees why the step is quiet (a provider backing off for a
 * minute looks like a hang otherwise). */
static void on_provider_retry(void *arg, int attempt, long status, const char *msg, double wait_s)
{
    step *s = arg;
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_SUPERVISING) | AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_COMPACTING) |
                             AGENT_IN(AGENT_ENDED)) ||
        s->a->stopping)
        return;
    json_t *d = json_pack("{s:I,s:i,s:s,s:s,s:i,s:i,s:f}", "step", (json_int_t)s->id, "island", s->island, "provider",
                          s->pv->name, "model", s->pv->model, "attempt", attempt, "max_retries", s->pv->max_retries,
                          "wait_s", wait_s);
    if (!d)
        return;
    if (status < 0)
        json_object_set_new(d, "error", json_string(msg ? msg : ""));
    else
        json_object_set_new(d, "status", json_integer(status));
    if (status >= 0 && msg && *msg)
        json_object_set_new(d, "message", json_string(msg));
    char *data = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    char job[32];
    snprintf(job, sizeof job, "%lld", s->job);
    if (data)
        agent_query(s, "SELECT avo_event($1, 'llm_retry', $2::jsonb)", 2, (const char *const[]){job, data},
                    agent_on_ignored);
    free(data);
    avo_info("agent", "job %lld island %d: step %lld: %s attempt %d failed (%ld: %s); retrying in %.1f s", s->job,
             s->island, s->id, s->pv->name, attempt, status, msg ? msg : "", wait_s);
}

/* Start a provider request on conv; 0, or a negative int with err (no
 * callback then): -EDQUOT when a budget refuses it. */
int agent_call_provider(step *s, json_t *conv, json_t *tools, avo_llmcall_cb cb, char *err, size_t errlen)
{
    long long need;
    double cost;
    int rc = check_budgets(s, estimate_prompt(s, conv, tools), &need, &cost, err, errlen);
    if (rc < 0)
        return rc;
    s->call_t0 = uv_now(s->a->loop) / 1e3;
    s->pending++;
    rc = avo_llmcall_start(&s->call, s->a->loop, s->a->http, s->pv, s->key, conv, tools, cb, s, err, errlen);
    if (rc < 0) {
        s->pending--;
        s->call = NULL;
        return rc;
    }
    avo_llmcall_on_retry(s->call, on_provider_retry);
    job_state *js = agent_job_find(s->a, s->job, 1);
    if (js) {
        s->held_tokens = need;
        s->held_cost = cost;
        js->held_tokens += need;
        js->held_cost += cost;
    }
    return 0;
}

/* One line of a dropped message for the compaction summary. */
static void summarise(FILE *f, json_t *m)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    const char *text = json_string_value(json_object_get(m, "text"));
    int n = text ? (int)strcspn(text, "\n") : 0;
    /* Cut at a character boundary: the summary must stay valid UTF-8. */
    const int shown = n > 160 ? (int)avo_utf8_cut(text, 160) : n;
    if (role && !strcmp(role, "tool")) {
        fprintf(f, "- result%s: %.*s%s\n", json_is_true(json_object_get(m, "is_error")) ? " (error)" : "", shown,
                text ? text : "", n > 160 ? " ..." : "");
        return;
    }
    if (text && *text)
        fprintf(f, "- %s: %.*s%s\n", role && !strcmp(role, "assistant") ? "you said" : "note", shown, text,
                n > 160 ? " ..." : "");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(m, "tool_calls"), i, c)
    {
        char *a = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
        int an = a ? (int)strlen(a) : 0;
        fprintf(f, "- you called %s %.*s%s\n", json_string_value(json_object_get(c, "name")),
                an > 120 ? (int)avo_utf8_cut(a, 120) : an, a ? a : "", an > 120 ? " ..." : "");
        free(a);
    }
}

/* Near the model's context window the turns before the last two are
 * replaced by a summary, appended to the first message: the system prompt,
 * the problem, the lineage and the latest turns stay whole. The cut falls
 * before an assistant message, so no tool result loses its call. Returns
 * the cut (messages [2, cut) go), or 0 when there is nothing to compact. */
static size_t compaction_cut(step *s)
{
    size_t cut = json_array_size(s->conv), kept = 0;
    while (cut > 2 && kept < 2)
        if (!strcmp(json_string_value(json_object_get(json_array_get(s->conv, --cut), "role")), "assistant"))
            kept++;
    return cut > 2 ? cut : 0;
}

static void apply_compaction(step *s, size_t cut, const char *summary, const char *by)
{
    json_t *first = json_array_get(s->conv, 1);
    char *joined = NULL;
    if (asprintf(&joined, "%s\n\nEarlier turns of this step, %s to stay within the model's context:\n%s",
                 json_string_value(json_object_get(first, "text")),
                 !strcmp(by, "model") ? "summarised by the model" : "compacted (one line each)", summary) < 0)
        return;
    avo_utf8_scrub(joined);
    int rc = json_object_set_new(first, "text", json_string(joined));
    free(joined);
    if (rc < 0)
        return; /* nothing dropped: the turns stay rather than vanish unsummarised */
    for (size_t i = 2; i < cut; i++)
        json_array_remove(s->conv, 2);
    s->sent = json_array_size(s->conv);
    s->last_prompt = 0; /* the provider has not counted the compacted conversation yet */
    char job[32], data[200];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(data, sizeof data,
             "{\"step\": %lld, \"island\": %d, \"messages_compacted\": %zu, \"prompt_tokens\": %ld, \"by\": \"%s\"}",
             s->id, s->island, cut - 2, s->cmp_prompt, by);
    agent_query(s, "SELECT avo_event($1, 'agent_compacted', $2::jsonb)", 2, (const char *const[]){job, data},
                agent_on_ignored);
    avo_info("agent", "job %lld island %d: step %lld compacted %zu messages (%s; prompt %ld tokens of %ld)", s->job,
             s->island, s->id, cut - 2, by, s->cmp_prompt, s->pv->context_tokens);
}

/* Without a summary from the model: one line per dropped message. */
static void compact_mechanically(step *s, size_t cut)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    for (size_t i = 2; i < cut; i++)
        summarise(f, json_array_get(s->conv, i));
    fclose(f);
    apply_compaction(s, cut, buf, "mechanical");
    free(buf);
}

static void go_on(step *s);

static const char compaction_prompt[] =
    "You keep the notes of an LLM agent that is optimising a kernel, turn by turn, with tools. Its conversation "
    "is about to exceed the model's context, so the turns below will be dropped and replaced by your summary. "
    "Write what the agent needs to carry on: what it tried, what each tool returned (scores, candidate ids, "
    "exact compiler errors, counters), what worked, what failed and why, and what it meant to do next. Keep "
    "numbers and identifiers exact. Plain text, at most 300 words.";

static void on_compacted(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts)
{
    step *s = arg;
    /* Cancelled by the step's end: recorded, and nothing to compact for. */
    if (!agent_answered(s, s->cmp_conv, 0, rc, reply, reason, attempts, AGENT_IN(AGENT_COMPACTING), __func__))
        return;
    json_decref(s->cmp_conv);
    s->cmp_conv = NULL;
    const char *text = rc == 0 ? json_string_value(json_object_get(reply->message, "text")) : NULL;
    if (rc == 0) {
        s->tokens += reply->in_tokens + reply->out_tokens;
        s->cost += reply->cost_usd;
    }
    if (text && *text) {
        apply_compaction(s, s->cmp_cut, text, "model");
    } else {
        avo_warn("agent", "job %lld: no summary from the model (%s); compacting line by line", s->job,
                 rc ? reason : "an empty answer");
        compact_mechanically(s, s->cmp_cut);
    }
    go_on(s);
}

/* Ask the model for the summary (one request, no tools, recorded in the
 * transcript like any other); on any failure fall back to the one-line
 * summaries. Returns 0 when the request is under way (go_on follows). */
static int start_compaction(step *s, long prompt_tokens)
{
    size_t cut = compaction_cut(s);
    if (!cut)
        return -1;
    s->cmp_cut = cut;
    s->cmp_prompt = prompt_tokens;
    /* The dropped turns, each cut short, within about half the context. */
    const size_t cap = (size_t)(s->pv->context_tokens > 0 ? s->pv->context_tokens : 8000) * 2;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -1;
    for (size_t i = 2; i < cut && (size_t)ftell(f) < cap; i++) {
        json_t *m = json_array_get(s->conv, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *text = json_string_value(json_object_get(m, "text"));
        if (text && *text)
            fprintf(f, "[%s] %.*s%s\n", role ? role : "?", (int)avo_utf8_cut(text, 600), text,
                    strlen(text) > 600 ? " ..." : "");
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(m, "tool_calls"), k, c)
        {
            char *a = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
            fprintf(f, "[call] %s %.*s%s\n", json_string_value(json_object_get(c, "name")),
                    a ? (int)avo_utf8_cut(a, 200) : 0, a ? a : "", a && strlen(a) > 200 ? " ..." : "");
            free(a);
        }
    }
    fclose(f);
    s->cmp_conv = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "text", compaction_prompt, "role", "user",
                            "text", buf ? buf : "");
    free(buf);
    char err[400];
    if (!s->cmp_conv || AGENT_MOVE(s, AGENT_COMPACTING) < 0 ||
        agent_call_provider(s, s->cmp_conv, NULL, on_compacted, err, sizeof err) < 0) {
        json_decref(s->cmp_conv);
        s->cmp_conv = NULL;
        compact_mechanically(s, cut);
        return -1;
    }
    return 0;
}

static void on_reply(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts)
{
    step *s = arg;
    /* The step ended while the call was out (cancel, the job's end): what
     * came back is recorded and nothing more; above all a cancelled call is
     * not a provider failure (it would count toward the failure rule). */
    if (!agent_answered(s, s->conv, s->sent, rc, reply, reason, attempts, AGENT_IN(AGENT_TURN), __func__))
        return;
    s->sent = json_array_size(s->conv);
    if (rc < 0) {
        char why[700];
        snprintf(why, sizeof why, "provider %s: %s", s->pv->name, reason ? reason : "failed");
        agent_fail_step(s, why);
        return;
    }
    s->tokens += reply->in_tokens + reply->out_tokens;
    s->cost += reply->cost_usd;
    json_t *calls = json_object_get(reply->message, "tool_calls");
    /* An empty answer stays out of the conversation (llm.c would leave it
     * out of the request anyway): the nudge that follows says what it was. */
    s->empty = !json_object_get(reply->message, "text") && json_array_size(calls) == 0;
    if (!s->empty)
        json_array_append(s->conv, reply->message);
    s->sent = json_array_size(s->conv);
    s->last_prompt = reply->in_tokens + reply->out_tokens;
    s->last_bytes = json_bytes(s->conv) + json_bytes(s->tools);
    json_decref(s->calls);
    s->calls = json_array_size(calls) > 0 ? json_incref(calls) : NULL;
    s->next_call = 0;
    snprintf(s->stop, sizeof s->stop, "%s", reply->stop);
    if (reply->in_tokens + reply->out_tokens >= s->pv->context_tokens * 7 / 10 &&
        start_compaction(s, reply->in_tokens) == 0)
        return;
    go_on(s);
}

/* After an answer (and its compaction): run its tool calls, or nudge. */
static void go_on(step *s)
{
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_COMPACTING)))
        return;
    if (s->calls) {
        if (AGENT_MOVE(s, AGENT_TOOLS) < 0)
            return;
        agent_run_next_tool(s);
        return;
    }
    s->empties += s->empty;
    if (++s->nudges > MAX_NUDGES) {
        char why[160];
        snprintf(why, sizeof why, "the model answered without a tool call %d times in a row (%d of them empty)",
                 s->nudges, s->empties);
        agent_fail_step(s, why);
        return;
    }
    agent_say(s, "user",
              !strcmp(s->stop, "max_tokens")
                  ? "Your answer was cut off by the output token limit. Continue with a tool call, and keep arguments "
                    "short (edit_source rather than write_source for small changes)."
              : s->empty ? "Your answer was empty: no text and no tool call. Continue by calling a tool (problem, "
                           "read_candidate, edit_source, evaluate, commit, give_up, ...)."
                         : "Continue by calling a tool: evaluate your working copy, then commit it or give_up.");
    agent_turn(s);
}

void agent_turn(step *s)
{
    char why[640], err[400];
    /* From the first message, a nudge, a compaction or the last tool; a
     * step that ended meanwhile takes no turn. */
    if (!AGENT_EXPECT(s, AGENT_IN(AGENT_STARTING) | AGENT_IN(AGENT_SUPERVISING) | AGENT_IN(AGENT_TURN) |
                             AGENT_IN(AGENT_COMPACTING) | AGENT_IN(AGENT_TOOLS) | AGENT_IN(AGENT_ENDED)))
        return;
    if (s->turns >= s->max_turns) {
        snprintf(why, sizeof why, "turn limit reached (%d turns)", s->max_turns);
        agent_end_step(s, "ended", why);
        return;
    }
    if (AGENT_MOVE(s, AGENT_TURN) < 0)
        return;
    s->turns++;
    const int rc = agent_call_provider(s, s->conv, s->tools, on_reply, err, sizeof err);
    if (rc == -EDQUOT) {
        s->turns--;
        agent_end_step(s, "ended", err);
    } else if (rc < 0) {
        snprintf(why, sizeof why, "provider %s: %s", s->pv->name, err);
        agent_fail_step(s, why);
    }
}

/* The first message: the problem, what earlier steps committed and what
 * failed (their notes and one-line summaries), the supervisor's directions
 * when it intervened, and the working copy. Then the first turn. */
void agent_begin(step *s)
{
    agent_say(s, "system", system_prompt);
    char *problem = avo_agenttools_problem_text(&s->prob), *first = NULL;
    if (!problem ||
        asprintf(&first,
                 "%s\nThe lineage so far (newest first: committed versions with their notes, and failed attempts):\n"
                 "%s\n%s%s%s\nYour working copy is candidate %lld, the current version of island %d, scoring %s %s. "
                 "Its source is below; improve it.\n\n%s",
                 problem, s->lineage ? s->lineage : "{}",
                 s->directions ? "\nA supervisor reviewed the search so far; its directions for this step:\n" : "",
                 s->directions ? s->directions : "", s->directions ? "\n" : "", s->head, s->island, s->head_score,
                 s->prob.unit, s->head_src) < 0) {
        free(problem);
        agent_end_step(s, "ended", "out of memory");
        return;
    }
    agent_say(s, "user", first);
    free(problem);
    free(first);
    agent_turn(s);
}
