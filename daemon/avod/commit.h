/* The commit rule that knows the noise (docs/jobs.md, "The commit rule"):
 * whether one correct candidate joins its island's lineage, decided on its
 * paired measurement against the island's best when the result has one,
 * and on absolute aggregates otherwise. Pure: the engine (evolve.c) and the
 * agent's commit tool (agent.c) both ask it, so they never disagree. */
#ifndef AVO_COMMIT_H
#define AVO_COMMIT_H

#include <jansson.h>
#include <stddef.h>

#include "avo_jobspec.h"

typedef struct {
    double min_gain;   /* commit.min_gain: the gain a commit must clear */
    double confidence; /* commit.confidence: of the lower bound that must clear it */
    double epsilon;    /* exploration slack: the unpaired fallback only */
} avo_commit_params;

typedef struct {
    int commit;
    int paired;         /* decided on a paired measurement */
    int screened;       /* ... which screened it out: the screen's ratio and interval, never a commit */
    int nconfigs;       /* screened: the configurations the screen timed */
    int pair_failed;    /* a pairing was attempted and failed (paired.error): never a commit */
    json_int_t against; /* paired: what it was measured against */
    double ratio, low, ci_lo, ci_hi;
    double confidence; /* paired: of ci (a screen's look may take a higher one than commit.confidence) */
    double threshold;  /* unpaired: the aggregate a commit needs */
    char reason[512];  /* not committed: why; unpaired: why unpaired */
} avo_commit_verdict;

/* The anchor: a paired commit also needs the candidate's absolute score
 * within max(AVO_COMMIT_ANCHOR_MIN, AVO_COMMIT_ANCHOR_FACTOR x min_gain) of
 * the island's best as recorded (2% on GPU problems, 8% on CPU ones with the
 * default min_gain), so an against that slows itself when paired gains a
 * candidate at most that much. */
#define AVO_COMMIT_ANCHOR_MIN 0.02
#define AVO_COMMIT_ANCHOR_FACTOR 4.0

/* From a stored job spec. A spec without "commit" (a job submitted before
 * the rule existed) keeps the rule it was started under: min_gain 0. */
void avo_commit_params_from_spec(json_t *spec, avo_commit_params *p);

/* One correct candidate with aggregate `aggregate` and result member
 * `paired` (NULL when absent) against its island's best (`best`, candidate
 * `best_cand`). A paired member with "screened_out" (the screen's
 * measurement: slower beyond noise on the screen's configurations) is never
 * committed, whatever its figures. */
void avo_commit_judge(const avo_commit_params *p, json_t *paired, double aggregate, double best, json_int_t best_cand,
                      avo_commit_verdict *v);

/* The verdict as recorded with the result ("rule" of its consume entry). */
json_t *avo_commit_verdict_json(const avo_commit_params *p, const avo_commit_verdict *v);

/* The pairing_failed event's data: a pairing attempted and failed (the
 * against crashed, hung, failed its checks or did not compile, or the
 * candidate made it fail), so no gain was shown: {candidate, island,
 * against (null when the result does not say), reason}. An island whose
 * best keeps failing as the against commits nothing; the events make that
 * stall visible. */
json_t *avo_commit_pairing_failed(const avo_commit_verdict *v, json_int_t cand, int island);

/* The not_significant event's data: a paired verdict that did not commit. */
json_t *avo_commit_not_significant(const avo_commit_params *p, const avo_commit_verdict *v, json_int_t cand,
                                   int island);

/* The screened_out event's data (docs/evaluation.md, "Screening"): a
 * result the screen stopped, from its paired member (the screen's): by how
 * much it was slower, with the interval, on which configurations. NULL when
 * paired says no screening stopped it. */
json_t *avo_commit_screened_out(json_t *paired, double confidence, json_int_t cand, int island);

/* What a person (or the agent) reads for a verdict that did not commit:
 * "candidate 12 is 0.3% faster than the island's best (95% interval
 * -0.4% .. +1.1%): not a significant gain; a commit needs a lower bound
 * above +0.5%". */
void avo_commit_explain(const avo_commit_params *p, const avo_commit_verdict *v, json_int_t cand, double aggregate,
                        double best, char *out, size_t outlen);

#endif
