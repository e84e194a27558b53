/* `avoctl watch` on a terminal: one live line per island (islands.h). */
#include "islands.h"

#include <math.h>
#include <string.h>

#include "fmt.h"

void avoctl_islands_init(avoctl_islands *v, int islands, int budget, const char *unit)
{
    memset(v, 0, sizeof *v);
    v->nislands = islands > 0 && islands <= AVOCTL_MAX_ISLANDS ? islands : 1;
    v->budget = budget > 0 ? budget : 0;
    v->elapsed = -1;
    snprintf(v->unit, sizeof v->unit, "%s", unit ? unit : "");
}

/* Island i (a JSON integer; anything else is island 0). */
static avoctl_island *island_at(avoctl_islands *v, const json_t *i)
{
    long long k = json_is_integer(i) ? json_integer_value(i) : 0;
    if (k < 0 || k >= AVOCTL_MAX_ISLANDS)
        return NULL;
    if (k + 1 > v->nislands)
        v->nislands = (int)k + 1;
    return &v->isl[k];
}

static avoctl_island *island_of(avoctl_islands *v, const json_t *data)
{
    return island_at(v, json_object_get(data, "island"));
}

static void push_best(avoctl_island *s, double best)
{
    s->best = best;
    if (s->nhistory == AVOCTL_SPARK) {
        memmove(s->history, s->history + 1, (AVOCTL_SPARK - 1) * sizeof *s->history);
        s->nhistory--;
    }
    s->history[s->nhistory++] = best;
}

void avoctl_islands_event(avoctl_islands *v, const json_t *ev)
{
    const char *kind = avoctl_fmt_str(ev, "kind");
    const json_t *d = json_object_get(ev, "data");
    if (!kind)
        return;
    const char *unit = avoctl_fmt_str(d, "unit");
    if (unit && !v->unit[0])
        snprintf(v->unit, sizeof v->unit, "%s", unit);
    if (!strcmp(kind, "candidate_evaluated") || !strcmp(kind, "evaluation_finished")) {
        avoctl_island *s = island_of(v, d);
        if (s) {
            s->evaluations++;
            const char *o = avoctl_fmt_str(d, "outcome");
            s->failed += o && strcmp(o, "ok") != 0;
        }
    } else if (!strcmp(kind, "committed") || !strcmp(kind, "island_migrated")) {
        avoctl_island *s = island_of(v, d);
        json_t *agg = json_object_get(d, "aggregate");
        if (s && json_is_number(agg)) {
            /* The first commit of the job is its seed. */
            if (v->seed == 0 && json_is_null(json_object_get(d, "parent")) && !strcmp(kind, "committed"))
                v->seed = json_number_value(agg);
            push_best(s, json_number_value(agg));
        }
    } else if (!strcmp(kind, "best_retired")) {
        /* Each island that held the retired best is back at its
         * predecessor's recorded aggregate. */
        json_t *agg = json_object_get(d, "aggregate"), *k;
        size_t i;
        json_array_foreach(json_object_get(d, "islands"), i, k)
        {
            avoctl_island *s = json_is_integer(k) ? island_at(v, k) : NULL;
            if (s && json_is_number(agg))
                push_best(s, json_number_value(agg));
        }
    } else if (!strcmp(kind, "job_finished")) {
        v->finished = 1;
        snprintf(v->state, sizeof v->state, "%s", avoctl_fmt_str(d, "state") ? avoctl_fmt_str(d, "state") : "");
        snprintf(v->reason, sizeof v->reason, "%s", avoctl_fmt_str(d, "reason") ? avoctl_fmt_str(d, "reason") : "");
        json_t *sp = json_object_get(d, "speedup");
        v->speedup = json_is_number(sp) ? json_number_value(sp) : 0;
        if (json_is_object(json_object_get(d, "speedup_detail")))
            avoctl_fmt_job_speedup(d, v->speedup_text, sizeof v->speedup_text);
        json_t *seed = json_object_get(json_object_get(d, "seed"), "aggregate");
        if (json_is_number(seed))
            v->seed = json_number_value(seed);
    }
}

/* Eight levels of block elements, scaled between the smallest and largest
 * point shown. */
static void sparkline(const avoctl_island *s, char *out, size_t len)
{
    static const char *const bars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < s->nhistory; i++) {
        lo = fmin(lo, s->history[i]);
        hi = fmax(hi, s->history[i]);
    }
    out[0] = 0;
    for (int i = 0; i < s->nhistory && strlen(out) + 4 < len; i++) {
        int k = hi > lo ? (int)((s->history[i] - lo) / (hi - lo) * 7.0 + 0.5) : 7;
        strcat(out, bars[k < 0 ? 0 : k > 7 ? 7 : k]);
    }
}

