/* Toolchain records and re-validations as avoctl prints them (toolchain.h). */
#include "toolchain.h"

#include <errno.h>
#include <string.h>

#include "fmt.h"

void avoctl_toolchain_label(const json_t *v, char *buf, size_t len)
{
    if (!json_is_object(v)) {
        snprintf(buf, len, "%s", json_is_string(v) ? json_string_value(v) : "unrecorded");
        return;
    }
    size_t n = 0;
    buf[0] = 0;
#define PART(fmt, ...)                                                                                                 \
    do {                                                                                                               \
        if (n < len)                                                                                                   \
            n += (size_t)snprintf(buf + n, len - n, "%s" fmt, n ? ", " : "", __VA_ARGS__);                             \
    } while (0)
    const char *cc = avoctl_fmt_str(v, "cc"), *nvcc = avoctl_fmt_str(v, "nvcc"), *dr = avoctl_fmt_str(v, "driver");
    const char *cd = avoctl_fmt_str(v, "cuda_driver"), *rt = avoctl_fmt_str(v, "cuda_runtime");
    const char *gpu = avoctl_fmt_str(v, "gpu"), *cpu = avoctl_fmt_str(v, "cpu"), *avo = avoctl_fmt_str(v, "avo");
    if (cc)
        PART("cc %s", cc);
    if (nvcc)
        PART("nvcc %s", nvcc);
    if (dr)
        PART("driver %s", dr);
    if (cd || rt)
        PART("cuda %s/%s", cd ? cd : "-", rt ? rt : "-");
    if (gpu)
        PART("%s", gpu);
    else if (cpu)
        PART("%s", cpu);
    if (avo)
        PART("avo %s", avo);
#undef PART
    if (!buf[0])
        snprintf(buf, len, "(empty)");
}

static void num(const json_t *x, char *buf, size_t len)
{
    if (json_is_number(x))
        snprintf(buf, len, "%.4g", json_number_value(x));
    else
        snprintf(buf, len, "-");
}

