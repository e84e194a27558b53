/* `avoctl report`: seed against best per configuration, as text or markdown (report.h). */
#include "report.h"

#include <errno.h>
#include <string.h>

#include "format.h"
#include "toolchain.h"

#define NTOTALS 14

/* One line of the totals: the same pairs feed the text and the markdown. */
typedef struct {
    const char *key;
    char val[512];
} total;

static void num_cell(const json_t *v, char *buf, size_t len)
{
    if (json_is_number(v))
        avoctl_fmt_num(json_number_value(v), buf, len);
    else
        snprintf(buf, len, "-");
}

/* "45.97 s", with the budget's limit when the spec set one. */
static void spent(const json_t *used, const json_t *limit, const char *unit, char *buf, size_t len)
{
    char u[64], l[64];
    num_cell(used, u, sizeof u);
    if (json_is_number(limit)) {
        avoctl_fmt_num(json_number_value(limit), l, sizeof l);
        snprintf(buf, len, "%s %s (budget %s %s)", u, unit, l, unit);
    } else {
        snprintf(buf, len, "%s %s", u, unit);
    }
}

/* with_island: the seed starts every island, so only the best names one. */
static void score_line(const json_t *cand, const char *unit, int with_island, char *buf, size_t len)
{
    char n[64];
    if (!json_is_object(cand) || !json_is_number(json_object_get(cand, "aggregate"))) {
        snprintf(buf, len, "-");
        return;
    }
    avoctl_fmt_num(json_number_value(json_object_get(cand, "aggregate")), n, sizeof n);
    snprintf(buf, len, "cand %lld: %s%s%s", (long long)json_integer_value(json_object_get(cand, "id")), n,
             unit ? " " : "", unit ? unit : "");
    if (with_island && json_is_integer(json_object_get(cand, "island")))
        snprintf(buf + strlen(buf), len - strlen(buf), " (island %lld)",
                 (long long)json_integer_value(json_object_get(cand, "island")));
}

/* "16 of 16: 13 ok, 2 wrong_result, 1 compile_error" */
static void evaluations_line(const json_t *e, char *buf, size_t len)
{
    char done[32], budget[32];
    const char *k;
    json_t *v;
    const json_t *by = json_object_get(e, "by_outcome");
    size_t used;

    avoctl_fmt_field(json_object_get(e, "done"), done, sizeof done);
    avoctl_fmt_field(json_object_get(e, "budget"), budget, sizeof budget);
    used = (size_t)snprintf(buf, len, "%s of %s", done, budget);
    int first = 1;
    /* ok first, then the failures as the daemon lists them. */
    for (int pass = 0; pass < 2; pass++)
        json_object_foreach((json_t *)by, k, v)
        {
            if ((strcmp(k, "ok") == 0) != (pass == 0) || used >= len)
                continue;
            used += (size_t)snprintf(buf + used, len - used, "%s%lld %s", first ? ": " : ", ",
                                     (long long)json_integer_value(v), k);
            first = 0;
        }
}

/* A score timed over its rse target: " noisy (rse 3.1%)" after it. */
static void noisy_mark(const json_t *c, const char *flag, const char *rse, char cell[128])
{
    if (!json_is_true(json_object_get(c, flag)))
        return;
    size_t used = strlen(cell);
    if (json_is_number(json_object_get(c, rse)))
        snprintf(cell + used, 128 - used, " noisy (rse %.1f%%)", 100 * json_number_value(json_object_get(c, rse)));
    else
        snprintf(cell + used, 128 - used, " noisy");
}

