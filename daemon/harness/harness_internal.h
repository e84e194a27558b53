/* What harness.c and gputime.c share: the harness's bounds and check
 * codes, a lane and the run's context, and the calls between the two files
 * (the CUDA timing protocol lives in gputime.c; the evaluation around it in
 * harness.c). Internal to daemon/harness/; harness.h is the interface. */
#ifndef AVO_HARNESS_INTERNAL_H
#define AVO_HARNESS_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "avo_phases.h"
#include "avo_problem.h"
#include "counters.h"
#include "gpu.h"
#include "harness.h"
#include "refcache.h"
#include "resident.h"
#include "runner.h"
#include "tensors.h"
#include "timing.h"

/* Empty round trips measured before the candidate is loaded; their minimum
 * is subtracted from every CPU sample. */
#define PINGS 200
/* What that calibration may set: well above the ~16 us measured on a busy
 * 2-core VM, far below any call worth timing. A host slower than this is
 * measured with this bound subtracted. */
#define CPU_OVERHEAD_MAX 200e-6
/* Largest problem validated against float64 without "validate" sizes. */
#define VALIDATE_MAX_ELEMS (1 << 22)

/* Why a check failed; decides the outcome. */
enum { CHECK_OK = 0, CHECK_WRONG, CHECK_INPUTS, CHECK_CRASH, CHECK_TIMEOUT, CHECK_FORGED, CHECK_FAULT, CHECK_IDLE };

/* Checks of timed calls: each sampled call is checked afterwards with
 * probability q (avo_timing_check_rate: about as much reference time as call time,
 * never under CHECK_Q_MIN); a config's timing does not end before
 * CHECK_K_MIN such checks, and stops once CHECK_K_MAX were made where the
 * reference is expensive (q at its floor). */
#define CHECK_Q_MIN 0.25
#define CHECK_K_MIN 2
#define CHECK_K_MAX 8
/* The checked samples are a random subset of all: when even the fastest of
 * them is this much slower than the median of all, the calls that were not
 * checked ran faster than the ones that were (skipped work that the draw
 * happened to miss). An honest evaluation has each checked sample above
 * 1.5x its median only in a rare outlier, but on a loaded host a burst can
 * hold two of a few samples: a lane whose checked samples look so gets
 * checks until CHECK_K_JUDGE before it is judged (a skipping cheat meets a
 * skipped call in each further draw; a burst rarely covers four). */
#define CONSISTENCY_FACTOR 1.5
#define CHECK_K_JUDGE 4
/* After a config's calls, the runner's group is let run this long with no
 * command; more CPU than IDLE_CPU_MAX in it is work left running outside a
 * call. */
#define IDLE_PROBE_S 0.005
#define IDLE_CPU_MAX 0.002
/* Samples taken while the SM clock ran under this fraction of its maximum
 * (thermal or power throttling, a neighbour) are discarded and counted. */
#define MIN_CLOCK_FRACTION 0.75
#define MAX_DISCARDED 50
/* Calls of the protocol around no call before each config's timed runs. */
#define CALIBRATION_CALLS 32
/* A timed run's tail (its stream's end -> the end mark after the
 * device-wide synchronisation) up to this percentile of the calibration's
 * tails, plus TAIL_SLACK of the call's own time (the host's latency grows
 * with the call's length), is the host's and left out of the sample; beyond
 * it, it is counted (work left on other streams). */
#define TAIL_ALLOW_PERCENTILE 90
#define TAIL_SLACK 0.01
/* Caps on what a calibration may set (it runs in the candidate's process,
 * which could disturb it): the overhead subtracted (H200: about 2 us gated;
 * ungated it holds the host's launch gap, 8-19 us) and the tail allowance
 * (6-10 us). They bound what a candidate gains by skewing them. */
#define OVERHEAD_MAX_GATED 5e-6
#define OVERHEAD_MAX_UNGATED 25e-6
#define TAIL_ALLOW_MAX 15e-6
/* The same protocol is calibrated before the candidate loads (trusted);
 * what a later calibration in the candidate's process may set is capped at
 * that plus this drift (the host's latency moves a little over a minute). */
