/* The noise-aware commit rule shared by the engine and the agent's commit tool (commit.h). */
#include "commit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "evolve.h"

static double num(json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

void avo_commit_params_from_spec(json_t *spec, avo_commit_params *p)
{
    json_t *c = json_object_get(spec, "commit");
    p->min_gain = num(c, "min_gain", 0);
    p->confidence = num(c, "confidence", AVO_COMMIT_CONFIDENCE);
    p->epsilon = num(spec, "epsilon", 0);
}

/* A paired member the rule can decide on: no error, finite ratio and bound. */
static const char *unusable(json_t *paired)
{
    if (!paired || json_is_null(paired))
        return "the result has no paired measurement";
    if (!json_is_object(paired))
        return "the result's paired member is not an object";
    if (json_object_get(paired, "error"))
        return json_is_string(json_object_get(paired, "error")) ? json_string_value(json_object_get(paired, "error"))
                                                                : "the paired measurement failed";
    if (!isfinite(num(paired, "ratio", NAN)) || !isfinite(num(paired, "low", NAN)))
        return "the paired measurement has no ratio or lower bound";
    return NULL;
}

void avo_commit_judge(const avo_commit_params *p, json_t *paired, double aggregate, double best, json_int_t best_cand,
                      avo_commit_verdict *v)
{
    memset(v, 0, sizeof *v);
    const char *why = unusable(paired);
    if (why && json_is_object(paired)) {
        /* A pairing was attempted and failed. The candidate can make it
         * fail (exhaust the device memory, the process limit or /dev/shm
         * the against needs), so a failed pairing never falls back to the
         * absolute rule: no gain was shown. */
        v->threshold = INFINITY;
        v->pair_failed = 1;
        json_t *a = json_object_get(paired, "against");
        v->against = json_is_integer(a) ? json_integer_value(a) : 0;
        snprintf(v->reason, sizeof v->reason, "the paired measurement failed (%s): no gain shown", why);
        return;
    }
    if (why) {
        /* Absolute aggregates drift between evaluations on shared machines,
         * so the fallback asks for the same gain; epsilon (the exploration
         * slack, which lets slightly slower versions in) applies here only:
         * a paired measurement says what is faster, and slack would undo it. */
        v->threshold = best * (1.0 + p->min_gain - p->epsilon);
        v->commit = avo_evolve_commit_rule(aggregate, best, p->epsilon - p->min_gain);
        snprintf(v->reason, sizeof v->reason, "%s", why);
        return;
    }
    v->paired = 1;
    json_t *a = json_object_get(paired, "against");
    v->against = json_is_integer(a) ? json_integer_value(a) : 0;
    v->ratio = num(paired, "ratio", NAN);
    v->low = num(paired, "low", NAN);
    v->confidence = num(paired, "confidence", p->confidence);
    json_t *ci = json_object_get(paired, "ci");
    v->ci_lo = json_is_number(json_array_get(ci, 0)) ? json_number_value(json_array_get(ci, 0)) : NAN;
    v->ci_hi = json_is_number(json_array_get(ci, 1)) ? json_number_value(json_array_get(ci, 1)) : NAN;
    if (json_is_true(json_object_get(paired, "screened_out"))) {
        /* Timed on the screen's configurations only, and slower there
         * beyond noise: its figures cover part of the problem, so nothing
         * (not even a lower bound that looks high) commits it. */
        v->screened = 1;
        v->nconfigs = (int)json_array_size(json_object_get(paired, "configs"));
        snprintf(v->reason, sizeof v->reason,
                 "screened out: slower than the against beyond noise on the screen's %d configurations, so not "
                 "timed on the others",
                 v->nconfigs);
        return;
    }
    const int significant = v->low > 1.0 + p->min_gain;
    /* The best may have changed while it was in flight: a gain over an
     * older best counts only if it also beats the new one outright. */
    const int current = v->against == best_cand || (isfinite(aggregate) && aggregate > best);
    /* The against is written by the same optimiser and may slow itself
     * when it can tell it is the against: its own score must not have
     * fallen beyond the drift absolute scores show, i.e. the candidate's
     * absolute score must stay near the best's as recorded. */
    const double anchor = fmax(AVO_COMMIT_ANCHOR_MIN, AVO_COMMIT_ANCHOR_FACTOR * p->min_gain);
    const int anchored = isfinite(aggregate) && aggregate >= best * (1.0 - anchor);
    v->commit = significant && current && anchored;
    if (significant && current && !anchored)
        snprintf(v->reason, sizeof v->reason,
                 "its own score %.6g is more than %.0f%% under the island's best %.6g as recorded: the against ran "
                 "slower than its record, so the paired gain is not trusted",
                 aggregate, anchor * 100, best);
    else if (!significant && v->low > 1.0)
        snprintf(v->reason, sizeof v->reason, "faster beyond noise, but below commit.min_gain");
    else if (!significant)
        snprintf(v->reason, sizeof v->reason, "not a significant gain");
    else if (!current)
        snprintf(v->reason, sizeof v->reason,
                 "measured against candidate %lld, no longer the island's best (%lld), and its aggregate %.6g "
                 "is not above the best's %.6g",
                 (long long)v->against, (long long)best_cand, aggregate, best);
}

json_t *avo_commit_verdict_json(const avo_commit_params *p, const avo_commit_verdict *v)
{
    if (!v->paired) {
        json_t *o = json_pack("{s:b,s:s,s:f,s:f}", "paired", 0, "why", v->reason, "min_gain", p->min_gain, "epsilon",
                              p->epsilon);
        /* A failed pairing has no threshold: nothing commits it. */
        json_object_set_new(o, "threshold", isfinite(v->threshold) ? json_real(v->threshold) : json_null());
        return o;
    }
    json_t *o = json_pack("{s:b,s:I,s:f,s:f,s:f,s:f}", "paired", 1, "against", v->against, "ratio", v->ratio, "low",
                          v->low, "min_gain", p->min_gain, "confidence", p->confidence);
    if (v->screened)
        json_object_set_new(o, "screened_out", json_true());
    json_object_set_new(
        o, "ci", isfinite(v->ci_lo) && isfinite(v->ci_hi) ? json_pack("[f,f]", v->ci_lo, v->ci_hi) : json_null());
    if (!v->commit)
        json_object_set_new(o, "why", json_string(v->reason));
    return o;
}

json_t *avo_commit_pairing_failed(const avo_commit_verdict *v, json_int_t cand, int island)
{
    json_t *o = json_pack("{s:I,s:i,s:s}", "candidate", cand, "island", island, "reason", v->reason);
    json_object_set_new(o, "against", v->against > 0 ? json_integer(v->against) : json_null());
    return o;
}

json_t *avo_commit_not_significant(const avo_commit_params *p, const avo_commit_verdict *v, json_int_t cand, int island)
{
    json_t *o = avo_commit_verdict_json(p, v);
    json_object_del(o, "paired");
    json_object_del(o, "why");
    json_object_set_new(o, "candidate", json_integer(cand));
    json_object_set_new(o, "island", json_integer(island));
    json_object_set_new(o, "reason", json_string(v->reason));
    return o;
}

json_t *avo_commit_screened_out(json_t *paired, double confidence, json_int_t cand, int island)
{
    if (!json_is_true(json_object_get(paired, "screened_out")))
        return NULL;
    json_t *names = json_array(), *c;
    size_t i;
    json_array_foreach(json_object_get(paired, "configs"), i, c) json_array_append(names, json_object_get(c, "config"));
    const json_t *conf = json_object_get(paired, "confidence");
    return json_pack("{s:I,s:i,s:O?,s:O?,s:O?,s:O?,s:f,s:o,s:s}", "candidate", cand, "island", island, "against",
                     json_object_get(paired, "against"), "ratio", json_object_get(paired, "ratio"), "low",
                     json_object_get(paired, "low"), "ci", json_object_get(paired, "ci"), "confidence",
                     json_is_number(conf) ? json_number_value(conf) : confidence, "configs", names, "reason",
                     "slower than the against beyond noise on the screen's configurations: not timed on the others, "
                     "never committed");
}

void avo_commit_explain(const avo_commit_params *p, const avo_commit_verdict *v, json_int_t cand, double aggregate,
                        double best, char *out, size_t outlen)
{
    if (v->screened) {
        char interval[96] = "";
        if (isfinite(v->ci_lo) && isfinite(v->ci_hi))
            snprintf(interval, sizeof interval, " (%g%% interval %+.1f%% .. %+.1f%%)", v->confidence * 100,
                     (v->ci_lo - 1) * 100, (v->ci_hi - 1) * 100);
        snprintf(out, outlen,
                 "candidate %lld was screened out: %.1f%% slower than the island's best on the screen's %d "
                 "configurations%s, beyond noise, so it was not timed on the others and cannot be committed",
                 (long long)cand, (1 - v->ratio) * 100, v->nconfigs, interval);
        return;
    }
    if (!v->paired && !isfinite(v->threshold)) {
        snprintf(out, outlen, "candidate %lld scores %.6g against the island's best %.6g: %s", (long long)cand,
                 aggregate, best, v->reason);
        return;
    }
    if (!v->paired) {
        snprintf(out, outlen,
                 "candidate %lld scores %.6g against the island's best %.6g, without a paired measurement (%s); "
                 "a commit needs at least %.6g",
                 (long long)cand, aggregate, best, v->reason, v->threshold);
        return;
    }
    const double gain = (v->ratio - 1) * 100;
    char interval[128];
    /* The rule reads the one-sided bound, which sits inside the two-sided
     * interval: both are shown, or a bound above 0 beside an interval
     * reaching below it reads as a contradiction. */
    if (isfinite(v->ci_lo) && isfinite(v->ci_hi))
        snprintf(interval, sizeof interval, "%g%% interval %+.1f%% .. %+.1f%%, one-sided lower bound %+.2f%%",
                 p->confidence * 100, (v->ci_lo - 1) * 100, (v->ci_hi - 1) * 100, (v->low - 1) * 100);
    else
        snprintf(interval, sizeof interval, "%g%% lower bound %+.1f%%", p->confidence * 100, (v->low - 1) * 100);
    snprintf(out, outlen,
             "candidate %lld is %.1f%% %s than the island's best (%s): %s; a commit needs a lower "
             "bound above %+.1f%%",
             (long long)cand, fabs(gain), gain >= 0 ? "faster" : "slower", interval, v->reason, p->min_gain * 100);
}
