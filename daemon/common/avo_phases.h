/* Wall time by phase of one evaluation (result "phases", docs/evaluation.md;
 * bench/eval_cost.sh reads it), in the worker and in the harness. A fixed
 * table filled in place: adding to a phase reads the clock once and
 * allocates nothing, so it may sit in the checker's call loop. The clock is
 * read between the steps of a call, never inside a timed window. */
#ifndef AVO_PHASES_H
#define AVO_PHASES_H

#include <jansson.h>

/* Room for every phase a path has: a CUDA evaluation with a baseline, a
 * counters pass and a paired against sums 24 in the harness. */
#define AVO_PHASES_MAX 32

typedef struct {
    const char *name[AVO_PHASES_MAX]; /* string literals: never copied or freed */
    double s[AVO_PHASES_MAX];
    int n;
} avo_phases;

/* CLOCK_MONOTONIC, seconds. */
double avo_phases_now(void);

/* Add seconds to the named phase. A phase exists from its first add, so
 * only phases that happened on a path are reported. A name past
 * AVO_PHASES_MAX distinct ones is dropped (a bug of the caller's, not a
 * reason to fail an evaluation). */
void avo_phases_add(avo_phases *ph, const char *name, double seconds);

/* Charge the time since *since to name and move *since to now: a run of
 * consecutive steps costs one clock read each. */
void avo_phases_lap(avo_phases *ph, const char *name, double *since);

/* Add every phase of src to dst's phase of the same name. */
void avo_phases_merge(avo_phases *dst, const avo_phases *src);

double avo_phases_sum(const avo_phases *ph);

/* {"name": seconds, ...} in order of first use; NULL when out of memory. */
json_t *avo_phases_json(const avo_phases *ph);

#endif
