/* The CUDA timing protocol: the runner's claimed times checked against the
 * checker's round trip, the empty call calibrated before and after the
 * candidate loads (gated and ungated), one timed call with the checker's
 * busy probes and copies (harness_internal.h). */
#include "harness_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a CUDA runner claims for a call, against what the checker saw: the
 * event time within the checker's own round trip rt (with 0.1 ms for clock
 * granularity), the tail within the event time. CHECK_FORGED otherwise. */
int gputime_check_claim(const avo_gpu_times *ev, double rt, char *why, size_t wl)
{
    if (!(ev->seconds > 0) || ev->seconds > rt + 1e-4) {
        snprintf(why, wl, "the runner reported %.6g s for a call that took %.6g s end to end", ev->seconds, rt);
        return CHECK_FORGED;
    }
    if (!(ev->gate_wait_s >= 0 && ev->gate_wait_s <= rt)) {
        snprintf(why, wl, "the runner reported a gate wait of %.6g s in a call that took %.6g s", ev->gate_wait_s, rt);
        return CHECK_FORGED;
    }
    if (!(ev->tail_s >= 0 && ev->tail_s <= ev->seconds)) {
        snprintf(why, wl, "the runner reported a tail of %.6g s in a call of %.6g s", ev->tail_s, ev->seconds);
        return CHECK_FORGED;
    }
    return CHECK_OK;
}

/* One busy probe from the checker's own thread, and how long that thread
 * waited for a CPU meanwhile (0 where the kernel does not say). */
static void busy_probe(run_ctx *r, double *busy, double *off_cpu)
{
    const double d0 = avo_timing_run_delay();
    *busy = 0;
    avo_gpu_busy_probe(r->gpu, busy);
    const double d1 = avo_timing_run_delay();
    *off_cpu = d0 >= 0 && d1 >= d0 ? d1 - d0 : 0;
}

/* The verdict of a busy probe taken now (from the checker's context, after
 * call i of config c "returned" or "had its outputs fetched"): CHECK_IDLE when it waited
 * beyond the hard bound; over the soft one it is counted (the config fails
 * on too many, run_config). A probe over a bound by no more than its
 * thread's wait for a CPU is taken again (BUSY_REPROBES): the host, not the
 * GPU, may have made it long. Work that ended during it is gone by the
 * next, so that call's sample is dropped (busy_stats.call_unsure): leftover
 * work hidden behind a wait for the CPU times nothing. */
int gputime_busy_verdict(run_ctx *r, int c, int i, const char *when, busy_stats *b, char *why, size_t wl)
{
    const avo_problem *p = r->p;
    double busy, off_cpu;
    busy_probe(r, &busy, &off_cpu);
    const double first = busy, first_off = off_cpu;
    int k = 0;
    while (k < BUSY_REPROBES && busy > r->ln->busy_max && off_cpu > 0 && busy - off_cpu <= r->ln->busy_max) {
        k++;
        busy_probe(r, &busy, &off_cpu);
    }
    b->reprobed += k > 0;
    b->call_unsure |= k > 0;
    b->first_max = fmax(b->first_max, first);
    b->off_cpu_max = fmax(b->off_cpu_max, first_off);
    if (getenv("AVO_HARNESS_BUSY_LOG"))
        fprintf(stderr,
                "busy probe: config %s call %d %s: %.1f us (off CPU %.1f us), judged %.1f us after %d more "
                "(limit %.1f, hard %.1f)\n",
                p->configs[c].name, i, when, first * 1e6, first_off * 1e6, busy * 1e6, k, r->ln->busy_max * 1e6,
                r->ln->busy_hard * 1e6);
    b->probes++;
    b->longest = fmax(b->longest, busy);
    if (busy > r->ln->busy_max)
        b->over++;
    if (busy > r->ln->busy_hard && !getenv("AVO_HARNESS_BUSY_LOG")) {
        snprintf(why, wl, "the GPU was still busy %.0f us after call %d %s: work left running outside the call%s",
                 busy * 1e6, i, when, k ? " (the probe taken again: its thread had waited for a CPU)" : "");
        return CHECK_IDLE;
    }
    return CHECK_OK;
}

