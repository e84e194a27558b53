/* The harness's timing arithmetic (daemon/harness/timing.c): summary
 * statistics of a set of samples, and how a GPU run's event times become a
 * sample (the host's usual latency after the call left out, work left on
 * other streams counted). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>

#include <cmocka.h>

#include "daemon/harness/timing.h"

static void test_stats_odd_and_even(void **state)
{
    (void)state;
    double t[] = {5, 1, 3, 2, 4};
    avo_stats s;
    avo_timing_stats_compute(t, 5, &s);
    assert_int_equal(s.runs, 5);
    assert_true(s.median == 3 && s.min == 1 && s.max == 5 && s.mean == 3);
    /* sample standard deviation sqrt(2.5); rse = sd / sqrt(n) / mean */
    assert_true(fabs(s.stddev - sqrt(2.5)) < 1e-12);
    assert_true(fabs(s.rse - sqrt(2.5) / sqrt(5) / 3) < 1e-12);
    double u[] = {4, 1, 3, 2};
    avo_timing_stats_compute(u, 4, &s);
    assert_true(s.median == 2.5);
}

static void test_stats_one_sample(void **state)
{
    (void)state;
    double t[] = {7e-3};
    avo_stats s;
    avo_timing_stats_compute(t, 1, &s);
    assert_true(s.median == 7e-3 && s.min == 7e-3 && s.max == 7e-3);
    /* One sample says nothing about its precision: rse 1, never "enough". */
    assert_true(s.stddev == 0 && s.rse == 1.0);
}

/* An honest call: 200 us on its stream, 2 us of it the protocol's own, then
 * 7.5 us of host latency before the end mark, within an allowance of 8 us.
 * The sample is the stream's time less the overhead; the host's latency,
 * whatever it was under the allowance, does not show. */
static void test_gpu_sample_leaves_out_host_latency(void **state)
{
    (void)state;
    const double a = avo_timing_gpu_sample(209.5e-6, 7.5e-6, 2e-6, 8e-6, 0, NULL);
    const double b = avo_timing_gpu_sample(206.0e-6, 4.0e-6, 2e-6, 8e-6, 0, NULL);
    assert_true(fabs(a - 200e-6) < 1e-12);
    assert_true(fabs(b - 200e-6) < 1e-12);
}

/* Work on another stream that ends 100 us after the call's own stream: the
 * tail grows by 100 us and all of it beyond the allowance is counted, so the
 * sample is within (allowance - host latency) of the whole work's time. */
static void test_gpu_sample_counts_work_left_on_other_streams(void **state)
{
    (void)state;
    const double host = 6e-6, allow = 8e-6, side = 100e-6;
    const double s = avo_timing_gpu_sample(202e-6 + side + host, side + host, 2e-6, allow, 0, NULL);
    assert_true(s >= 200e-6 + side - (allow - host) - 1e-12);
    assert_true(s <= 200e-6 + side + 1e-12);
}

/* Never zero or negative (a sample is divided into flops), even when the
 * overhead measured larger than this call's stream time. */
static void test_gpu_sample_floor(void **state)
{
    (void)state;
    assert_true(avo_timing_gpu_sample(5e-6, 4e-6, 2e-6, 8e-6, 0.01, NULL) > 0);
    assert_true(avo_timing_gpu_sample(0, 0, 2e-6, 8e-6, 0.01, NULL) > 0);
    /* An empty tail on a forged-short call: still the stream time less overhead. */
    assert_true(fabs(avo_timing_gpu_sample(50e-6, 0, 2e-6, 8e-6, 0.01, NULL) - 48e-6) < 1e-12);
}

/* The slack grows with the call: after a 1.5 ms call a tail 10 us over the
 * calibrated latency is the host's (within 1% of the call) and left out;
 * 100 us of work left on another stream is counted beyond that bound. */
