/* The agent operator's steps: LLM conversations that edit, evaluate and commit candidates (agent.h). */
#include "agent.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenttools.h"
#include "avo_utf8.h"
#include "avo_hash.h"
#include "avo_log.h"
#include "avo_paths.h"
#include "avo_problem.h"
#include "commit.h"
#include "llmcall.h"
#include "llmhttp.h"
#include "pin.h"
#include "seedcheck.h"
#include "srcdiff.h"

/* Answers without a tool call (empty ones included) the model is reminded
 * about before its step ends as failed. */
#define MAX_NUDGES 2
/* The failure rule's defaults, for jobs stored before the spec carried
 * them (avo_jobspec.c fills them at submission). */
#define DEFAULT_FAILED_STEPS 3
#define DEFAULT_BACKOFF_S 2
#define DEFAULT_BACKOFF_MAX_S 60
/* Prompt tokens estimated from bytes before a request is sent: about four
 * bytes a token for English, code and JSON. */
#define BYTES_PER_TOKEN 4
#define POLL_MS 250
/* How long a microbenchmark may wait for a worker and run (compile + run
 * bounds on the worker are 120 s + AVO_PROGRAM_TIMEOUT_S). */
#define PROGRAM_WAIT_S 300
/* How long the profile tool waits for its task (a CUDA profile replays the
 * kernels for seconds per configuration) before telling the agent to ask
 * again later. */
#define PROFILE_WAIT_S 300

typedef struct step step;

/* What avod keeps per agent job across its steps: the failure rule's
 * streak and backoff, and the LLM budgets' ledger (spent as recorded, and
 * what requests in flight may still use), so a request is checked against
 * the calls of every island of the job, not only its own step's. */
typedef struct {
    long long job;
    int failed;                /* steps in a row that failed (provider errors, unusable answers) */
    uint64_t not_before;       /* loop time (ms) before which no step starts: the backoff */
    long long spent_tokens, held_tokens;
    double spent_cost, held_cost;
    double budget_tokens, budget_cost; /* the job's budgets; 0 = none */
} job_state;

struct avo_agent {
    uv_loop_t *loop;
    avo_db *db;
    char kernels_dir[1024];
    char worker_bin[2100];      /* avo-worker beside avod: the sandboxed compile of the compile tool */
    char compile_cache[1200];
    avo_llm_provider *prov;
    int nprov;
    avo_llmhttp *http;
    void (*kick)(void *);
    void *kick_arg;
    step *steps;
    job_state *jobs;
    int njobs;
    int stopping;
    int in_stop;         /* avo_agent_stop is running: it frees the agent itself */
    int recovered;       /* the steps a restart interrupted were recorded (avo_agent_db_up) */
};

struct step {
    avo_agent *a;
    step *next;
    long long job, id, head;
    int island;
    avo_problem prob;
    int have_prob;
    char target[16];
    char setup_error[600];      /* why the step cannot run (recorded, then it ends) */
    char *head_src;
    char *lineage;              /* the lineage at the step's start (first message, supervisor) */
    char *directions;           /* the supervisor's, for this step's first message */
    int supervise_after, supervise_failures, repeats;
    int failed_steps, backoff_s, backoff_max_s; /* the job's failure rule */
    json_t *sup_conv;           /* the supervisor call's conversation, while it runs */
    json_t *cmp_conv;           /* the compaction call's conversation, while it runs */
    size_t cmp_cut;             /* messages [2, cmp_cut) are being summarised */
    long cmp_prompt;            /* the prompt size that called for it */
    char stop[16];              /* why the last answer stopped */
    char head_score[32];
    avo_agent_ws ws;
    json_t *conv, *tools;
    size_t sent;                /* conversation length already stored in the transcript */
    const avo_llm_provider *pv; /* &pvc: the step's own copy, so a reload cannot pull it away */
    avo_llm_provider pvc;
    char key[4096];
    int turns, max_turns, nudges, empties, evals;
    int empty;                  /* the last answer had neither text nor a tool call */
    int failed;                 /* the step ended on a provider error or unusable answers */
    long long tokens, max_tokens;
    long last_prompt;           /* the main conversation's size in tokens after the last answer, */
    size_t last_bytes;          /* and in bytes: the next prompt is estimated from them */
    long long held_tokens;      /* what the request in flight may use, held in the job's ledger */
    double held_cost;
    double cost;
    avo_commit_params cp;       /* the job's commit rule (commit.c) */
    json_t *calls;              /* the tool calls of the answer being worked through */
    size_t next_call;
    const char *call_id;        /* of the tool call being run */
    long long wait_eval;
    long long last_eval;        /* the step's last finished evaluation (profile reads its counters) */
    long long wait_program;     /* the microbenchmark being waited on */
    double program_deadline;
    long long wait_profile;     /* the profile task being waited on (sql/011_profiles.sql) */
    double profile_deadline;
    uv_timer_t timer;
    int timer_open;
    avo_llmcall *call;
    double call_t0;
    int pending;                /* queries, the provider call and the timer in flight */
    int ended, dead;
};

static void turn(step *s);
static void run_next_tool(step *s);
static void end_step(step *s, const char *state, const char *reason);

/* ---- lifetime ------------------------------------------------------------- */

