/* A problem package (kernels/<name>/problem.json): what a candidate computes,
 * on which sizes, how it is scored and which knobs the tune operator may turn.
 * Loaded and validated by avod (at submission), avo-worker and avo-harness.
 * Depends on jansson only, so the harness stays minimal. */
#ifndef AVO_PROBLEM_H
#define AVO_PROBLEM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#define AVO_PROBLEM_MAX_SIZES 16
#define AVO_PROBLEM_MAX_TENSORS 16
#define AVO_PROBLEM_MAX_KNOBS 16
#define AVO_PROBLEM_MAX_VALUES 64
/* screen.runs: at least the pairs a paired interval needs (the harness's
 * PAIRED_MIN_PAIRS) and timing.min_runs, at most this many. */
#define AVO_PROBLEM_SCREEN_MIN_RUNS 10
#define AVO_PROBLEM_SCREEN_MAX_RUNS 10000

typedef enum { AVO_DTYPE_F32, AVO_DTYPE_F64, AVO_DTYPE_F16, AVO_DTYPE_BF16, AVO_DTYPE_I32 } avo_dtype;
typedef enum { AVO_ROLE_INPUT, AVO_ROLE_OUTPUT, AVO_ROLE_INOUT } avo_role;

typedef struct {
    char name[32];
    avo_dtype dtype;
    avo_role role;
    int rank;
    char *shape[8]; /* expressions over the named sizes */
    double scale;   /* inputs: random values uniform in [-scale, scale); 1 unless declared */
} avo_tensor_spec;

typedef struct {
    char name[64];
    int64_t size[AVO_PROBLEM_MAX_SIZES]; /* in the order of avo_problem.sizes */
    int profile;                         /* the counters pass profiles it ("counters.configs"; default every config) */
    int screen;                          /* timed in the screen ("screen.configs"; docs/evaluation.md, "Screening") */
    /* "screen.check_sizes": the sizes this config (outside the screen) is
     * checked at before the screen, each named size capped; has_check_size
     * 0 when none of its sizes is over a cap (it is checked as it is). */
    int has_check_size;
    int64_t check_size[AVO_PROBLEM_MAX_SIZES];
} avo_config_spec;

typedef struct {
    char name[32];
    int nvalues;
    int64_t values[AVO_PROBLEM_MAX_VALUES];
    int64_t dflt; /* the seed's value */
} avo_knob_spec;

typedef struct {
    double rel_l2;
    double max_abs;
} avo_tolerance;

typedef struct avo_problem {
    char name[128];     /* e.g. "cpu/sgemm" (path under kernels/) */
    char dir[PATH_MAX]; /* absolute directory it was loaded from */
    char backend[16];   /* "cpu" (or "cuda") */
    char entry[64];     /* symbol the candidate exports */
    int nsizes;
    char sizes[AVO_PROBLEM_MAX_SIZES][32];
    int ntensors;
    avo_tensor_spec tensors[AVO_PROBLEM_MAX_TENSORS];
    int nconfigs;
    avo_config_spec *configs;
    char *flops;          /* expression, may be NULL */
    char *bytes;          /* expression, may be NULL */
    char score_metric[8]; /* "flops" or "bytes" */
    char unit[16];        /* "GFLOP/s" or "GB/s" */
    avo_tolerance tol[5]; /* indexed by avo_dtype */
    char reference[256];  /* file name relative to dir */
    char seed[256];       /* file name relative to dir */
    char seed_name[64];   /* "" = the package's default seed, else the entry of "seeds" in use */
    char baseline[256];   /* optional: a vendor implementation timed beside the candidate ("" = none) */
    int ncflags;
    char *cflags[32]; /* cc flags (cpu) or nvcc flags (cuda) */
    int nknobs;
    avo_knob_spec knobs[AVO_PROBLEM_MAX_KNOBS];
    int nconstraints;
    char *constraints[16];     /* expressions over knob names; nonzero = allowed */
    double timing_max_seconds; /* per configuration */
    int timing_min_runs;
    double timing_rse; /* target relative standard error */
    int check_input_sets;
    /* "check": {"rows": {"dims": [...], "sample": N}} (cuda only): a timed
     * call is checked on N random rows, a row being one index over the
     * first check_rows_dims entries of every output's shape (all the same);
     * the reference exports avo_reference_rows for it (docs/problems.md).
     * check_rows_dims 0: every check is of the whole outputs. */
    int check_rows_dims;
    int check_rows_sample;
    /* "screen": {"configs": [names], "runs": N[, "check_sizes": {SIZE:
     * cap}]}: a paired evaluation asked to screen checks the other configs
     * (at their check_size where capped), times the configs marked .screen
     * first, N pairs each, and stops there when the candidate is slower
     * than the against beyond noise. screen_runs 0: no screen declared. */
    int screen_runs;
    /* "validate": sizes on which the reference is checked against its own
     * float64 twin (avo_reference_f64); has_validate 0 = not declared. */
    int has_validate;
    int64_t validate_size[AVO_PROBLEM_MAX_SIZES];
    /* "roofline": the machine's attainable GFLOP/s and GB/s; 0 = not declared. */
    double roofline_gflops;
    double roofline_gbps;
    /* "policy": the candidate-policy rules this problem relaxes, a bit per
     * enum avo_policy_rule (avo_policy_rules.h); 0 = every rule holds. */
    unsigned policy_relax;
    json_t *json; /* the parsed file, owned */
} avo_problem;