static void test_gpu_sample_slack_scales_with_the_call(void **state)
{
    (void)state;
    const double stream = 1.5e-3, allow = 8e-6, slack = 0.01;
    assert_true(fabs(avo_timing_gpu_sample(stream + 18e-6, 18e-6, 2e-6, allow, slack, NULL) - (stream - 2e-6)) < 1e-12);
    double charged = -1;
    const double s = avo_timing_gpu_sample(stream + 108e-6, 108e-6, 2e-6, allow, slack, &charged);
    assert_true(fabs(s - (stream - 2e-6 + 108e-6 - allow - slack * stream)) < 1e-12);
    assert_true(fabs(charged - (108e-6 - allow - slack * stream)) < 1e-12);
    avo_timing_gpu_sample(stream + 18e-6, 18e-6, 2e-6, allow, slack, &charged);
    assert_true(charged == 0);
    assert_true(s >= stream - 2e-6 + 100e-6 - allow - slack * stream - 1e-12);
    /* A 200 us call gets 2 us of slack: 10 us over the allowance is counted but for them. */
    assert_true(fabs(avo_timing_gpu_sample(200e-6 + 18e-6, 18e-6, 2e-6, allow, slack, NULL) - (198e-6 + 8e-6)) < 1e-12);
}

/* A CPU call faster than the empty round trip calibrated before the
 * candidate loaded is refused, never clamped to a tiny positive time (which
 * had scored a moved calibration 10^6 times honest work). */
static void test_cpu_sample_refuses_non_positive(void **state)
{
    (void)state;
    double s = -1;
    assert_int_equal(avo_timing_cpu_sample(120e-6, 50e-6, &s), 0);
    assert_true(fabs(s - 70e-6) < 1e-15);
    assert_int_equal(avo_timing_cpu_sample(50e-6, 50e-6, &s), -1);
    assert_int_equal(avo_timing_cpu_sample(10e-6, 50e-6, &s), -1);
    assert_true(s < 0);
}

/* The check rate: about as much reference time as call time, at least
 * q_min, at most every call; unknown times check every call. */
static volatile int spin_on;

static void *spin(void *arg)
{
    (void)arg;
    while (spin_on)
        ;
    return NULL;
}

static void spin_for(double seconds)
{
    const double end = avo_timing_now() + seconds;
    while (avo_timing_now() < end)
        ;
}

/* The checker's wait for a CPU (clock_gap.checker_wait_s): a
 * thread that shares its one CPU with a busy one waits for it, and one
 * alone does not. */
static void test_run_delay_counts_a_wait_for_the_cpu(void **state)
{
    (void)state;
    if (avo_timing_run_delay() < 0)
        skip(); /* no schedstat on this kernel */
    cpu_set_t old, one;
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof old, &old), 0);
    int cpu = -1;
    for (int i = CPU_SETSIZE - 1; i >= 0 && cpu < 0; i--)
        if (CPU_ISSET(i, &old))
            cpu = i;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    double d0 = avo_timing_run_delay();
    spin_for(0.05);
    const double alone = avo_timing_run_delay() - d0;
    spin_on = 1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, spin, NULL), 0); /* inherits the one CPU */
    d0 = avo_timing_run_delay();
    spin_for(0.2);
    const double shared = avo_timing_run_delay() - d0;
    spin_on = 0;
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    assert_true(alone >= 0);
    /* Half of 0.2 s is the fair share; a tenth of it leaves room for any
     * scheduler's slices. */
    assert_true(shared > 0.02);
    assert_true(shared > alone);
}

static void test_check_rate(void **state)
{
    (void)state;
    assert_true(fabs(avo_timing_check_rate(1e-3, 2e-3, 0.25) - 0.5) < 1e-12);
    assert_true(avo_timing_check_rate(1e-3, 1e-1, 0.25) == 0.25);
    assert_true(avo_timing_check_rate(1e-3, 1e-4, 0.25) == 1.0);
    assert_true(avo_timing_check_rate(1e-3, 0, 0.25) == 1.0);
    assert_true(avo_timing_check_rate(0, 1e-3, 0.25) == 1.0);
}

