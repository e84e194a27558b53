/* `avoctl compare`: reading what a compare task measured (compare.h). */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

int avoctl_compare_read(const json_t *cmp, avoctl_paired_ratio *out, char *why, size_t whylen)
{
    const char *state = avoctl_fmt_str(cmp, "state");
    const char *outcome = avoctl_fmt_str(cmp, "outcome");
    const char *detail = avoctl_fmt_str(cmp, "detail");
    const json_t *p = json_object_get(cmp, "paired");
    const json_t *ci = json_object_get(p, "ci");
    if (!state) {
        snprintf(why, whylen, "not a compare (no state)");
        return AVOCTL_COMPARE_FAILED;
    }
    if (!strcmp(state, "queued") || !strcmp(state, "running"))
        return AVOCTL_COMPARE_PENDING;
    if (!strcmp(state, "cancelled")) {
        snprintf(why, whylen, "compare %lld was cancelled", (long long)json_integer_value(json_object_get(cmp, "id")));
        return AVOCTL_COMPARE_FAILED;
    }
    if (!outcome || strcmp(outcome, "ok") != 0) {
        snprintf(why, whylen, "the candidate's evaluation was %s%s%s", outcome ? outcome : state, detail ? ": " : "",
                 detail ? detail : "");
        return AVOCTL_COMPARE_FAILED;
    }
    if (!json_is_object(p)) {
        snprintf(why, whylen, "the evaluation has no paired measurement");
        return AVOCTL_COMPARE_FAILED;
    }
    if (json_object_get(p, "error")) {
        snprintf(why, whylen, "the paired measurement failed: %s",
                 avoctl_fmt_str(p, "error") ? avoctl_fmt_str(p, "error") : "no reason given");
        return AVOCTL_COMPARE_FAILED;
    }
    const double r = json_number_value(json_object_get(p, "ratio"));
    const double lo = json_number_value(json_array_get(ci, 0)), hi = json_number_value(json_array_get(ci, 1));
    if (!json_is_number(json_object_get(p, "ratio")) || !(r > 0) || !isfinite(r) ||
        !json_is_number(json_array_get(ci, 0)) || !json_is_number(json_array_get(ci, 1)) || !(lo <= hi)) {
        snprintf(why, whylen, "the paired measurement has no ratio with an interval");
        return AVOCTL_COMPARE_FAILED;
    }
    const json_t *c = json_object_get(p, "confidence");
    *out = (avoctl_paired_ratio){
        r, lo, hi, json_is_number(c) ? json_number_value(c) : json_number_value(json_object_get(cmp, "confidence"))};
    return AVOCTL_COMPARE_MEASURED;
}

void avoctl_compare_line(const json_t *cmp, char *buf, size_t len)
{
    avoctl_paired_ratio pr;
    char why[700];
    const long long a = (long long)json_integer_value(json_object_get(cmp, "candidate"));
    const long long b = (long long)json_integer_value(json_object_get(cmp, "against"));
    switch (avoctl_compare_read(cmp, &pr, why, sizeof why)) {
    case AVOCTL_COMPARE_MEASURED:
        snprintf(buf, len, "candidate %lld vs %lld: x%.3f, %g%% [%.3f, %.3f]", a, b, pr.ratio, 100 * pr.confidence,
                 pr.lo, pr.hi);
        break;
    case AVOCTL_COMPARE_PENDING:
        snprintf(buf, len, "candidate %lld vs %lld: %s (compare %lld)", a, b, avoctl_fmt_str(cmp, "state"),
                 (long long)json_integer_value(json_object_get(cmp, "id")));
        break;
    default:
        snprintf(buf, len, "candidate %lld vs %lld: no paired measurement: %s", a, b, why);
    }
}
