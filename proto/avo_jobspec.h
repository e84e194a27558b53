/* The job spec (docs/jobs.md): what `avoctl submit` sends and avod stores.
 * Parsing validates every field and fills defaults; the normalised JSON is
 * what lands in jobs.spec. */
#ifndef AVO_JOBSPEC_H
#define AVO_JOBSPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* name: 1 to 64 characters, no control characters. labels: at most 16;
 * a key is 1 to 63 characters [a-z0-9._/-] starting with a letter or
 * digit, a value a string of at most 128 characters, no control
 * characters. */
#define AVO_JOBSPEC_NAME_MAX 64
#define AVO_JOBSPEC_LABELS_MAX 16
#define AVO_JOBSPEC_LABEL_KEY_MAX 63
#define AVO_JOBSPEC_LABEL_VALUE_MAX 128

typedef struct {
    char problem[128];
    char op[16];                  /* "tune" */
    char target[16];              /* "cpu" or "sm_90"...; "" = from the problem's backend */
    char gpu[64];                 /* a GPU model ("H200"): only workers with it claim; "" = any of the target */
    int evaluations;              /* budget: evaluations, > 0 */
    double wall_seconds;          /* budget: wall time, 0 = none */
    double gpu_seconds;           /* budget: GPU-seconds, 0 = none */
    double energy_joules;         /* budget: energy, 0 = none */
    double tokens;                /* budget (agent jobs): LLM tokens, input + output, 0 = none */
    double cost_usd;              /* budget (agent jobs): LLM cost in USD, 0 = none */
    char agent_provider[64];      /* agent jobs: one of avod's configured providers */
    int agent_max_turns;          /* agent jobs: model turns per step */
    int agent_step_tokens;        /* agent jobs: tokens per step */
    int agent_supervise_after;    /* agent jobs: steps in a row without a commit before a supervisor call */
    int agent_supervise_failures; /* agent jobs: failed evaluations in a row before a supervisor call */
    int agent_failed_steps;       /* agent jobs: failed steps in a row (provider errors, bad answers) failing the job */
    int agent_backoff_s;          /* agent jobs: wait after the first failed step, doubled after each further one, */
    int agent_backoff_max_s;      /* up to this */
    double target_score;          /* stop once the best aggregate reaches it, 0 = none */
    int patience;                 /* evaluations without a commit before an island is stagnant */
    int stagnation_limit;         /* evaluations without a commit (any island) that end the job, 0 = none */
    int islands;                  /* lineages, each with inflight evaluations in flight */
    int inflight;                 /* operator_params.inflight: tune proposals per island queued or running at once */
    int migrate_every;            /* commits between migrations of the global best */
    double epsilon;               /* commit rule slack (the unpaired fallback only) */
    double min_gain;              /* commit.min_gain in [0, 1); < 0: the backend's default, set at submission */
    double confidence;            /* commit.confidence in (0, 1) */
    int priority;
    uint64_t rng_seed; /* operator randomness; 0 = chosen at submission */
    /* The seed: the package's (all empty), a file's source (seed_file names
     * it, seed_source holds it), or another job's candidate (transfer). */
    char seed_name[64]; /* one of the package's named seeds, "" = its default */
    char seed_file[256];
    char *seed_source; /* owned; avo_jobspec_clear frees it */
    int64_t seed_candidate;
    json_t *seed_knobs;                  /* owned: {"BM":64,...} or NULL */
    json_t *toolchain;                   /* owned: canonical constraints (avo_toolchain.h), or NULL: any worker */
    char name[AVO_JOBSPEC_NAME_MAX + 1]; /* a human name, "" = none; not unique */
    json_t *labels;                      /* owned: {"key": "value", ...} (see below), or NULL */
} avo_jobspec;

/* The limits of the spec's numbers: avod refuses past them, and avoctl
 * checks its flags against the same ones (one source, so the two agree). */
#define AVO_JOBSPEC_MAX_ISLANDS 256
#define AVO_JOBSPEC_MAX_INFLIGHT 8
#define AVO_JOBSPEC_MAX_COUNT 1000000 /* evaluations, patience, stagnation limit, migrate_every */
#define AVO_JOBSPEC_MIN_SECONDS 1.0   /* wall_seconds, gpu_seconds */
#define AVO_JOBSPEC_MAX_SECONDS 1e9
#define AVO_JOBSPEC_MAX_JOULES 1e12
#define AVO_JOBSPEC_MAX_PRIORITY 1000 /* priority in [-MAX, MAX] */

/* commit's defaults: a GPU problem's paired ratios are tight, a shared
 * CPU's are not (docs/jobs.md, "The commit rule"). */
#define AVO_COMMIT_MIN_GAIN_CUDA 0.005
#define AVO_COMMIT_MIN_GAIN_CPU 0.02
#define AVO_COMMIT_CONFIDENCE 0.95

/* Returns 0 and a new normalised object in *normalized (may be NULL), or a
 * negative int with "FIELD: reason" in err. The normalised spec keeps the
 * seed's file name and knobs but not its source (stored once, by content). */
int avo_jobspec_parse(json_t *in, avo_jobspec *out, json_t **normalized, char *err, size_t errlen);
void avo_jobspec_clear(avo_jobspec *s);
/* 1 when k is a valid label key (see labels above). */
int avo_jobspec_label_key_ok(const char *k);

/* Once the problem's backend is known (avod, at submission): an unset
 * commit.min_gain takes the backend's default, in s and in the normalised
 * spec, so the stored spec says what applied. */
void avo_jobspec_commit_resolve(avo_jobspec *s, json_t *normalized, int cuda);

/* "cpu" or "sm_" followed by digits. */
int avo_jobspec_target_valid(const char *t);

#endif
