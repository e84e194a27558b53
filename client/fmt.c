/* avoctl's human output: numbers, scores, speedups, durations, colour and event lines (fmt.h). */
#include "fmt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void avoctl_fmt_count(long long n, const char *noun, char *buf, size_t len)
{
    snprintf(buf, len, "%lld %s%s", n, noun, n == 1 ? "" : "s");
}

void avoctl_fmt_duration(double s, char *buf, size_t len)
{
    if (!isfinite(s) || s < 0)
        s = 0;
    long long t = (long long)(s + 0.5);
    if (t < 60)
        snprintf(buf, len, "%lld s", t);
    else if (t < 3600)
        snprintf(buf, len, "%lld min %lld s", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, len, "%lld h %02lld min", t / 3600, t % 3600 / 60);
    else
        snprintf(buf, len, "%lld d %lld h", t / 86400, t % 86400 / 3600);
}

int avoctl_fmt_eta_seconds(double elapsed, long long done, long long budget, double wall_budget, double *left)
{
    int have = 0;
    double best = 0;
    if (elapsed > 0 && done > 0 && budget > 0) {
        best = done >= budget ? 0 : elapsed / (double)done * (double)(budget - done);
        have = 1;
    }
    if (wall_budget > 0 && elapsed >= 0) {
        double w = wall_budget > elapsed ? wall_budget - elapsed : 0;
        if (!have || w < best)
            best = w;
        have = 1;
    }
    if (!have)
        return -1;
    *left = best;
    return 0;
}

void avoctl_fmt_eta(double elapsed, long long done, long long budget, double wall_budget, char *buf, size_t len)
{
    double left;
    char d[64];
    if (avoctl_fmt_eta_seconds(elapsed, done, budget, wall_budget, &left) < 0) {
        snprintf(buf, len, "ETA unknown");
        return;
    }
    avoctl_fmt_duration(left, d, sizeof d);
    snprintf(buf, len, "ETA %s", d);
}

double avoctl_fmt_job_elapsed(const json_t *job)
{
    const json_t *w = json_object_get(json_object_get(job, "accounting"), "wall_seconds");
    const char *started = json_string_value(json_object_get(job, "started_at"));
    if (!started || !json_is_number(w))
        return -1;
    return json_number_value(w);
}

static int color_on;

void avoctl_fmt_color_init(int force_off)
{
    const char *nc = getenv("NO_COLOR");
    color_on = !force_off && !(nc && *nc) && isatty(STDOUT_FILENO);
}

void avoctl_fmt_color_set(int on)
{
    color_on = on;
}

const char *avoctl_fmt_color_fail(void)
{
    return color_on ? "\033[31m" : "";
}

const char *avoctl_fmt_color_good(void)
{
    return color_on ? "\033[32m" : "";
}

const char *avoctl_fmt_color_off(void)
{
    return color_on ? "\033[0m" : "";
}

const char *avoctl_fmt_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

void avoctl_fmt_num(double v, char *buf, size_t len)
{
    if (!isfinite(v))
        snprintf(buf, len, "%s", isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
    else if (fabs(v) >= 1000)
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, "%.4g", v);
}

void avoctl_fmt_time(const char *iso, int with_date, char *buf, size_t len)
{
    /* Expect "YYYY-MM-DD[T ]HH:MM:SS..." and show it as the daemon wrote it
     * (its zone), rather than guess at conversions. */
    size_t n = iso ? strlen(iso) : 0;
    if (n < 19 || iso[4] != '-' || iso[7] != '-' || (iso[10] != 'T' && iso[10] != ' ') || iso[13] != ':' ||
        iso[16] != ':') {
        snprintf(buf, len, "-");
        return;
    }
    if (with_date)
        snprintf(buf, len, "%.10s %.5s", iso, iso + 11);
    else
        snprintf(buf, len, "%.8s", iso + 11);
}

void avoctl_fmt_field(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v) && *json_string_value(v))
        snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        avoctl_fmt_num(json_real_value(v), buf, len);
    else if (json_is_boolean(v))
        snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else
        snprintf(buf, len, "-");
}

