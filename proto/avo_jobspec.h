/* The job spec (docs/jobs.md): what `avoctl submit` sends and avod stores.
 * Parsing validates every field and fills defaults; the normalised JSON is
 * what lands in jobs.spec. */
#ifndef AVO_JOBSPEC_H
#define AVO_JOBSPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char problem[128];
    char op[16];              /* "tune" */
    char target[16];          /* "cpu" or "sm_90"...; "" = from the problem's backend */
    int evaluations;          /* budget: evaluations, > 0 */
    double wall_seconds;      /* budget: wall time, 0 = none */
    int islands;              /* concurrent evaluations in flight */
    double epsilon;           /* commit rule slack */
    int priority;
    uint64_t rng_seed;        /* operator randomness; 0 = chosen at submission */
} avo_jobspec;

/* Returns 0 and a new normalised object in *normalized (may be NULL), or a
 * negative int with "FIELD: reason" in err. */
int avo_jobspec_parse(json_t *in, avo_jobspec *out, json_t **normalized, char *err, size_t errlen);

/* "cpu" or "sm_" followed by digits. */
int avo_jobspec_target_valid(const char *t);

#endif
