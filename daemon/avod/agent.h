/* The agent operator's steps (issue 7): one step per island of an agent job
 * at a time, each a conversation with an LLM provider that reads the
 * problem and the lineage, edits a working copy, evaluates it through the
 * queue like any candidate (attempts are held from the engine until the
 * step ends) and commits one under the commit rule, or gives up. Runs on
 * avod's loop and never blocks it: provider calls through llmcall, the
 * database through db, evaluations waited for by polling their rows. Every
 * request and answer is stored (llm_calls) with tokens, latency and cost;
 * the step's end, its reason and its totals in agent_steps. */
#ifndef AVO_AGENT_H
#define AVO_AGENT_H

#include <jansson.h>
#include <uv.h>

#include "db.h"
#include "llm.h"

typedef struct avo_agent avo_agent;

/* providers: the configured providers (copied; may be empty). kick: asks
 * the engine for a pass (a step released its attempts). Steps left running
 * by a previous avod are recorded once the database is up
 * (avo_agent_db_up). Returns 0 or a negative int. */
int avo_agent_start(avo_agent **out, uv_loop_t *loop, avo_db *db, const char *kernels_dir, const char *home,
                    const avo_llm_provider *providers, int nproviders, void (*kick)(void *), void *kick_arg);

/* The engine's call for an agent job in its pass: make sure each island
 * that has no step has one (when the job has evaluation budget left). snap
 * is the job's snapshot (avo_job_snapshot); problem_json the text of
 * problem.json the job pinned (sql/016_pinned_problem.sql), which a new
 * step describes to the model; NULL (a job from before the pin): the
 * package on disk. */
void avo_agent_ensure(avo_agent *a, json_t *snap, const char *problem_json);
/* The database is connected: on the first connection of this process,
 * the steps a previous avod left running are recorded as interrupted and
 * their held attempts released (queued ahead of any new step's query).
 * 0, or a negative errno when the queries could not be queued. */
int avo_agent_db_up(avo_agent *a);
/* The job ended: its steps stop (their provider calls are cancelled). */
void avo_agent_stop_job(avo_agent *a, long long job);

/* Replace the providers (a configuration reload): steps already running
 * keep the copy they started with; new steps use these. 0 or -ENOMEM. */
int avo_agent_set_providers(avo_agent *a, const avo_llm_provider *providers, int nproviders);
/* Steps of jobs not in active (a JSON array of the active job ids) stop. */
void avo_agent_prune(avo_agent *a, json_t *active);

/* Whether a job may name this provider (the submission check): 0, or
 * -ENOENT (not configured; err lists those that are) or -EACCES (its key
 * cannot be read now; err says why, never the key). */
int avo_agent_provider_check(const avo_agent *a, const char *name, char *err, size_t errlen);

void avo_agent_stop(avo_agent *a);

#endif