static void step_free(step *s)
{
    avo_agent *a = s->a;
    for (step **p = &a->steps; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    if (s->have_prob)
        avo_problem_free(&s->prob);
    free(s->head_src);
    free(s->lineage);
    free(s->directions);
    json_decref(s->sup_conv);
    json_decref(s->cmp_conv);
    avo_agent_ws_free(&s->ws);
    json_decref(s->conv);
    json_decref(s->tools);
    json_decref(s->calls);
    memset(s->key, 0, sizeof s->key);
    free(s);
    if (a->stopping && !a->in_stop && !a->steps) {
        free(a->prov);
        free(a->jobs);
        free(a);
    }
}

/* Called whenever something in flight comes back: a dead step goes once
 * nothing refers to it any more. */
static int settle(step *s)
{
    s->pending--;
    if (s->dead && s->pending == 0) {
        step_free(s);
        return 1;
    }
    return s->dead;
}

static int query(step *s, const char *sql, int n, const char *const *params, avo_db_cb cb)
{
    s->pending++;
    if (avo_db_query(s->a->db, sql, n, params, cb, s) < 0) {
        s->pending--;
        return -EIO;
    }
    return 0;
}

static void on_ignored(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    (void)res;
    if (err)
        avo_warn("agent", "job %lld: %s", s->job, err);
    settle(s);
}

/* ---- the job's ledger and failure rule ---------------------------------------- */

static job_state *job_find(avo_agent *a, long long job, int create)
{
    for (int i = 0; i < a->njobs; i++)
        if (a->jobs[i].job == job)
            return &a->jobs[i];
    if (!create)
        return NULL;
    job_state *n = realloc(a->jobs, (size_t)(a->njobs + 1) * sizeof *n);
    if (!n)
        return NULL;
    a->jobs = n;
    memset(&n[a->njobs], 0, sizeof *n);
    n[a->njobs].job = job;
    return &n[a->njobs++];
}

/* The snapshot's totals are those recorded; this avod's own count may be
 * ahead of a snapshot read before its last answers were stored. */
static void job_sync(job_state *js, json_t *snap)
{
    json_t *b = json_object_get(json_object_get(snap, "spec"), "budget");
    const long long t = json_integer_value(json_object_get(snap, "tokens"));
    const double c = json_number_value(json_object_get(snap, "cost_usd"));
    if (t > js->spent_tokens)
        js->spent_tokens = t;
    if (c > js->spent_cost)
        js->spent_cost = c;
    js->budget_tokens = json_number_value(json_object_get(b, "tokens"));
    js->budget_cost = json_number_value(json_object_get(b, "cost_usd"));
}

static void finish_job(step *s, const char *state, const char *reason, json_t *events)
{
    char job[32];
    snprintf(job, sizeof job, "%lld", s->job);
    json_t *d = json_pack("{s:{s:s,s:s},s:o}", "finish", "state", state, "reason", reason, "events",
                          events ? events : json_array());
    char *dj = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (dj)
        query(s, "SELECT avo_job_apply($1, $2::jsonb)", 2, (const char *const[]){job, dj}, on_ignored);
    free(dj);
}

/* A step that failed adds to the job's streak: the next step waits
 * backoff_s, doubled for each further failure up to backoff_max_s, and
 * failed_steps in a row fail the job. Any other end clears the streak. */
static void count_failure(step *s, const char *reason)
{
    job_state *js = job_find(s->a, s->job, 1);
    if (!js)
        return;
    if (!s->failed) {
        js->failed = 0;
        return;
    }
    if (++js->failed >= s->failed_steps) {
        char why[900];
        snprintf(why, sizeof why, "agent: %d steps in a row failed (provider errors or unusable answers); the last: %s",
                 js->failed, reason);
        finish_job(s, "failed", why, NULL);
        js->failed = 0;
        return;
    }
    double wait = ldexp(s->backoff_s, js->failed - 1);
    if (wait > s->backoff_max_s)
        wait = s->backoff_max_s;
    js->not_before = uv_now(s->a->loop) + (uint64_t)(wait * 1000);
    avo_warn("agent", "job %lld: %d failed step%s in a row (of %d allowed); the next starts in %.0f s", s->job,
             js->failed, js->failed == 1 ? "" : "s", s->failed_steps, wait);
}

/* The request in flight is answered (or not): what it held goes back, what
 * it used is spent. */
static void release_hold(step *s, const avo_llm_reply *reply)
{
    job_state *js = job_find(s->a, s->job, 0);
    if (js) {
        js->held_tokens -= s->held_tokens;
        js->held_cost -= s->held_cost;
        if (reply) {
            js->spent_tokens += reply->in_tokens + reply->out_tokens;
            js->spent_cost += reply->cost_usd;
        }
    }
    s->held_tokens = 0;
    s->held_cost = 0;
}

/* ---- conversation ---------------------------------------------------------- */

static void say(step *s, const char *role, const char *text)
{
    json_array_append_new(s->conv, json_pack("{s:s,s:s}", "role", role, "text", text));
}

static void tool_result(step *s, const char *text, int is_error)
{
    json_array_append_new(s->conv, json_pack("{s:s,s:s,s:s,s:b}", "role", "tool", "tool_call_id",
                                             s->call_id ? s->call_id : "", "text", text, "is_error", is_error));
    run_next_tool(s);
}

static void tool_errorf(step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tool_errorf(step *s, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tool_result(s, buf, 1);
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
    const char *late = reply && s->ended ? "true" : "false";
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
    const char *p[] = {sid, job, t, s->pv->name, s->pv->model, rj ? rj : "[]", aj, reply ? reply->stop : NULL,
                       error, att, lat, in, out, cached, cost, late};
    query(s,
          "INSERT INTO llm_calls (step_id, job_id, turn, provider, model, request, response, stop, error, attempts, "
          "latency_s, in_tokens, out_tokens, cached_tokens, cost_usd, late) VALUES ($1, $2, $3, $4, $5, $6::jsonb, "
          "$7::jsonb, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
          16, p, on_ignored);
    if (reply) {
        query(s,
              "UPDATE agent_steps SET turns = $2, in_tokens = in_tokens + $3, out_tokens = out_tokens + $4, "
              "cost_usd = cost_usd + $5 WHERE id = $1",
              5, (const char *const[]){sid, t, in, out, cost}, on_ignored);
        query(s, "UPDATE jobs SET tokens = tokens + $2 + $3, cost_usd = cost_usd + $4 WHERE id = $1", 4,
              (const char *const[]){job, in, out, cost}, on_ignored);
    }
    free(rj);
    free(aj);
}

/* A provider call came back: recorded first, then settled, so the rows of
 * an answer that outlived its step are written before the step goes.
 * Returns 1 when the step is over (the caller stops there). */
static int answered(step *s, json_t *conv, size_t from, int rc, avo_llm_reply *reply, const char *reason,
                    int attempts)
{
    s->call = NULL;
    release_hold(s, rc == 0 ? reply : NULL);
    record_call(s, conv, from, rc == 0 ? reply : NULL, rc == 0 ? NULL : reason, attempts);
    return settle(s);
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
    finish_job(s, "succeeded", why, ev);
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
        snprintf(why, len, "the step's token limit would be exceeded: the next request could use up to %lld tokens "
                 "(a prompt of about %ld, up to %d of output), %lld of %lld are left; not sent", *need, prompt,
                 p->max_tokens, s->max_tokens - s->tokens, s->max_tokens);
        return -EDQUOT;
    }
    job_state *js = job_find(s->a, s->job, 1);
    if (!js)
        return 0;
    const double left = js->budget_tokens - (double)(js->spent_tokens + js->held_tokens);
    if (js->budget_tokens > 0 && (double)*need > left) {
        snprintf(why, len, "token budget reached: the next request could use up to %lld tokens (a prompt of about "
                 "%ld, up to %d of output), %.0f of %.0f are left; not sent", *need, prompt, p->max_tokens,
                 left > 0 ? left : 0, js->budget_tokens);
        finish_on_budget(s, "tokens", (double)js->spent_tokens, js->budget_tokens, (double)*need, why);
        return -EDQUOT;
    }
    const double cleft = js->budget_cost - js->spent_cost - js->held_cost;
    if (js->budget_cost > 0 && *cost > cleft) {
        snprintf(why, len, "cost budget reached: the next request could cost up to %.4f USD, %.4f of %.4f are "
                 "left; not sent", *cost, cleft > 0 ? cleft : 0, js->budget_cost);
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
    if (s->ended || s->a->stopping)
        return;
    json_t *d = json_pack("{s:I,s:i,s:s,s:s,s:i,s:i,s:f}", "step", (json_int_t)s->id, "island", s->island,
                          "provider", s->pv->name, "model", s->pv->model, "attempt", attempt, "max_retries",
                          s->pv->max_retries, "wait_s", wait_s);
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
        query(s, "SELECT avo_event($1, 'llm_retry', $2::jsonb)", 2, (const char *const[]){job, data}, on_ignored);
    free(data);
    avo_info("agent", "job %lld island %d: step %lld: %s attempt %d failed (%ld: %s); retrying in %.1f s", s->job,
             s->island, s->id, s->pv->name, attempt, status, msg ? msg : "", wait_s);
}

/* Start a provider request on conv; 0, or a negative int with err (no
 * callback then): -EDQUOT when a budget refuses it. */
static int call_provider(step *s, json_t *conv, json_t *tools, avo_llmcall_cb cb, char *err, size_t errlen)
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
    job_state *js = job_find(s->a, s->job, 1);
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
    json_array_foreach(json_object_get(m, "tool_calls"), i, c) {
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
    query(s, "SELECT avo_event($1, 'agent_compacted', $2::jsonb)", 2, (const char *const[]){job, data}, on_ignored);
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
    if (answered(s, s->cmp_conv, 0, rc, reply, reason, attempts))
        return;
    json_decref(s->cmp_conv);
    s->cmp_conv = NULL;
    if (s->ended)
        return; /* cancelled by the step's end: nothing to compact for */
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
        json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
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
    if (!s->cmp_conv || call_provider(s, s->cmp_conv, NULL, on_compacted, err, sizeof err) < 0) {
        json_decref(s->cmp_conv);
        s->cmp_conv = NULL;
        compact_mechanically(s, cut);
        return -1;
    }
    return 0;
}

static void fail_step(step *s, const char *reason)
{
    s->failed = 1;
    end_step(s, "ended", reason);
}

static void on_reply(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts)
{
    step *s = arg;
    if (answered(s, s->conv, s->sent, rc, reply, reason, attempts))
        return;
    /* The step ended while the call was out (cancel, the job's end): what
     * came back is recorded and nothing more; above all a cancelled call is
     * not a provider failure (it would count toward the failure rule). */
    if (s->ended)
        return;
    s->sent = json_array_size(s->conv);
    if (rc < 0) {
        char why[700];
        snprintf(why, sizeof why, "provider %s: %s", s->pv->name, reason ? reason : "failed");
        fail_step(s, why);
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
    if (s->calls) {
        run_next_tool(s);
        return;
    }
    s->empties += s->empty;
    if (++s->nudges > MAX_NUDGES) {
        char why[160];
        snprintf(why, sizeof why, "the model answered without a tool call %d times in a row (%d of them empty)",
                 s->nudges, s->empties);
        fail_step(s, why);
        return;
    }
    say(s, "user",
        !strcmp(s->stop, "max_tokens")
            ? "Your answer was cut off by the output token limit. Continue with a tool call, and keep arguments "
              "short (edit_source rather than write_source for small changes)."
        : s->empty ? "Your answer was empty: no text and no tool call. Continue by calling a tool (problem, "
                     "read_candidate, edit_source, evaluate, commit, give_up, ...)."
                   : "Continue by calling a tool: evaluate your working copy, then commit it or give_up.");
    turn(s);
}

static void turn(step *s)
{
    char why[640], err[400];
    if (s->ended)
        return;
    if (s->turns >= s->max_turns) {
        snprintf(why, sizeof why, "turn limit reached (%d turns)", s->max_turns);
        end_step(s, "ended", why);
        return;
    }
    s->turns++;
    const int rc = call_provider(s, s->conv, s->tools, on_reply, err, sizeof err);
    if (rc == -EDQUOT) {
        s->turns--;
        end_step(s, "ended", err);
    } else if (rc < 0) {
        snprintf(why, sizeof why, "provider %s: %s", s->pv->name, err);
        fail_step(s, why);
    }
}

/* ---- tools ------------------------------------------------------------------ */

/* The lineage as the agent reads it ($1 job, $2 island, $3 how many): the
 * island's best, the committed versions with their notes, and the failed
 * attempts' one-line summaries, newest first. The first message of a step
 * carries it too, so each step starts from what earlier steps learnt. */
static const char lineage_sql[] =
    "SELECT jsonb_pretty(jsonb_build_object("
    "'island_best', (SELECT jsonb_build_object('candidate', best_candidate, 'aggregate', best) "
    "FROM islands WHERE job_id = $1 AND idx = $2::int), "
    "'committed', COALESCE((SELECT jsonb_agg(jsonb_build_object('candidate', id, 'island', island, "
    "'parent', parent_id, 'aggregate', aggregate, 'operator', operator, 'notes', notes) ORDER BY id DESC) "
    "FROM (SELECT * FROM candidates WHERE job_id = $1 AND committed ORDER BY id DESC LIMIT $3::int) x), "
    "'[]'), "
    "'failed_attempts', COALESCE((SELECT jsonb_agg(jsonb_build_object('candidate', c.id, 'outcome', "
    "c.outcome, 'aggregate', c.aggregate, 'detail', left(e.result->>'detail', 200)) ORDER BY c.id DESC) "
    "FROM (SELECT * FROM candidates WHERE job_id = $1 AND NOT committed AND outcome IS NOT NULL "
    "ORDER BY id DESC LIMIT $3::int) c LEFT JOIN LATERAL (SELECT result FROM evaluations "
    "WHERE candidate_id = c.id AND purpose = 'search' ORDER BY id DESC LIMIT 1) e ON true), '[]')))";

/* A query whose one JSON (or text) column is the tool's answer; NULL means
 * not found, with the message given. */
typedef struct {
    step *s;
    char missing[160];
} answer_q;

static void on_answer(void *arg, PGresult *res, const char *err)
{
    answer_q *q = arg;
    step *s = q->s;
    char missing[160];
    snprintf(missing, sizeof missing, "%s", q->missing);
    free(q);
    if (settle(s))
        return;
    if (err)
        tool_errorf(s, "the database failed: %s; try again", err);
    else if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0))
        tool_result(s, missing, 1);
    else
        tool_result(s, PQgetvalue(res, 0, 0), 0);
}

static void answer(step *s, const char *sql, int n, const char *const *params, const char *missing)
{
    answer_q *q = calloc(1, sizeof *q);
    if (!q) {
        tool_errorf(s, "out of memory");
        return;
    }
    q->s = s;
    snprintf(q->missing, sizeof q->missing, "%s", missing);
    s->pending++;
    if (avo_db_query(s->a->db, sql, n, params, on_answer, q) < 0) {
        s->pending--;
        free(q);
        tool_errorf(s, "the database is unavailable; try again");
    }
}

static void poll_eval(uv_timer_t *t);

static void on_eval_row(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err || PQntuples(res) != 1) {
        uv_timer_start(&s->timer, poll_eval, POLL_MS, 0);
        return;
    }
    const char *state = PQgetvalue(res, 0, 0);
    if (strcmp(state, "done") != 0 && strcmp(state, "failed") != 0 && strcmp(state, "cancelled") != 0) {
        uv_timer_start(&s->timer, poll_eval, POLL_MS, 0);
        return;
    }
    s->last_eval = s->wait_eval;
    s->wait_eval = 0;
    json_t *r = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
    int failed = 1;
    char *buf = avo_agent_eval_text(&s->cp, r, state, strtoll(PQgetvalue(res, 0, 3), NULL, 10),
                                    atof(PQgetvalue(res, 0, 2)), strtoll(PQgetvalue(res, 0, 4), NULL, 10), &failed);
    json_decref(r);
    if (!buf) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, buf, failed);
    free(buf);
}

