/* `avoctl show`: one candidate (GET /v1/candidates/{id}) for a person:
 * where it came from, how it scored per configuration, what compiling it
 * said, its counters and energy, then its diff against its parent (or its
 * source). Pure: JSON in, text out. */
#ifndef AVOCTL_SHOW_H
#define AVOCTL_SHOW_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* with_source: print the source instead of the diff. The diff is the
 * candidate's "diff" field (the caller may fill it in from the diff route
 * when avod stored none). width: see avoctl_table_fit (0 = no limit).
 * Returns 0, -EINVAL when cand is not an object, -ENOMEM or -EIO. */
int avoctl_show_print(const json_t *cand, int with_source, size_t width, FILE *out);

/* A profile task (GET /v1/profiles/{id}, or a candidate's "profile"): why
 * and in which state, then, once it ran, its outcome and its counters in
 * the same lines and table as a candidate's. Returns 0, -EINVAL when prof is
 * not an object, -ENOMEM or -EIO. */
int avoctl_show_profile(const json_t *prof, size_t width, FILE *out);

#endif
