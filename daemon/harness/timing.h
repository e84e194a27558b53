/* Wall-clock timing for the CPU harness: a monotonic clock, a last-level
 * cache flush between timed runs, and summary statistics. */
#ifndef AVO_HARNESS_TIMING_H
#define AVO_HARNESS_TIMING_H

#include <stddef.h>

typedef struct {
    unsigned char *buf;
    size_t bytes;
} avo_flusher;

typedef struct {
    int runs;
    double median, min, max, mean, stddev, rse;
} avo_stats;

double avo_now(void);

/* Size: twice the LLC of cpu0 (sysfs), or 64 MiB when sysfs does not say. */
int avo_flusher_init(avo_flusher *f);
void avo_flusher_run(avo_flusher *f);
void avo_flusher_free(avo_flusher *f);

/* Summarise n >= 1 samples (t is reordered). rse is the relative standard
 * error of the mean: stddev / sqrt(n) / mean. */
void avo_stats_compute(double *t, int n, avo_stats *s);

#endif