static void poll_eval(uv_timer_t *t)
{
    step *s = t->data;
    if (s->ended || !s->wait_eval)
        return;
    char e[32], job[32], isl[16];
    snprintf(e, sizeof e, "%lld", s->wait_eval);
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    const char *p[] = {e, job, isl};
    if (query(s,
              "SELECT e.state, COALESCE(e.result, '{}'::jsonb)::text, "
              "COALESCE((SELECT best FROM islands WHERE job_id = $2 AND idx = $3::int), 0), e.candidate_id, "
              "COALESCE((SELECT best_candidate FROM islands WHERE job_id = $2 AND idx = $3::int), 0) "
              "FROM evaluations e WHERE e.id = $1",
              3, p, on_eval_row) < 0)
        uv_timer_start(&s->timer, poll_eval, POLL_MS * 4, 0);
}

static void on_proposed(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    json_t *r = !err && PQntuples(res) == 1 ? json_loads(PQgetvalue(res, 0, 0), 0, NULL) : NULL;
    if (!r) {
        tool_errorf(s, "the evaluation could not be queued: %s; try again", err ? err : "no answer");
        return;
    }
    const char *e = json_string_value(json_object_get(r, "error"));
    if (e) {
        tool_errorf(s, "evaluate: %s; commit an evaluated version or give_up", e);
        json_decref(r);
        return;
    }
    s->wait_eval = json_integer_value(json_object_get(r, "evaluation"));
    if (!json_is_true(json_object_get(r, "fresh"))) {
        char sid[32];
        snprintf(sid, sizeof sid, "%lld", s->id);
        s->repeats++;
        query(s, "UPDATE agent_steps SET repeats = repeats + 1 WHERE id = $1", 1, (const char *const[]){sid},
              on_ignored);
    } else {
        s->evals++;
        char sid[32];
        snprintf(sid, sizeof sid, "%lld", s->id);
        query(s, "UPDATE agent_steps SET evaluations = evaluations + 1 WHERE id = $1", 1, (const char *const[]){sid},
              on_ignored);
    }
    json_decref(r);
    poll_eval(&s->timer);
}

static void tool_evaluate(step *s)
{
    if (!s->ws.src) {
        tool_errorf(s, "evaluate: there is no working copy; write_source first");
        return;
    }
    char sha[AVO_SHA256_HEX], job[32], isl[16], head[32];
    char *diff = NULL;
    if (avo_sha256_hex(s->ws.src, strlen(s->ws.src), sha) < 0) {
        tool_errorf(s, "out of memory");
        return;
    }
    if (s->head_src && avo_srcdiff(s->head_src, s->prob.seed, s->ws.src, s->prob.seed, &diff) < 0)
        diff = NULL;
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    snprintf(head, sizeof head, "%lld", s->head);
    const char *p[] = {job, isl, head, sha, s->ws.src, diff};
    if (query(s, "SELECT avo_agent_propose($1, $2::int, $3, $4, $5, $6)", 6, p, on_proposed) < 0)
        tool_errorf(s, "the database is unavailable; try again");
    free(diff);
}