#define CAL_DRIFT_ABS 1e-6
#define CAL_DRIFT_REL 0.25
/* The runner measures a call's GPU time in the candidate's own process,
 * which could report less than it ran: a sample is never less than the
 * checker's own measure of the call (its round trip less the longest of an
 * empty call's, before the candidate loaded) divided by this. The longest,
 * not the median: a real call's round trip holds 30-50 us more protocol
 * than an empty call's (H200; not the kernel: a kernel of ours in place of
 * the empty call's memset added 4-6 us, nor the prep), which the median
 * left in and which raised 30 us kernels by the floor. */
#define CLAIM_FACTOR 2.0
/* Work a thread of the candidate's launches when the runner thaws, before
 * the gate (tests/hostile/gpu/computes_in_prep.cu), holds the SMs the gate
 * needs, and the start mark waits behind the gate: the gate's wait beyond
 * the longest before the load (plus this) is added to the sample. */
#define GATE_WAIT_SLACK 10e-6
/* After each call (and after its fetch) the checker's own context launches
 * one tiny kernel and waits for it: the GPU time-slices between the two
 * processes, so the probe waits for the switch from the runner's context
 * (H200: 155-200 us, now and then 240; an immediate second probe takes
 * 10-15 us) and for any work the call left running there. Before the
 * candidate loads, the same probe after each of BUSY_PROBES empty calls
 * gives the switch alone (p90). A probe longer than GPU_BUSY_FACTOR x p90 +
 * GPU_BUSY_SLACK is over; work left running is more than GPU_BUSY_OVER_MIN
 * probes over and more than GPU_BUSY_OVER_SHARE of a config's, or one probe
 * over GPU_BUSY_HARD_FACTOR x p90 + GPU_BUSY_HARD_SLACK. */
#define GPU_BUSY_FACTOR 1.5
#define GPU_BUSY_SLACK 50e-6
#define GPU_BUSY_OVER_MIN 3
#define GPU_BUSY_OVER_SHARE 0.1
#define GPU_BUSY_HARD_FACTOR 4.0
#define GPU_BUSY_HARD_SLACK 1e-3
#define BUSY_PROBES 16
/* A probe is timed by the host clock: the checker's thread waiting for a
 * CPU during it (schedstat's run_delay; a compile or another process on
 * the CPU the checker is pinned to) is counted as GPU wait. A probe over a
 * bound whose excess that wait explains is taken again, at most this many
 * times, and the last one is judged; the first cannot tell work left
 * running from the wait, so the call gives no sample (work that ended
 * during it earns nothing). */
#define BUSY_REPROBES 2
/* Room at the end of the shared region for a counters report. */
#define PROFILE_AREA (256u << 10)
/* A measurement this far above the declared roofline is impossible. */
#define ROOFLINE_SLACK 1.05
/* CPU problems without a declared roofline: no core does more than this
 * many float operations per second (5 GHz x 64, two AVX-512 FMA pipes on
 * single precision), so a faster median is not an optimisation. */
#define HOST_CORE_FLOPS (5e9 * 64)
/* Paired: a config's loop goes on after the candidate's stopping rule
 * until the pairs are enough, up to this many times timing.max_seconds. */
#define PAIRED_TIME_FACTOR 3.0
/* The vendor baseline's timing (a trusted lane, shown beside the score,
 * never decided on) stops at this share of timing.max_seconds. */
#define BASELINE_TIME_SHARE 0.25
/* Paired: the pairs every config needs for its interval (the loop goes on
 * for them, past PAIRED_TIME_FACTOR, until the against's cut-off; fewer is
 * paired.error). */
#define PAIRED_MIN_PAIRS 10
/* Paired: the against's calls stop at this share of the time from its
 * start to the evaluation's deadline. */
#define PAIR_CUTOFF_SHARE 0.6
/* CPU, paired: a first round that shows a gain is timed again in fresh
 * runners (docs/evaluation.md, "The confirmation round") on input sets of
 * its own, when the against's share of the time left holds this many times
 * the first round's. */
