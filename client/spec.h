/* Building a job spec (docs/jobs.md) from `avoctl submit` flags. */
#ifndef AVOCTL_SPEC_H
#define AVOCTL_SPEC_H

#include <stddef.h>
#include <jansson.h>

/* The flags as typed; NULL = not given (the field is omitted so that the
 * daemon's defaults apply). */
typedef struct {
    const char *problem;
    const char *operator_name;
    const char *evaluations;
    const char *islands;
    const char *wall;
    const char *epsilon;
    const char *priority;
} avoctl_spec_flags;

/* Validate the flags and merge them into *spec: a new object when *spec is
 * NULL, else the given one (a spec file), flags winning and "budget" merged
 * field by field. Returns 0, or -EINVAL with err naming the flag (*spec is
 * left as it was), or -ENOMEM. */
int avoctl_spec_build(const avoctl_spec_flags *f, json_t **spec, char *err, size_t errlen);

#endif