static void on_commit_check(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err) {
        tool_errorf(s, "the database failed: %s; try again", err);
        return;
    }
    json_t *call = json_array_get(s->calls, s->next_call - 1);
    json_t *args = json_object_get(call, "arguments");
    long long cand = json_integer_value(json_object_get(args, "candidate"));
    if (PQntuples(res) != 1 || atoll(PQgetvalue(res, 0, 0)) != s->job || strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
        tool_errorf(s, "commit: candidate %lld is not one of this step's evaluated attempts (evaluate returns "
                       "their ids)", cand);
        return;
    }
    if (PQgetisnull(res, 0, 2)) {
        tool_errorf(s, "commit: candidate %lld has no finished evaluation yet", cand);
        return;
    }
    const char *outcome = PQgetvalue(res, 0, 2);
    double agg = atof(PQgetvalue(res, 0, 3)), best = atof(PQgetvalue(res, 0, 4));
    if (strcmp(outcome, "ok") != 0) {
        tool_errorf(s, "commit: candidate %lld failed its evaluation (%s); only a version that passed every check "
                       "can be committed", cand, outcome);
        return;
    }
    json_t *paired = PQgetisnull(res, 0, 5) ? NULL : json_loads(PQgetvalue(res, 0, 5), JSON_DECODE_ANY, NULL);
    avo_commit_verdict v;
    avo_commit_judge(&s->cp, paired, agg, best, strtoll(PQgetvalue(res, 0, 6), NULL, 10), &v);
    json_decref(paired);
    if (!v.commit) {
        char why[1024];
        avo_commit_explain(&s->cp, &v, cand, agg, best, why, sizeof why);
        tool_errorf(s, "commit: %s; improve it or give_up", why);
        return;
    }
    char c[32], why[160];
    snprintf(c, sizeof c, "%lld", cand);
    const char *p[] = {c, json_string_value(json_object_get(args, "notes"))};
    query(s, "UPDATE candidates SET commit_requested = true, notes = $2 WHERE id = $1", 2, p, on_ignored);
    snprintf(why, sizeof why, "committed candidate %lld (%.6g, island best was %.6g)", cand, agg, best);
    end_step(s, "committed", why);
}

static void tool_commit(step *s, json_t *args)
{
    char c[32], isl[16];
    snprintf(c, sizeof c, "%lld", (long long)json_integer_value(json_object_get(args, "candidate")));
    snprintf(isl, sizeof isl, "%d", s->island);
    const char *p[] = {c, isl};
    if (query(s,
              "SELECT c.job_id, c.hold, e.outcome, e.aggregate, "
              "COALESCE((SELECT best FROM islands WHERE job_id = c.job_id AND idx = $2::int), 0), "
              "e.result->'paired', "
              "COALESCE((SELECT best_candidate FROM islands WHERE job_id = c.job_id AND idx = $2::int), 0) "
              "FROM candidates c LEFT JOIN LATERAL (SELECT outcome, aggregate, result FROM evaluations "
              "WHERE candidate_id = c.id AND state IN ('done','failed') AND purpose = 'search' "
              "ORDER BY id DESC LIMIT 1) e ON true "
              "WHERE c.id = $1",
              2, p, on_commit_check) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

static void on_compiled(void *arg, int compiled, const char *detail, const char *log, const json_t *disasm)
{
    step *s = arg;
    (void)disasm;
    if (settle(s))
        return;
    char *buf = NULL;
    const int policy = compiled == 0 && detail && !strncmp(detail, AVO_SEEDCHECK_POLICY, strlen(AVO_SEEDCHECK_POLICY));
    if (policy)
        detail += strlen(AVO_SEEDCHECK_POLICY);
    if (asprintf(&buf, "%s%s%s%s",
                 compiled > 0  ? "compiles"
                 : policy      ? "is refused by the candidate policy (outcome policy_violation; see the system "
                                 "prompt): "
                 : compiled == 0 ? "does not compile: "
                                 : "could not compile here: ",
                 compiled > 0 ? "" : detail ? detail : "", log && *log ? "\ncompiler output:\n" : "",
                 log ? (strlen(log) > 6000 ? log + strlen(log) - 6000 : log) : "") < 0) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, buf, compiled <= 0);
    free(buf);
}

static void on_disassembled(void *arg, int compiled, const char *detail, const char *log, const json_t *disasm)
{
    step *s = arg;
    (void)log;
    if (settle(s))
        return;
    if (compiled <= 0) {
        tool_errorf(s, "disassemble: the working copy %s%s; compile shows the compiler's messages",
                    compiled == 0 ? "does not compile: " : "could not be compiled here: ", detail ? detail : "");
        return;
    }
    const char *text = json_string_value(json_object_get(disasm, "text"));
    if (!text) {
        const char *why = json_string_value(json_object_get(disasm, "error"));
        tool_errorf(s, "disassemble: %s", why ? why : "the worker returned no disassembly");
        return;
    }
    json_t *args = json_object_get(json_array_get(s->calls, s->next_call - 1), "arguments");
    char *out = NULL, err[600];
    if (avo_agent_disasm_filter(text, json_string_value(json_object_get(args, "pattern")),
                                json_string_value(json_object_get(args, "kernel")), &out, err, sizeof err) < 0) {
        tool_result(s, err, 1);
        return;
    }
    tool_result(s, out, 0);
    free(out);
}

/* compile and disassemble: the worker's sandboxed compile beside avod
 * (`avo-worker eval --compile-only`, nothing of the source runs), which for
 * disassemble also disassembles the object there; avod only reads text. */
static void start_compile(step *s, const char *tool, int disassemble, avo_seedcheck_cb cb)
{
    if (!s->ws.src) {
        tool_errorf(s, "%s: there is no working copy; write_source first", tool);
        return;
    }
    if (!s->a->worker_bin[0]) {
        tool_errorf(s, "%s: avod cannot find avo-worker beside itself; evaluate reports the compiler's messages",
                    tool);
        return;
    }
    s->pending++;
    if (avo_seedcheck_start(s->a->loop, s->a->worker_bin, s->a->compile_cache, s->prob.dir, s->target, s->ws.src,
                            disassemble, cb, s) < 0) {
        s->pending--;
        tool_errorf(s, "%s: the compiler could not be started; evaluate reports the compiler's messages", tool);
    }
}

static void poll_program(uv_timer_t *t);

static void on_program_row(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    const char *state = !err && PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : NULL;
    if (!state || !strcmp(state, "queued") || !strcmp(state, "running")) {
        if (uv_now(s->a->loop) / 1e3 < s->program_deadline) {
            uv_timer_start(&s->timer, poll_program, state ? POLL_MS : POLL_MS * 4, 0);
            return;
        }
        char pid[32];
        snprintf(pid, sizeof pid, "%lld", s->wait_program);
        query(s, "UPDATE programs SET state = 'failed', finished_at = now() WHERE id = $1 AND state IN "
                 "('queued', 'running')", 1, (const char *const[]){pid}, on_ignored);
        s->wait_program = 0;
        tool_errorf(s, "microbenchmark: %s within %d s (are the job's %s workers busy or gone?); go on without it",
                    state && !strcmp(state, "running") ? "it did not finish" : "no worker took it", PROGRAM_WAIT_S,
                    s->target);
        return;
    }
    long long id = s->wait_program;
    s->wait_program = 0;
    json_t *r = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    char *buf = NULL;
    int rc;
    if (outcome && !strcmp(outcome, "compile_error"))
        rc = asprintf(&buf, "microbenchmark %lld does not compile:\n%s", id,
                      json_string_value(json_object_get(r, "compile_log")) ?: "");
    else if (outcome && (!strcmp(outcome, "ran") || !strcmp(outcome, "timeout") || !strcmp(outcome, "crash")))
        rc = asprintf(&buf, "microbenchmark %lld: %s, exit code %lld, signal %lld, %.3f s%s\nstdout:\n%s\nstderr:\n%s",
                      id, outcome, (long long)json_integer_value(json_object_get(r, "exit_code")),
                      (long long)json_integer_value(json_object_get(r, "signal")),
                      json_number_value(json_object_get(r, "wall_s")),
                      !strcmp(outcome, "timeout") ? " (killed at the time limit)" : "",
                      json_string_value(json_object_get(r, "stdout")) ?: "",
                      json_string_value(json_object_get(r, "stderr")) ?: "");
    else
        rc = asprintf(&buf, "microbenchmark %lld did not run: %s", id,
                      json_string_value(json_object_get(r, "detail")) ?: (outcome ? outcome : "no result"));
    const int ran = outcome && !strcmp(outcome, "ran");
    json_decref(r);
    if (rc < 0) {
        tool_errorf(s, "out of memory");
        return;
    }
    tool_result(s, buf, !ran);
    free(buf);
}

static void poll_program(uv_timer_t *t)
{
    step *s = t->data;
    if (s->ended || !s->wait_program)
        return;
    char pid[32];
    snprintf(pid, sizeof pid, "%lld", s->wait_program);
    if (query(s, "SELECT state, COALESCE(result, '{}'::jsonb)::text FROM programs WHERE id = $1", 1,
              (const char *const[]){pid}, on_program_row) < 0)
        uv_timer_start(&s->timer, poll_program, POLL_MS * 4, 0);
}

static void on_program_queued(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err || PQntuples(res) != 1) {
        tool_errorf(s, "microbenchmark: it could not be queued (%s); try again", err ? err : "no row");
        return;
    }
    s->wait_program = atoll(PQgetvalue(res, 0, 0));
    s->program_deadline = uv_now(s->a->loop) / 1e3 + PROGRAM_WAIT_S;
    poll_program(&s->timer);
}

