/* `avoctl campaign run FILE`: a set of jobs submitted together, waited for,
 * and summarised (JSON and markdown) against the previous campaign of the
 * same name, so a nightly run fails when a job failed or a problem's best
 * fell: measured paired against the previous best candidate where it can
 * be (client/compare.h), by the aggregates where not. Pure: JSON in, JSON
 * and text out; the I/O is in avoctl.c.
 *
 * Campaign file: {"name": "nightly", "tolerance": 0.02,
 *                 "revalidate": "off"|"on_toolchain_change"|"always",
 *                 "jobs": [JOB SPEC, ...]}   (docs/jobs.md for a spec;
 * "revalidate": client/campreval.h) */
#ifndef AVOCTL_CAMPAIGN_H
#define AVOCTL_CAMPAIGN_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* Check a campaign document: a name of letters, digits, '-', '_' (it names
 * the files), jobs a non-empty array of objects that name a problem,
 * revalidate (when present) one of avoctl_campreval_mode_parse's names,
 * tolerance in [0, 1) (default 0.02: a best more than 2% under the previous
 * campaign's is a regression). *jobs is borrowed from doc. 0, or -EINVAL
 * with the field in err. */
int avoctl_campaign_parse(const json_t *doc, const char **name, double *tolerance, json_t **jobs, char *err,
                          size_t errlen);

/* The summary of finished jobs (their /v1/jobs/{id} objects, in campaign
 * order) against previous (the last summary of this campaign, or NULL):
 * {"campaign", "started_at", "finished_at", "tolerance",
 *  "jobs": [{"id","problem","state","reason","unit","seed","best","speedup"[,"speedup_detail"]}],
 *  "problems": {P: {"best","unit","job","candidate","previous","previous_candidate","change",
 *                   "absolute_change","comparison","regressed","baseline","baseline_candidate"}},
 *  "failed", "regressions", "ok"}. A problem's best is the highest over its
 * jobs that succeeded (scores are higher-is-better), "candidate" the
 * candidate that scored it. compares (NULL: none) maps a problem to its
 * compare object (GET /v1/compare/{id}: this best measured paired against
 * the previous baseline's candidate) or to {"error": why} when none could
 * be made. A problem whose compare measured is decided paired: "change" is
 * the paired ratio, regressed only when the interval's upper end is under
 * 1 - tolerance, "comparison" {"measured": "paired", "compare", "candidate",
 * "against", "ratio", "low", "ci", "confidence"}; any other is decided by
 * the aggregates as before ("change" = best / previous baseline, regressed
 * under 1 - tolerance), "comparison" {"measured": "absolute", "reason"}
 * saying why (an older previous summary without candidate ids, a compare
 * refused, failed or unfinished). "comparison" is null for a new problem.
 * "baseline" and "baseline_candidate" are what the next campaign compares
 * with: this best, or the previous ones when no job of the problem
 * succeeded (best null). NULL when out of memory. */
json_t *avoctl_campaign_summary(const char *name, const json_t *jobs, const json_t *previous, const json_t *compares,
                                double tolerance, const char *started_at, const char *finished_at);

/* [pick(P, entry)] over doc's "problems" object (a summary's, or its
 * re-validation section's), leaving out the problems pick returns NULL for:
 * the lists of work a campaign run does per problem. NULL when out of
 * memory. */
json_t *avoctl_campaign_problem_list(const json_t *doc, json_t *(*pick)(const char *problem, const json_t *entry));

/* The paired compares a summary made without compares needs:
 * [{"problem", "candidate": this best, "against": the previous baseline's
 * candidate}] for each problem that has both. NULL when out of memory. */
json_t *avoctl_campaign_compare_list(const json_t *summary);

/* The summary as a markdown document. 0 or -EIO. */
int avoctl_campaign_markdown(const json_t *summary, FILE *out);

#endif