static void count_of(const json_t *noisy, size_t n, char *buf, size_t len)
{
    if (!json_is_integer(noisy))
        snprintf(buf, len, "-");
    else if (json_integer_value(noisy) == 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%lld of %zu", (long long)json_integer_value(noisy), n);
}

/* "seed 1 of 4, best none; rse target 0.5%": how many of each one's
 * configurations ended over the target. */
static void noise_line(const json_t *r, char *buf, size_t len)
{
    const json_t *configs = json_object_get(r, "configs"), *c;
    const json_t *sn = json_object_get(json_object_get(r, "seed"), "noisy_configs");
    const json_t *bn = json_object_get(json_object_get(r, "best"), "noisy_configs");
    char s[48], b[48];
    count_of(sn, json_array_size(configs), s, sizeof s);
    count_of(bn, json_array_size(configs), b, sizeof b);
    c = json_array_get(configs, 0);
    if (json_is_number(json_object_get(c, "rse_target")))
        snprintf(buf, len, "seed %s, best %s over the rse target %.1f%%", s, b,
                 100 * json_number_value(json_object_get(c, "rse_target")));
    else
        snprintf(buf, len, "seed %s, best %s", s, b);
}

static size_t totals(const json_t *r, total *t)
{
    const json_t *job = json_object_get(r, "job");
    const json_t *acc = json_object_get(job, "accounting");
    const json_t *budget = json_object_get(json_object_get(job, "spec"), "budget");
    const char *unit = avoctl_fmt_str(job, "unit");
    size_t n = 0;

    t[n].key = "seed";
    score_line(json_object_get(r, "seed"), unit, 0, t[n++].val, sizeof t->val);
    t[n].key = "best";
    score_line(json_object_get(r, "best"), unit, 1, t[n++].val, sizeof t->val);
    t[n].key = "speedup";
    avoctl_fmt_job_speedup(job, t[n++].val, sizeof t->val);
    /* Results from before the flag existed say nothing: no line. */
    if (json_is_integer(json_object_get(json_object_get(r, "seed"), "noisy_configs")) ||
        json_is_integer(json_object_get(json_object_get(r, "best"), "noisy_configs"))) {
        t[n].key = "noisy";
        noise_line(r, t[n++].val, sizeof t->val);
    }
    t[n].key = "evaluations";
    evaluations_line(json_object_get(job, "evaluations"), t[n++].val, sizeof t->val);
    /* Screening, where the problem has a screen: how many it stopped. */
    if (json_integer_value(json_object_get(r, "screened")) > 0) {
        t[n].key = "screened";
        snprintf(t[n++].val, sizeof t->val,
                 "%lld of %lld screened evaluations stopped by the screen (slower than the island's best beyond "
                 "noise)",
                 (long long)json_integer_value(json_object_get(r, "screened_out")),
                 (long long)json_integer_value(json_object_get(r, "screened")));
    }
    t[n].key = "commits";
    avoctl_fmt_field(json_object_get(job, "commits"), t[n++].val, sizeof t->val);
    t[n].key = "islands";
    snprintf(t[n++].val, sizeof t->val, "%zu", json_array_size(json_object_get(job, "islands")));
    t[n].key = "wall";
    spent(json_object_get(acc, "wall_seconds"), json_object_get(budget, "wall_seconds"), "s", t[n++].val,
          sizeof t->val);
    t[n].key = "GPU";
    spent(json_object_get(acc, "gpu_seconds"), json_object_get(budget, "gpu_seconds"), "s", t[n++].val, sizeof t->val);
    t[n].key = "CPU";
    spent(json_object_get(acc, "cpu_seconds"), NULL, "s", t[n++].val, sizeof t->val);
    t[n].key = "energy";
    spent(json_object_get(acc, "energy_j"), json_object_get(budget, "energy_joules"), "J", t[n++].val, sizeof t->val);
    return n;
}

/* The per-configuration rows, then the aggregate (geometric mean) row. */
static size_t nconfig_rows(const json_t *r)
{
    return json_array_size(json_object_get(r, "configs")) + 1;
}

static void config_row(const json_t *r, size_t i, char cells[4][128])
{
    const json_t *configs = json_object_get(r, "configs");
    if (i < json_array_size(configs)) {
        const json_t *c = json_array_get(configs, i);
        snprintf(cells[0], 128, "%s", avoctl_fmt_str(c, "config") ? avoctl_fmt_str(c, "config") : "?");
        num_cell(json_object_get(c, "seed"), cells[1], 128);
        num_cell(json_object_get(c, "best"), cells[2], 128);
        noisy_mark(c, "seed_noisy", "seed_rse", cells[1]);
        noisy_mark(c, "best_noisy", "best_rse", cells[2]);
        avoctl_fmt_speedup(json_object_get(c, "speedup"), cells[3], 128);
        return;
    }
    const json_t *job = json_object_get(r, "job");
    snprintf(cells[0], 128, "aggregate");
    num_cell(json_object_get(json_object_get(r, "seed"), "aggregate"), cells[1], 128);
    num_cell(json_object_get(json_object_get(r, "best"), "aggregate"), cells[2], 128);
    avoctl_fmt_speedup(json_object_get(job, "speedup"), cells[3], 128);
}

static void island_row(const json_t *is, char cells[6][64])
{
    avoctl_fmt_field(json_object_get(is, "idx"), cells[0], 64);
    num_cell(json_object_get(is, "best"), cells[1], 64);
    avoctl_fmt_field(json_object_get(is, "best_candidate"), cells[2], 64);
    avoctl_fmt_field(json_object_get(is, "commits"), cells[3], 64);
    avoctl_fmt_field(json_object_get(is, "evaluations"), cells[4], 64);
    avoctl_fmt_field(json_object_get(is, "migrations"), cells[5], 64);
}

static const char *const island_hdr[] = {"ISLAND", "BEST", "CANDIDATE", "COMMITS", "EVALUATIONS", "MIGRATIONS"};

static void title(const json_t *job, const char *word, char *buf, size_t len)
{
    const char *reason = avoctl_fmt_str(job, "reason");
    const char *problem = avoctl_fmt_str(job, "problem"), *op = avoctl_fmt_str(job, "operator");
    const char *target = avoctl_fmt_str(job, "target"), *state = avoctl_fmt_str(job, "state");
    snprintf(buf, len, "%s %lld: %s (%s, %s), %s%s%s", word, (long long)json_integer_value(json_object_get(job, "id")),
             problem ? problem : "?", op ? op : "?", target ? target : "?", state ? state : "?", reason ? ": " : "",
             reason ? reason : "");
}

int avoctl_report_print(const json_t *r, size_t width, FILE *out)
{
    const json_t *job = json_object_get(r, "job");
    const char *unit = avoctl_fmt_str(job, "unit");
    avoctl_table *t = NULL;
    total tot[NTOTALS];
    char line[1024], seedh[64], besth[64];
    int rc;

    if (!json_is_object(job))
        return -EINVAL;
    title(job, "job", line, sizeof line);
    fprintf(out, "%s\n\n", line);

    snprintf(seedh, sizeof seedh, unit ? "SEED (%s)" : "SEED", unit);
    snprintf(besth, sizeof besth, unit ? "BEST (%s)" : "BEST", unit);
    const char *hdr[] = {"CONFIG", seedh, besth, "SPEEDUP"};
    if ((rc = avoctl_table_new(&t, 4, hdr, 1u << 1 | 1u << 2 | 1u << 3)) < 0)
        return rc;
    avoctl_table_fit(t, width, 0, 12);
    for (size_t i = 0; i < nconfig_rows(r); i++) {
        char cells[4][128];
        config_row(r, i, cells);
        const char *row[] = {cells[0], cells[1], cells[2], cells[3]};
        if ((rc = avoctl_table_add(t, row)) < 0)
            goto cleanup;
    }
    if ((rc = avoctl_table_print(t, out)) < 0)
        goto cleanup;
    avoctl_table_free(t);
    t = NULL;

    fputc('\n', out);
    size_t n = totals(r, tot);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%-12s %s\n", tot[i].key, tot[i].val);

    const json_t *islands = json_object_get(job, "islands");
    if (json_array_size(islands) > 1) {
        size_t i;
        json_t *is;
        if ((rc = avoctl_table_new(&t, 6, island_hdr, 0x3f)) < 0)
            goto cleanup;
        json_array_foreach(islands, i, is)
        {
            char cells[6][64];
            island_row(is, cells);
            const char *row[] = {cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]};
            if ((rc = avoctl_table_add(t, row)) < 0)
                goto cleanup;
        }
        fputc('\n', out);
        if ((rc = avoctl_table_print(t, out)) < 0)
            goto cleanup;
    }
    /* Results grouped by the toolchain that produced them (sql/018) */
    rc = avoctl_toolchain_groups_print(json_object_get(r, "toolchains"), width, out);
cleanup:
    avoctl_table_free(t);
    return rc < 0 ? rc : ferror(out) ? -EIO : 0;
}