/* The program runs on a worker of the job's target, in the sandbox, never in
 * avod: it goes through its own queue (sql/007_programs.sql). */
static void tool_microbenchmark(step *s, json_t *args)
{
    char job[32], sid[32];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(sid, sizeof sid, "%lld", s->id);
    const char *lang = json_string_value(json_object_get(args, "language"));
    if (!strcmp(lang, "cuda") && strncmp(s->target, "sm_", 3) != 0) {
        tool_errorf(s, "microbenchmark: this job runs on %s workers, which have no GPU; write it in c", s->target);
        return;
    }
    const char *p[] = {job, sid, s->target, lang, json_string_value(json_object_get(args, "source"))};
    if (query(s,
              "INSERT INTO programs (job_id, step_id, target, language, source) "
              "VALUES ($1, NULLIF($2, '0')::bigint, $3, $4, $5) RETURNING id",
              5, p, on_program_queued) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

static void poll_profile(uv_timer_t *t);

/* The profile task's row: wait while it is queued or running (up to
 * PROFILE_WAIT_S; it stays queued after, and a later call finds it), then
 * its counters in the same words as ever. */
static void on_profile_row(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    const char *state = !err && PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : NULL;
    if (!state || !strcmp(state, "queued") || !strcmp(state, "running")) {
        if (uv_now(s->a->loop) / 1e3 < s->profile_deadline) {
            uv_timer_start(&s->timer, poll_profile, state ? POLL_MS : POLL_MS * 4, 0);
            return;
        }
        tool_errorf(s, "profile: task %lld is still %s after %d s (are the job's %s workers busy or gone?); call "
                       "profile again later for its counters",
                    s->wait_profile, state ? state : "unread", PROFILE_WAIT_S, s->target);
        s->wait_profile = 0;
        return;
    }
    s->wait_profile = 0;
    json_t *r = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
    json_t *args = json_object_get(json_array_get(s->calls, s->next_call - 1), "arguments");
    char *out = NULL, why[900];
    if (!r)
        tool_errorf(s, "profile: its result could not be read; try again");
    else if (avo_agent_profile_text(r, atoll(PQgetvalue(res, 0, 2)), json_string_value(json_object_get(args, "config")),
                                    &out, why, sizeof why) < 0)
        tool_result(s, why, 1);
    else
        tool_result(s, out, 0);
    free(out);
    json_decref(r);
}

static void poll_profile(uv_timer_t *t)
{
    step *s = t->data;
    if (s->ended || !s->wait_profile)
        return;
    char pid[32];
    snprintf(pid, sizeof pid, "%lld", s->wait_profile);
    if (query(s, "SELECT state, COALESCE(result, '{}'::jsonb)::text, candidate_id FROM profiles WHERE id = $1", 1,
              (const char *const[]){pid}, on_profile_row) < 0)
        uv_timer_start(&s->timer, poll_profile, POLL_MS * 4, 0);
}

static void on_profile_queued(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err || PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        tool_errorf(s, "profile: it could not be queued (%s); try again", err ? err : "no evaluated candidate");
        return;
    }
    s->wait_profile = atoll(PQgetvalue(res, 0, 0));
    s->profile_deadline = uv_now(s->a->loop) / 1e3 + PROFILE_WAIT_S;
    poll_profile(&s->timer);
}

/* Counters are no part of an evaluation: profile queues a profile task of
 * the step's last evaluated version on a worker of the job's target (or
 * finds the one already queued or done for it) and waits for it, as
 * evaluate and microbenchmark wait for theirs. */
static void tool_profile(step *s, json_t *args)
{
    if (!s->last_eval) {
        tool_errorf(s, "profile: nothing has been evaluated in this step yet; evaluate first (the counters are "
                       "read from the version evaluated last)");
        return;
    }
    const char *config = json_string_value(json_object_get(args, "config"));
    char why[700];
    if (config && avo_problem_config_index(&s->prob, config, why, sizeof why) < 0) {
        tool_errorf(s, "profile: config: %s", why);
        return;
    }
    char e[32];
    snprintf(e, sizeof e, "%lld", s->last_eval);
    if (query(s, "SELECT avo_profile_request(candidate_id, $2, 'agent') FROM evaluations WHERE id = $1", 2,
              (const char *const[]){e, config}, on_profile_queued) < 0)
        tool_errorf(s, "the database is unavailable; try again");
}

static void on_diff_sources(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    json_t *args = json_object_get(json_array_get(s->calls, s->next_call - 1), "arguments");
    const int to_ws = !json_object_get(args, "to");
    if (err || PQntuples(res) != 1 || PQgetisnull(res, 0, 0) || (!to_ws && PQgetisnull(res, 0, 1))) {
        tool_errorf(s, "diff: %s", err ? err : "no such candidate (read_candidate and lineage give ids)");
        return;
    }
    const char *b = to_ws ? s->ws.src : PQgetvalue(res, 0, 1);
    char *d = NULL;
    if (!b || avo_srcdiff(PQgetvalue(res, 0, 0), s->prob.seed, b, s->prob.seed, &d) < 0) {
        tool_errorf(s, "diff: %s", b ? "the diff failed" : "there is no working copy");
        return;
    }
    tool_result(s, d && *d ? d : "(no differences)", 0);
    free(d);
}

static void run_tool(step *s, json_t *call)
{
    const char *name = json_string_value(json_object_get(call, "name"));
    json_t *args = json_object_get(call, "arguments");
    const char *aerr = json_string_value(json_object_get(call, "arguments_error"));
    char err[1024], msg[512];
    s->call_id = json_string_value(json_object_get(call, "id"));
    if (aerr) {
        tool_errorf(s, "%s: the arguments are not a JSON object (%s); send them again as JSON", name ? name : "?",
                    aerr);
        return;
    }
    if (avo_agent_tool_check(name, args, err, sizeof err) < 0) {
        tool_result(s, err, 1);
        return;
    }
    char job[32], id[32], lim[16], isl[16];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    if (!strcmp(name, "problem")) {
        char *t = avo_agent_problem_text(&s->prob);
        if (!t) {
            tool_errorf(s, "out of memory");
            return;
        }
        tool_result(s, t, 0);
        free(t);
    } else if (!strcmp(name, "write_source") || !strcmp(name, "edit_source")) {
        int rc = !strcmp(name, "write_source")
                     ? avo_agent_ws_write(&s->ws, json_string_value(json_object_get(args, "source")), msg, sizeof msg)
                     : avo_agent_ws_edit(&s->ws, json_string_value(json_object_get(args, "search")),
                                         json_string_value(json_object_get(args, "replace")), msg, sizeof msg);
        tool_result(s, msg, rc < 0);
    } else if (!strcmp(name, "read_candidate")) {
        json_t *c = json_object_get(args, "candidate");
        if (!c) {
            tool_result(s, s->ws.src ? s->ws.src : "(the working copy is empty)", !s->ws.src);
            return;
        }
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(c));
        snprintf(msg, sizeof msg, "no candidate %s", id);
        answer(s, "SELECT s.body FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $1", 1,
               (const char *const[]){id}, msg);
    } else if (!strcmp(name, "lineage")) {
        json_t *i = json_object_get(args, "island"), *l = json_object_get(args, "limit");
        if (i)
            snprintf(isl, sizeof isl, "%lld", (long long)json_integer_value(i));
        snprintf(lim, sizeof lim, "%lld", l ? (long long)json_integer_value(l) : 20LL);
        answer(s, lineage_sql, 3, (const char *const[]){job, isl, lim}, "no lineage");
    } else if (!strcmp(name, "search_knowledge")) {
        json_t *l = json_object_get(args, "limit");
        snprintf(lim, sizeof lim, "%lld", l ? (long long)json_integer_value(l) : 8LL);
        answer(s, "SELECT jsonb_pretty(avo_kb_search($1, $2::int))", 2,
               (const char *const[]){json_string_value(json_object_get(args, "query")), lim}, "no hits");
    } else if (!strcmp(name, "read_knowledge")) {
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(args, "id")));
        snprintf(msg, sizeof msg, "no knowledge-base entry %s (search_knowledge gives the ids)", id);
        answer(s, "SELECT jsonb_pretty(avo_kb_chunk_json($1))", 1, (const char *const[]){id}, msg);
    } else if (!strcmp(name, "evaluate")) {
        tool_evaluate(s);
    } else if (!strcmp(name, "compile")) {
        start_compile(s, "compile", 0, on_compiled);
    } else if (!strcmp(name, "disassemble")) {
        start_compile(s, "disassemble", 1, on_disassembled);
    } else if (!strcmp(name, "profile")) {
        tool_profile(s, args);
    } else if (!strcmp(name, "microbenchmark")) {
        tool_microbenchmark(s, args);
    } else if (!strcmp(name, "diff")) {
        char from[32], to[32];
        json_t *t = json_object_get(args, "to");
        snprintf(from, sizeof from, "%lld", (long long)json_integer_value(json_object_get(args, "from")));
        snprintf(to, sizeof to, "%lld", t ? (long long)json_integer_value(t) : 0LL);
        if (query(s,
                  "SELECT (SELECT s.body FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $1), "
                  "(SELECT s.body FROM candidates c JOIN sources s ON s.sha256 = c.sha256 WHERE c.id = $2)",
                  2, (const char *const[]){from, to}, on_diff_sources) < 0)
            tool_errorf(s, "the database is unavailable; try again");
    } else if (!strcmp(name, "commit")) {
        tool_commit(s, args);
    } else if (!strcmp(name, "give_up")) {
        snprintf(msg, sizeof msg, "gave up: %s", json_string_value(json_object_get(args, "reason")));
        end_step(s, "ended", msg);
    } else {
        tool_errorf(s, "%s is declared but this avod does not run it; use the other tools", name);
    }
}