/* The draw that decides a check: uniform in [0, 1), and two generators
 * (two evaluations) do not share a sequence. */
static void test_check_rng(void **state)
{
    (void)state;
    avo_check_rng a, b;
    avo_timing_rng_init(&a);
    avo_timing_rng_init(&b);
    int same = 0, below = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = avo_timing_rng_next(&a), y = avo_timing_rng_next(&b);
        assert_true(x >= 0 && x < 1);
        same += x == y;
        below += x < 0.25;
    }
    assert_true(same < 3);
    /* 0.25 of 100000, within 6 standard deviations (137 each). */
    assert_true(abs(below - n / 4) < 6 * 137);
}

/* Checked samples drawn at random from honest calls straddle the median;
 * when every checked one is far slower than the median of all, the calls
 * left unchecked were the fast ones. */
static void test_checked_consistent(void **state)
{
    (void)state;
    const double honest[] = {1.02e-3, 0.98e-3, 1.3e-3};
    assert_int_equal(avo_timing_checked_consistent(honest, 3, 1.0e-3, 1.5), 0);
    /* One outlier alone is not evidence; two checks are needed. */
    const double one[] = {5e-3};
    assert_int_equal(avo_timing_checked_consistent(one, 1, 1.0e-3, 1.5), 0);
    /* Skipped work: the median sits among the fast (skipped) calls. */
    const double slow[] = {1.0e-3, 1.05e-3};
    assert_int_equal(avo_timing_checked_consistent(slow, 2, 0.05e-3, 1.5), -1);
    /* One fast checked call is enough to clear it. */
    const double mixed[] = {1.0e-3, 0.06e-3};
    assert_int_equal(avo_timing_checked_consistent(mixed, 2, 0.05e-3, 1.5), 0);
}

/* The noisy flag: over the target is noisy, under it or at it is not (the
 * stopping rule stops at the target), and an rse that is not a number is. */
static void test_noisy_rule(void **state)
{
    (void)state;
    assert_true(avo_timing_noisy(0.0051, 0.005));
    assert_false(avo_timing_noisy(0.0049, 0.005));
    assert_false(avo_timing_noisy(0.005, 0.005));
    assert_true(avo_timing_noisy(nextafter(0.005, 1), 0.005));
    assert_true(avo_timing_noisy(NAN, 0.005));
    /* One sample's rse is 1 (avo_timing_stats_compute): noisy under any target < 1. */
    assert_true(avo_timing_noisy(1.0, 0.5));
}

/* A CUDA lane's calibration: never made is stale; kept while young and
 * the clock within its band, whichever way the clock moved; stale past the
 * age at any clock; an unknown clock leaves the age alone to decide. */
static void test_calibration_stale(void **state)
{
    (void)state;
    const double young = AVO_TIMING_CAL_MAX_AGE_S / 4, old = AVO_TIMING_CAL_MAX_AGE_S * 1.01;
    assert_true(avo_timing_calibration_stale(-1, 0, 0));
    assert_true(avo_timing_calibration_stale(-1, 1980, 1980));
    assert_false(avo_timing_calibration_stale(0, 1980, 1980));
    assert_false(avo_timing_calibration_stale(young, 1980, 1980));
    assert_true(avo_timing_calibration_stale(old, 1980, 1980));
    assert_true(avo_timing_calibration_stale(old, 0, 0));
    const unsigned in_lo = (unsigned)(1980 * (1 - AVO_TIMING_CAL_CLOCK_BAND)) + 1,
                   out_lo = (unsigned)(1980 * (1 - AVO_TIMING_CAL_CLOCK_BAND)) - 1,
                   in_hi = (unsigned)(1980 * (1 + AVO_TIMING_CAL_CLOCK_BAND)) - 1,
                   out_hi = (unsigned)(1980 * (1 + AVO_TIMING_CAL_CLOCK_BAND)) + 1;
    assert_false(avo_timing_calibration_stale(young, 1980, in_lo));
    assert_false(avo_timing_calibration_stale(young, 1980, in_hi));
    assert_true(avo_timing_calibration_stale(young, 1980, out_lo));
    assert_true(avo_timing_calibration_stale(young, 1980, out_hi));
    assert_true(avo_timing_calibration_stale(young, 1980, 1200));
    assert_false(avo_timing_calibration_stale(young, 0, 1200));
    assert_false(avo_timing_calibration_stale(young, 1980, 0));
}