/* A table cell: '|' would end it and a newline the row. */
static void md_cell(FILE *out, const char *s)
{
    fputs("| ", out);
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", out);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', out);
        else
            fputc(*s, out);
    }
    fputc(' ', out);
}

int avoctl_report_markdown(const json_t *r, FILE *out)
{
    const json_t *job = json_object_get(r, "job");
    const char *unit = avoctl_fmt_str(job, "unit");
    total tot[NTOTALS];
    char line[1024];

    if (!json_is_object(job))
        return -EINVAL;
    title(job, "Job", line, sizeof line);
    fprintf(out, "# %s\n\n", line);

    fprintf(out, "## Seed against best, per configuration\n\n");
    fprintf(out, "| config | seed%s%s%s | best%s%s%s | speedup |\n|---|---:|---:|---:|\n", unit ? " (" : "",
            unit ? unit : "", unit ? ")" : "", unit ? " (" : "", unit ? unit : "", unit ? ")" : "");
    for (size_t i = 0; i < nconfig_rows(r); i++) {
        char cells[4][128];
        config_row(r, i, cells);
        if (i + 1 == nconfig_rows(r))
            fprintf(out, "| **%s** ", cells[0]);
        else
            md_cell(out, cells[0]);
        for (int k = 1; k < 4; k++)
            md_cell(out, cells[k]);
        fputs("|\n", out);
    }

    fprintf(out, "\n## Totals\n\n| | |\n|---|---|\n");
    size_t n = totals(r, tot);
    for (size_t i = 0; i < n; i++) {
        md_cell(out, tot[i].key);
        md_cell(out, tot[i].val);
        fputs("|\n", out);
    }

    const json_t *islands = json_object_get(job, "islands");
    if (json_array_size(islands) > 1) {
        size_t i;
        json_t *is;
        fprintf(out, "\n## Islands\n\n| island | best | candidate | commits | evaluations | migrations |\n"
                     "|---:|---:|---:|---:|---:|---:|\n");
        json_array_foreach(islands, i, is)
        {
            char cells[6][64];
            island_row(is, cells);
            for (int k = 0; k < 6; k++)
                md_cell(out, cells[k]);
            fputs("|\n", out);
        }
    }
    avoctl_toolchain_groups_markdown(json_object_get(r, "toolchains"), out);
    return ferror(out) ? -EIO : 0;
}