static void run_next_tool(step *s)
{
    if (s->ended)
        return;
    if (s->next_call >= json_array_size(s->calls)) {
        s->nudges = s->empties = 0;
        turn(s);
        return;
    }
    run_tool(s, json_array_get(s->calls, s->next_call++));
}

/* ---- start and end ------------------------------------------------------------ */

static void on_released(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    (void)res;
    if (err)
        avo_warn("agent", "job %lld: releasing the step's attempts: %s", s->job, err);
    avo_agent *a = s->a;
    settle(s);
    if (!a->stopping && a->kick)
        a->kick(a->kick_arg);
}

static void on_timer_closed(uv_handle_t *h)
{
    settle(h->data);
}

static void end_step(step *s, const char *state, const char *reason)
{
    if (s->ended)
        return;
    s->ended = 1;
    avo_agent *a = s->a;
    avo_info("agent", "job %lld island %d: step %lld %s after %d turns, %d evaluations, %lld tokens: %s", s->job,
             s->island, s->id, state, s->turns, s->evals, s->tokens, reason);
    if (s->call)
        avo_llmcall_cancel(s->call);
    if (s->timer_open) {
        uv_timer_stop(&s->timer);
        s->pending++;
        uv_close((uv_handle_t *)&s->timer, on_timer_closed);
        s->timer_open = 0;
    }
    char sid[32], job[32], isl[16];
    snprintf(sid, sizeof sid, "%lld", s->id);
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    if (!a->stopping) {
        if (s->id > 0) {
            query(s, "UPDATE agent_steps SET state = $2, reason = $3, ended_at = now() WHERE id = $1", 3,
                  (const char *const[]){sid, state, reason}, on_ignored);
            /* Nobody waits for its microbenchmarks any more. */
            query(s,
                  "UPDATE programs SET state = 'failed', finished_at = now(), "
                  "result = '{\"outcome\": \"cancelled\", \"detail\": \"the step ended\"}' "
                  "WHERE step_id = $1 AND state IN ('queued', 'running')",
                  1, (const char *const[]){sid}, on_ignored);
        }
        /* The attempts go to the engine now: the committed one (if any) under
         * the rule, the others as the island's failed attempts. */
        query(s, "UPDATE candidates SET hold = false WHERE job_id = $1 AND island = $2::int AND hold", 2,
              (const char *const[]){job, isl}, on_released);
        count_failure(s, reason);
    }
    s->dead = 1;
    s->pending++;
    settle(s);
}

/* The first message: the problem, what earlier steps committed and what
 * failed (their notes and one-line summaries), the supervisor's directions
 * when it intervened, and the working copy. Then the first turn. */
static void begin(step *s)
{
    say(s, "system", system_prompt);
    char *problem = avo_agent_problem_text(&s->prob), *first = NULL;
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
        end_step(s, "ended", "out of memory");
        return;
    }
    say(s, "user", first);
    free(problem);
    free(first);
    turn(s);
}

static const char supervisor_prompt[] =
    "You supervise avo, an evolutionary search in which an LLM agent edits a kernel to make it faster, one step at "
    "a time. The search has stalled. From the trajectory below, give the next step two to five concrete "
    "directions: what to try next, what to stop trying, and why. Plain text, at most 200 words.";

static void on_supervised(void *arg, int rc, avo_llm_reply *reply, const char *reason, int attempts)
{
    step *s = arg;
    /* the transcript row holds the supervisor's own request, whole */
    if (answered(s, s->sup_conv, 0, rc, reply, reason, attempts))
        return;
    json_decref(s->sup_conv);
    s->sup_conv = NULL;
    if (s->ended)
        return; /* aborted by the step's end: there is no step to direct */
    const char *text = rc == 0 ? json_string_value(json_object_get(reply->message, "text")) : NULL;
    if (text && *text) {
        s->directions = strdup(text);
        s->tokens += reply->in_tokens + reply->out_tokens;
        char job[32];
        snprintf(job, sizeof job, "%lld", s->job);
        json_t *d = json_pack("{s:I,s:i,s:s}", "step", (json_int_t)s->id, "island", s->island, "directions", text);
        char *dj = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        if (dj)
            query(s, "SELECT avo_event($1, 'agent_supervised', $2::jsonb)", 2, (const char *const[]){job, dj},
                  on_ignored);
        free(dj);
        avo_info("agent", "job %lld island %d: the supervisor intervened before step %lld", s->job, s->island, s->id);
    } else {
        /* the step goes ahead without directions; the reason is in llm_calls */
        avo_warn("agent", "job %lld: the supervisor gave no directions: %s", s->job, rc ? reason : "an empty answer");
    }
    begin(s);
}