#define CONFIRM_SET ((1 << 27) + (1 << 28))
#define CONFIRM_TIME_FACTOR 1.5
/* CPU: CPU time the runner's group used beyond a call's round trip that is
 * not charged to the call (cgroup accounting is in microseconds). */
#define CPU_OUTSIDE_SLACK_S 20e-6
/* Paired, the order test: with at least ORDER_MIN_PAIRS pairs each way,
 * the candidate's median right after the against must not be under
 * ORDER_FACTOR x its median before it with a one-sided rank test's p-value
 * under ORDER_ALPHA (8 pairs each way wholly apart: p about 4e-4). An
 * honest candidate is called a cheat at most ORDER_ALPHA of the time per
 * configuration, whatever the load. */
#define ORDER_MIN_PAIRS 8
#define ORDER_FACTOR 0.5
#define ORDER_ALPHA 1e-3
/* ... and the against's median right after the candidate must not be over
 * ORDER_AGAINST_FACTOR x its median before it, with the rank test's p under
 * ORDER_ALPHA (a slowed against inflates the ratio; the anchor bounds what
 * a commit can take of it). */
#define ORDER_AGAINST_FACTOR 1.5
/* Paired, full run: a config whose loop would stop short of the order
 * test's ORDER_MIN_PAIRS each way goes on, while the candidate's calls
 * right after the against look ORDER_FACTOR x faster with a rank test's p
 * under ORDER_SUSPECT_ALPHA, until it has them, up to ORDER_EXTEND_MAX
 * pairs (order_suspect): a channel used on one config of 10 pairs could
 * never reach ORDER_ALPHA (5 each way: p at least 1/252), and pooled it is
 * diluted by the others. */
#define ORDER_SUSPECT_ALPHA 0.05
#define ORDER_EXTEND_MAX 64
/* Paired: what an against's call may take (lane_deadline). */
#define AGAINST_LIMIT_MIN_S 5.0
#define AGAINST_LIMIT_FACTOR 20.0
/* The input set a config's counters pass profiles: none of its calls had it. */
#define PROFILE_SET (1 << 30)
/* The warm-up calls' input sets (the first check.input_sets calls of each
 * config: checked, never timed) are the job's: set JOB_SET_BASE + k (k <
 * K) of the config's stream under the job's seed, the same in every
 * evaluation of the job, in a fresh order each time (warm_order). Timed
 * calls keep sets of the evaluation's own seed (set i for call i). The
 * numbers never meet, so even a run by hand without a job seed (the
 * evaluation's seed stands in) gives no timed call a warm-up's inputs. */
#define JOB_SET_BASE (1 << 29)
/* Screening's input sets (docs/evaluation.md, "Screening"): the checked
 * calls of the configs the screen does not time, and the screen's own
 * timed calls; the full run that may follow starts at set 0, as without a
 * screen, so no runner sees a set twice. Below JOB_SET_BASE: every
 * stage's warm-up calls have the job's sets (call_set). */
#define SCREEN_CHECK_SET (1 << 27)
#define SCREEN_TIMED_SET (1 << 28)
/* The screen's second stage (after its first look) goes on from here: the
 * first stage's calls never reach it, nor does it reach CONFIRM_SET. */
#define SCREEN_MORE_SET ((1 << 28) + (1 << 26))

/* CUDA: the timing protocol around no call, calibrated in the runner about
 * to be timed (the host's latency differs from one process to the next)
 * before its first config's timed runs, and again before a later config's
 * once stale (avo_timing_calibration_stale). */
typedef struct {
    double stream_min, stream_median; /* start -> stream end of an empty call; the minimum is subtracted */
    double tail_median, tail_allow;   /* stream end -> end mark; the allowance is left out of every sample */
    double rt_over;                   /* median of (round trip - event time) of those calls: reported only
                                          (measured in the candidate's process) */
    double host_median;               /* their runner's host time to the release (avo_gpu_times.host_s) */
    int ungated;                      /* timed calls start without the gate (gpu.h) */
    char ungated_why[200];
    double cal_at;    /* when it was calibrated (avo_timing_now), 0 never */
    unsigned cal_mhz; /* the SM clock then (0 unknown) */
    int calibrations; /* in this runner */
} gpu_timing;