int avoctl_islands_print(const avoctl_islands *v, size_t width, FILE *out)
{
    int total = 0;
    for (int i = 0; i < v->nislands; i++)
        total += v->isl[i].evaluations;
    for (int i = 0; i < v->nislands; i++) {
        const avoctl_island *s = &v->isl[i];
        char line[512], spark[AVOCTL_SPARK * 4 + 1], best[64] = "-", speed[32] = "";
        if (s->best > 0)
            snprintf(best, sizeof best, "%.4g %s", s->best, v->unit);
        if (s->best > 0 && v->seed > 0)
            snprintf(speed, sizeof speed, "x%.2f", s->best / v->seed);
        sparkline(s, spark, sizeof spark);
        int n;
        if (v->budget)
            n = snprintf(line, sizeof line, "island %-2d %4d %s (job %d/%d)  best %-18s %-7s %s", i, s->evaluations,
                         s->evaluations == 1 ? "eval " : "evals", total, v->budget, best, speed, spark);
        else
            n = snprintf(line, sizeof line, "island %-2d %4d %s  best %-18s %-7s %s", i, s->evaluations,
                         s->evaluations == 1 ? "eval " : "evals", best, speed, spark);
        if (s->failed)
            n += snprintf(line + n, sizeof line - (size_t)n, "  %s(%d failed)%s", avoctl_fmt_color_fail(), s->failed,
                          avoctl_fmt_color_off());
        /* Cut at the terminal's width, counting a multi-byte bar as one column. */
        size_t cols = 0, cut = strlen(line);
        for (size_t b = 0; line[b]; b++) {
            if (((unsigned char)line[b] & 0xC0) != 0x80)
                cols++;
            if (width && cols > width) {
                cut = b;
                break;
            }
        }
        fprintf(out, "%.*s%s\n", (int)cut, line, cut < strlen(line) ? avoctl_fmt_color_off() : "");
    }
    if (v->elapsed < 0)
        return v->nislands;
    char el[64], eta[96];
    avoctl_fmt_duration(v->elapsed, el, sizeof el);
    avoctl_fmt_eta(v->elapsed, total, v->budget, v->wall_budget, eta, sizeof eta);
    fprintf(out, "elapsed %s, %s\n", el, eta);
    return v->nislands + 1;
}

void avoctl_islands_summary(const avoctl_islands *v, FILE *out)
{
    int total = 0;
    double best = 0;
    for (int i = 0; i < v->nislands; i++) {
        total += v->isl[i].evaluations;
        best = fmax(best, v->isl[i].best);
    }
    const char *unit = v->unit[0] ? v->unit : "(unit unknown)";
    fprintf(out, "job %s: %s; ", v->state[0] ? v->state : "ended", v->reason[0] ? v->reason : "-");
    if (best > 0)
        fprintf(out, "best %.4g %s", best, unit);
    else
        fprintf(out, "no valid evaluation yet");
    if (best > 0 && v->seed > 0 && v->speedup_text[0])
        fprintf(out, " vs seed %.4g %s (speedup %s)", v->seed, unit, v->speedup_text);
    else if (best > 0 && v->seed > 0)
        fprintf(out, " vs seed %.4g %s (x%.2f)", v->seed, unit, v->speedup > 0 ? v->speedup : best / v->seed);
    fprintf(out, " after %d evaluation%s on %d island%s\n", total, total == 1 ? "" : "s", v->nislands,
            v->nislands == 1 ? "" : "s");
}

void avoctl_islands_job_summary(const json_t *job, FILE *out)
{
    const char *state = avoctl_fmt_str(job, "state"), *reason = avoctl_fmt_str(job, "reason");
    const char *unit = avoctl_fmt_str(job, "unit");
    const json_t *best = json_object_get(json_object_get(job, "best"), "aggregate");
    const json_t *seed = json_object_get(job, "seed");
    const json_t *seed_agg = json_object_get(seed, "aggregate");
    const char *seed_outcome = avoctl_fmt_str(seed, "outcome");
    const json_t *done = json_object_get(json_object_get(job, "evaluations"), "done");
    long long n = json_is_integer(done) ? (long long)json_integer_value(done) : 0;
    size_t nisl = json_array_size(json_object_get(job, "islands"));
    const json_t *spec_isl = json_object_get(json_object_get(job, "spec"), "islands");
    char num[64], sp[512], evals[64];

    if (!unit)
        unit = "(unit unknown)";
    if (!nisl)
        nisl = json_is_integer(spec_isl) && json_integer_value(spec_isl) > 0 ? (size_t)json_integer_value(spec_isl) : 1;
    fprintf(out, "job %s: %s; ", state ? state : "ended", reason && *reason ? reason : "-");
    int seed_failed = (seed_outcome && strcmp(seed_outcome, "ok") != 0) ||
                      (json_is_number(seed_agg) && !(json_number_value(seed_agg) > 0));
    if (json_is_number(best) && json_number_value(best) > 0) {
        avoctl_fmt_num(json_number_value(best), num, sizeof num);
        fprintf(out, "best %s %s", num, unit);
        if (seed_failed) {
            fprintf(out, "; seed failed (%s)",
                    seed_outcome && strcmp(seed_outcome, "ok") ? seed_outcome : "no valid score");
        } else if (json_is_number(seed_agg)) {
            avoctl_fmt_num(json_number_value(seed_agg), num, sizeof num);
            avoctl_fmt_job_speedup(job, sp, sizeof sp);
            if (json_is_object(json_object_get(job, "speedup_detail")))
                fprintf(out, " vs seed %s %s (speedup %s)", num, unit, sp);
            else
                fprintf(out, " vs seed %s %s (%s)", num, unit, sp);
        }
    } else if (seed_failed) {
        fprintf(out, "seed failed (%s); no valid evaluation yet",
                seed_outcome && strcmp(seed_outcome, "ok") ? seed_outcome : "no valid score");
    } else {
        fprintf(out, "no valid evaluation yet");
    }
    avoctl_fmt_count(n, "evaluation", evals, sizeof evals);
    fprintf(out, " after %s on %zu island%s\n", evals, nisl, nisl == 1 ? "" : "s");
}