/* Should a supervisor review the trajectory before this step? After every
 * supervise_after steps in a row without a commit, every
 * supervise_failures failed evaluations in a row, or when the last step
 * kept evaluating sources already evaluated (a loop of the same edits). */
static void on_supervise_check(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err || PQntuples(res) != 1) {
        begin(s);
        return;
    }
    long barren = atol(PQgetvalue(res, 0, 0)), failed = atol(PQgetvalue(res, 0, 1)), repeats = atol(PQgetvalue(res, 0, 2));
    char why[200] = "";
    if (barren > 0 && barren % s->supervise_after == 0)
        snprintf(why, sizeof why, "%ld steps in a row ended without a commit", barren);
    else if (failed > 0 && failed % s->supervise_failures == 0)
        snprintf(why, sizeof why, "the last %ld evaluations failed", failed);
    else if (repeats >= 2)
        snprintf(why, sizeof why, "the last step evaluated %ld sources that had been evaluated before", repeats);
    if (!why[0]) {
        begin(s);
        return;
    }
    char *user = NULL;
    if (asprintf(&user, "Problem %s. Why you are called: %s.\n\nRecent steps (newest first):\n%s\n\nLineage "
                        "(newest first):\n%s",
                 s->prob.name, why, PQgetvalue(res, 0, 3), s->lineage ? s->lineage : "{}") < 0 ||
        !(s->sup_conv = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "text", supervisor_prompt, "role", "user",
                                  "text", user))) {
        free(user);
        begin(s);
        return;
    }
    free(user);
    char e[400];
    if (call_provider(s, s->sup_conv, NULL, on_supervised, e, sizeof e) < 0)
        begin(s);
}

static void on_first_lineage(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    s->lineage = strdup(!err && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) ? PQgetvalue(res, 0, 0) : "{}");
    char job[32], sid[32];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(sid, sizeof sid, "%lld", s->id);
    if (query(s,
              "SELECT (SELECT count(*) FROM agent_steps WHERE job_id = $1 AND id < $2 AND state <> 'committed' "
              "AND id > COALESCE((SELECT max(id) FROM agent_steps WHERE job_id = $1 AND state = 'committed'), 0)), "
              "(SELECT count(*) FROM candidates WHERE job_id = $1 AND operator = 'agent' AND outcome IS NOT NULL "
              "AND outcome <> 'ok' AND id > COALESCE((SELECT max(id) FROM candidates WHERE job_id = $1 "
              "AND operator = 'agent' AND outcome = 'ok'), 0)), "
              "COALESCE((SELECT repeats FROM agent_steps WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT 1), 0), "
              "COALESCE((SELECT jsonb_pretty(jsonb_agg(jsonb_build_object('step', id, 'state', state, 'reason', "
              "reason, 'evaluations', evaluations) ORDER BY id DESC)) FROM (SELECT * FROM agent_steps "
              "WHERE job_id = $1 AND id < $2 ORDER BY id DESC LIMIT 6) x), '[]')",
              2, (const char *const[]){job, sid}, on_supervise_check) < 0)
        begin(s);
}

static void on_head(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err || PQntuples(res) != 1) {
        end_step(s, "ended", err ? err : "the island's head could not be read");
        return;
    }
    s->head_src = strdup(PQgetvalue(res, 0, 0));
    char msg[128];
    if (!s->head_src || avo_agent_ws_write(&s->ws, s->head_src, msg, sizeof msg) < 0) {
        end_step(s, "ended", "out of memory");
        return;
    }
    s->ws.version = 0;
    snprintf(s->head_score, sizeof s->head_score, "%s", PQgetvalue(res, 0, 1));
    char job[32], isl[16];
    snprintf(job, sizeof job, "%lld", s->job);
    snprintf(isl, sizeof isl, "%d", s->island);
    if (query(s, lineage_sql, 3, (const char *const[]){job, isl, "10"}, on_first_lineage) < 0)
        end_step(s, "ended", "the database is unavailable");
}

static void on_inserted(void *arg, PGresult *res, const char *err)
{
    step *s = arg;
    if (settle(s))
        return;
    if (err || PQntuples(res) != 1) {
        end_step(s, "ended", err ? err : "the step could not be recorded");
        return;
    }
    s->id = atoll(PQgetvalue(res, 0, 0));
    if (s->setup_error[0]) {
        fail_step(s, s->setup_error);
        return;
    }
    char head[32];
    snprintf(head, sizeof head, "%lld", s->head);
    query(s,
          "SELECT s.body, COALESCE(c.aggregate, 0) FROM candidates c JOIN sources s ON s.sha256 = c.sha256 "
          "WHERE c.id = $1",
          1, (const char *const[]){head}, on_head);
}

static void setup(step *s, json_t *snap, const char *problem_json)
{
    avo_agent *a = s->a;
    json_t *spec = json_object_get(snap, "spec"), *ag = json_object_get(spec, "agent");
    const char *pname = json_string_value(json_object_get(ag, "provider"));
    const char *problem = json_string_value(json_object_get(snap, "problem"));
    const char *seed_name = json_string_value(json_object_get(json_object_get(spec, "seed"), "name"));
    char dir[2048], err[512];
    s->max_turns = (int)json_integer_value(json_object_get(ag, "max_turns"));
    s->max_tokens = json_integer_value(json_object_get(ag, "step_tokens"));
    if (s->max_turns <= 0)
        s->max_turns = 40;
    if (s->max_tokens <= 0)
        s->max_tokens = 500000;
    s->supervise_after = (int)json_integer_value(json_object_get(ag, "supervise_after"));
    s->supervise_failures = (int)json_integer_value(json_object_get(ag, "supervise_failures"));
    if (s->supervise_after <= 0)
        s->supervise_after = 3;
    if (s->supervise_failures <= 0)
        s->supervise_failures = 4;
    json_t *v;
    s->failed_steps = (v = json_object_get(ag, "failed_steps")) ? (int)json_integer_value(v) : DEFAULT_FAILED_STEPS;
    s->backoff_s = (v = json_object_get(ag, "backoff_s")) ? (int)json_integer_value(v) : DEFAULT_BACKOFF_S;
    s->backoff_max_s = (v = json_object_get(ag, "backoff_max_s")) ? (int)json_integer_value(v) : DEFAULT_BACKOFF_MAX_S;
    if (s->failed_steps <= 0)
        s->failed_steps = DEFAULT_FAILED_STEPS;
    avo_commit_params_from_spec(spec, &s->cp);
    snprintf(s->target, sizeof s->target, "%s",
             json_string_value(json_object_get(snap, "target")) ? json_string_value(json_object_get(snap, "target"))
                                                                 : "cpu");
    for (int i = 0; i < a->nprov; i++)
        if (pname && !strcmp(a->prov[i].name, pname)) {
            s->pvc = a->prov[i];
            s->pv = &s->pvc;
        }
    if (!s->pv) {
        snprintf(s->setup_error, sizeof s->setup_error, "no provider '%s' is configured in avod",
                 pname ? pname : "");
        return;
    }
    if (avo_llm_load_key(s->pv, s->key, sizeof s->key, err, sizeof err) < 0) {
        snprintf(s->setup_error, sizeof s->setup_error, "provider %s: %s", s->pv->name, err);
        return;
    }
    if (!problem || avo_problem_resolve(a->kernels_dir, problem, dir, sizeof dir, err, sizeof err) < 0 ||
        (problem_json ? avo_pin_load(&s->prob, dir, problem_json, seed_name, err, sizeof err)
                      : avo_problem_load(&s->prob, dir, err, sizeof err)) < 0) {
        snprintf(s->setup_error, sizeof s->setup_error, "problem '%s': %s", problem ? problem : "?", err);
        return;
    }
    s->have_prob = 1;
    if (!problem_json && avo_problem_use_seed(&s->prob, seed_name, err, sizeof err) < 0) {
        snprintf(s->setup_error, sizeof s->setup_error, "%s", err);
        return;
    }
    if (!(s->conv = json_array()) || !(s->tools = avo_agent_tools()))
        snprintf(s->setup_error, sizeof s->setup_error, "out of memory");
}

