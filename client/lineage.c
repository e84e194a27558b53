/* `avoctl lineage`: a job's candidates printed as a tree by parent (lineage.h). */
#include "lineage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fmt.h"

typedef struct {
    const json_t *c;
    long long id, parent;
    int committed;
    int shown;
    size_t nkids, first_kid; /* into the kids array, in id order */
} node;

typedef struct {
    node *n;
    size_t count;
    size_t *kids;
    const char *unit;
    long long seed, best;
    double seed_agg;
    int all;
    avoctl_table *t;
    avoctl_buf prefix;
} tree;

static long long int_or(const json_t *v, long long dflt)
{
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static int by_id(const void *a, const void *b)
{
    const node *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static node *find(const tree *t, long long id)
{
    node key = {.id = id};
    return bsearch(&key, t->n, t->count, sizeof *t->n, by_id);
}

static const char *outcome_cell(const node *n)
{
    const char *o = json_string_value(json_object_get(n->c, "outcome"));
    if (n->committed)
        return "committed";
    if (!o)
        return "pending";
    return strcmp(o, "ok") == 0 ? "not committed" : o;
}

static int add_row(tree *t, const node *n, const char *glyph)
{
    const json_t *agg = json_object_get(n->c, "aggregate");
    const char *outcome = json_string_value(json_object_get(n->c, "outcome"));
    int scored = json_is_number(agg) && outcome && strcmp(outcome, "ok") == 0;
    char label[4096], parent[32] = "", island[32], score[96] = "", sp[32] = "", knobs[1024];
    const char *mark = n->id == t->seed && n->id == t->best ? " (seed, best)"
                       : n->id == t->seed                   ? " (seed)"
                       : n->id == t->best                   ? " (best)"
                                                            : "";

    snprintf(label, sizeof label, "%s%s%lld%s", t->prefix.p ? t->prefix.p : "", glyph, n->id, mark);
    if (n->parent > 0)
        snprintf(parent, sizeof parent, "%lld", n->parent);
    avoctl_fmt_field(json_object_get(n->c, "island"), island, sizeof island);
    if (scored) {
        double v = json_number_value(agg);
        avoctl_fmt_num(v, score, sizeof score);
        /* Some of its configurations ended over the rse target. */
        const json_t *noisy = json_object_get(n->c, "noisy");
        if (json_is_integer(noisy) && json_integer_value(noisy) > 0) {
            size_t used = strlen(score);
            snprintf(score + used, sizeof score - used, " (noisy %lld)", (long long)json_integer_value(noisy));
        }
        if (t->seed_agg > 0)
            snprintf(sp, sizeof sp, "x%.2f", v / t->seed_agg);
    } else {
        /* Stopped by the screen: no full score, but by how much it lost. */
        avoctl_fmt_screen(json_object_get(n->c, "screen"), score, sizeof score);
    }
    avoctl_fmt_knobs(json_object_get(n->c, "knobs"), knobs, sizeof knobs);
    const char *row[] = {label, parent, island, score, sp, t->all ? outcome_cell(n) : knobs, knobs};
    return avoctl_table_add(t->t, row);
}

/* A node and what hangs from it. Where a node has exactly one committed
 * child, that child continues the line at the same indentation (its
 * attempts branch off first): a lineage is mostly one long chain per
 * island, and indenting every step would push it off the screen. */
static int walk(tree *t, node *n, const char *glyph)
{
    int rc;
    size_t saved = t->prefix.len;

    for (;;) {
        if ((rc = add_row(t, n, glyph)) < 0)
            return rc;
        /* What the children's lines start with under this node's glyph. */
        const char *cont = strcmp(glyph, "+- ") == 0 ? "|  " : *glyph ? "   " : "";
        if ((rc = avoctl_buf_append(&t->prefix, cont, strlen(cont), 0)) < 0)
            return rc;
        node *next = NULL;
        size_t ncommitted = 0;
        for (size_t k = 0; k < n->nkids; k++)
            if (t->n[t->kids[n->first_kid + k]].committed)
                ncommitted++;
        for (size_t k = 0; k < n->nkids; k++) {
            node *kid = &t->n[t->kids[n->first_kid + k]];
            if (ncommitted == 1 && kid->committed) {
                next = kid;
                continue;
            }
            const char *g = ncommitted != 1 && k + 1 == n->nkids ? "`- " : "+- ";
            if ((rc = walk(t, kid, g)) < 0)
                return rc;
        }
        if (!next)
            break;
        n = next;
        glyph = "";
    }
    t->prefix.len = saved;
    if (t->prefix.p)
        t->prefix.p[saved] = 0;
    return 0;
}

static int build(tree *t, const json_t *cands)
{
    size_t i, j = 0;
    json_t *c;

    t->count = json_array_size(cands);
    t->n = calloc(t->count ? t->count : 1, sizeof *t->n);
    t->kids = calloc(t->count ? t->count : 1, sizeof *t->kids);
    if (!t->n || !t->kids)
        return -ENOMEM;
    json_array_foreach(cands, i, c)
    {
        node *n = &t->n[i];
        n->c = c;
        n->id = int_or(json_object_get(c, "id"), 0);
        n->parent = int_or(json_object_get(c, "parent"), 0);
        n->committed = json_is_true(json_object_get(c, "committed"));
        n->shown = n->committed || t->all;
    }
    qsort(t->n, t->count, sizeof *t->n, by_id);
    /* Children grouped by parent, each group in id order: count, then
     * place. A parent that is not shown leaves its child a root. */
    for (i = 0; i < t->count; i++) {
        node *p = t->n[i].shown ? find(t, t->n[i].parent) : NULL;
        if (p && p->shown && p != &t->n[i])
            p->nkids++;
    }
    for (i = 0; i < t->count; i++) {
        t->n[i].first_kid = j;
        j += t->n[i].nkids;
        t->n[i].nkids = 0;
    }
    for (i = 0; i < t->count; i++) {
        node *p = t->n[i].shown ? find(t, t->n[i].parent) : NULL;
        if (p && p->shown && p != &t->n[i])
            t->kids[p->first_kid + p->nkids++] = i;
    }
    return 0;
}

static int is_root(const tree *t, const node *n)
{
    const node *p = find(t, n->parent);
    return n->shown && (!p || !p->shown || p == n);
}

int avoctl_lineage_print(const json_t *lineage, int all, size_t width, FILE *out)
{
    const json_t *cands = json_object_get(lineage, "candidates");
    tree t = {.all = all};
    size_t ncommitted = 0;
    int rc;

    if (!json_is_array(cands))
        return -EINVAL;
    t.unit = json_string_value(json_object_get(lineage, "unit"));
    t.seed = int_or(json_object_get(lineage, "seed"), 0);
    t.best = int_or(json_object_get(lineage, "best"), 0);
    if ((rc = build(&t, cands)) < 0)
        goto cleanup;
    const node *seed = find(&t, t.seed), *best = find(&t, t.best);
    const json_t *sa = seed ? json_object_get(seed->c, "aggregate") : NULL;
    t.seed_agg = json_is_number(sa) ? json_number_value(sa) : 0;
    for (size_t i = 0; i < t.count; i++)
        ncommitted += (size_t)t.n[i].committed;

    const char *state = json_string_value(json_object_get(lineage, "state"));
    fprintf(out, "job %lld %s: ", int_or(json_object_get(lineage, "job"), 0), state ? state : "?");
    if (t.count == 0) {
        fprintf(out, "no candidates yet\n");
        goto cleanup;
    }
    fprintf(out, "%zu committed of %zu candidate%s", ncommitted, t.count, t.count == 1 ? "" : "s");
    if (best && t.seed_agg > 0 && json_is_number(json_object_get(best->c, "aggregate")))
        fprintf(out, "; best cand %lld, x%.2f over seed cand %lld", best->id,
                json_number_value(json_object_get(best->c, "aggregate")) / t.seed_agg, t.seed);
    if (!all && ncommitted < t.count)
        fprintf(out, " (--all shows the %zu attempt%s)", t.count - ncommitted, t.count - ncommitted == 1 ? "" : "s");
    fputc('\n', out);
    if (ncommitted == 0 && !all)
        goto cleanup;

    /* The unit heads the score column: repeated in every row it would
     * take the room the knobs need. */
    const char *score = t.unit ? t.unit : "SCORE";
    const char *hdr_all[] = {"CANDIDATE", "PARENT", "ISLAND", score, "SPEEDUP", "OUTCOME", "KNOBS"};
    const char *hdr[] = {"CANDIDATE", "PARENT", "ISLAND", score, "SPEEDUP", "KNOBS"};
    size_t ncols = all ? 7 : 6;
    if ((rc = avoctl_table_new(&t.t, ncols, all ? hdr_all : hdr, 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4)) < 0)
        goto cleanup;
    avoctl_table_fit(t.t, width, ncols - 1, 12);
    fputc('\n', out);
    for (size_t i = 0; i < t.count; i++)
        if (is_root(&t, &t.n[i]) && (rc = walk(&t, &t.n[i], "")) < 0)
            goto cleanup;
    rc = avoctl_table_print(t.t, out);

cleanup:
    avoctl_table_free(t.t);
    avoctl_buf_free(&t.prefix);
    free(t.kids);
    free(t.n);
    return rc;
}
