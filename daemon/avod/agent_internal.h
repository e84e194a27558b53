/* Private to the agent operator's files (agent.c, agentstep.c, agentturn.c,
 * agentexec.c, agenttools.c' table): the agent, a step and its one state,
 * and the functions they share. Nothing outside daemon/avod/agent*.c
 * includes it; the public API is agent.h. */
#ifndef AVO_AGENT_INTERNAL_H
#define AVO_AGENT_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent.h"
#include "agenttools.h"
#include "avo_list.h"
#include "avo_problem.h"
#include "commit.h"
#include "db.h"
#include "llm.h"
#include "llmcall.h"
#include "llmhttp.h"

typedef struct avo_agent_step step;

/* A step's state: one value, moved only by agent_move, which refuses a move
 * this table does not allow; every callback starts by checking that the
 * step is in a state it may run in (agent_arrive, agent_expect).
 *
 *   STARTING    ─▶ SUPERVISING, TURN
 *   SUPERVISING ─▶ TURN
 *   TURN        ─▶ TOOLS, COMPACTING, TURN
 *   COMPACTING  ─▶ TOOLS, TURN
 *   TOOLS       ─▶ TURN
 *   every state but ENDED ─▶ ENDED; nothing leaves ENDED
 *
 * STARTING    the row is inserted, the head and lineage read, the
 *             supervisor rule checked (queries of agentstep.c);
 *             → SUPERVISING (the supervisor is called), → TURN (first turn)
 * SUPERVISING the supervisor's provider call is out; → TURN
 * TURN        a provider call of the main conversation is out; → TOOLS
 *             (the answer has tool calls), → COMPACTING (the conversation
 *             nears the context window), → TURN (a nudge: no tool call)
 * COMPACTING  the compaction summary's provider call is out; → TOOLS, → TURN
 *             (as after the answer it follows)
 * TOOLS       the answer's tool calls run one at a time (a tool waits for
 *             its query, compile, evaluation, program or profile; the ids
 *             wait_eval, wait_program, wait_profile say which); → TURN when
 *             the last has answered
 * ENDED       the end is recorded (agent_end_step); what is still in flight
 *             comes back, is recorded (a late answer is billed) and settled,
 *             and the step is freed when nothing is pending. No way out.
 *
 * The step's row (agent_steps.state: running, then committed, ended or
 * interrupted), its held attempts and its programs change only through the
 * SQL functions of sql/025_agent_states.sql, which draws their states.
 */
typedef enum {
    AGENT_STARTING,
    AGENT_SUPERVISING,
    AGENT_TURN,
    AGENT_COMPACTING,
    AGENT_TOOLS,
    AGENT_ENDED,
    AGENT_NSTATES
} agent_state;

/* A set of states, for the checks: AGENT_IN(AGENT_TURN) | AGENT_IN(AGENT_ENDED). */
#define AGENT_IN(st) (1u << (st))

/* What avod keeps per agent job across its steps: the failure rule's
 * streak and backoff, and the LLM budgets' ledger (spent as recorded, and
 * what requests in flight may still use), so a request is checked against
 * the calls of every island of the job, not only its own step's. */
typedef struct {
    long long job;
    int failed;          /* steps in a row that failed (provider errors, unusable answers) */
    uint64_t not_before; /* loop time (ms) before which no step starts: the backoff */
    long long spent_tokens, held_tokens;
    double spent_cost, held_cost;
    double budget_tokens, budget_cost; /* the job's budgets; 0 = none */
} job_state;

struct avo_agent {
    uv_loop_t *loop;
    avo_db *db;
    char kernels_dir[PATH_MAX];
    char worker_bin[PATH_MAX]; /* avo-worker beside avod: the sandboxed compile of the compile tool */
    char compile_cache[PATH_MAX];
    avo_llm_provider *prov;
    int nprov;
    avo_llmhttp *http;
    void (*kick)(void *);
    void *kick_arg;
    avo_list steps; /* live steps (step.link) */
    job_state *jobs;
    int njobs;
    int stopping;
    int in_stop;   /* avo_agent_stop is running: it frees the agent itself */
    int recovered; /* the steps a restart interrupted were recorded (avo_agent_db_up) */
};

/* The step whose link is node. */
#define agent_step_of(node) avo_list_entry(node, step, link)

struct avo_agent_step {
    avo_agent *a;
    avo_list link; /* on avo_agent.steps */
    long long job, id, head;
    int island;
    avo_problem prob;
    int have_prob;
    char target[16];
    char setup_error[600]; /* why the step cannot run (recorded, then it ends) */
    char *head_src;
    char *lineage;    /* the lineage at the step's start (first message, supervisor) */
    char *directions; /* the supervisor's, for this step's first message */
    int supervise_after, supervise_failures, repeats;
    int failed_steps, backoff_s, backoff_max_s; /* the job's failure rule */
    json_t *sup_conv;                           /* the supervisor call's conversation, while it runs */
    json_t *cmp_conv;                           /* the compaction call's conversation, while it runs */
    size_t cmp_cut;                             /* messages [2, cmp_cut) are being summarised */
    long cmp_prompt;                            /* the prompt size that called for it */
    char stop[16];                              /* why the last answer stopped */
    char head_score[32];
    avo_agenttools_ws ws;
    json_t *conv, *tools;
    size_t sent;                /* conversation length already stored in the transcript */
    const avo_llm_provider *pv; /* &pvc: the step's own copy, so a reload cannot pull it away */
    avo_llm_provider pvc;
    char key[4096];
    int turns, max_turns, nudges, empties, evals;
    int empty;  /* the last answer had neither text nor a tool call */
    int failed; /* the step ended on a provider error or unusable answers */
    long long tokens, max_tokens;
    long last_prompt;      /* the main conversation's size in tokens after the last answer, */
    size_t last_bytes;     /* and in bytes: the next prompt is estimated from them */
    long long held_tokens; /* what the request in flight may use, held in the job's ledger */
    double held_cost;
    double cost;
    avo_commit_params cp; /* the job's commit rule (commit.c) */
    json_t *calls;        /* the tool calls of the answer being worked through */
    size_t next_call;
    const char *call_id; /* of the tool call being run */
    long long wait_eval;
    long long last_eval;    /* the step's last finished evaluation (profile reads its counters) */
    long long wait_program; /* the microbenchmark being waited on */
    double program_deadline;
    long long wait_profile; /* the profile task being waited on (sql/011_profiles.sql) */
    double profile_deadline;
    uv_timer_t timer;
    int timer_open;
    avo_llmcall *call;
    double call_t0;
    int pending;       /* queries, the provider call and the timer in flight */
    agent_state state; /* moved only by agent_move */
};

