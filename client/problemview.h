/* `avoctl problem list` and `avoctl problem show`: the packages avod can
 * run (GET /v1/problems, /v1/problems/{name}) for a person. */
#ifndef AVOCTL_PROBLEMVIEW_H
#define AVOCTL_PROBLEMVIEW_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* One row per package: name, backend, knobs, configurations, unit,
 * description (cut to width when width is nonzero); a package that does
 * not load shows its error instead. 0 or a negative int. */
int avoctl_problemview_list(const json_t *list, size_t width, FILE *out);

/* One package: what it computes, its tensors, configurations, knobs with
 * their values and defaults, constraints, seeds with their knob spaces,
 * files and package hash. 0 or a negative int. */
int avoctl_problemview_print(const json_t *problem, FILE *out);

#endif
