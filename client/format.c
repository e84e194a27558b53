#include "format.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct avoctl_table {
    size_t ncols;
    size_t nrows;       /* including the header row */
    size_t cap;
    unsigned right_mask;
    char **cells;       /* nrows * ncols, row-major */
};

static int grow(avoctl_table *t)
{
    if (t->nrows < t->cap)
        return 0;
    size_t cap = t->cap ? t->cap * 2 : 16;
    char **c = realloc(t->cells, cap * t->ncols * sizeof *c);
    if (!c)
        return -ENOMEM;
    t->cells = c;
    t->cap = cap;
    return 0;
}

int avoctl_table_add(avoctl_table *t, const char *const *cells)
{
    if (grow(t) < 0)
        return -ENOMEM;
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        row[i] = strdup(cells[i] && *cells[i] ? cells[i] : "-");
        if (!row[i]) {
            while (i--)
                free(row[i]);
            return -ENOMEM;
        }
    }
    t->nrows++;
    return 0;
}

int avoctl_table_new(avoctl_table **out, size_t ncols, const char *const *headers,
                     unsigned right_mask)
{
    avoctl_table *t = calloc(1, sizeof *t);
    if (!t || ncols == 0)
        goto fail;
    t->ncols = ncols;
    t->right_mask = right_mask;
    if (avoctl_table_add(t, headers) < 0)
        goto fail;
    *out = t;
    return 0;
fail:
    avoctl_table_free(t);
    return ncols ? -ENOMEM : -EINVAL;
}

size_t avoctl_table_rows(const avoctl_table *t)
{
    return t->nrows - 1;
}

/* Display width in columns: UTF-8 continuation bytes take no room. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

int avoctl_table_print(const avoctl_table *t, FILE *out)
{
    size_t *w = calloc(t->ncols, sizeof *w);
    if (!w)
        return -ENOMEM;
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t cw = width(t->cells[r * t->ncols + c]);
            if (cw > w[c])
                w[c] = cw;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            int pad = (int)(w[c] - width(s));
            int last = c + 1 == t->ncols;
            if (c)
                fputs("  ", out);
            if (t->right_mask & (1u << c))
                fprintf(out, "%*s%s", pad, "", s);
            else
                fprintf(out, "%s%*s", s, last ? 0 : pad, "");
        }
        fputc('\n', out);
    }
    free(w);
    return ferror(out) ? -EIO : 0;
}

void avoctl_table_free(avoctl_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
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
    if (n < 19 || iso[4] != '-' || iso[7] != '-' || (iso[10] != 'T' && iso[10] != ' ') ||
        iso[13] != ':' || iso[16] != ':') {
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

    if (strcmp(kind, "evaluation_finished") == 0) {
        const char *outcome = json_string_value(json_object_get(d, "outcome"));
        add(buf, len, "evaluation_finished cand %lld %s", int_of(d, "candidate"),
            outcome ? outcome : "?");
        if (outcome && strcmp(outcome, "ok") == 0) {
            add_num(buf, len, json_object_get(d, "aggregate"));
            if (unit && json_is_number(json_object_get(d, "aggregate")))
                add(buf, len, " %s", unit);
        } else {
            add_detail(buf, len, json_object_get(d, "detail"));
        }
    } else if (strcmp(kind, "committed") == 0) {
        add(buf, len, "committed cand %lld", int_of(d, "candidate"));
        if (json_is_integer(json_object_get(d, "parent")))
            add(buf, len, " (parent %lld)", int_of(d, "parent"));
        add_num(buf, len, json_object_get(d, "aggregate"));
    } else if (strcmp(kind, "new_best") == 0) {
        add(buf, len, "new best");
        add_num(buf, len, json_object_get(d, "aggregate"));
        if (json_is_number(json_object_get(d, "speedup")))
            add(buf, len, " (x%.2f over seed)", json_number_value(json_object_get(d, "speedup")));
        if (json_is_integer(json_object_get(d, "candidate")))
            add(buf, len, ", cand %lld", int_of(d, "candidate"));
    } else if (strcmp(kind, "job_finished") == 0) {
        const char *state = json_string_value(json_object_get(d, "state"));
        const char *reason = json_string_value(json_object_get(d, "reason"));
        char best[128], seed[128], sp[32];
        avoctl_fmt_score(json_object_get(d, "best"), unit, best, sizeof best);
        avoctl_fmt_score(json_object_get(d, "seed"), unit, seed, sizeof seed);
        avoctl_fmt_speedup(json_object_get(d, "speedup"), sp, sizeof sp);
        add(buf, len, "job %lld finished: %s", int_of(ev, "job"), state ? state : "?");
        if (reason && *reason)
            add(buf, len, " (%s)", reason);
        add(buf, len, "; best %s vs seed %s; speedup %s", best, seed, sp);
    } else if (strcmp(kind, "job_submitted") == 0 || strcmp(kind, "job_started") == 0) {
        add(buf, len, "job %lld %s", int_of(ev, "job"), kind + 4);
    } else {
        /* Kinds added later still show up, with their raw data. */
        add(buf, len, "%s", kind);
        char *raw = d ? json_dumps(d, JSON_COMPACT) : NULL;
        if (raw && strcmp(raw, "{}") != 0)
            add(buf, len, " %s", raw);
        free(raw);
    }
}