/* Load and validate <dir>/problem.json. On failure returns a negative errno-style
 * int and writes "FILE: FIELD: reason" into err. */
int avo_problem_load(avo_problem *p, const char *dir, char *err, size_t errlen);
/* The same from problem.json's text as a job pinned it (docs/jobs.md,
 * "Pinned problems"): what it names is still looked up in dir. */
int avo_problem_load_text(avo_problem *p, const char *dir, const char *text, char *err, size_t errlen);
void avo_problem_free(avo_problem *p);
/* Switch p to one of the package's named seeds ("seeds" in problem.json):
 * its file, knobs and constraints replace the default seed's. NULL or ""
 * keeps the default. -ENOENT with the names it has when there is no such
 * seed. */
int avo_problem_use_seed(avo_problem *p, const char *name, char *err, size_t errlen);

/* The index of the size configuration called name; -ENOENT, with err
 * "problem P has no configuration 'X' (it has: A, B, ...)", when it has
 * none by that name. */
int avo_problem_config_index(const avo_problem *p, const char *name, char *err, size_t errlen);

/* Resolve a problem name ("cpu/sgemm") under a kernels root directory, refusing
 * names that escape it ("..", absolute paths). */
int avo_problem_resolve(const char *kernels_root, const char *name, char *out, size_t outlen, char *err, size_t errlen);

/* A row-subset check's geometry at sizes `size` (check.rows): the number
 * of rows, and per tensor the elements of one row (0 for inputs). Returns
 * 0, -EINVAL when the problem declares no check.rows, or a shape's error. */
int avo_problem_rows_at(const avo_problem *p, const int64_t *size, int64_t *rows, int64_t *row_elems, char *err,
                        size_t errlen);

/* Knob configuration helpers used by the tune operator. values[i] is the value
 * of knob i. Returns 1 when every constraint holds, 0 when one fails, <0 on error. */
int avo_problem_knobs_allowed(const avo_problem *p, const int64_t *values);
/* The index of the first constraint that values break (or cannot be
 * evaluated on), -1 when they all hold: for messages naming it. */
int avo_problem_constraint_failed(const avo_problem *p, const int64_t *values);

/* Render the candidate source for a knob configuration: a "#define NAME value"
 * block followed by the seed source, numbered as file seed_name (NULL: the
 * package's seed file) for compiler messages. Caller frees *out. */
int avo_problem_render(const avo_problem *p, const int64_t *values, const char *seed_src, const char *seed_name,
                       char **out);
/* A source rendered by avo_problem_render without its knob header (the
 * defines and the #line), so it can seed a job and be rendered again;
 * any other text is returned as is. */
const char *avo_problem_unrender(const char *src);
/* The values a job starts from, in spec order: each knob's default,
 * overridden by the integer entry of the same name in `knobs`
 * ({"BM": 64}; NULL for none). Validation is the caller's. */
void avo_problem_start_knobs(const avo_problem *p, json_t *knobs, int64_t *values);

/* Evaluate an expression (flops, bytes, a shape) over the sizes of
 * configuration `config`. Returns 0 or a negative int with a message in err. */
int avo_problem_eval_config(const avo_problem *p, int config, const char *expr, double *out, char *err, size_t errlen);

/* The same over an explicit size vector (in the order of p->sizes), e.g.
 * p->validate_size. */
int avo_problem_eval_sizes(const avo_problem *p, const int64_t *size, const char *expr, double *out, char *err,
                           size_t errlen);
int avo_problem_tensor_elems_at(const avo_problem *p, const int64_t *size, int tensor, int64_t *elems, char *err,
                                size_t errlen);

/* Element count of tensor `tensor` in configuration `config`. */
int avo_problem_tensor_elems(const avo_problem *p, int config, int tensor, int64_t *elems, char *err, size_t errlen);

const char *avo_problem_dtype_name(avo_dtype d);
size_t avo_problem_dtype_size(avo_dtype d);

#endif