void avoctl_fmt_knobs(const json_t *knobs, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    size_t used = 0;
    char val[64];

    if (!len)
        return;
    buf[0] = 0;
    json_object_foreach((json_t *)knobs, k, v)
    {
        avoctl_fmt_field(v, val, sizeof val);
        int n = snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "", k, val);
        if (n < 0 || (size_t)n >= len - used) {
            buf[used] = 0; /* half a knob would read as a wrong value */
            return;
        }
        used += (size_t)n;
    }
}

void avoctl_fmt_speedup(const json_t *v, char *buf, size_t len)
{
    if (json_is_number(v))
        snprintf(buf, len, "x%.2f", json_number_value(v));
    else
        snprintf(buf, len, "-");
}

void avoctl_fmt_score(const json_t *obj, const char *fallback_unit, char *buf, size_t len)
{
    const json_t *agg = json_object_get(obj, "aggregate");
    const json_t *cand = json_object_get(obj, "candidate");
    const char *unit = json_string_value(json_object_get(obj, "unit"));
    char num[64];

    if (!json_is_object(obj) || !json_is_number(agg)) {
        snprintf(buf, len, "-");
        return;
    }
    if (!cand)
        cand = json_object_get(obj, "id"); /* candidate objects name it "id" */
    if (!unit)
        unit = fallback_unit;
    const char *outcome = json_string_value(json_object_get(obj, "outcome"));
    if ((outcome && strcmp(outcome, "ok") != 0) || !(json_number_value(agg) > 0)) {
        /* A failed check zeroes the score: "0 GFLOP/s" would read as a speed. */
        if (json_is_integer(cand))
            snprintf(buf, len, "failed (%s, cand %lld)", outcome && strcmp(outcome, "ok") ? outcome : "no valid score",
                     (long long)json_integer_value(cand));
        else
            snprintf(buf, len, "failed (%s)", outcome && strcmp(outcome, "ok") ? outcome : "no valid score");
        return;
    }
    avoctl_fmt_num(json_number_value(agg), num, sizeof num);
    if (json_is_integer(cand))
        snprintf(buf, len, "%s%s%s (cand %lld)", num, unit ? " " : "", unit ? unit : "",
                 (long long)json_integer_value(cand));
    else
        snprintf(buf, len, "%s%s%s", num, unit ? " " : "", unit ? unit : "");
}

/* Append to a line without overflowing it; the line stays truncated. */
static void add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strnlen(buf, len);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

static void add_num(char *buf, size_t len, const json_t *v)
{
    char num[64];
    if (json_is_number(v)) {
        avoctl_fmt_num(json_number_value(v), num, sizeof num);
        add(buf, len, " %s", num);
    }
}

