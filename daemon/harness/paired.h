/* Paired A/B statistics (docs/evaluation.md, "Paired measurement"): the
 * candidate's and the against's timed calls of each config, pair i of both
 * on the same input set, summed up as the speed ratio of the two with a
 * bootstrap-percentile confidence interval. Pure functions: no clock, no
 * global state; the same pairs give the same interval. */
#ifndef AVO_HARNESS_PAIRED_H
#define AVO_HARNESS_PAIRED_H

/* Resamples of the bootstrap the harness uses. */
#define AVO_PAIRED_RESAMPLES 2000

/* One config's pairs: a[i] the candidate's time of pair i, b[i] the
 * against's; n >= 1, every time finite and > 0. */
typedef struct {
    const double *a, *b;
    int n;
} avo_paired_config;

/* A ratio (the against's time over the candidate's: > 1, the candidate is
 * faster) with its one-sided lower bound and its two-sided interval at the
 * confidence asked for. */
typedef struct {
    double ratio, low, ci_lo, ci_hi;
    double median_a, median_b; /* per config: each side's own median time (aggregate: unset) */
} avo_paired_est;

/* Per config (per_config[c], c < ncfg): the median of the pairs' ratios
 * b[i] / a[i] (of their logarithms, so an even count takes the geometric
 * mean of the middle two); aggregate: the geometric mean of those ratios.
 * The pairs' own ratios, not the ratio of the two sides' medians: a burst
 * of load that lands on one call of a pair moves that pair's ratio, up or
 * down at random, and the median of the ratios barely, while the ratio of
 * medians jumps whenever load pushes one side's median across a gap in
 * its times (a config with calls hit by preemption and calls not: A/A
 * ratios of medians 0.67-2.04, of pairs 0.99-1.02, on the same ten
 * evaluations; docs/evaluation.md). The interval: `resamples` times,
 * every config's pairs resampled with replacement (a pair stays a pair)
 * and the ratios recomputed; low is the (1 - confidence) quantile of the
 * resampled values, ci the (1 - confidence) / 2 and (1 + confidence) / 2
 * quantiles. The generator is seeded from a fixed constant and the total
 * pair count: deterministic. Every buffer is allocated once, before the
 * first resample. 0, -EINVAL (ncfg < 1, a config without pairs, a time
 * not finite or not > 0, confidence outside (0, 1), resamples < 1), or
 * -ENOMEM. */
int avo_paired_bootstrap(const avo_paired_config *cfg, int ncfg, double confidence, int resamples,
                         avo_paired_est *per_config, avo_paired_est *aggregate);

#endif