/* The empty GPU call as measured before the candidate loaded: trusted. */
typedef struct {
    double stream_min, tail_allow; /* as in gpu_timing */
    double rt_over;                /* median of (round trip to the answer - event time): the protocol's own */
    double rt_over_max;            /* and its largest */
    double gate_wait_max;          /* the longest wait for the gate's SMs (gated) */
} gpu_preload;

/* What calibrate_calls measured of the checker's round trip beyond the
 * event time, and of the gate's wait. */
typedef struct {
    double median, max;
    double gate_wait_max; /* over the calls whose gate was resident in time */
    double host_median;   /* the runner's host time to the release (reported only) */
} protocol_over;

/* One runner the checker drives, a "lane": the candidate's, the against's
 * (paired measurement: code of the candidate's kind, so confined, checked
 * and bounded exactly as the candidate is) or the trusted baseline's. What
 * its calibrations measured before its object loaded is its own: its
 * process, its context, its latency. */
enum { LANE_CAND = 0, LANE_BASE, LANE_AGAINST, LANES };
typedef struct {
    avo_runner run;
    gpu_timing tm;              /* CUDA: its protocol, calibrated before each config's timed calls */
    gpu_preload pre[2];         /* CUDA: [gated, ungated], before its object loaded */
    double busy_max, busy_hard; /* CUDA: a busy probe over the first is over; over the second, fails */
    double overhead, overhead_median, overhead_measured; /* CPU: empty round trip before the load: subtracted
                                                             (capped), median, min */
    int slot;                                            /* LANE_*: which one it is */
    /* CUDA runners on the checker's device tensors: the memfd they get
     * instead of the shared region (lane_mem_fd), PROFILE_AREA bytes, and
     * the checker's mapping of it (NULL: none). */
    int report_fd;
    unsigned char *report;
} lane;