/* Call i of config c on a GPU, as every call goes (gputime_call: prep, then the
 * run), then, from the checker's own process, the SM clock (*mhz) and a
 * busy probe, then the fetch and a second probe. *reply_s: the run's round
 * trip up to its answer. */
int gputime_timed_call(run_ctx *r, int c, int i, const avo_tensors *x, unsigned steps, int *ret, double *rt,
                       double *reply_s, unsigned *mhz, avo_gpu_times *ev, busy_stats *b, char *why, size_t wl)
{
    b->call_unsure = 0;
    int res = gputime_call(r, c, x, steps, r->ln->tm.ungated ? 0 : AVO_GPU_GATED, ret, rt, ev, why, wl);
    *reply_s = r->ln->run.reply_s;
    /* A failed call has no times to check: it is wrong as it is. */
    if (res == CHECK_OK && *ret == 0)
        res = gputime_check_claim(ev, *rt, why, wl);
    if (res != CHECK_OK)
        return res;
    /* The clock, and whether the GPU still runs something the call left
     * behind. */
    *mhz = avo_gpu_sm_clock(r->gpu);
    res = gputime_busy_verdict(r, c, i, "returned", b, why, wl);
    harness_trace("  clock and busy probe");
    if (res != CHECK_OK || *ret != 0)
        return res;
    /* Checked on the device where they are: nothing to fetch. */
    if (r->dev_fill)
        return CHECK_OK;
    /* The checker's own fetch, the runner frozen: nothing more to probe. */
    if (r->dev.n)
        return gputime_checker_copies(r, c, x, AVO_GPU_FETCH, why, wl);
    int fret = 0;
    double frt = 0;
    avo_gpu_times fev;
    if ((res = harness_cand_call_flags(r, c, x, AVO_GPU_FETCH, &fret, &frt, &fev, why, wl)) != CHECK_OK)
        return res;
    /* Nor after the fetch: its thaw let the candidate's threads run again. */
    return gputime_busy_verdict(r, c, i, "had its outputs fetched", b, why, wl);
}

/* The prep (flags with AVO_GPU_PREPARE) or the fetch (AVO_GPU_FETCH) of a
 * call on the device tensors the checker shares with the runner, by the
 * checker in its own context while the runner stays frozen. Its failure is
 * the checker's (a negative int). */
int gputime_checker_copies(run_ctx *r, int c, const avo_tensors *x, unsigned flags, char *why, size_t wl)
{
    unsigned outputs = 0;
    for (int i = 0; i < x->n; i++)
        if (r->p->tensors[i].role == AVO_ROLE_OUTPUT)
            outputs |= 1u << i;
    int ret = 0;
    avo_gpu_times t;
    char err[300];
    int rc = avo_gpu_run(r->gpu, NULL, x->ptr, x->bytes, x->n, r->p->configs[c].size, flags | AVO_GPU_SHARED, outputs,
                         &ret, &t, err, sizeof err);
    if (rc) {
        snprintf(why, wl, "the checker %s the call's tensors: %s", (flags & AVO_GPU_FETCH) ? "fetching" : "laying out",
                 err);
        return rc < 0 && rc != AVO_GPU_ESTICKY ? rc : -EIO;
    }
    return CHECK_OK;
}

/* One CUDA call as every call goes: its tensors laid out and the L2
 * flushed (prep, untimed: the checker's own copies where it shares the
 * device tensors, else a command of the runner's), then the call itself in
 * a command of its own (run), so the checker's round trip *rt covers the
 * call and the protocol around it, not the copies. */
int gputime_call(run_ctx *r, int c, const avo_tensors *x, unsigned prep, unsigned run, int *ret, double *rt,
                 avo_gpu_times *ev, char *why, size_t wl)
{
    double prt;
    avo_gpu_times pev;
    int pret = 0;
    int res = r->dev.n ? gputime_checker_copies(r, c, x, prep | AVO_GPU_PREPARE, why, wl)
                       : harness_cand_call_flags(r, c, x, prep | AVO_GPU_PREPARE, &pret, &prt, &pev, why, wl);
    harness_trace("  prep");
    if (res != CHECK_OK)
        return res;
    res = harness_cand_call_flags(r, c, x, run, ret, rt, ev, why, wl);
    harness_trace("  run (round trip %.3f ms)", *rt * 1e3);
    return res;
}

