/* Timing for the harness: a monotonic clock, a last-level cache flush
 * between timed CPU runs, summary statistics, and how a GPU run's event
 * times make a sample. */
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

/* One GPU sample from a call's event times (gpu.h, avo_gpu_times):
 * seconds (start -> end mark) less tail_s (stream end -> end mark) is the
 * call's own stream, all on the GPU's clock; less overhead_s, the same
 * protocol around no call. The tail holds the host's latency after the
 * call, which grows with the call's length (H200: 7 us after an empty call,
 * 8 after 200 us, 8-18 after 1.5 ms), and any work the call left running on
 * other streams after its own stream ended. Of the tail, the part beyond
 * tail_allow_s (the calibrated latency) plus slack x the stream's time is
 * counted: the host is left out, work on other streams beyond that bound is
 * not. Never below 1 ns. *charged (may be NULL) gets the part of the tail
 * counted (0 when it is all the host's). */
double avo_gpu_sample(double seconds, double tail_s, double overhead_s, double tail_allow_s, double slack,
                      double *charged);

#endif
