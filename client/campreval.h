/* The campaign's re-validation option (issue 21, point 3): when the
 * toolchain of the live workers that would claim a problem's work differs
 * from the one recorded in the result of the previous campaign's best for
 * that problem, that best is evaluated again on one of those workers
 * (POST /v1/revalidate) and the ratio new/recorded goes into the
 * campaign's summary, so an upgrade is a measured event; when nothing
 * changed the summary says so in one line. Pure: JSON in, JSON and text
 * out; the calls are avoctl.c's (docs/jobs.md, "Re-validation").
 *
 * The keys compared (docs/jobs.md): for a GPU target nvcc, cc (nvcc's host
 * compiler), driver, cuda_driver, cuda_runtime, gpu (the model) and avo
 * (the harness that times); for the cpu target cc, cpu and avo. gpu_uuid
 * is not one: another card of the same model is not a new toolchain. */
#ifndef AVOCTL_CAMPREVAL_H
#define AVOCTL_CAMPREVAL_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

typedef enum {
    AVOCTL_REVAL_OFF = 0,       /* the default: nothing checked */
    AVOCTL_REVAL_ON_CHANGE = 1, /* "on_toolchain_change" */
    AVOCTL_REVAL_ALWAYS = 2,    /* every night, changed or not (drift) */
} avoctl_campreval_mode;

/* "off", "on_toolchain_change" or "always" into *mode: 0, or -EINVAL
 * (text NULL included). */
int avoctl_campreval_mode_parse(const char *text, avoctl_campreval_mode *mode);
const char *avoctl_campreval_mode_name(avoctl_campreval_mode mode);

/* How the versions current differ from recorded on the keys that matter
 * for target ("cpu" or a GPU architecture): "cc 12.2.0 -> 14.1.0, nvcc
 * (none) -> 13.0.88" in buf; returns how many keys differ. */
size_t avoctl_campreval_diff(const json_t *recorded, const json_t *current, const char *target, char *buf, size_t len);

/* What to do for each problem of previous (the last summary, or NULL)
 * that has a baseline candidate. cands maps a problem to that candidate
 * (GET /v1/candidates/{id}) or to {"error": why}; jobs are tonight's
 * (GET /v1/jobs/{id}: their target and spec.gpu say which workers would
 * claim the work; the candidate's worker's target for a problem tonight
 * has no job of); workers is GET /v1/workers's array (live: idle or
 * busy). The section:
 *   {"mode", "message", "revalidate": N, "unchanged": N, "skipped": N,
 *    "problems": {P: {"candidate", "job", "target", "recorded": versions,
 *                     "action": "revalidate"|"unchanged"|"skipped",
 *                     "worker", "current": versions, "changes": "...",
 *                     "changed_workers": N, "live_workers": N, "reason"}}}
 * "worker" is the live worker to measure on: the lowest id whose
 * toolchain differs (or, for "always", the lowest id). NULL when out of
 * memory. */
json_t *avoctl_campreval_plan(avoctl_campreval_mode mode, const json_t *previous, const json_t *cands,
                              const json_t *jobs, const json_t *workers);

/* The problems a plan re-validates: [{"problem", "candidate", "worker"}]. */
json_t *avoctl_campreval_todo(const json_t *plan);

/* Fill a plan in with what was measured: revs maps a problem to its
 * re-validation (GET /v1/revalidations/{id}) or {"error": why}. Adds per
 * problem "revalidation", "state", "outcome", "recorded_aggregate",
 * "aggregate", "ratio", "toolchain" (the new result's versions), "error";
 * and "measured", "geomean_ratio", "min_ratio", "max_ratio" over the
 * problems' ratios. 0 or -ENOMEM. */
int avoctl_campreval_finish(json_t *plan, const json_t *revs);

/* The section as markdown ("## Re-validation"). */
void avoctl_campreval_markdown(const json_t *plan, FILE *out);

#endif