static void workers_cell(const json_t *w, char *buf, size_t len)
{
    size_t i, n = 0;
    json_t *x;
    buf[0] = 0;
    json_array_foreach(w, i, x)
    {
        if (json_is_integer(x) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%lld", n ? "," : "", (long long)json_integer_value(x));
    }
    if (!buf[0])
        snprintf(buf, len, "-");
}

int avoctl_toolchain_groups_print(const json_t *groups, size_t width, FILE *out)
{
    static const char *const hdr[] = {"TOOLCHAIN", "EVALUATIONS", "OK", "BEST", "WORKERS"};
    avoctl_table *t = NULL;
    size_t i;
    json_t *g;
    int rc;
    if (!json_array_size(groups))
        return 0;
    if ((rc = avoctl_table_new(&t, 5, hdr, 1u << 1 | 1u << 2 | 1u << 3)) < 0)
        return rc;
    avoctl_table_fit(t, width, 0, 24);
    json_array_foreach(groups, i, g)
    {
        char label[512], ev[32], ok[32], best[64], w[128];
        avoctl_toolchain_label(json_object_get(g, "toolchain"), label, sizeof label);
        snprintf(ev, sizeof ev, "%lld", (long long)json_integer_value(json_object_get(g, "evaluations")));
        snprintf(ok, sizeof ok, "%lld", (long long)json_integer_value(json_object_get(g, "ok")));
        num(json_object_get(g, "best"), best, sizeof best);
        workers_cell(json_object_get(g, "workers"), w, sizeof w);
        const char *row[] = {label, ev, ok, best, w};
        if ((rc = avoctl_table_add(t, row)) < 0)
            goto cleanup;
    }
cleanup:
    return avoctl_table_print_free(t, rc, out);
}

void avoctl_toolchain_groups_markdown(const json_t *groups, FILE *out)
{
    size_t i;
    json_t *g;
    if (!json_array_size(groups))
        return;
    fprintf(out, "\n## Toolchains\n\n| toolchain | evaluations | ok | best | workers |\n|---|---:|---:|---:|---|\n");
    json_array_foreach(groups, i, g)
    {
        char label[512], best[64], w[128];
        avoctl_toolchain_label(json_object_get(g, "toolchain"), label, sizeof label);
        for (char *p = label; *p; p++)
            if (*p == '|')
                *p = '/';
        num(json_object_get(g, "best"), best, sizeof best);
        workers_cell(json_object_get(g, "workers"), w, sizeof w);
        fprintf(out, "| %s | %lld | %lld | %s | %s |\n", label,
                (long long)json_integer_value(json_object_get(g, "evaluations")),
                (long long)json_integer_value(json_object_get(g, "ok")), best, w);
    }
}

int avoctl_toolchain_revalidation_over(const json_t *rv)
{
    const char *st = avoctl_fmt_str(rv, "state");
    return st && !strcmp(st, "done");
}

int avoctl_toolchain_revalidation_print(const json_t *rv, size_t width, FILE *out)
{
    static const char *const hdr[] = {"CANDIDATE", "RECORDED", "NEW", "RATIO", "TOOLCHAIN"};
    avoctl_table *t = NULL;
    const json_t *entries = json_object_get(rv, "entries");
    const char *unit = avoctl_fmt_str(rv, "unit");
    size_t i;
    json_t *e;
    int rc;
    if (!json_is_array(entries))
        return -EINVAL;
    fprintf(out, "revalidation %lld of %s %lld (%zu candidate%s%s%s): %s\n",
            (long long)json_integer_value(json_object_get(rv, "id")),
            json_is_integer(json_object_get(rv, "candidate")) ? "candidate" : "job",
            (long long)json_integer_value(json_is_integer(json_object_get(rv, "candidate"))
                                              ? json_object_get(rv, "candidate")
                                              : json_object_get(rv, "job")),
            json_array_size(entries), json_array_size(entries) == 1 ? "" : "s", unit ? ", " : "", unit ? unit : "",
            avoctl_fmt_str(rv, "state") ? avoctl_fmt_str(rv, "state") : "?");
    if ((rc = avoctl_table_new(&t, 5, hdr, 1u << 1 | 1u << 2 | 1u << 3)) < 0)
        return rc;
    avoctl_table_fit(t, width, 4, 24);
    json_array_foreach(entries, i, e)
    {
        char cand[32], rec[64], now[128], ratio[64], tc[1100], rtc[512];
        const json_t *r = json_object_get(e, "recorded");
        const char *st = avoctl_fmt_str(e, "state"), *oc = avoctl_fmt_str(e, "outcome");
        snprintf(cand, sizeof cand, "%lld", (long long)json_integer_value(json_object_get(e, "candidate")));
        num(json_object_get(r, "aggregate"), rec, sizeof rec);
        if (st && (!strcmp(st, "queued") || !strcmp(st, "running")))
            snprintf(now, sizeof now, "%s", st);
        else if (oc && strcmp(oc, "ok"))
            snprintf(now, sizeof now, "%s", oc);
        else
            num(json_object_get(e, "aggregate"), now, sizeof now);
        if (json_is_number(json_object_get(e, "ratio")))
            snprintf(ratio, sizeof ratio, "x%.4f", json_number_value(json_object_get(e, "ratio")));
        else
            snprintf(ratio, sizeof ratio, "-");
        const json_t *changed = json_object_get(e, "changed");
        avoctl_toolchain_label(json_object_get(r, "toolchain"), rtc, sizeof rtc);
        if (json_is_false(changed)) {
            snprintf(tc, sizeof tc, "(same) %s", rtc);
        } else if (json_is_true(changed)) {
            char ntc[512];
            avoctl_toolchain_label(json_object_get(e, "toolchain"), ntc, sizeof ntc);
            snprintf(tc, sizeof tc, "%s (was %s)", ntc, rtc);
        } else {
            snprintf(tc, sizeof tc, "recorded on %s", rtc);
        }
        const char *row[] = {cand, rec, now, ratio, tc};
        if ((rc = avoctl_table_add(t, row)) < 0)
            goto cleanup;
    }
    if ((rc = avoctl_table_print(t, out)) < 0)
        goto cleanup;
    const json_t *s = json_object_get(rv, "summary");
    if (json_is_number(json_object_get(s, "geomean_ratio")))
        fprintf(out, "ratio new/recorded: x%.4f geometric mean over %lld of %lld, min x%.4f, max x%.4f\n",
                json_number_value(json_object_get(s, "geomean_ratio")),
                (long long)json_integer_value(json_object_get(s, "measured")),
                (long long)json_integer_value(json_object_get(s, "candidates")),
                json_number_value(json_object_get(s, "min_ratio")), json_number_value(json_object_get(s, "max_ratio")));
    else
        fprintf(out, "ratio new/recorded: none measured yet\n");
cleanup:
    avoctl_table_free(t);
    return rc < 0 ? rc : ferror(out) ? -EIO : 0;
}