typedef struct {
    const avo_problem *p;
    uint64_t seed;
    int nsets;        /* calls of each config always checked, before its samples */
    void *ref_handle; /* the reference object, loaded in this process only */
    avo_kernel_fn ref;
    lane *ln; /* the runner driven now: one of lanes[] */
    lane lanes[LANES];
    int shm_fd; /* the tensors the runner sees: memfd, mapped shared */
    unsigned char *shm;
    size_t shm_bytes;
    int shm_pinned;            /* CUDA: the checker's mapping of it page-locked (its own copies) */
    avo_runner_devmem dev;     /* CUDA: device tensors the checker shares with its runners (n 0: none) */
    char dev_note[300];        /* who lays out the device tensors, and why not the checker */
    int dev_fill;              /* CUDA: every call's inputs generated on the device (check_device_fill) */
    unsigned char in_key[32];  /* the input stream's key (from seed): the device's generator needs it */
    uint64_t job_seed;         /* the job's secret seed: the warm-up calls' input sets (JOB_SET_BASE) */
    unsigned char job_key[32]; /* its stream's key */
    int *warm_order;           /* the current config's warm-up calls' sets, a permutation of 0..nsets-1 drawn
                                  from the checker's secret generator for each config */
    char fill_note[300];       /* where the inputs are generated, and why not on the device */
    double deadline;           /* absolute, avo_timing_now() */
    avo_counters ctr;
    int ctr_open;
    /* The same counters on the against's runner, read by no one: counting
     * costs a runner time at every switch (about 0.2% of an A/A ratio on
     * the CPU fixture, 2026-12-05), so both lanes pay it or neither. */
    avo_counters actr;
    int actr_open;
    int ref_validated;
    char ref_note[512];
    double worst_rel_l2, worst_max_abs; /* of the current config */
    int cuda;                           /* backend "cuda": tensors mirrored on the GPU */
    avo_gpu *gpu;                       /* the checker's own context, for the reference only */
    unsigned max_mhz;                   /* the GPU's maximum SM clock (0 = unknown) */
    json_t *gpu_info;
    const char *base_so; /* the vendor baseline, or NULL */
                         /* its own runner (lanes[LANE_BASE]): beside the others'
                          * where every config is timed, else on first use */
    int base_state;      /* 0 not started, 2 spawned, 1 running, -1 failed */
    int base_runs;       /* its runs on the current config stop here: the
                          * candidate's (at least timing.min_runs) */
    char base_err[400];
    unsigned char *area;     /* the checker's own tensors: the call's pristine inputs, */
    unsigned char *ref_area; /* and the reference's run on them, */
    size_t area_bytes;       /* each sized for the largest config and reused by every one */
    int area_pinned;         /* page-locked (CUDA) */
    char ref_copies[240];    /* CUDA: how the reference's copies ran */
    avo_flusher fl;          /* CPU: the cache flush before every call */
    int one_cpu;             /* CPU: checker and runner pinned to one CPU (main.c) */
    avo_check_rng rng;       /* which calls get checked: secret, not from seed */
    avo_phases *ph;          /* where the current config's wall time goes (a trusted baseline's
                                             runs: a table of their own, so nothing counts twice) */
    double gpu_s[LANES];     /* CUDA: the calls' own stream time by their events, summed, per
                                             lane (result phases.gpu) */
    int gpu_calls[LANES];
    int against_state; /* paired: 0 none or not loaded yet, 1 loaded, -1 failed (against_err
                                             says why) */
    char against_err[600];
    double confidence;                          /* paired: of its interval */
    double cand_rt_max;                         /* the candidate's slowest round trip so far (lane_deadline) */
    double pair_cutoff;                         /* paired: no call of the against's after this (avo_timing_now()), so a
                                             slow against cannot spend the candidate's deadline */
    int pair_open;                              /* paired: inside a pair (run_config_paired) */
    double pair_draw;                           /* paired: the candidate's check draw in this pair (NAN: not made
                                             yet), taken by the against when it runs second, so both are
                                             checked on the same pairs and one reference run serves both */
    int held_c, held_set;                       /* the config and input set whose reference outputs the checker's
                                             copies hold now (rx, or its own device tensors; held_c -1: none):
                                             a check of the same set (the other lane of a pair) reuses them */
    int held_rows;                              /* what it holds is the reference's rows of the draw in rows[] only */
    avo_gpu_rows_fn ref_rows;                   /* the reference's row entry (check.rows; NULL: every check whole) */
    int64_t *rows;                              /* a timed call's check: the rows drawn (ascending), */
    int64_t nrows, rows_cap;                    /* how many, room for */
    int64_t rows_total;                         /* the current config's rows (avo_problem_rows_at), */
    int64_t row_elems[AVO_PROBLEM_MAX_TENSORS]; /* and each output's elements per row */
    int row_checks;                             /* the current config's checks of a row subset */
    int refs_computed, refs_reused;             /* the current config's reference runs, and checks that reused one */
    double ref_run_s;                           /* the current config's reference runs' time (runs only: not the
                                             checks that reused one, not cache reads), over refs_timed of
                                             them: a check probability weighs a check by a run's cost */
    int refs_timed;
    avo_refcache cache; /* the worker's reference cache (cache.dirfd -1: none): the job's
                                             warm-up sets' reference outputs across its evaluations */
    int cache_cfg;      /* the current config's warm-up references go through it */
    int cache_hits, cache_misses, cache_corrupt, cache_failed; /* of the current config */
    avo_resident res;     /* a kept checker's: the warm-up sets' references held in its own memory
                                             (resident.h; res.budget 0: none) */
    int res_hits;         /* of the current config's cache hits, those from res */
    int res_dev;          /* res holds device memory (made when dev_fill was set) */
    char cache_note[300]; /* why the current config is not cached (or what went wrong) */
    int set_base;         /* call i of a config gets input set set_base + i: each stage of a
                                             screened evaluation has its own sets, so no runner sees a set
                                             twice (docs/evaluation.md, "Screening") */
    int screen_pairs;     /* screening's timed stage: the pairs each config gets (0: the
                                             stopping rule of a full run) */
    int stand_in;         /* the current config runs at its screen.check_sizes (its sizes swapped
                                             in): its cached references are named apart */
    int keep_slack;       /* AVO_HARNESS_KEEP_SLACK: the region past a config's tensors is not
                                             cleared before each call (tests of the order test, which
                                             need a channel that still works) */
    int no_order_extend;  /* AVO_HARNESS_NO_ORDER_EXTEND: no config goes on for the order test
                                             (order_suspect; tests of the pooled test, which a config
                                             extended would pre-empt) */
} run_ctx;