static long long int_of(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* First line of a string detail, so one event stays one line. */
static void add_detail(char *buf, size_t len, const json_t *detail)
{
    const char *s = json_string_value(detail);
    if (!s && json_is_object(detail)) {
        s = json_string_value(json_object_get(detail, "message"));
        if (!s)
            s = json_string_value(json_object_get(detail, "error"));
    }
    if (!s || !*s)
        return;
    size_t n = strcspn(s, "\r\n");
    add(buf, len, ": %.*s", (int)(n > 160 ? 160 : n), s);
}

/* " island 2" where the event names one: multi-island jobs interleave. */
static void add_island(char *buf, size_t len, const json_t *d)
{
    if (json_is_integer(json_object_get(d, "island")))
        add(buf, len, " island %lld", int_of(d, "island"));
}

static void add_knobs(char *buf, size_t len, const json_t *knobs)
{
    char k[512];
    avoctl_fmt_knobs(knobs, k, sizeof k);
    if (k[0])
        add(buf, len, " [%s]", k);
}

void avoctl_fmt_noisy(const json_t *config, int with_figures, char *buf, size_t len)
{
    const json_t *rse = json_object_get(config, "rse"), *target = json_object_get(config, "rse_target");
    if (!len)
        return;
    buf[0] = 0;
    if (!json_is_true(json_object_get(config, "noisy")))
        return;
    if (with_figures && json_is_number(rse) && json_is_number(target))
        snprintf(buf, len, "noisy: rse %.1f%% > %.1f%%", 100 * json_number_value(rse), 100 * json_number_value(target));
    else
        snprintf(buf, len, "noisy");
}

void avoctl_fmt_screen(const json_t *screen, char *buf, size_t len)
{
    const json_t *ci = json_object_get(screen, "ci");
    if (!len)
        return;
    buf[0] = 0;
    if (!json_is_true(json_object_get(screen, "screened_out")))
        return;
    if (!json_is_number(json_object_get(screen, "ratio")) || !json_is_number(json_array_get(ci, 0)) ||
        !json_is_number(json_array_get(ci, 1))) {
        snprintf(buf, len, "screened out");
        return;
    }
    snprintf(buf, len, "screened out (x%.4f, %g%% [%.4f, %.4f] on %zu config%s)",
             json_number_value(json_object_get(screen, "ratio")),
             100 * json_number_value(json_object_get(screen, "confidence")), json_number_value(json_array_get(ci, 0)),
             json_number_value(json_array_get(ci, 1)), json_array_size(json_object_get(screen, "configs")),
             json_array_size(json_object_get(screen, "configs")) == 1 ? "" : "s");
}

void avoctl_fmt_job_speedup(const json_t *job, char *buf, size_t len)
{
    const json_t *d = json_object_get(job, "speedup_detail");
    const json_t *ratio = json_object_get(d, "ratio");
    avoctl_fmt_speedup(json_is_number(ratio) ? ratio : json_object_get(job, "speedup"), buf, len);
    if (!json_is_object(d))
        return;
    const json_t *ci = json_object_get(d, "ci");
    const char *note = json_string_value(json_object_get(d, "note"));
    const char *reason = json_string_value(json_object_get(d, "reason"));
    if (json_is_true(json_object_get(d, "paired"))) {
        if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1)))
            add(buf, len, " [%.3f, %.3f]", json_number_value(json_array_get(ci, 0)),
                json_number_value(json_array_get(ci, 1)));
        if (json_is_number(json_object_get(d, "confidence")))
            add(buf, len, " (%g%% interval, paired)", 100 * json_number_value(json_object_get(d, "confidence")));
        else
            add(buf, len, " (paired)");
    } else if (note) {
        add(buf, len, " (%s)", note);
    } else if (reason) {
        add(buf, len, " (unpaired: %s)", reason);
    }
}

static void fmt_evaluated(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    /* evaluation_finished: its name before candidate_evaluated; old
     * jobs' streams still replay it. */
    const char *outcome = json_string_value(json_object_get(d, "outcome"));
    add(buf, len, "%s cand %lld", kind, int_of(d, "candidate"));
    add_island(buf, len, d);
    add(buf, len, " %s", outcome ? outcome : "?");
    if (outcome && strcmp(outcome, "ok") == 0 && !json_is_number(json_object_get(d, "aggregate"))) {
        /* No full score (screened out): the detail says why. */
        add_knobs(buf, len, json_object_get(d, "knobs"));
        add_detail(buf, len, json_object_get(d, "detail"));
    } else if (outcome && strcmp(outcome, "ok") == 0) {
        add_num(buf, len, json_object_get(d, "aggregate"));
        if (unit && json_is_number(json_object_get(d, "aggregate")))
            add(buf, len, " %s", unit);
        /* Configurations timed over the rse target: a score to doubt. */
        if (int_of(d, "noisy") > 0)
            add(buf, len, " (noisy: %lld config%s)", int_of(d, "noisy"), int_of(d, "noisy") == 1 ? "" : "s");
        add_knobs(buf, len, json_object_get(d, "knobs"));
    } else {
        add_knobs(buf, len, json_object_get(d, "knobs"));
        add_detail(buf, len, json_object_get(d, "detail"));
    }
}

static void fmt_committed(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    (void)kind;
    add(buf, len, "committed cand %lld", int_of(d, "candidate"));
    if (json_is_integer(json_object_get(d, "parent")))
        add(buf, len, " (parent %lld)", int_of(d, "parent"));
    add_island(buf, len, d);
    add_num(buf, len, json_object_get(d, "aggregate"));
    if (unit && json_is_number(json_object_get(d, "aggregate")))
        add(buf, len, " %s", unit);
}

static void fmt_new_best(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    (void)kind;
    add(buf, len, "new best");
    add_num(buf, len, json_object_get(d, "aggregate"));
    if (unit && json_is_number(json_object_get(d, "aggregate")))
        add(buf, len, " %s", unit);
    if (json_is_number(json_object_get(d, "speedup")))
        add(buf, len, " (x%.2f over seed)", json_number_value(json_object_get(d, "speedup")));
    if (json_is_integer(json_object_get(d, "candidate")))
        add(buf, len, ", cand %lld", int_of(d, "candidate"));
    add_island(buf, len, d);
}

