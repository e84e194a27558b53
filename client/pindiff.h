/* `avoctl problem diff JOB` (GET /v1/jobs/{id}/problem/diff) for a person:
 * the package hash the job pinned and the one on disk now, the files that
 * differ, then the unified diffs avod made of the texts the job keeps
 * (problem.json, its seed). Pure: JSON in, text out. */
#ifndef AVOCTL_PINDIFF_H
#define AVOCTL_PINDIFF_H

#include <stdio.h>
#include <jansson.h>

/* Returns 0, -EINVAL when body is not an object, -EIO. */
int avoctl_pindiff_print(const json_t *body, FILE *out);

#endif
