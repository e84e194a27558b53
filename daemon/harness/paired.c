/* Paired A/B statistics: the speed ratio with a bootstrap confidence interval (paired.h). */
#include "paired.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* splitmix64: small, fast, and good enough to draw resample indices. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) (n < 2^32; the bias is under n / 2^32). */
static int draw(uint64_t *s, int n)
{
    return (int)(((next_u64(s) >> 32) * (uint64_t)n) >> 32);
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* A config's samples sorted, and each pair's rank in them (rank[i]: the
 * position of v[i] in sorted): a resample's median is then read from rank
 * counts, with no sort per resample. order: n ints of scratch. */
static void rank_values(const double *v, int n, double *sorted, int *order, int *rank)
{
    for (int i = 0; i < n; i++)
        sorted[i] = v[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    /* Equal values share a value, not a rank: any assignment of their
     * ranks gives the same order statistics. */
    for (int i = 0; i < n; i++)
        order[i] = 0;
    for (int i = 0; i < n; i++) {
        int lo = 0, hi = n;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (sorted[mid] < v[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        while (order[lo]) /* the next free slot among equal values */
            lo++;
        order[lo] = 1;
        rank[i] = lo;
    }
}

/* The median of a sample: the middle value, or the mean of the two middle
 * ones (as avo_timing_stats_compute). count[k]: how often sorted[k] was drawn. */
static double median_of_counts(const double *sorted, const int *count, int n)
{
    const int lo = (n - 1) / 2, hi = n / 2;
    double vlo = NAN;
    int seen = 0;
    for (int k = 0; k < n; k++) {
        const int next = seen + count[k];
        if (lo >= seen && lo < next)
            vlo = sorted[k];
        if (hi >= seen && hi < next)
            return (vlo + sorted[k]) / 2;
        seen = next;
    }
    return NAN;
}

static double median_sorted(const double *s, int n)
{
    return (s[(n - 1) / 2] + s[n / 2]) / 2;
}

/* Quantile q of n sorted values, interpolated between neighbours. */
static double quantile(const double *s, int n, double q)
{
    const double h = q * (n - 1);
    const int i = (int)floor(h);
    if (i >= n - 1)
        return s[n - 1];
    return s[i] + (h - i) * (s[i + 1] - s[i]);
}

static void interval(double *v, int n, double ratio, double confidence, avo_paired_est *e)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    e->ratio = ratio; /* the point estimate: of the pairs as measured */
    e->low = quantile(v, n, 1 - confidence);
    e->ci_lo = quantile(v, n, (1 - confidence) / 2);
    e->ci_hi = quantile(v, n, (1 + confidence) / 2);
}

/* The median of n values (v reordered: sorted). */
static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return median_sorted(v, n);
}

int avo_paired_bootstrap(const avo_paired_config *cfg, int ncfg, double confidence, int resamples,
                         avo_paired_est *per_config, avo_paired_est *aggregate)
{
    if (!cfg || ncfg < 1 || !(confidence > 0 && confidence < 1) || resamples < 1 || !per_config || !aggregate)
        return -EINVAL;
    size_t total = 0;
    int maxn = 0;
    for (int c = 0; c < ncfg; c++) {
        if (cfg[c].n < 1 || !cfg[c].a || !cfg[c].b)
            return -EINVAL;
        for (int i = 0; i < cfg[c].n; i++)
            if (!(isfinite(cfg[c].a[i]) && cfg[c].a[i] > 0 && isfinite(cfg[c].b[i]) && cfg[c].b[i] > 0))
                return -EINVAL;
        total += (size_t)cfg[c].n;
        maxn = cfg[c].n > maxn ? cfg[c].n : maxn;
    }
    int rc = 0;
    /* Everything the resamples need, allocated once. */
    double *sorted = malloc(total * sizeof *sorted);
    int *rank = malloc(total * sizeof *rank);
    int *count = malloc((size_t)maxn * sizeof *count);
    double *scratch = malloc(2 * (size_t)maxn * sizeof *scratch);
    double *logr = malloc((size_t)resamples * (size_t)ncfg * sizeof *logr);
    double *agg = malloc((size_t)resamples * sizeof *agg);
    double *col = malloc((size_t)resamples * sizeof *col);
    if (!sorted || !rank || !count || !scratch || !logr || !agg || !col) {
        rc = -ENOMEM;
        goto cleanup;
    }
    double log_point = 0;
    size_t off = 0;
    for (int c = 0; c < ncfg; c++) {
        const int n = cfg[c].n;
        double *l = scratch, *m = scratch + maxn;
        for (int i = 0; i < n; i++)
            l[i] = log(cfg[c].b[i] / cfg[c].a[i]);
        rank_values(l, n, sorted + off, count, rank + off);
        log_point += median_sorted(sorted + off, n);
        for (int i = 0; i < n; i++)
            m[i] = cfg[c].a[i];
        per_config[c].median_a = median_of(m, n);
        for (int i = 0; i < n; i++)
            m[i] = cfg[c].b[i];
        per_config[c].median_b = median_of(m, n);
        off += (size_t)n;
    }
    uint64_t state = 0x5eed0fa1b0075eedULL ^ (uint64_t)total;
    for (int s = 0; s < resamples; s++) {
        double lsum = 0;
        off = 0;
        for (int c = 0; c < ncfg; c++) {
            const int n = cfg[c].n;
            const int *rl = rank + off;
            for (int k = 0; k < n; k++)
                count[k] = 0;
            for (int k = 0; k < n; k++)
                count[rl[draw(&state, n)]]++;
            const double l = median_of_counts(sorted + off, count, n);
            logr[(size_t)c * (size_t)resamples + (size_t)s] = l;
            lsum += l;
            off += (size_t)n;
        }
        agg[s] = exp(lsum / ncfg);
    }
    off = 0;
    for (int c = 0; c < ncfg; c++) {
        const double *l = logr + (size_t)c * (size_t)resamples;
        for (int s = 0; s < resamples; s++)
            col[s] = exp(l[s]);
        interval(col, resamples, exp(median_sorted(sorted + off, cfg[c].n)), confidence, &per_config[c]);
        off += (size_t)cfg[c].n;
    }
    interval(agg, resamples, exp(log_point / ncfg), confidence, aggregate);
    aggregate->median_a = aggregate->median_b = NAN;
cleanup:
    free(sorted);
    free(rank);
    free(count);
    free(scratch);
    free(logr);
    free(agg);
    free(col);
    return rc;
}
