/* `avoctl campaign run`: campaign file checks, summary and regression report (campaign.h). */
#include "campaign.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "campreval.h"
#include "compare.h"
#include "fmt.h"

int avoctl_campaign_parse(const json_t *doc, const char **name, double *tolerance, json_t **jobs, char *err,
                          size_t errlen)
{
    if (!json_is_object(doc)) {
        snprintf(err, errlen, "a campaign is a JSON object {\"name\", \"jobs\": [spec, ...]}");
        return -EINVAL;
    }
    const char *n = json_string_value(json_object_get(doc, "name"));
    if (!n || !*n || strlen(n) > 64 ||
        strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != strlen(n)) {
        snprintf(err, errlen, "name: 1 to 64 letters, digits, '-' or '_' (it names the summary files)");
        return -EINVAL;
    }
    json_t *tol = json_object_get(doc, "tolerance");
    double t = tol ? json_number_value(tol) : 0.02;
    if (tol && (!json_is_number(tol) || t < 0 || t >= 1)) {
        snprintf(err, errlen, "tolerance: a fraction in [0, 1), e.g. 0.02 (2%%)");
        return -EINVAL;
    }
    json_t *j = json_object_get(doc, "jobs");
    if (!json_is_array(j) || json_array_size(j) == 0) {
        snprintf(err, errlen, "jobs: a non-empty array of job specs");
        return -EINVAL;
    }
    size_t i;
    json_t *s;
    json_array_foreach(j, i, s)
    {
        if (!json_is_object(s) || !json_is_string(json_object_get(s, "problem"))) {
            snprintf(err, errlen, "jobs[%zu]: a job spec object with a \"problem\"", i);
            return -EINVAL;
        }
    }
    json_t *rv = json_object_get(doc, "revalidate");
    avoctl_campreval_mode mode;
    if (rv && avoctl_campreval_mode_parse(json_string_value(rv), &mode) < 0) {
        snprintf(err, errlen, "revalidate: one of \"off\", \"on_toolchain_change\", \"always\"");
        return -EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)doc, k, v)
    {
        if (strcmp(k, "name") && strcmp(k, "tolerance") && strcmp(k, "jobs") && strcmp(k, "description") &&
            strcmp(k, "revalidate")) {
            snprintf(err, errlen, "%s: unknown field (name, description, tolerance, revalidate, jobs)", k);
            return -EINVAL;
        }
    }
    *name = n;
    *tolerance = t;
    *jobs = j;
    return 0;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A candidate id, or 0. */