static void fmt_island_migrated(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                                size_t len)
{
    (void)ev;
    (void)kind;
    add(buf, len, "island_migrated island %lld adopted cand %lld", int_of(d, "island"), int_of(d, "candidate"));
    if (json_is_number(json_object_get(d, "aggregate"))) {
        char num[64];
        avoctl_fmt_num(json_number_value(json_object_get(d, "aggregate")), num, sizeof num);
        add(buf, len, " (%s%s%s)", num, unit ? " " : "", unit ? unit : "");
    }
    if (json_is_integer(json_object_get(d, "from")))
        add(buf, len, " from island %lld", int_of(d, "from"));
}

static void fmt_stagnation(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    const char *action = json_string_value(json_object_get(d, "action"));
    add(buf, len, "stagnation island %lld: %lld evaluation%s without a commit", int_of(d, "island"),
        int_of(d, "evaluations_without_commit"), int_of(d, "evaluations_without_commit") == 1 ? "" : "s");
    if (json_is_integer(json_object_get(d, "level")))
        add(buf, len, ", level %lld", int_of(d, "level"));
    if (action && *action)
        add(buf, len, ": %s", action);
}

static void fmt_budget_reached(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                               size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    const char *budget = json_string_value(json_object_get(d, "budget"));
    add(buf, len, "budget_reached %s", budget ? budget : "?");
    if (json_is_number(json_object_get(d, "used"))) {
        add(buf, len, ":");
        add_num(buf, len, json_object_get(d, "used"));
        if (json_is_number(json_object_get(d, "limit"))) {
            add(buf, len, " of");
            add_num(buf, len, json_object_get(d, "limit"));
        }
    }
}

static void fmt_job_finished(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                             size_t len)
{
    (void)kind;
    const char *state = json_string_value(json_object_get(d, "state"));
    const char *reason = json_string_value(json_object_get(d, "reason"));
    char best[128], seed[128], sp[512];
    avoctl_fmt_score(json_object_get(d, "best"), unit, best, sizeof best);
    avoctl_fmt_score(json_object_get(d, "seed"), unit, seed, sizeof seed);
    avoctl_fmt_job_speedup(d, sp, sizeof sp);
    add(buf, len, "job %lld finished: %s", int_of(ev, "job"), state ? state : "?");
    if (reason && *reason)
        add(buf, len, " (%s)", reason);
    if (!json_is_number(json_object_get(json_object_get(d, "best"), "aggregate")) &&
        !json_is_number(json_object_get(d, "speedup"))) {
        add(buf, len, "; no valid evaluation");
        if (json_is_object(json_object_get(d, "seed")))
            add(buf, len, "; seed %s", seed);
    } else
        add(buf, len, "; best %s vs seed %s; speedup %s", best, seed, sp);
}

static void fmt_pairing_failed(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                               size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    /* no gain shown: the pairing itself failed, and why */
    const char *reason = json_string_value(json_object_get(d, "reason"));
    add(buf, len, "pairing_failed cand %lld", int_of(d, "candidate"));
    add_island(buf, len, d);
    if (json_is_integer(json_object_get(d, "against")))
        add(buf, len, " vs cand %lld", int_of(d, "against"));
    if (reason && *reason)
        add(buf, len, ": %s", reason);
}

/* A best that keeps failing as the against (sql/026): queued alone, then
 * kept or retired. */
static void fmt_best_recheck(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                             size_t len)
{
    (void)ev;
    (void)unit;
    const char *s;
    add(buf, len, "%s cand %lld", kind, int_of(d, "candidate"));
    add_island(buf, len, d);
    if (!strcmp(kind, "best_recheck")) {
        add(buf, len, ": %lld pairings against it failed in a row, evaluated again alone",
            int_of(d, "pairing_failures"));
        if ((s = json_string_value(json_object_get(d, "last_reason"))) && *s)
            add(buf, len, " (last: %s)", s);
    } else if (!strcmp(kind, "best_rechecked")) {
        add(buf, len, ": %s alone, kept", (s = json_string_value(json_object_get(d, "outcome"))) ? s : "?");
        if ((s = json_string_value(json_object_get(d, "inconclusive"))))
            add(buf, len, " (no verdict: %s)", s);
    } else {
        add(buf, len, ": %s", (s = json_string_value(json_object_get(d, "reason"))) ? s : "failed alone");
        if (json_is_integer(json_object_get(d, "replaced_by")))
            add(buf, len, "; replaced by cand %lld", int_of(d, "replaced_by"));
        if (json_is_integer(json_object_get(d, "best_candidate")))
            add(buf, len, "; job best cand %lld", int_of(d, "best_candidate"));
    }
}