/* The busy probes of one config: how many ran, how many waited over the
 * soft bound, the longest wait. */
typedef struct {
    int probes, over;
    int reprobed;       /* probes taken again: the checker waited for a CPU (BUSY_REPROBES) */
    int call_unsure;    /* the current call had one: it gives no sample (lane_gpu_sample) */
    int dropped;        /* timed calls that gave no sample for that reason */
    double longest;     /* the longest judged probe */
    double first_max;   /* the longest probe as first taken, before any retake */
    double off_cpu_max; /* the longest wait for a CPU during a probe */
} busy_stats;

/* harness.c, for gputime.c: one command of the runner's (the call with
 * flags, its claimed times in *claimed), the device's generated inputs of
 * config c for input set set, and the order of doubles for qsort. */
int harness_cand_call_flags(run_ctx *r, int c, const avo_tensors *x, unsigned flags, int *ret, double *rt,
                            avo_gpu_times *claimed, char *why, size_t wl);
void harness_set_device_inputs(run_ctx *r, int c, int set);
/* AVO_HARNESS_TRACE=1: a step's wall time since the last one on stderr. */
void harness_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int harness_cmp_double(const void *a, const void *b);
/* harness.c, for keep.c: everything setup_checker made, released (what a
 * keep took over is no longer in r). */
void harness_release_checker(run_ctx *r);
/* harness.c, for keep.c: the shared tensor region (a sealed memfd, mapped),
 * sized for the largest config. 0, or a negative errno with err. */
int harness_make_shm(run_ctx *r, char *err, size_t errlen);
/* and released (unpinned, unmapped, closed). */
void harness_release_shm(run_ctx *r);

/* keep.c (harness.h, avo_harness_keep): the checker's state moved from k
 * into r (k made for the same problem, reference, job seed and cache fd), the region and device tensors cleared. 1 when r took it over,
 * 0 when k held none or held another job's (then released), or a
 * negative int with err (r holds the state: harness_close releases it). */
int harness_keep_resume(run_ctx *r, avo_harness_keep *k, const char *ref_so, int cache_fd, char *err, size_t errlen);
/* r's checker state moved into k (r keeps none of it). */
void harness_keep_park(run_ctx *r, avo_harness_keep *k, const char *ref_so, int cache_fd);

/* gputime.c: the CUDA timing protocol (each function's contract is at its
 * definition). */
int gputime_check_claim(const avo_gpu_times *ev, double rt, char *why, size_t wl);
int gputime_busy_verdict(run_ctx *r, int c, int i, const char *when, busy_stats *b, char *why, size_t wl);
int gputime_timed_call(run_ctx *r, int c, int i, const avo_tensors *x, unsigned steps, int *ret, double *rt,
                       double *reply_s, unsigned *mhz, avo_gpu_times *ev, busy_stats *b, char *why, size_t wl);
int gputime_checker_copies(run_ctx *r, int c, const avo_tensors *x, unsigned flags, char *why, size_t wl);
int gputime_call(run_ctx *r, int c, const avo_tensors *x, unsigned prep, unsigned run, int *ret, double *rt,
                 avo_gpu_times *ev, char *why, size_t wl);
int gputime_calibrate_preload(run_ctx *r, char *why, size_t wl);
int gputime_calibrate(run_ctx *r, int c, const avo_tensors *x, unsigned flags, char *why, size_t wl);
int gputime_calibration_stale(run_ctx *r, double *age_s);
int gputime_go_ungated(run_ctx *r, int c, const avo_tensors *x, unsigned flags, const char *why_ungated, char *why,
                       size_t wl);

#endif