static json_int_t cand_of(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* Why a problem with a previous baseline is compared by the numbers, or
 * NULL with *pr filled when its paired compare measured (docs/operations.md,
 * section 5). */
static const char *paired_or_why(json_int_t cand, json_int_t prev_cand, const json_t *compares, const char *problem,
                                 avoctl_paired_ratio *pr, json_int_t *cmp_id, char *why, size_t whylen)
{
    const json_t *cmp = json_object_get(compares, problem);
    if (!prev_cand)
        return "the previous summary records no candidate for it (written before paired regression checks)";
    if (!cand)
        return "this campaign's best has no candidate id";
    if (!cmp)
        return "no paired measurement was asked for";
    if (json_is_string(json_object_get(cmp, "error"))) {
        snprintf(why, whylen, "%s", json_string_value(json_object_get(cmp, "error")));
        return why;
    }
    *cmp_id = json_integer_value(json_object_get(cmp, "id"));
    switch (avoctl_compare_read(cmp, pr, why, whylen)) {
    case AVOCTL_COMPARE_MEASURED:
        return NULL;
    case AVOCTL_COMPARE_PENDING:
        snprintf(why, whylen, "compare %lld was still %s when the campaign stopped waiting", (long long)*cmp_id,
                 avoctl_fmt_str(cmp, "state"));
        return why;
    default:
        return why;
    }
}

/* Decide one problem against its previous baseline: paired when its
 * compare measured (regressed only when the whole interval lies under
 * 1 - tolerance), else by the aggregates as before. Sets previous,
 * previous_candidate, change, comparison, regressed; returns regressed. */
static int decide(json_t *p, const char *problem, const json_t *pp, const json_t *compares, double tolerance)
{
    json_t *prev = json_object_get(pp, "baseline");
    if (!json_is_number(prev))
        prev = json_object_get(pp, "best");
    const json_int_t prev_cand = cand_of(json_object_get(pp, "baseline_candidate"));
    const int has_prev = json_is_number(prev) && json_number_value(prev) > 0;
    const double now = json_number_value(json_object_get(p, "best"));
    const double abs_change = has_prev ? now / json_number_value(prev) : NAN;
    json_object_set_new(p, "previous", has_prev ? json_real(json_number_value(prev)) : json_null());
    json_object_set_new(p, "previous_candidate", prev_cand ? json_integer(prev_cand) : json_null());
    json_object_set_new(p, "absolute_change", num_or_null(abs_change));
    if (!has_prev && !prev_cand) {
        json_object_set_new(p, "change", json_null());
        json_object_set_new(p, "comparison", json_null());
        json_object_set_new(p, "regressed", json_false());
        return 0;
    }
    avoctl_paired_ratio pr;
    json_int_t cmp_id = 0;
    char buf[900];
    const char *why = paired_or_why(cand_of(json_object_get(p, "candidate")), prev_cand, compares, problem, &pr,
                                    &cmp_id, buf, sizeof buf);
    int regressed;
    if (!why) {
        regressed = pr.hi < 1 - tolerance;
        json_object_set_new(p, "change", json_real(pr.ratio));
        json_object_set_new(
            p, "comparison",
            json_pack("{s:s,s:I,s:O,s:I,s:f,s:O?,s:[f,f],s:f}", "measured", "paired", "compare", cmp_id, "candidate",
                      json_object_get(p, "candidate"), "against", prev_cand, "ratio", pr.ratio, "low",
                      json_object_get(json_object_get(json_object_get(compares, problem), "paired"), "low"), "ci",
                      pr.lo, pr.hi, "confidence", pr.confidence));
    } else {
        regressed = has_prev && abs_change < 1 - tolerance;
        json_object_set_new(p, "change", num_or_null(abs_change));
        json_object_set_new(p, "comparison", json_pack("{s:s,s:s}", "measured", "absolute", "reason", why));
    }
    json_object_set_new(p, "regressed", json_boolean(regressed));
    return regressed;
}

json_t *avoctl_campaign_summary(const char *name, const json_t *jobs, const json_t *previous, const json_t *compares,
                                double tolerance, const char *started_at, const char *finished_at)
{
    json_t *out = json_pack("{s:s,s:s,s:s,s:f,s:[],s:{}}", "campaign", name, "started_at", started_at, "finished_at",
                            finished_at, "tolerance", tolerance, "jobs", "problems");
    if (!out)
        return NULL;
    json_t *list = json_object_get(out, "jobs"), *probs = json_object_get(out, "problems");
    json_t *prev_probs = json_object_get(previous, "problems");
    int failed = 0, regressions = 0;
    size_t i;
    json_t *j;
    json_array_foreach((json_t *)jobs, i, j)
    {
        const char *problem = avoctl_fmt_str(j, "problem"), *state = avoctl_fmt_str(j, "state");
        const char *unit = avoctl_fmt_str(j, "unit");
        json_t *best = json_object_get(json_object_get(j, "best"), "aggregate");
        json_t *seed = json_object_get(json_object_get(j, "seed"), "aggregate");
        const json_int_t best_cand = cand_of(json_object_get(json_object_get(j, "best"), "candidate"));
        const int ok = state && !strcmp(state, "succeeded");
        failed += !ok;
        json_array_append_new(
            list, json_pack("{s:I,s:s,s:s,s:o,s:o,s:O,s:O,s:O}", "id",
                            (json_int_t)json_integer_value(json_object_get(j, "id")), "problem",
                            problem ? problem : "?", "state", state ? state : "unknown", "reason",
                            avoctl_fmt_str(j, "reason") ? json_string(avoctl_fmt_str(j, "reason")) : json_null(),
                            "unit", unit ? json_string(unit) : json_null(), "seed", seed ? seed : json_null(), "best",
                            best ? best : json_null(), "speedup",
                            json_object_get(j, "speedup") ? json_object_get(j, "speedup") : json_null()));
        /* the final measurement's interval, where the job made one */
        if (json_is_object(json_object_get(j, "speedup_detail")))
            json_object_set(json_array_get(list, json_array_size(list) - 1), "speedup_detail",
                            json_object_get(j, "speedup_detail"));
        if (!ok || !problem || !json_is_number(best))
            continue;
        json_t *p = json_object_get(probs, problem);
        if (!p || json_number_value(best) > json_number_value(json_object_get(p, "best")))
            json_object_set_new(probs, problem,
                                json_pack("{s:O,s:o,s:I,s:o}", "best", best, "unit",
                                          unit ? json_string(unit) : json_null(), "job",
                                          (json_int_t)json_integer_value(json_object_get(j, "id")), "candidate",
                                          best_cand ? json_integer(best_cand) : json_null()));
    }
    /* A problem with no successful job this time has no best, but keeps its
     * baseline (and the candidate that scored it) for the next campaign (its
     * failed jobs already fail this one): a regression is then still
     * measured against the last good run. */
    const char *pname;
    json_t *p;
    json_object_foreach(prev_probs, pname, p)
    {
        json_t *base = json_object_get(p, "baseline");
        if (!json_is_number(base))
            base = json_object_get(p, "best");
        const json_int_t bc = cand_of(json_object_get(p, "baseline_candidate"));
        if (!json_object_get(probs, pname) && json_is_number(base))
            json_object_set_new(probs, pname,
                                json_pack("{s:n,s:O,s:n,s:n,s:O,s:n,s:b,s:O,s:o}", "best", "unit",
                                          json_object_get(p, "unit") ? json_object_get(p, "unit") : json_null(), "job",
                                          "candidate", "previous", base, "change", "regressed", 0, "baseline", base,
                                          "baseline_candidate", bc ? json_integer(bc) : json_null()));
    }
    json_object_foreach(probs, pname, p)
    {
        if (json_object_get(p, "baseline"))
            continue; /* carried over above */
        regressions += decide(p, pname, json_object_get(prev_probs, pname), compares, tolerance);
        json_object_set_new(p, "baseline", json_real(json_number_value(json_object_get(p, "best"))));
        json_object_set(p, "baseline_candidate", json_object_get(p, "candidate"));
    }
    json_object_set_new(out, "failed", json_integer(failed));
    json_object_set_new(out, "regressions", json_integer(regressions));
    json_object_set_new(out, "ok", json_boolean(!failed && !regressions));
    return out;
}

json_t *avoctl_campaign_problem_list(const json_t *doc, json_t *(*pick)(const char *problem, const json_t *entry))
{
    json_t *out = json_array();
    const char *pname;
    json_t *p, *item;
    if (!out)
        return NULL;
    json_object_foreach(json_object_get(doc, "problems"), pname, p)
    {
        if ((item = pick(pname, p)))
            json_array_append_new(out, item);
    }
    return out;
}

static json_t *compare_pick(const char *problem, const json_t *p)
{
    const json_int_t cand = cand_of(json_object_get(p, "candidate"));
    const json_int_t prev = cand_of(json_object_get(p, "previous_candidate"));
    if (!cand || !prev)
        return NULL;
    return json_pack("{s:s,s:I,s:I}", "problem", problem, "candidate", cand, "against", prev);
}

json_t *avoctl_campaign_compare_list(const json_t *summary)
{
    return avoctl_campaign_problem_list(summary, compare_pick);
}

static void cell_num(FILE *f, const json_t *v, const char *fmt)
{
    if (json_is_number(v))
        fprintf(f, fmt, json_number_value(v));
    else
        fputs("-", f);
}

int avoctl_campaign_markdown(const json_t *s, FILE *out)
{
    fprintf(out, "# Campaign %s\n\n", avoctl_fmt_str(s, "campaign") ? avoctl_fmt_str(s, "campaign") : "?");
    fprintf(out, "%s to %s. **%s**: %lld job(s) failed, %lld problem(s) regressed (tolerance %.1f%%).\n\n",
            avoctl_fmt_str(s, "started_at") ? avoctl_fmt_str(s, "started_at") : "?",
            avoctl_fmt_str(s, "finished_at") ? avoctl_fmt_str(s, "finished_at") : "?",
            json_is_true(json_object_get(s, "ok")) ? "OK" : "FAILED",
            (long long)json_integer_value(json_object_get(s, "failed")),
            (long long)json_integer_value(json_object_get(s, "regressions")),
            json_number_value(json_object_get(s, "tolerance")) * 100);
    fprintf(out, "## Problems\n\n| problem | best | unit | job | candidate | previous | change | measured | |\n"
                 "|---|---|---|---|---|---|---|---|---|\n");
    const char *name;
    json_t *p;
    json_object_foreach(json_object_get(s, "problems"), name, p)
    {
        fprintf(out, "| %s | ", name);
        cell_num(out, json_object_get(p, "best"), "%.6g");
        fprintf(out, " | %s | ", avoctl_fmt_str(p, "unit") ? avoctl_fmt_str(p, "unit") : "");
        cell_num(out, json_object_get(p, "job"), "%.0f");
        fputs(" | ", out);
        cell_num(out, json_object_get(p, "candidate"), "%.0f");
        fputs(" | ", out);
        cell_num(out, json_object_get(p, "previous"), "%.6g");
        fputs(" | ", out);
        json_t *ch = json_object_get(p, "change");
        const json_t *cmp = json_object_get(p, "comparison");
        const char *measured = avoctl_fmt_str(cmp, "measured");
        if (!json_is_number(json_object_get(p, "best")))
            fputs("no successful job (baseline kept)", out);
        else if (json_is_number(ch))
            fprintf(out, "%+.1f%%", (json_number_value(ch) - 1) * 100);
        else
            fputs("new", out);
        fputs(" | ", out);
        if (measured && !strcmp(measured, "paired")) {
            const json_t *ci = json_object_get(cmp, "ci");
            fprintf(out, "measured paired: x%.3f, %g%% [%.3f, %.3f] (compare %lld: candidate %lld vs %lld)",
                    json_number_value(json_object_get(cmp, "ratio")),
                    100 * json_number_value(json_object_get(cmp, "confidence")),
                    json_number_value(json_array_get(ci, 0)), json_number_value(json_array_get(ci, 1)),
                    (long long)json_integer_value(json_object_get(cmp, "compare")),
                    (long long)json_integer_value(json_object_get(cmp, "candidate")),
                    (long long)json_integer_value(json_object_get(cmp, "against")));
        } else if (measured) {
            fprintf(out, "absolute (no paired measurement: %s)",
                    avoctl_fmt_str(cmp, "reason") ? avoctl_fmt_str(cmp, "reason") : "no reason given");
        }
        fprintf(out, " | %s |\n", json_is_true(json_object_get(p, "regressed")) ? "**regressed**" : "");
    }
    fprintf(out,
            "\n## Jobs\n\n| job | problem | state | seed | best | speedup | reason |\n|---|---|---|---|---|---|---|\n");
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(s, "jobs"), i, j)
    {
        fprintf(out, "| %lld | %s | %s | ", (long long)json_integer_value(json_object_get(j, "id")),
                avoctl_fmt_str(j, "problem"), avoctl_fmt_str(j, "state"));
        cell_num(out, json_object_get(j, "seed"), "%.6g");
        fputs(" | ", out);
        cell_num(out, json_object_get(j, "best"), "%.6g");
        fputs(" | ", out);
        char sp[512];
        avoctl_fmt_job_speedup(j, sp, sizeof sp);
        fprintf(out, "%s | %s |\n", sp, avoctl_fmt_str(j, "reason") ? avoctl_fmt_str(j, "reason") : "");
    }
    if (json_is_object(json_object_get(s, "revalidation")))
        avoctl_campreval_markdown(json_object_get(s, "revalidation"), out);
    return ferror(out) ? -EIO : 0;
}
