/* Search efficiency of the `tune` operator against uniform random sampling,
 * on a measured landscape: every allowed knob configuration of a problem
 * evaluated once (bench/tune_sweep.sh writes that table). Both searches are
 * replayed against the table with 10 RNG seeds; the figure is the number of
 * evaluations until one within 2% of the table's best has been evaluated.
 *
 *   tune_efficiency list PROBLEM_DIR
 *       every allowed configuration, one per line: "K1=v1 K2=v2 ..."
 *   tune_efficiency run PROBLEM_DIR TABLE [--seeds N] [--batch B] [--budget E] [--within F]
 *       TABLE lines: "K1=v1 K2=v2 ...<TAB>aggregate" (0 = failed)
 *
 * tune proposes B configurations at a time (B islands' worth in flight),
 * sees their scores, proposes the next B: the engine's loop, without I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_problem.h"
#include "tune.h"

typedef struct {
    int64_t v[AVO_PROBLEM_MAX_KNOBS];
    double score;
} table_row;

typedef struct {
    table_row *rows;
    int n;
    double best;
} landscape;

static int parse_config(const avo_problem *p, const char *text, int64_t *v)
{
    int got = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%.1000s", text);
    for (char *save = NULL, *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -EINVAL;
        *eq = 0;
        for (int i = 0; i < p->nknobs; i++)
            if (!strcmp(p->knobs[i].name, tok)) {
                v[i] = strtoll(eq + 1, NULL, 10);
                got++;
            }
    }
    return got == p->nknobs ? 0 : -EINVAL;
}

static void print_config(const avo_problem *p, const int64_t *v)
{
    for (int i = 0; i < p->nknobs; i++)
        printf("%s%s=%lld", i ? " " : "", p->knobs[i].name, (long long)v[i]);
    printf("\n");
}

/* Every allowed configuration, in mixed-radix order of the knob values. */
static int enumerate(const avo_problem *p, int64_t (**out)[AVO_PROBLEM_MAX_KNOBS])
{
    uint64_t space = avo_tune_space_size(p);
    int64_t (*all)[AVO_PROBLEM_MAX_KNOBS] = calloc(space ? space : 1, sizeof *all);
    int n = 0;
    if (!all)
        return -ENOMEM;
    for (uint64_t idx = 0; idx < space; idx++) {
        uint64_t r = idx;
        int64_t v[AVO_PROBLEM_MAX_KNOBS] = {0};
        for (int i = 0; i < p->nknobs; i++) {
            v[i] = p->knobs[i].values[r % (uint64_t)p->knobs[i].nvalues];
            r /= (uint64_t)p->knobs[i].nvalues;
        }
        if (avo_problem_knobs_allowed(p, v) == 1)
            memcpy(all[n++], v, sizeof v);
    }
    *out = all;
    return n;
}

static int load_table(const avo_problem *p, const char *path, landscape *l)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tune_efficiency: %s: %s\n", path, strerror(errno));
        return -errno;
    }
    char line[1024];
    int cap = 0, lineno = 0;
    memset(l, 0, sizeof *l);
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab)
            continue;
        *tab = 0;
        if (l->n == cap) {
            cap = cap ? 2 * cap : 256;
            table_row *g = realloc(l->rows, (size_t)cap * sizeof *g);
            if (!g) {
                fclose(f);
                return -ENOMEM;
            }
            l->rows = g;
        }
        table_row *r = &l->rows[l->n];
        memset(r, 0, sizeof *r);
        if (parse_config(p, line, r->v) < 0) {
            fprintf(stderr, "tune_efficiency: %s:%d: not a configuration of this problem\n", path, lineno);
            fclose(f);
            return -EINVAL;
        }
        r->score = strtod(tab + 1, NULL);
        if (r->score > l->best)
            l->best = r->score;
        l->n++;
    }
    fclose(f);
    return l->n > 0 ? 0 : -EINVAL;
}

static double lookup(const avo_problem *p, const landscape *l, const int64_t *v)
{
    for (int i = 0; i < l->n; i++)
        if (!memcmp(l->rows[i].v, v, (size_t)p->nknobs * sizeof *v))
            return l->rows[i].score;
    return -1;  /* not in the table */
}

/* Evaluations tune needs to reach `goal`, or budget + 1 when it does not. */
static int run_tune(const avo_problem *p, const landscape *l, uint64_t seed, int batch, int budget, double goal)
{
    avo_tune_point *tried = calloc((size_t)budget + 1, sizeof *tried), out[64];
    int ntried = 0, result = budget + 1;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    if (!tried)
        return -1;
    /* The job starts from the seed: the problem's default knobs. */
    for (int i = 0; i < p->nknobs; i++)
        tried[0].v[i] = p->knobs[i].dflt;
    tried[0].score = lookup(p, l, tried[0].v);
    tried[0].evaluated = 1;
    ntried = 1;
    if (tried[0].score >= goal)
        result = 1;
    while (result > budget && ntried < budget) {
        int want = batch < budget - ntried ? batch : budget - ntried;
        int n = avo_tune_propose(p, &rng, tried, ntried, budget - ntried, 0, out, want);
        if (n <= 0)
            break;
        for (int k = 0; k < n && result > budget; k++) {
            out[k].score = lookup(p, l, out[k].v);
            out[k].evaluated = 1;
            tried[ntried++] = out[k];
            if (out[k].score >= goal)
                result = ntried;
        }
    }
    free(tried);
    return result;
}