static void fmt_not_significant(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                                size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    /* a measured gain the commit rule did not take, and why */
    const json_t *ci = json_object_get(d, "ci");
    const char *reason = json_string_value(json_object_get(d, "reason"));
    add(buf, len, "not_significant cand %lld", int_of(d, "candidate"));
    add_island(buf, len, d);
    if (json_is_number(json_object_get(d, "ratio")))
        add(buf, len, " x%.4f vs cand %lld", json_number_value(json_object_get(d, "ratio")), int_of(d, "against"));
    if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1)))
        add(buf, len, " [%.4f, %.4f]", json_number_value(json_array_get(ci, 0)),
            json_number_value(json_array_get(ci, 1)));
    if (json_is_number(json_object_get(d, "low")) && json_is_number(json_object_get(d, "min_gain")))
        add(buf, len, ", low %.4f needs > %.4f", json_number_value(json_object_get(d, "low")),
            1 + json_number_value(json_object_get(d, "min_gain")));
    if (reason && *reason)
        add(buf, len, ": %s", reason);
}

static void fmt_screened_out(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                             size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    /* stopped by the screen: slower than the island's best beyond noise */
    const json_t *ci = json_object_get(d, "ci");
    size_t n = json_array_size(json_object_get(d, "configs"));
    add(buf, len, "screened_out cand %lld", int_of(d, "candidate"));
    add_island(buf, len, d);
    if (json_is_number(json_object_get(d, "ratio")))
        add(buf, len, " x%.4f vs cand %lld", json_number_value(json_object_get(d, "ratio")), int_of(d, "against"));
    if (json_is_number(json_array_get(ci, 0)) && json_is_number(json_array_get(ci, 1)))
        add(buf, len, " (%g%% [%.4f, %.4f])", 100 * json_number_value(json_object_get(d, "confidence")),
            json_number_value(json_array_get(ci, 0)), json_number_value(json_array_get(ci, 1)));
    add(buf, len, " on %zu screen config%s: slower beyond noise, not timed on the rest", n, n == 1 ? "" : "s");
}

static void fmt_final_measurement(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                                  size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    const char *status = json_string_value(json_object_get(d, "status"));
    if (status && !strcmp(status, "started")) {
        add(buf, len, "finishing: measuring the best (cand %lld) paired against the seed (cand %lld)",
            int_of(d, "candidate"), int_of(d, "against"));
    } else {
        char sp[512];
        json_t *j = json_pack("{s:O?}", "speedup_detail", json_object_get(d, "speedup"));
        avoctl_fmt_job_speedup(j, sp, sizeof sp);
        json_decref(j);
        add(buf, len, "final measurement: speedup %s", sp);
    }
}

static void fmt_job_submitted_started(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                                      size_t len)
{
    (void)unit;
    const json_t *seed = json_object_get(d, "seed");
    const char *file = json_string_value(json_object_get(seed, "file"));
    add(buf, len, "job %lld %s", int_of(ev, "job"), kind + 4);
    if (json_is_integer(json_object_get(seed, "candidate")))
        add(buf, len, " (seed: cand %lld)", int_of(seed, "candidate"));
    else if (file)
        add(buf, len, " (seed: %s)", file);
}

static void fmt_detail(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    /* not stored: what the job waits for or does now (sql/023_why.sql) */
    const char *dt = json_string_value(json_object_get(d, "detail"));
    add(buf, len, "now %s", dt ? dt : "?");
}

static void fmt_agent_step_started(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                                   size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    add(buf, len, "agent step %lld started", int_of(d, "step"));
    add_island(buf, len, d);
}

