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
    const char *seed_file;      /* --seed FILE: read and sent as its text */
    const char *seed_candidate; /* --seed-candidate ID (transfer, `fork`) */
    const char *seed_name;      /* --seed-name NAME: one of the problem's named seeds */
    const char *target_score;
    const char *patience;         /* stagnation.patience */
    const char *stagnation_limit; /* stagnation.limit */
    const char *gpu_seconds;      /* budget.gpu_seconds */
    const char *energy_joules;    /* budget.energy_joules */
    const char *migrate_every;
    const char *min_gain;   /* commit.min_gain */
    const char *confidence; /* commit.confidence */
    const char *name;       /* --name: the job's name */
    const char *labels;     /* --label K=V[,K=V...]: merged into the file's labels */
} avoctl_spec_flags;

/* Largest --seed file read; avod's own (smaller) limit gives its message. */
#define AVOCTL_SEED_FILE_LIMIT (16u << 20)

/* Validate the flags and merge them into *spec: a new object when *spec is
 * NULL, else the given one (a spec file), flags winning and "budget",
 * "stagnation", "commit" and "seed" merged field by field (a seed flag replaces the
 * file's seed source but keeps its knobs). --seed FILE is read here: the
 * spec carries {"file": basename, "source": text}.
 * Returns 0; -EINVAL with err naming the flag (a usage error); another
 * negative errno with err naming the --seed file when it cannot be read
 * (-ENOENT, -EACCES, -EISDIR, -EFBIG, -EILSEQ when not UTF-8 text...); or
 * -ENOMEM. On failure *spec is left as it was. */
int avoctl_spec_build(const avoctl_spec_flags *f, json_t **spec, char *err, size_t errlen);

#endif
