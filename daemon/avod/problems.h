/* The problem packages as a user sees them (GET /v1/problems and
 * /v1/problems/{name}, docs/api.md): every directory under avod's kernels
 * root that holds a problem.json, loaded and validated as a submission
 * would load it. Read from the disk on each request, so an edited or new
 * package shows at once; a package that does not load is listed with its
 * error rather than hidden. */
#ifndef AVO_PROBLEMS_H
#define AVO_PROBLEMS_H

#include <stddef.h>
#include <jansson.h>

/* Packages looked for at most this deep under the root (cpu/sgemm is 2). */
#define AVO_PROBLEMS_MAX_DEPTH 4
/* A knob space larger than this is not counted point by point. */
#define AVO_PROBLEMS_COUNT_MAX 1000000u

/* {"problems": [summary, ...]} in name order: each {"name", "backend",
 * "description", "knobs", "seeds", "sizes", "configs", "unit",
 * "baseline"}, or {"name", "error"} for a package that does not load.
 * NULL only when out of memory. */
json_t *avo_problems_list(const char *kernels_dir);

/* One package in detail: the summary plus "spec" (problem.json as parsed),
 * "files" (the manifest a job would pin), "package_hash" and "knob_space"
 * (per seed: knobs, points, allowed). 0 and *out; -ENOENT when there is
 * no such package, err saying so with the closest names ("did you mean
 * 'cpu/sgemm'?"); -EINVAL when the name is malformed or the package does
 * not load, err the reason. */
int avo_problems_get(const char *kernels_dir, const char *name, json_t **out, char *err, size_t errlen);

/* For a name no package has: "; did you mean 'cpu/sgemm'?" naming the
 * closest package (the same last segment, as sgemm for cpu/sgemm, or
 * within a third of the name's length in edits), else "; `avoctl problem
 * list` lists them"; to append to an error message. */
void avo_problems_suggest(const char *kernels_dir, const char *name, char *out, size_t outlen);

/* The edit distance between a and b (insertions, deletions, substitutions),
 * capped at 255; for "did you mean". Pure. */
int avo_problems_distance(const char *a, const char *b);

#endif