/* ---- the state (agentstep.c) ---------------------------------------------------- */

const char *agent_state_name(agent_state st);
/* Whether s may go on in a callback that allows the states in `allowed`:
 * 1 yes; 0 when the step has ended (silently where `allowed` has ENDED: a
 * late arrival is normal) or is in a state the callback does not allow.
 * That is a bug: logged with `where`, and the callback is refused (the
 * daemon never dies for one step); built with -DAVO_STRICT_STATES it
 * aborts instead, for tests and debugging. */
int agent_expect(step *s, unsigned allowed, const char *where);
#define AGENT_EXPECT(s, allowed) agent_expect((s), (allowed), __func__)
/* A callback's first call when it was counted in `pending`: settles it
 * (the step may be freed: nothing may touch it after a 0 then), then
 * agent_expect. 1: the callback goes on. */
int agent_arrive(step *s, unsigned allowed, const char *where);
#define AGENT_ARRIVE(s, allowed) agent_arrive((s), (allowed), __func__)
/* Move s to `to`: 0, or -EPROTO (logged; the state stays) when the table
 * above does not allow it. */
int agent_move(step *s, agent_state to, const char *where) __attribute__((warn_unused_result));
#define AGENT_MOVE(s, to) agent_move((s), (to), __func__)

/* ---- the step's life cycle (agentstep.c) ------------------------------------------ */

/* A new step of island `island` of `job` from candidate `head`: set up
 * from the snapshot and recorded (INSERT agent_steps); the rest follows on
 * the loop. 0, or -ENOMEM. */
int agent_step_start(avo_agent *a, json_t *snap, const char *problem_json, long long job, int island, long long head);
/* Something in flight came back: 1 when the step has ended (it may be
 * freed then). */
int agent_settle(step *s);
/* A query counted in pending; 0 or -EIO (not queued, cb never runs). */
int agent_query(step *s, const char *sql, int n, const char *const *params, avo_db_cb cb);
/* The callback of queries whose answer is only logged on error. */
void agent_on_ignored(void *arg, PGresult *res, const char *err);
/* Record the end (state: ended, committed, interrupted) and release the
 * step's attempts; a second call does nothing. */
void agent_end_step(step *s, const char *state, const char *reason);
/* The end of a step that failed (provider errors, unusable answers): it
 * counts toward the job's failure rule. */
void agent_fail_step(step *s, const char *reason);

/* ---- the job's ledger and failure rule (agent.c) ------------------------------------ */

job_state *agent_job_find(avo_agent *a, long long job, int create);
void agent_finish_job(step *s, const char *state, const char *reason, json_t *events);
void agent_count_failure(step *s, const char *reason);
void agent_release_hold(step *s, const avo_llm_reply *reply);

/* ---- the conversation (agentturn.c) -------------------------------------------------- */

void agent_say(step *s, const char *role, const char *text);
/* The first message (problem, lineage, directions, working copy), then the
 * first turn. */
void agent_begin(step *s);
/* The next turn: a provider call on the conversation, or the step's end. */
void agent_turn(step *s);
/* Start a provider request on conv; 0, or a negative int with err (no
 * callback then): -EDQUOT when a budget refuses it. */
int agent_call_provider(step *s, json_t *conv, json_t *tools, avo_llmcall_cb cb, char *err, size_t errlen);
/* A provider call came back: released, recorded (llm_calls), then arrived
 * (agent_arrive with allowed and where). 1: the callback goes on. */
int agent_answered(step *s, json_t *conv, size_t from, int rc, avo_llm_reply *reply, const char *reason, int attempts,
                   unsigned allowed, const char *where);

/* ---- the tools (agentexec.c) ----------------------------------------------------------- */

/* The lineage as the agent reads it ($1 job, $2 island, $3 how many). */
extern const char agent_lineage_sql[];
/* Run the answer's next tool call, or the next turn when all have run. */
void agent_run_next_tool(step *s);
/* The tools' handlers, named in agenttools.c's table beside each tool's
 * declaration: each answers through tool_result, now or from a
 * callback, or ends the step (commit, give_up). */
avo_agenttools_fn agent_tool_problem, agent_tool_write_source, agent_tool_edit_source, agent_tool_read_candidate,
    agent_tool_lineage, agent_tool_search_knowledge, agent_tool_read_knowledge, agent_tool_evaluate, agent_tool_compile,
    agent_tool_disassemble, agent_tool_profile, agent_tool_microbenchmark, agent_tool_diff, agent_tool_commit,
    agent_tool_give_up;

#endif
