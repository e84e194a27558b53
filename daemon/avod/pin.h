/* A job's pinned problem package (sql/016_pinned_problem.sql; docs/jobs.md,
 * "Pinned problems"): made at submission from the package on disk, loaded
 * back by the engine and the agent from what the job stored, and compared
 * with the disk for `avoctl problem diff`. */
#ifndef AVO_PIN_H
#define AVO_PIN_H

#include <stddef.h>
#include <jansson.h>

#include "avo_problem.h"

/* The pin of p, a package loaded from disk with the job's seed in use
 * (avo_problem_use_seed): {"hash", "files", "problem_json", "seed_text"},
 * as avo_job_submit's p_pin takes it. NULL when a file of the package
 * cannot be read, with "cannot read PATH: reason" in err. */
json_t *avo_pin_make(const avo_problem *p, char *err, size_t errlen);

/* The problem as the job pinned it: problem_json's text over the package
 * directory dir, with seed seed_name ("" or NULL: the default). 0 or a
 * negative int with the reason in err; *p is the caller's to free. */
int avo_pin_load(avo_problem *p, const char *dir, const char *problem_json, const char *seed_name, char *err,
                 size_t errlen);

/* How the package on disk differs from a job's pin (pin: avo_job_pin's
 * row). {"job", "problem", "dir", "pinned", "disk", "same", "changes":
 * [avo_package_changes], "seed": {"file", "diff"}, "disk_error"?}. NULL
 * with err when the problem's directory cannot be resolved at all. */
json_t *avo_pin_diff(const char *kernels_dir, const json_t *pin, char *err, size_t errlen);

#endif