static void fmt_agent_step_ended(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf,
                                 size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    const char *state = json_string_value(json_object_get(d, "state"));
    const char *reason = json_string_value(json_object_get(d, "reason"));
    add(buf, len, "agent step %lld %s", int_of(d, "step"), state ? state : "ended");
    add_island(buf, len, d);
    add(buf, len, " after %lld turn%s, %lld evaluation%s", int_of(d, "turns"), int_of(d, "turns") == 1 ? "" : "s",
        int_of(d, "evaluations"), int_of(d, "evaluations") == 1 ? "" : "s");
    if (reason && *reason)
        add(buf, len, ": %s", reason);
}

static void fmt_llm_retry(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    (void)kind;
    (void)unit;
    /* a provider call failed and is sent again: the step is waiting, not hung */
    const char *prov = json_string_value(json_object_get(d, "provider"));
    const char *why = json_string_value(json_object_get(d, "message"));
    if (!why)
        why = json_string_value(json_object_get(d, "error"));
    add(buf, len, "provider %s: attempt %lld failed", prov && *prov ? prov : "?", int_of(d, "attempt"));
    if (json_is_integer(json_object_get(d, "status")))
        add(buf, len, " (HTTP %lld)", int_of(d, "status"));
    if (why && *why)
        add(buf, len, ": %.200s", why);
    add(buf, len, "; retrying in %.1f s (%lld of %lld retries)", json_number_value(json_object_get(d, "wait_s")),
        int_of(d, "attempt"), int_of(d, "max_retries"));
    if (json_is_integer(json_object_get(d, "step")))
        add(buf, len, ", agent step %lld", int_of(d, "step"));
}

static void fmt_unknown(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len)
{
    (void)ev;
    (void)unit;
    /* Kinds added later still show up, with their raw data. */
    add(buf, len, "%s", kind);
    char *raw = d ? json_dumps(d, JSON_COMPACT) : NULL;
    if (raw && strcmp(raw, "{}") != 0)
        add(buf, len, " %s", raw);
    free(raw);
}

/* What each event kind shows after its time; a kind not here shows its raw
 * data (fmt_unknown). */
static const struct {
    const char *kind;
    void (*fmt)(const json_t *ev, const json_t *d, const char *kind, const char *unit, char *buf, size_t len);
} event_formats[] = {
    {"candidate_evaluated", fmt_evaluated},
    {"evaluation_finished", fmt_evaluated},
    {"committed", fmt_committed},
    {"new_best", fmt_new_best},
    {"island_migrated", fmt_island_migrated},
    {"stagnation", fmt_stagnation},
    {"budget_reached", fmt_budget_reached},
    {"job_finished", fmt_job_finished},
    {"not_significant", fmt_not_significant},
    {"pairing_failed", fmt_pairing_failed},
    {"best_recheck", fmt_best_recheck},
    {"best_rechecked", fmt_best_recheck},
    {"best_retired", fmt_best_recheck},
    {"screened_out", fmt_screened_out},
    {"final_measurement", fmt_final_measurement},
    {"job_submitted", fmt_job_submitted_started},
    {"job_started", fmt_job_submitted_started},
    {"detail", fmt_detail},
    {"agent_step_started", fmt_agent_step_started},
    {"agent_step_ended", fmt_agent_step_ended},
    {"llm_retry", fmt_llm_retry},
};

void avoctl_fmt_event(const json_t *ev, const char *fallback_unit, char *buf, size_t len)
{
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    const json_t *d = json_object_get(ev, "data");
    char t[32];

    if (!len)
        return;
    buf[0] = 0;
    avoctl_fmt_time(json_string_value(json_object_get(ev, "at")), 0, t, sizeof t);
    if (strcmp(t, "-") != 0)
        add(buf, len, "[%s] ", t);
    if (!kind)
        kind = "event";

    const char *unit = json_string_value(json_object_get(d, "unit"));
    if (!unit)
        unit = json_string_value(json_object_get(json_object_get(d, "detail"), "unit"));
    if (!unit)
        unit = fallback_unit;

    for (size_t i = 0; i < sizeof event_formats / sizeof event_formats[0]; i++)
        if (strcmp(kind, event_formats[i].kind) == 0) {
            event_formats[i].fmt(ev, d, kind, unit, buf, len);
            return;
        }
    fmt_unknown(ev, d, kind, unit, buf, len);
}