/* Results of the job the engine has not applied yet: the last step's
 * commit may be among them, and the next step must start from the head
 * that commit makes (the engine's next pass, right after it applies them,
 * comes back here). Any island's, not only the step's own: a commit on
 * one island can migrate its best into another's head. */
static int results_waiting(json_t *snap)
{
    return json_array_size(json_object_get(snap, "finished")) > 0;
}

void avo_agent_ensure(avo_agent *a, json_t *snap, const char *problem_json)
{
    if (!a || a->stopping)
        return;
    const long long job = json_integer_value(json_object_get(snap, "id"));
    const char *state = json_string_value(json_object_get(snap, "state"));
    json_t *islands = json_object_get(snap, "islands");
    if (!state || strcmp(state, "running") != 0 || json_integer_value(json_object_get(snap, "best_candidate")) <= 0 ||
        json_integer_value(json_object_get(snap, "total")) >= json_integer_value(json_object_get(snap, "budget")))
        return;
    job_state *js = job_find(a, job, 1);
    if (js)
        job_sync(js, snap);
    if (js && uv_now(a->loop) < js->not_before)
        return; /* backing off after failed steps; a later pass starts the next */
    size_t i;
    json_t *isl;
    json_array_foreach(islands, i, isl) {
        const int k = (int)json_integer_value(json_object_get(isl, "idx"));
        int busy = 0;
        for (step *s = a->steps; s; s = s->next)
            busy |= s->job == job && s->island == k;
        if (busy || json_integer_value(json_object_get(isl, "head")) <= 0 || results_waiting(snap))
            continue;
        step *s = calloc(1, sizeof *s);
        if (!s)
            return;
        s->a = a;
        s->job = job;
        s->island = k;
        s->head = json_integer_value(json_object_get(isl, "head"));
        s->timer.data = s;
        uv_timer_init(a->loop, &s->timer);
        s->timer_open = 1;
        s->next = a->steps;
        a->steps = s;
        setup(s, snap, problem_json);
        char jb[32], kb[16];
        snprintf(jb, sizeof jb, "%lld", job);
        snprintf(kb, sizeof kb, "%d", k);
        if (query(s, "INSERT INTO agent_steps (job_id, island) VALUES ($1, $2::int) RETURNING id", 2,
                  (const char *const[]){jb, kb}, on_inserted) < 0)
            end_step(s, "ended", "the database is unavailable");
        else
            avo_info("agent", "job %lld island %d: step starts from candidate %lld", job, k, s->head);
    }
}

void avo_agent_stop_job(avo_agent *a, long long job)
{
    if (!a)
        return;
    for (step *s = a->steps, *n; s; s = n) {
        n = s->next;
        if (s->job == job && !s->ended)
            end_step(s, "ended", "the job ended");
    }
}

void avo_agent_prune(avo_agent *a, json_t *active)
{
    if (!a || !json_is_array(active))
        return;
    for (step *s = a->steps, *n; s; s = n) {
        n = s->next;
        int live = 0;
        size_t i;
        json_t *v;
        json_array_foreach(active, i, v) live |= json_integer_value(v) == s->job;
        if (!live && !s->ended)
            end_step(s, "ended", "the job is no longer running");
    }
    /* the ledgers of ended jobs go once no step of theirs is left */
    for (int k = a->njobs - 1; k >= 0; k--) {
        int keep = 0;
        size_t i;
        json_t *v;
        json_array_foreach(active, i, v) keep |= json_integer_value(v) == a->jobs[k].job;
        for (step *s = a->steps; s && !keep; s = s->next)
            keep = s->job == a->jobs[k].job;
        if (!keep)
            a->jobs[k] = a->jobs[--a->njobs];
    }
}

int avo_agent_provider_check(const avo_agent *a, const char *name, char *err, size_t errlen)
{
    char names[512], why[600];
    size_t n = 0;
    names[0] = 0;
    for (int i = 0; a && i < a->nprov; i++) {
        if (name && !strcmp(a->prov[i].name, name)) {
            if (avo_llm_key_check(&a->prov[i], why, sizeof why) == 0)
                return 0;
            snprintf(err, errlen, "provider '%s' cannot be used: %s", name, why);
            return -EACCES;
        }
        if (n < sizeof names)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", a->prov[i].name);
    }
    snprintf(err, errlen, "no provider '%s' is configured in avod (%s%s)", name ? name : "",
             names[0] ? "configured: " : "start avod with --providers FILE; docs/agent.md", names);
    return -ENOENT;
}

static void on_cleared(void *arg, PGresult *res, const char *err)
{
    (void)arg;
    (void)res;
    if (err)
        avo_warn("agent", "clearing steps of a previous avod: %s", err);
}

int avo_agent_set_providers(avo_agent *a, const avo_llm_provider *providers, int nproviders)
{
    avo_llm_provider *copy = NULL;
    if (nproviders > 0 && !(copy = calloc((size_t)nproviders, sizeof *copy)))
        return -ENOMEM;
    if (nproviders > 0)
        memcpy(copy, providers, (size_t)nproviders * sizeof *copy);
    free(a->prov);
    a->prov = copy;
    a->nprov = nproviders > 0 ? nproviders : 0;
    return 0;
}

int avo_agent_start(avo_agent **out, uv_loop_t *loop, avo_db *db, const char *kernels_dir, const char *home,
                    const avo_llm_provider *providers, int nproviders, void (*kick)(void *), void *kick_arg)
{
    avo_agent *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->loop = loop;
    a->db = db;
    a->kick = kick;
    a->kick_arg = kick_arg;
    snprintf(a->kernels_dir, sizeof a->kernels_dir, "%s", kernels_dir);
    avo_path_compile_check(home, a->compile_cache, sizeof a->compile_cache, a->worker_bin, sizeof a->worker_bin);
    if (nproviders > 0) {
        if (!(a->prov = calloc((size_t)nproviders, sizeof *a->prov))) {
            free(a);
            return -ENOMEM;
        }
        memcpy(a->prov, providers, (size_t)nproviders * sizeof *a->prov);
        a->nprov = nproviders;
    }
    int rc = avo_llmhttp_init(&a->http, loop);
    if (rc < 0) {
        free(a->prov);
        free(a);
        return rc;
    }
    *out = a;
    return 0;
}

int avo_agent_db_up(avo_agent *a)
{
    /* Only the first connection of this process: a reconnect finds steps
     * still alive here, whose rows must stay running. */
    if (a->recovered)
        return 0;
    /* Steps do not survive a restart (their conversation lived here): what
     * was running is recorded as interrupted and its attempts go to the
     * engine; new steps start from the islands' heads. Queued before the
     * engine's first pass on the same connection, so they run first. */
    int rc = avo_db_query(a->db,
                          "UPDATE agent_steps SET state = 'interrupted', reason = 'avod restarted', ended_at = now() "
                          "WHERE state = 'running'",
                          0, NULL, on_cleared, NULL);
    if (rc == 0)
        rc = avo_db_query(a->db, "UPDATE candidates SET hold = false WHERE hold", 0, NULL, on_cleared, NULL);
    if (rc < 0) {
        avo_warn("agent", "cannot record the steps a restart interrupted: %s", strerror(-rc));
        return rc;
    }
    a->recovered = 1;
    return 0;
}

void avo_agent_stop(avo_agent *a)
{
    if (!a)
        return;
    a->stopping = 1;
    /* Ending a step or closing the transport runs callbacks that may free
     * the last step; the agent itself is freed here then, or by the last
     * step's close later, never both. */
    a->in_stop = 1;
    for (step *s = a->steps, *n; s; s = n) {
        n = s->next;
        end_step(s, "interrupted", "avod is stopping");
    }
    avo_llmhttp_close(a->http);
    a->in_stop = 0;
    if (!a->steps) {
        free(a->prov);
        free(a->jobs);
        free(a);
    }
}