/* Why the loop stops, and that the time budget's stop (its rse still over
 * the target) is the case the flag catches, the target's own never. */
static void test_stop_reason_and_flag(void **state)
{
    (void)state;
    const double target = 0.005, budget = 0.4;
    /* Too few samples, or checks not done: go on whatever the rse. */
    assert_int_equal(avo_timing_stop(4, 5, 1, 0, 0.001, target, 1.0, budget), AVO_STOP_NONE);
    assert_int_equal(avo_timing_stop(9, 5, 0, 0, 0.001, target, 1.0, budget), AVO_STOP_NONE);
    /* Within the target: stopped by it, not noisy, even past the budget. */
    assert_int_equal(avo_timing_stop(9, 5, 1, 0, 0.004, target, 1.0, budget), AVO_STOP_RSE);
    assert_int_equal(avo_timing_stop(9, 5, 1, 0, target, target, 0.1, budget), AVO_STOP_RSE);
    assert_false(avo_timing_noisy(target, target));
    /* Over the target: on until the budget ends it, then noisy. */
    assert_int_equal(avo_timing_stop(9, 5, 1, 0, 0.03, target, 0.39, budget), AVO_STOP_NONE);
    assert_int_equal(avo_timing_stop(9, 5, 1, 0, 0.03, target, 0.4, budget), AVO_STOP_TIME);
    assert_true(avo_timing_noisy(0.03, target));
    /* The check floor and the run cap end it too. */
    assert_int_equal(avo_timing_stop(9, 5, 1, 1, 0.03, target, 0.1, budget), AVO_STOP_CHECKS);
    assert_int_equal(avo_timing_stop(AVO_TIMING_MAX_RUNS, 5, 0, 0, 0.03, target, 0.1, budget), AVO_STOP_RUNS);
    assert_string_equal(avo_timing_stop_name(AVO_STOP_TIME), "max_seconds");
    assert_string_equal(avo_timing_stop_name(AVO_STOP_RSE), "rse");
    assert_null(avo_timing_stop_name(AVO_STOP_NONE));
}

/* The rank test against values worked by hand: a = {1, 2, 3}, b = {0.5}:
 * U = 3 (b under every a), mean 1.5, variance 3 x 1 / 12 x 5 = 1.25, z =
 * (3 - 1.5 - 0.5) / sqrt(1.25), p = erfc(z / sqrt 2) / 2 = 0.18555. */
static void test_rank_p_by_hand(void **state)
{
    (void)state;
    const double a[] = {1, 2, 3}, b[] = {0.5};
    assert_true(fabs(avo_timing_rank_p_smaller(a, 3, b, 1) - 0.18555) < 1e-4);
    /* b above every a: p near 1. */
    const double high[] = {9};
    assert_true(avo_timing_rank_p_smaller(a, 3, high, 1) > 0.5);
    /* Nothing to compare, or every value equal: no evidence. */
    assert_true(avo_timing_rank_p_smaller(a, 0, b, 1) == 1);
    const double same[] = {2, 2, 2};
    assert_true(avo_timing_rank_p_smaller(same, 3, same, 3) == 1);
}

/* Eight samples each way wholly apart (the order test's least): the exact
 * p-value is 1 / C(16, 8) = 7.8e-5; the approximation says about 4e-4,
 * above the exact one (it never calls a cheat more readily than exact
 * counting would) and under the order test's 1e-3. One value crossing
 * over still is; the reverse is nowhere near. */
