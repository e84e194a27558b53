/* Timing for the harness: a monotonic clock, a last-level cache flush
 * between timed CPU runs, summary statistics, and how a GPU run's event
 * times make a sample. */
#ifndef AVO_HARNESS_TIMING_H
#define AVO_HARNESS_TIMING_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned char *buf;
    size_t bytes;
} avo_flusher;

typedef struct {
    int runs;
    double median, min, max, mean, stddev, rse;
} avo_stats;

double avo_timing_now(void);

/* Seconds the calling thread has spent ready to run and waiting for a CPU
 * (its run_delay in /proc/thread-self/schedstat), or -1 where the kernel
 * keeps no such count. */
double avo_timing_run_delay(void);

/* Size: twice the LLC of cpu0 (sysfs), or 64 MiB when sysfs does not say. */
int avo_timing_flusher_open(avo_flusher *f);
void avo_timing_flusher_run(avo_flusher *f);
void avo_timing_flusher_close(avo_flusher *f);

/* Summarise n >= 1 samples (t is reordered). rse is the relative standard
 * error of the mean: stddev / sqrt(n) / mean. */
void avo_timing_stats_compute(double *t, int n, avo_stats *s);

/* Why a config's timing loop stops after its latest sample. It needs
 * min_runs samples and its random checks done (checks_done); then it stops
 * when the relative standard error of the mean (avo_stats.rse) is within
 * the problem's timing.rse target, or its calls used max_s, or it made its
 * most checks at the floor rate (at_floor), or it has AVO_TIMING_MAX_RUNS
 * samples. AVO_STOP_NONE: go on. */
typedef enum { AVO_STOP_NONE = 0, AVO_STOP_RSE, AVO_STOP_TIME, AVO_STOP_CHECKS, AVO_STOP_RUNS } avo_timing_stop_t;

#define AVO_TIMING_MAX_RUNS 100000

avo_timing_stop_t avo_timing_stop(int n, int min_runs, int checks_done, int at_floor, double rse, double target,
                                  double spent_s, double max_s);

/* "rse", "max_seconds", "check_floor", "max_runs" (NULL for NONE): the
 * result's stopped_by. */
const char *avo_timing_stop_name(avo_timing_stop_t s);

/* A config is noisy when the rse its timing ended with is over the target:
 * every stop but the target's own (the time budget, the check floor, the
 * run cap) can leave it there. At the target is not noisy, as the stopping
 * rule stops there; an rse that is not a number is noisy. */
int avo_timing_noisy(double rse, double target);

/* A CUDA lane's protocol around no call (its calibration) is measured once
 * in its runner and kept for later configs while it is younger than
 * AVO_TIMING_CAL_MAX_AGE_S and the SM clock stays within
 * AVO_TIMING_CAL_CLOCK_BAND of the clock it was measured at: the protocol
 * is the runner's and the host's, not the config's. Whether a calibration
 * age_s old, made at cal_mhz, is stale now that the clock reads mhz (either
 * 0: unknown, and only the age decides); never made (cal_mhz ignored) is
 * stale, age_s < 0. */
#define AVO_TIMING_CAL_MAX_AGE_S 2.0
#define AVO_TIMING_CAL_CLOCK_BAND 0.05
int avo_timing_calibration_stale(double age_s, unsigned cal_mhz, unsigned mhz);

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
double avo_timing_gpu_sample(double seconds, double tail_s, double overhead_s, double tail_allow_s, double slack,
                             double *charged);

/* A CPU sample: the checker's round trip less its calibrated empty round
 * trip. 0 with *sample set, or -1 when the call came back faster than an
 * empty round trip (nothing honest does: the overhead was moved, or the
 * work was not inside the call). */
int avo_timing_cpu_sample(double round_trip_s, double overhead_s, double *sample);

/* Which timed calls get checked. The decision is made after a call, from a
 * generator seeded from the kernel's entropy (never the recorded input
 * seed), so nothing the candidate can see tells a checked call from an
 * unchecked one. */
typedef struct {
    uint64_t state;
} avo_check_rng;

void avo_timing_rng_init(avo_check_rng *g);
/* Uniform in [0, 1). */
double avo_timing_rng_next(avo_check_rng *g);

/* The probability a sampled call is checked: reference time spent at about
 * the calls' own time (call_s / ref_s), never under q_min, at most 1. A
 * cheap reference checks every call; an expensive one q_min of them. */
double avo_timing_check_rate(double call_s, double ref_s, double q_min);

/* The checked samples are a random subset of all the samples: 0 when they
 * look like it, -1 when there are at least two and even the fastest of them
 * is more than factor x the median of all (the unchecked calls ran faster:
 * work skipped where no check landed). */
int avo_timing_checked_consistent(const double *checked, int nchecked, double median, double factor);

/* The one-sided Mann-Whitney test that the b samples are drawn smaller than
 * the a samples: its p-value under the hypothesis that a and b come from
 * one distribution (the normal approximation of the rank-sum statistic,
 * with the continuity and tie corrections). Exact whatever that
 * distribution's shape, so a bimodal one (calls hit by bursts of load)
 * does not make it cry wolf. 1 when a side is empty; -1 (not a p-value)
 * when out of memory. */
double avo_timing_rank_p_smaller(const double *a, int na, const double *b, int nb);

/* One stratum of the stratified test: its a and b samples. */
typedef struct {
    const double *a;
    int na;
    const double *b;
    int nb;
} avo_rank_stratum;

/* The same test over strata whose samples may differ in scale (each
 * configuration's times): van Elteren's stratified rank-sum test, each
 * stratum's ranks taken within it and its statistic weighted 1 / (n + 1).
 * Valid when a and b are one distribution within each stratum, whatever
 * the strata's sizes and splits; one stratum gives
 * avo_timing_rank_p_smaller. Strata with an empty side count for
 * nothing; 1 when none is left; -1 when out of memory. */
double avo_timing_rank_p_smaller_strata(const avo_rank_stratum *st, int ns);

#endif
