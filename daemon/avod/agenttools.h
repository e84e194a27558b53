/* The agent operator's tools, the part that needs no I/O: their
 * declarations for the model (name, description, JSON schema, from one
 * table that also checks the arguments and names each tool's handler, so
 * what the model sees, what it is held to and what runs are one row), the
 * working copy of the source a
 * step edits (write_source, edit_source) and the problem as the model reads
 * it. The tools that need the database or a worker (lineage, evaluate,
 * compile, ...) are run by the agent step (agentexec.c); here only their
 * arguments are checked. Every error is a sentence the model can act on: it names the
 * tool, the argument and what would be accepted. */
#ifndef AVO_AGENTTOOLS_H
#define AVO_AGENTTOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "avo_problem.h"
#include "commit.h"

struct avo_agent_step;
/* A tool's handler: runs one checked call for the step and answers it
 * (agent_internal.h). */
typedef void avo_agenttools_fn(struct avo_agent_step *s, json_t *args);

/* The handler of a declared tool; NULL for a name that is not one. */
avo_agenttools_fn *avo_agenttools_handler(const char *name);

/* Largest string argument (a whole source file fits; a runaway answer does
 * not). */
#define AVO_AGENT_MAX_ARG (1u << 20)

/* [{"name", "description", "schema"}] in llm.h's neutral form; a new
 * reference, NULL when out of memory. */
json_t *avo_agenttools_schema(void);

/* A tool call's arguments against the tool's schema: a known tool, an
 * object, required arguments present, each of its declared type, strings
 * non-empty where required and at most AVO_AGENT_MAX_ARG bytes, integers
 * within their range, no unknown arguments. Returns 0, or -EINVAL (-ENOENT
 * for an unknown tool) with the message for the model in err. */
int avo_agenttools_check(const char *name, json_t *args, char *err, size_t errlen);

/* The working copy: the source the agent edits during a step. version
 * counts the changes (0: as the step began). */
typedef struct {
    char *src;
    int version;
} avo_agenttools_ws;

/* Replace the whole text. Returns 0 with a short confirmation in msg, or a
 * negative int with the reason. */
int avo_agenttools_ws_write(avo_agenttools_ws *w, const char *text, char *msg, size_t msglen);
/* Replace the one exact occurrence of search. No occurrence, or more than
 * one, is an error that says which and where (line numbers), and the copy
 * is left as it was. */
int avo_agenttools_ws_edit(avo_agenttools_ws *w, const char *search, const char *replace, char *msg, size_t msglen);
void avo_agenttools_ws_free(avo_agenttools_ws *w);

/* The problem as text for the `problem` tool: what the entry point must
 * compute and export, sizes, tensors, configurations, score, tolerances,
 * the seed's knobs and constraints. Caller frees; NULL when out of memory. */
char *avo_agenttools_problem_text(const avo_problem *p);

/* Most lines the disassemble tool returns. */
#define AVO_AGENT_DISASM_LINES 400

/* The disassemble tool's answer from a whole disassembly (cuobjdump -sass or
 * objdump -d): the instruction lines matching the extended regular
 * expression `pattern`, grouped by function, only in functions whose name
 * contains `kernel` (NULL: all), at most AVO_AGENT_DISASM_LINES of them,
 * with counts. Returns 0 with *out (caller frees), or -EINVAL with the
 * reason in err (a bad pattern, no such function). */
int avo_agenttools_disasm_filter(const char *text, const char *pattern, const char *kernel, char **out, char *err,
                                 size_t errlen);

/* The profile tool's answer from a profile task's result (or an
 * evaluation's: the per-configuration counters have one shape;
 * docs/evaluation.md): the hardware counters of configuration `config`
 * (NULL: the one with the longest median time, else the last), kernel by
 * kernel on a GPU, or why there are none. Returns 0 with *out (caller
 * frees), or -EINVAL with the reason in err (no such configuration: the
 * names are listed; a candidate that failed its checked calls: the
 * outcome). */
int avo_agenttools_profile_text(const json_t *result, long long candidate, const char *config, char **out, char *err,
                                size_t errlen);

/* The evaluate tool's answer from a finished evaluation's result (its
 * state when the result says no outcome): the outcome, the aggregate with
 * the island's best (`best`, candidate `best_cand`), what the commit rule
 * would decide now (cp; avo_commit_explain's sentence when not: by how much,
 * with the interval, or that the screen stopped it), the detail, per
 * configuration the score and median (or that it was not timed: screened
 * out), and the compiler's output when it failed. *failed: not ok. NULL
 * when out of memory; caller frees. */
char *avo_agenttools_eval_text(const avo_commit_params *cp, const json_t *result, const char *state, long long cand,
                               double best, long long best_cand, int *failed);

#endif