/* CALIBRATION_CALLS calls of the protocol around no call (run: AVO_GPU_EMPTY,
 * with AVO_GPU_GATED when asked), each after the prep the timed calls have (prep flags): start -> stream end (sorted), the tails
 * (sorted), and in *o the round trip less event time and the gate's wait.
 * The inputs (generated or copied) are laid out by the first call's prep
 * alone: an empty call reads none of them, and the flush and the poison
 * that end every prep still run before each call, so what the call starts
 * on is what a timed call starts on. Laying them out 32 times cost
 * attention 1.2 s an evaluation (13 configs, 0.4 GB of inputs each). */
static int calibrate_calls(run_ctx *r, int c, const avo_tensors *x, unsigned prep, unsigned run, double *stream,
                           double *tail, protocol_over *o, char *why, size_t wl)
{
    enum { CALLS = CALIBRATION_CALLS };
    double over[CALLS], host[CALLS];
    o->gate_wait_max = 0;
    if (prep & AVO_GPU_GEN_INPUTS)
        harness_set_device_inputs(r, c, -1);
    for (int i = 0; i < CALLS; i++) {
        int ret = 0;
        double rt = 0;
        avo_gpu_times ev;
        const unsigned inputs = i ? AVO_GPU_GEN_INPUTS | AVO_GPU_COPY_INPUTS : 0;
        int res = gputime_call(r, c, x, prep & ~inputs, AVO_GPU_EMPTY | run, &ret, &rt, &ev, why, wl);
        if (res != CHECK_OK)
            return res;
        char sub[300];
        if ((res = gputime_check_claim(&ev, rt, sub, sizeof sub)) != CHECK_OK) {
            snprintf(why, wl, "calibration: %s", sub);
            return res;
        }
        stream[i] = ev.seconds - ev.tail_s;
        tail[i] = ev.tail_s;
        over[i] = r->ln->run.reply_s - ev.seconds;
        host[i] = ev.host_s;
        if (!(ev.notes & AVO_GPU_NOTE_GATE_BUSY))
            o->gate_wait_max = fmax(o->gate_wait_max, ev.gate_wait_s);
    }
    qsort(stream, CALLS, sizeof *stream, harness_cmp_double);
    qsort(tail, CALLS, sizeof *tail, harness_cmp_double);
    qsort(over, CALLS, sizeof *over, harness_cmp_double);
    o->median = over[CALLS / 2];
    o->max = over[CALLS - 1];
    qsort(host, CALLS, sizeof *host, harness_cmp_double);
    o->host_median = host[CALLS / 2];
    return CHECK_OK;
}

/* Before the candidate loads (the runner has its context but no candidate
 * code): the empty call gated and ungated, with only the flush as prep.
 * What later calibrations in the candidate's process may set is capped by
 * these, and the floor on every sample uses their round trips. */
int gputime_calibrate_preload(run_ctx *r, char *why, size_t wl)
{
    enum { CALLS = CALIBRATION_CALLS };
    double stream[CALLS], tail[CALLS];
    avo_tensors none = {0};
    for (int u = 0; u < 2; u++) {
        const unsigned gate = u ? 0 : AVO_GPU_GATED;
        gpu_preload *pre = &r->ln->pre[u];
        protocol_over o;
        int res = calibrate_calls(r, 0, &none, AVO_GPU_FLUSH, gate, stream, tail, &o, why, wl);
        if (res != CHECK_OK)
            return res;
        pre->stream_min = stream[0];
        pre->tail_allow = tail[(CALLS - 1) * TAIL_ALLOW_PERCENTILE / 100];
        pre->rt_over = o.median;
        pre->rt_over_max = o.max;
        pre->gate_wait_max = o.gate_wait_max;
    }
    /* The checker's probe right after an empty call of the runner's, as
     * after every timed call: the context switch and nothing else. */
    double probe[BUSY_PROBES];
    for (int i = 0; i < BUSY_PROBES; i++) {
        int ret = 0;
        double rt = 0;
        avo_gpu_times ev;
        int res = gputime_call(r, 0, &none, AVO_GPU_FLUSH, AVO_GPU_EMPTY | AVO_GPU_GATED, &ret, &rt, &ev, why, wl);
        if (res != CHECK_OK)
            return res;
        if (avo_gpu_busy_probe(r->gpu, &probe[i]) != 0)
            probe[i] = 0;
        if (getenv("AVO_HARNESS_BUSY_LOG"))
            fprintf(stderr, "busy probe before the load: %.1f us\n", probe[i] * 1e6);
    }
    qsort(probe, BUSY_PROBES, sizeof *probe, harness_cmp_double);
    const double p90 = probe[(BUSY_PROBES - 1) * 9 / 10];
    r->ln->busy_max = GPU_BUSY_FACTOR * p90 + GPU_BUSY_SLACK;
    r->ln->busy_hard = GPU_BUSY_HARD_FACTOR * p90 + GPU_BUSY_HARD_SLACK;
    return CHECK_OK;
}

