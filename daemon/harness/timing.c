/* Harness timing: clock, cache flush, statistics, stopping rules, GPU samples (timing.h). */
#include "timing.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

double avo_timing_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double avo_timing_run_delay(void)
{
    /* Read twice per round trip of a CPU problem's call: the file stays
     * open for the thread (an open and close each time cost more than the
     * read), re-read from its start. */
    static _Thread_local int fd = -1;
    char buf[96];
    if (fd < 0 && (fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    /* "time on a CPU, time waiting on a run queue, timeslices", in ns */
    unsigned long long on_cpu, waited;
    if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
        return -1;
    return (double)waited * 1e-9;
}

static size_t llc_bytes(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!f)
        return 0;
    unsigned long long v = 0;
    char unit = 0;
    int n = fscanf(f, "%llu%c", &v, &unit);
    fclose(f);
    if (n < 1)
        return 0;
    if (unit == 'K')
        v <<= 10;
    else if (unit == 'M')
        v <<= 20;
    return (size_t)v;
}

int avo_timing_flusher_open(avo_flusher *f)
{
    size_t llc = llc_bytes();
    f->bytes = llc ? 2 * llc : (64u << 20);
    f->buf = mmap(NULL, f->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f->buf == MAP_FAILED) {
        f->buf = NULL;
        return -ENOMEM;
    }
    /* Not inherited by the runner: a fork would make every page
     * copy-on-write, and each flush would then take a page fault per page
     * (on a VM, most of an evaluation's time). Huge pages where the system
     * offers them: fewer TLB misses in a loop that touches every line. */
    madvise(f->buf, f->bytes, MADV_DONTFORK);
    madvise(f->buf, f->bytes, MADV_HUGEPAGE);
    memset(f->buf, 1, f->bytes);
    return 0;
}

static volatile unsigned char flush_sink;

void avo_timing_flusher_run(avo_flusher *f)
{
    /* Read-modify-write of every cache line evicts the candidate's data from
     * every level; the volatile sink keeps the compiler from dropping it. */
    unsigned char acc = 0;
    for (size_t i = 0; i < f->bytes; i += 64) {
        f->buf[i]++;
        acc ^= f->buf[i];
    }
    flush_sink = acc;
}

void avo_timing_flusher_close(avo_flusher *f)
{
    if (f->buf)
        munmap(f->buf, f->bytes);
    f->buf = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void avo_timing_stats_compute(double *t, int n, avo_stats *s)
{
    memset(s, 0, sizeof *s);
    if (n < 1)
        return;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += t[i];
    s->runs = n;
    s->mean = sum / n;
    double var = 0;
    for (int i = 0; i < n; i++)
        var += (t[i] - s->mean) * (t[i] - s->mean);
    s->stddev = n > 1 ? sqrt(var / (n - 1)) : 0;
    s->rse = s->mean > 0 && n > 1 ? s->stddev / sqrt((double)n) / s->mean : 1.0;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s->min = t[0];
    s->max = t[n - 1];
    s->median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

avo_timing_stop_t avo_timing_stop(int n, int min_runs, int checks_done, int at_floor, double rse, double target,
                                  double spent_s, double max_s)
{
    if (n >= min_runs && checks_done) {
        if (rse <= target)
            return AVO_STOP_RSE;
        if (spent_s >= max_s)
            return AVO_STOP_TIME;
        if (at_floor)
            return AVO_STOP_CHECKS;
    }
    return n >= AVO_TIMING_MAX_RUNS ? AVO_STOP_RUNS : AVO_STOP_NONE;
}

const char *avo_timing_stop_name(avo_timing_stop_t s)
{
    switch (s) {
    case AVO_STOP_RSE:
        return "rse";
    case AVO_STOP_TIME:
        return "max_seconds";
    case AVO_STOP_CHECKS:
        return "check_floor";
    case AVO_STOP_RUNS:
        return "max_runs";
    default:
        return NULL;
    }
}

int avo_timing_noisy(double rse, double target)
{
    return !(rse <= target);
}

double avo_timing_gpu_sample(double seconds, double tail_s, double overhead_s, double tail_allow_s, double slack,
                             double *charged)
{
    const double stream = seconds - tail_s;
    const double extra = fmax(tail_s - tail_allow_s - slack * fmax(stream, 0), 0);
    if (charged)
        *charged = extra;
    return fmax(fmax(stream - overhead_s, 0) + extra, 1e-9);
}

int avo_timing_cpu_sample(double round_trip_s, double overhead_s, double *sample)
{
    *sample = round_trip_s - overhead_s;
    return *sample > 0 ? 0 : -1;
}

void avo_timing_rng_init(avo_check_rng *g)
{
    if (getrandom(&g->state, sizeof g->state, 0) != (ssize_t)sizeof g->state) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        g->state = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32;
    }
}

double avo_timing_rng_next(avo_check_rng *g)
{
    /* splitmix64 */
    uint64_t z = (g->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

double avo_timing_check_rate(double call_s, double ref_s, double q_min)
{
    if (!(ref_s > 0) || !(call_s > 0))
        return 1.0;
    double q = call_s / ref_s;
    return q < q_min ? q_min : q > 1 ? 1 : q;
}

int avo_timing_checked_consistent(const double *checked, int nchecked, double median, double factor)
{
    if (nchecked < 2)
        return 0;
    double fastest = checked[0];
    for (int i = 1; i < nchecked; i++)
        fastest = fmin(fastest, checked[i]);
    return fastest > factor * median ? -1 : 0;
}

/* A sample of the rank test: its value and which side it came from. */
typedef struct {
    double v;
    int from_a;
} ranked;

static int cmp_ranked(const void *x, const void *y)
{
    const double a = ((const ranked *)x)->v, b = ((const ranked *)y)->v;
    return (a > b) - (a < b);
}

/* The rank-sum comparison of a and b (na, nb >= 1): *dev, u's excess over
 * its mean under one distribution, u being the pairs (a_i, b_j) with b_j
 * below a_i (a tie counting half), and *var, its variance with the tie
 * correction. 0, or -ENOMEM. */
static int rank_u(const double *a, int na, const double *b, int nb, double *dev, double *var)
{
    const int n = na + nb;
    ranked *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return -ENOMEM;
    for (int i = 0; i < na; i++)
        s[i] = (ranked){a[i], 1};
    for (int i = 0; i < nb; i++)
        s[na + i] = (ranked){b[i], 0};
    qsort(s, (size_t)n, sizeof *s, cmp_ranked);
    /* a's rank sum with mid-ranks for ties, and the ties' share of the
     * variance (sum of t^3 - t over groups of t equal values). */
    double rank_a = 0, ties = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && s[j].v == s[i].v)
            j++;
        const double mid = (i + 1 + j) / 2.0, t = j - i;
        for (int k = i; k < j; k++)
            if (s[k].from_a)
                rank_a += mid;
        ties += t * t * t - t;
        i = j;
    }
    free(s);
    *dev = rank_a - na * (na + 1.0) / 2 - na * (double)nb / 2;
    *var = n > 1 ? na * (double)nb / 12 * ((n + 1) - ties / ((double)n * (n - 1))) : 0;
    return 0;
}

double avo_timing_rank_p_smaller(const double *a, int na, const double *b, int nb)
{
    const avo_rank_stratum one = {a, na, b, nb};
    return avo_timing_rank_p_smaller_strata(&one, 1);
}

double avo_timing_rank_p_smaller_strata(const avo_rank_stratum *st, int ns)
{
    /* van Elteren's weights, 1 / (n + 1) a stratum: each stratum's
     * statistic counts about alike whatever its size, and one stratum
     * gives the plain test. The continuity correction is the largest
     * weight's half step, the conservative side. */
    double t = 0, var = 0, wmax = 0;
    for (int k = 0; k < ns; k++) {
        if (st[k].na < 1 || st[k].nb < 1)
            continue;
        double dev, v;
        if (rank_u(st[k].a, st[k].na, st[k].b, st[k].nb, &dev, &v))
            return -1;
        const double w = 1.0 / (st[k].na + st[k].nb + 1);
        t += w * dev;
        var += w * w * v;
        wmax = w > wmax ? w : wmax;
    }
    if (!(var > 0))
        return 1; /* no stratum, or every value of each equal: nothing says b is smaller */
    const double z = (t - 0.5 * wmax) / sqrt(var);
    return 0.5 * erfc(z / sqrt(2));
}

int avo_timing_calibration_stale(double age_s, unsigned cal_mhz, unsigned mhz)
{
    if (age_s < 0 || age_s > AVO_TIMING_CAL_MAX_AGE_S)
        return 1;
    if (!cal_mhz || !mhz)
        return 0;
    const double band = AVO_TIMING_CAL_CLOCK_BAND * cal_mhz;
    return (double)mhz < cal_mhz - band || (double)mhz > cal_mhz + band;
}
