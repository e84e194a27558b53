/* The evolution step: given a job snapshot (avo_job_snapshot in sql/), decide
 * what happens next: which finished evaluations join the lineage (the AVO
 * commit rule), which new candidates to propose, whether the job is done.
 * Pure: the engine applies the decision in one transaction (avo_job_apply). */
#ifndef AVO_EVOLVE_H
#define AVO_EVOLVE_H

#include <jansson.h>
#include <stddef.h>

#include "avo_problem.h"

/* The absolute rule: a correct child commits when aggregate >= best * (1 - slack).
 * commit.c's unpaired fallback asks it with slack = epsilon - min_gain. */
int avo_evolve_commit_rule(double aggregate, double best, double epsilon);

/* Returns a new decision object for avo_job_apply, or NULL with err set. */
json_t *avo_evolve_decide(json_t *snapshot, const avo_problem *p, const char *seed_src, char *err, size_t errlen);

#endif
