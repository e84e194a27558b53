/* Human views of avod's problem packages (problemview.h). */
#include "problemview.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* A description's first sentence, at most 100 characters: the list is an
 * index (`show` has the whole text). */
static void first_sentence(const char *d, char *out, size_t len)
{
    size_t n = d ? strcspn(d, "\n") : 0;
    const char *dot = d ? strstr(d, ". ") : NULL;
    if (dot && (size_t)(dot - d) < n)
        n = (size_t)(dot - d);
    if (n > 100)
        snprintf(out, len, "%.97s...", d);
    else
        snprintf(out, len, "%.*s", (int)n, d ? d : "");
}

int avoctl_problemview_list(const json_t *list, size_t width, FILE *out)
{
    static const char *const hdr[] = {"NAME", "BACKEND", "KNOBS", "CONFIGS", "UNIT", "DESCRIPTION"};
    avoctl_table *t = NULL;
    const json_t *rows = json_object_get(list, "problems");
    if (!json_is_array(rows))
        return -EINVAL;
    if (avoctl_table_new(&t, 6, hdr, 1u << 2 | 1u << 3) < 0)
        return -ENOMEM;
    size_t i;
    json_t *p;
    json_array_foreach(rows, i, p)
    {
        char knobs[16], configs[16], err[600], desc[128];
        const char *e = avoctl_fmt_str(p, "error");
        snprintf(knobs, sizeof knobs, "%lld", (long long)json_integer_value(json_object_get(p, "knobs")));
        snprintf(configs, sizeof configs, "%zu", json_array_size(json_object_get(p, "configs")));
        snprintf(err, sizeof err, "does not load: %s", e ? e : "");
        first_sentence(avoctl_fmt_str(p, "description"), desc, sizeof desc);
        const char *row[] = {avoctl_fmt_str(p, "name"), e ? "-" : avoctl_fmt_str(p, "backend"), e ? "-" : knobs,
                             e ? "-" : configs,         e ? "-" : avoctl_fmt_str(p, "unit"),    e ? err : desc};
        avoctl_table_add(t, row);
    }
    avoctl_table_fit(t, width, 5, 20);
    int rc = json_array_size(rows) ? avoctl_table_print(t, out) : 0;
    if (!json_array_size(rows))
        fprintf(out, "no problem packages under avod's kernels directory\n");
    avoctl_table_free(t);
    return rc < 0 || ferror(out) ? -EIO : 0;
}

static void join_strings(const json_t *a, char *buf, size_t len)
{
    size_t i, n = 0;
    json_t *v;
    buf[0] = 0;
    json_array_foreach(a, i, v)
    {
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "",
                                  json_string_value(v) ? json_string_value(v) : "?");
    }
}

static void print_knobs(const json_t *knobs, const json_t *constraints, FILE *out)
{
    size_t i, j;
    json_t *k, *v;
    json_array_foreach(knobs, i, k)
    {
        fprintf(out, "  %-12s default %-6lld values", avoctl_fmt_str(k, "name") ? avoctl_fmt_str(k, "name") : "?",
                (long long)json_integer_value(json_object_get(k, "default")));
        json_array_foreach(json_object_get(k, "values"), j, v)
            fprintf(out, "%s%lld", j ? ", " : " ", (long long)json_integer_value(v));
        fputc('\n', out);
    }
    json_array_foreach(constraints, i, v)
        fprintf(out, "  constraint   %s\n", json_string_value(v) ? json_string_value(v) : "?");
}

int avoctl_problemview_print(const json_t *p, FILE *out)
{
    const json_t *spec = json_object_get(p, "spec");
    char buf[1024];
    size_t i;
    json_t *v;
    if (!json_is_object(spec))
        return -EINVAL;
    fprintf(out, "problem      %s\n", avoctl_fmt_str(p, "name") ? avoctl_fmt_str(p, "name") : "?");
    fprintf(out, "backend      %s\n", avoctl_fmt_str(p, "backend") ? avoctl_fmt_str(p, "backend") : "?");
    if (avoctl_fmt_str(p, "description") && *avoctl_fmt_str(p, "description"))
        fprintf(out, "description  %s\n", avoctl_fmt_str(p, "description"));
    fprintf(out, "entry        %s\n", avoctl_fmt_str(spec, "entry") ? avoctl_fmt_str(spec, "entry") : "?");
    const char *metric = avoctl_fmt_str(spec, "score_metric");
    const char *formula = metric ? avoctl_fmt_str(spec, metric) : NULL;
    fprintf(out, "score        %s, from %s = %s\n", avoctl_fmt_str(p, "unit") ? avoctl_fmt_str(p, "unit") : "?",
            metric ? metric : "?", formula ? formula : "?");
    join_strings(json_object_get(p, "sizes"), buf, sizeof buf);
    fprintf(out, "sizes        %s\n", buf);
    fprintf(out, "\ntensors\n");
    json_array_foreach(json_object_get(spec, "tensors"), i, v)
    {
        char *shape = json_dumps(json_object_get(v, "shape"), JSON_COMPACT);
        fprintf(out, "  %-12s %-5s %-7s %s\n", avoctl_fmt_str(v, "name") ? avoctl_fmt_str(v, "name") : "?",
                avoctl_fmt_str(v, "dtype") ? avoctl_fmt_str(v, "dtype") : "?",
                avoctl_fmt_str(v, "role") ? avoctl_fmt_str(v, "role") : "?", shape ? shape : "?");
        free(shape);
    }
    fprintf(out, "\nconfigurations\n");
    json_array_foreach(json_object_get(spec, "configs"), i, v)
    {
        char *sz = json_dumps(json_object_get(v, "sizes"), JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(out, "  %-16s %s\n", avoctl_fmt_str(v, "name") ? avoctl_fmt_str(v, "name") : "?", sz ? sz : "?");
        free(sz);
    }
    fprintf(out, "\nseed %s: knobs\n", avoctl_fmt_str(spec, "seed") ? avoctl_fmt_str(spec, "seed") : "?");
    print_knobs(json_object_get(spec, "knobs"), json_object_get(spec, "constraints"), out);
    const char *key;
    json_object_foreach(json_object_get(spec, "seeds"), key, v)
    {
        fprintf(out, "\nseed %s (--seed-name %s): knobs\n", avoctl_fmt_str(v, "file") ? avoctl_fmt_str(v, "file") : "?",
                key);
        print_knobs(json_object_get(v, "knobs"), json_object_get(v, "constraints"), out);
    }
    fprintf(out, "\nknob spaces\n");
    json_array_foreach(json_object_get(p, "knob_space"), i, v)
    {
        const json_t *al = json_object_get(v, "allowed");
        char allowed[64];
        if (json_is_integer(al))
            snprintf(allowed, sizeof allowed, "%lld allowed by the constraints", (long long)json_integer_value(al));
        else
            snprintf(allowed, sizeof allowed, "too many to count");
        fprintf(out, "  %-10s %lld knobs, %.0f settings, %s\n",
                avoctl_fmt_str(v, "seed") ? avoctl_fmt_str(v, "seed") : "?",
                (long long)json_integer_value(json_object_get(v, "knobs")),
                json_number_value(json_object_get(v, "points")), allowed);
    }
    fprintf(out, "\nfiles\n");
    json_object_foreach(json_object_get(p, "files"), key, v)
        fprintf(out, "  %-20s %.12s\n", key, json_string_value(v) ? json_string_value(v) : "(unreadable)");
    fprintf(out, "package      %s\n", avoctl_fmt_str(p, "package_hash") ? avoctl_fmt_str(p, "package_hash") : "-");
    return ferror(out) ? -EIO : 0;
}