/* Uniform sampling without replacement, also starting from the seed. */
static int run_random(const avo_problem *p, const landscape *l, uint64_t seed, int budget, double goal)
{
    int *order = malloc((size_t)l->n * sizeof *order), result = budget + 1;
    uint64_t rng = seed * 0xD1B54A32D192ED03ull + 7;
    int64_t dflt[AVO_PROBLEM_MAX_KNOBS] = {0};
    if (!order)
        return -1;
    for (int i = 0; i < p->nknobs; i++)
        dflt[i] = p->knobs[i].dflt;
    if (lookup(p, l, dflt) >= goal)
        result = 1;
    for (int i = 0; i < l->n; i++)
        order[i] = i;
    for (int i = l->n - 1; i > 0; i--) {
        int j = (int)(avo_tune_rand(&rng) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int used = 1;
    for (int i = 0; i < l->n && result > budget && used < budget; i++) {
        const table_row *r = &l->rows[order[i]];
        if (!memcmp(r->v, dflt, (size_t)p->nknobs * sizeof *dflt))
            continue;
        used++;
        if (r->score >= goal)
            result = used;
    }
    free(order);
    return result;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "list") && strcmp(argv[1], "run"))) {
        fprintf(stderr, "usage: tune_efficiency list PROBLEM_DIR\n"
                        "       tune_efficiency run PROBLEM_DIR TABLE [--seeds N] [--batch B] [--budget E] "
                        "[--within F]\n");
        return 2;
    }
    avo_problem p;
    char err[1024];
    if (avo_problem_load(&p, argv[2], err, sizeof err) < 0) {
        fprintf(stderr, "tune_efficiency: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (!strcmp(argv[1], "list")) {
        int64_t (*all)[AVO_PROBLEM_MAX_KNOBS] = NULL;
        int n = enumerate(&p, &all);
        for (int i = 0; i < n; i++)
            print_config(&p, all[i]);
        free(all);
        avo_problem_free(&p);
        return n > 0 ? 0 : 1;
    }
    if (argc < 4) {
        fprintf(stderr, "tune_efficiency run: TABLE missing\n");
        avo_problem_free(&p);
        return 2;
    }
    int seeds = 10, batch = 4, budget = 200;
    double within = 0.02;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seeds"))
            seeds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--budget"))
            budget = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--within"))
            within = atof(argv[i + 1]);
    }
    if (seeds < 1 || seeds > 1000 || batch < 1 || batch > 64 || budget < 2 || within < 0 || within >= 1) {
        fprintf(stderr, "tune_efficiency: --seeds 1..1000, --batch 1..64, --budget >= 2, --within [0, 1)\n");
        avo_problem_free(&p);
        return 2;
    }
    landscape l;
    if (load_table(&p, argv[3], &l) < 0) {
        avo_problem_free(&p);
        return 2;
    }
    const double goal = l.best * (1 - within);
    int near = 0;
    for (int i = 0; i < l.n; i++)
        near += l.rows[i].score >= goal;
    int *t = malloc((size_t)seeds * sizeof *t), *r = malloc((size_t)seeds * sizeof *r);
    if (!t || !r) {
        rc = 1;
        goto cleanup;
    }
    printf("# %s: %d configurations measured, best %.4g, goal >= %.4g (within %.0f%%): %d configurations "
           "qualify; budget %d evaluations, tune batch %d\n",
           argv[2], l.n, l.best, goal, within * 100, near, budget, batch);
    printf("seed  tune  random\n");
    for (int s = 0; s < seeds; s++) {
        t[s] = run_tune(&p, &l, (uint64_t)s + 1, batch, budget, goal);
        r[s] = run_random(&p, &l, (uint64_t)s + 1, budget, goal);
        printf("%4d  %4d%s  %4d%s\n", s + 1, t[s] > budget ? budget : t[s], t[s] > budget ? "+" : " ",
               r[s] > budget ? budget : r[s], r[s] > budget ? "+" : " ");
    }
    qsort(t, (size_t)seeds, sizeof *t, cmp_int);
    qsort(r, (size_t)seeds, sizeof *r, cmp_int);
    double mt = seeds % 2 ? t[seeds / 2] : (t[seeds / 2 - 1] + t[seeds / 2]) / 2.0;
    double mr = seeds % 2 ? r[seeds / 2] : (r[seeds / 2 - 1] + r[seeds / 2]) / 2.0;
    printf("median evaluations to the goal: tune %.1f, random %.1f, ratio %.2f (target <= 0.33)%s\n", mt, mr,
           mt / mr, t[seeds - 1] > budget || r[seeds - 1] > budget ? " (+ = not reached within the budget)" : "");
cleanup:
    free(t);
    free(r);
    free(l.rows);
    avo_problem_free(&p);
    return rc;
}