static void test_rank_p_apart(void **state)
{
    (void)state;
    double slow[8], fast[8];
    for (int i = 0; i < 8; i++)
        slow[i] = 1.0 + i * 0.01, fast[i] = 0.4 + i * 0.01;
    const double p = avo_timing_rank_p_smaller(slow, 8, fast, 8);
    assert_true(p > 1.0 / 12870 && p < 1e-3);
    fast[7] = 1.035; /* above three of the slow ones */
    assert_true(avo_timing_rank_p_smaller(slow, 8, fast, 8) < 1e-2);
    assert_true(avo_timing_rank_p_smaller(fast, 8, slow, 8) > 0.99);
}

static uint64_t mix_state = 0x2545f4914f6cdd1dULL;
static double uniform01(void)
{
    uint64_t z = (mix_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static int cmp_d(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return (v[(n - 1) / 2] + v[n / 2]) / 2;
}

/* An honest candidate on a loaded host: half its calls hit by a
 * preemption (1 ms of work, 2-4 ms more when hit), split into the order
 * test's two places by a fair coin. The medians alone put one place under
 * half the other in about a quarter of the trials (the false alarm seen on
 * the 2-CPU VM); the rank test stays at its nominal rate (p < 0.05 in
 * about 5% of the trials), so both together fire a few times in a
 * thousand at most (6 of 3995 with this generator; the approximation's
 * own rate of p < 1e-3 was 0.03-0.08% at 17-68 calls in 200000 trials of
 * uniform samples, under the nominal 0.1%). */
static void test_rank_p_bimodal_honest(void **state)
{
    (void)state;
    enum { TRIALS = 4000, CALLS = 33 };
    int median_rule = 0, both = 0, nominal = 0, trials = 0;
    for (int t = 0; t < TRIALS; t++) {
        double g[2][CALLS];
        int n[2] = {0, 0};
        for (int i = 0; i < CALLS; i++) {
            const double v = 1.0 + (uniform01() < 0.5 ? 2.0 + 2.0 * uniform01() : 0.0);
            const int place = uniform01() < 0.5;
            g[place][n[place]++] = v;
        }
        if (n[0] < 8 || n[1] < 8)
            continue;
        trials++;
        const double p = avo_timing_rank_p_smaller(g[0], n[0], g[1], n[1]);
        const int by_median = median_of(g[1], n[1]) < 0.5 * median_of(g[0], n[0]);
        median_rule += by_median;
        nominal += p < 0.05;
        both += by_median && p < 1e-3;
    }
    print_message("bimodal honest: %d trials, median rule %d, p < 0.05 %d, both %d\n", trials, median_rule, nominal,
                  both);
    assert_true(trials > TRIALS * 9 / 10);
    assert_true(median_rule > trials / 10);
    assert_true(nominal > trials * 3 / 100 && nominal < trials * 7 / 100);
    assert_true(both <= trials * 3 / 1000 && both * 50 < median_rule);
}

/* The stratified test by hand: stratum 1 is test_rank_p_by_hand's (n 4,
 * weight 1/5, u 1.5 over its mean, variance 1.25); stratum 2, a hundred
 * times larger, a = {100, 200}, b = {50, 300} (u at its mean, variance
 * 2 x 2 / 12 x 5 = 5/3). t = 0.3, variance 0.04 x (1.25 + 5/3), z = (0.3 -
 * 0.1) / sqrt of that, p = 0.27909. One stratum is the plain test; a
 * stratum with an empty side counts for nothing. */
static void test_rank_strata_by_hand(void **state)
{
    (void)state;
    const double a1[] = {1, 2, 3}, b1[] = {0.5}, a2[] = {100, 200}, b2[] = {50, 300};
    const avo_rank_stratum st[] = {{a1, 3, b1, 1}, {a2, 2, b2, 2}, {a1, 3, b1, 0}};
    assert_true(fabs(avo_timing_rank_p_smaller_strata(st, 3) - 0.27909) < 1e-4);
    assert_true(fabs(avo_timing_rank_p_smaller_strata(st, 1) - avo_timing_rank_p_smaller(a1, 3, b1, 1)) < 1e-12);
    assert_true(avo_timing_rank_p_smaller_strata(st + 2, 1) == 1);
    assert_true(avo_timing_rank_p_smaller_strata(st, 0) == 1);
}

/* A config of few pairs: its calls split by a fair coin into two places,
 * at its own scale, bimodal (half hit by a preemption); with a channel,
 * the calls of place 1 take a fifth of the time. */
static void stratum_draw(double g[2][16], int n[2], int calls, double scale, int channel)
{
    n[0] = n[1] = 0;
    for (int i = 0; i < calls; i++) {
        const int place = uniform01() < 0.5;
        const double v = scale * (1.0 + (uniform01() < 0.5 ? 2.0 + 2.0 * uniform01() : 0.0) * 0.2);
        g[place][n[place]++] = channel && place ? 0.2 * v : v;
    }
}

/* The order test pooled over configs of 10 pairs each (paired.order_pooled):
 * five configs whose times differ ten-thousandfold, four with a channel,
 * are found (p under 1e-3) whatever their splits (1994 of 2000 trials);
 * without a channel, p under 0.05 in about 5% of the trials (89) and under
 * 1e-3 about never (3). */
static void test_rank_strata_pooled_configs(void **state)
{
    (void)state;
    enum { TRIALS = 2000, CONFIGS = 5, CALLS = 10 };
    double g[CONFIGS][2][16];
    int n[CONFIGS][2];
    avo_rank_stratum st[CONFIGS];
    int found = 0, nominal = 0, alarm = 0;
    for (int t = 0; t < TRIALS; t++)
        for (int channel = 0; channel < 2; channel++) {
            for (int c = 0; c < CONFIGS; c++) {
                stratum_draw(g[c], n[c], CALLS, pow(10, c - 2), channel && c < 4);
                st[c] = (avo_rank_stratum){g[c][0], n[c][0], g[c][1], n[c][1]};
            }
            const double p = avo_timing_rank_p_smaller_strata(st, CONFIGS);
            if (channel)
                found += p < 1e-3;
            else
                nominal += p < 0.05, alarm += p < 1e-3;
        }
    print_message("pooled configs: %d trials, channel found %d, honest p < 0.05 %d, p < 1e-3 %d\n", TRIALS, found,
                  nominal, alarm);
    assert_true(found > TRIALS * 95 / 100);
    assert_true(nominal > TRIALS * 3 / 100 && nominal < TRIALS * 7 / 100);
    assert_true(alarm <= TRIALS * 3 / 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_odd_and_even),
        cmocka_unit_test(test_stats_one_sample),
        cmocka_unit_test(test_gpu_sample_leaves_out_host_latency),
        cmocka_unit_test(test_gpu_sample_counts_work_left_on_other_streams),
        cmocka_unit_test(test_gpu_sample_floor),
        cmocka_unit_test(test_gpu_sample_slack_scales_with_the_call),
        cmocka_unit_test(test_cpu_sample_refuses_non_positive),
        cmocka_unit_test(test_run_delay_counts_a_wait_for_the_cpu),
        cmocka_unit_test(test_check_rate),
        cmocka_unit_test(test_check_rng),
        cmocka_unit_test(test_checked_consistent),
        cmocka_unit_test(test_noisy_rule),
        cmocka_unit_test(test_calibration_stale),
        cmocka_unit_test(test_stop_reason_and_flag),
        cmocka_unit_test(test_rank_p_by_hand),
        cmocka_unit_test(test_rank_p_apart),
        cmocka_unit_test(test_rank_p_bimodal_honest),
        cmocka_unit_test(test_rank_strata_by_hand),
        cmocka_unit_test(test_rank_strata_pooled_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