/* The timing protocol around no call, CALIBRATION_CALLS times in the runner
 * about to be timed (the host's latency differs from one process to the
 * next), with the prep (flags) the timed calls of config c take, so the two
 * differ only by the call. The minimum of start -> stream end is subtracted
 * from every sample, and the TAIL_ALLOW_PERCENTILE-th percentile of the
 * tails is the host latency a sample leaves out (TAIL_SLACK covers its
 * growth with the call's length). Both are capped by what the same protocol
 * measured before the candidate loaded (plus a little drift) and by fixed
 * bounds, since the runner reports them from the candidate's process. */
int gputime_calibrate(run_ctx *r, int c, const avo_tensors *x, unsigned flags, char *why, size_t wl)
{
    enum { CALLS = CALIBRATION_CALLS };
    double stream[CALLS], tail[CALLS];
    const int u = r->ln->tm.ungated;
    protocol_over o;
    int res = calibrate_calls(r, c, x, flags, u ? 0 : AVO_GPU_GATED, stream, tail, &o, why, wl);
    if (res != CHECK_OK)
        return res;
    r->ln->tm.rt_over = o.median;
    r->ln->tm.host_median = o.host_median;
    const gpu_preload *pre = &r->ln->pre[u];
    const double cap_stream = fmin(u ? OVERHEAD_MAX_UNGATED : OVERHEAD_MAX_GATED,
                                   pre->stream_min + fmax(CAL_DRIFT_ABS, CAL_DRIFT_REL * pre->stream_min));
    const double cap_tail = fmin(TAIL_ALLOW_MAX,
                                 pre->tail_allow + fmax(CAL_DRIFT_ABS, CAL_DRIFT_REL * pre->tail_allow));
    r->ln->tm.stream_min = fmin(stream[0], cap_stream);
    r->ln->tm.stream_median = stream[CALLS / 2];
    r->ln->tm.tail_median = tail[CALLS / 2];
    r->ln->tm.tail_allow = fmin(tail[(CALLS - 1) * TAIL_ALLOW_PERCENTILE / 100], cap_tail);
    r->ln->tm.cal_at = avo_timing_now();
    r->ln->tm.cal_mhz = avo_gpu_sm_clock(r->gpu);
    r->ln->tm.calibrations++;
    return CHECK_OK;
}

/* Whether the lane's calibration must be made again before a config's
 * timed calls; *age_s: its age (-1 never made). 32 empty calls before
 * every config of every lane cost attention about 0.16 s an evaluation
 * (13 configs, two lanes), for a protocol that is the runner's, not the
 * config's. */
int gputime_calibration_stale(run_ctx *r, double *age_s)
{
    const gpu_timing *tm = &r->ln->tm;
    *age_s = tm->calibrations ? avo_timing_now() - tm->cal_at : -1;
    return avo_timing_calibration_stale(*age_s, tm->cal_mhz, tm->calibrations ? avo_gpu_sm_clock(r->gpu) : 0);
}

/* From here on every timed call starts without the gate (why says what made
 * the gate unusable); the empty call is calibrated again, since its event
 * time now includes the launch gap. */
int gputime_go_ungated(run_ctx *r, int c, const avo_tensors *x, unsigned flags, const char *why_ungated, char *why,
                       size_t wl)
{
    r->ln->tm.ungated = 1;
    snprintf(r->ln->tm.ungated_why, sizeof r->ln->tm.ungated_why, "%s", why_ungated);
    return gputime_calibrate(r, c, x, flags, why, wl);
}
