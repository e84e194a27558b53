/* The problem packages under avod's kernels root, listed and described for
 * GET /v1/problems and /v1/problems/{name} (problems.h). */
#include "problems.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "avo_package.h"
#include "avo_paths.h"
#include "avo_problem.h"

typedef struct {
    char **names;
    size_t n, cap;
} name_list;

static int names_add(name_list *l, const char *name)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **m = realloc(l->names, cap * sizeof *m);
        if (!m)
            return -ENOMEM;
        l->names = m;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name)))
        return -ENOMEM;
    l->n++;
    return 0;
}

static void names_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Every directory under root/rel holding a problem.json, as its path under
 * root. A package's own subdirectories are not searched (a package is a
 * leaf); names avo_problem_resolve would refuse are skipped. */
static int walk(const char *root, const char *rel, int depth, name_list *out)
{
    char dir[PATH_MAX], path[PATH_MAX];
    /* A directory whose path does not fit is skipped, as one whose name
     * avo_problem_resolve would refuse. */
    if (avo_paths_join(dir, sizeof dir, *rel ? root : "", *rel ? rel : root) < 0 ||
        avo_paths_join(path, sizeof path, dir, "problem.json") < 0)
        return 0;
    if (*rel && access(path, F_OK) == 0)
        return names_add(out, rel);
    if (depth >= AVO_PROBLEMS_MAX_DEPTH)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        char sub[PATH_MAX];
        if (e->d_name[0] == '.' || strspn(e->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                     "0123456789_-.") != strlen(e->d_name))
            continue;
        if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= (int)sizeof sub)
            continue;
        if (avo_paths_join(path, sizeof path, root, sub) < 0)
            continue;
        if (is_dir(path))
            rc = walk(root, sub, depth + 1, out);
    }
    closedir(d);
    return rc;
}

int avo_problems_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 254 || lb > 254)
        return 255;
    int row[256];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] > 255 ? 255 : row[lb];
}

static json_t *str_array(const char (*items)[32], int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(items[i]));
    return a;
}

static json_t *summary(const avo_problem *p, const char *name)
{
    json_t *configs = json_array(), *seeds = json_array();
    for (int i = 0; configs && i < p->nconfigs; i++)
        json_array_append_new(configs, json_string(p->configs[i].name));
    const char *key;
    json_t *v;
    json_array_append_new(seeds, json_string("default"));
    json_object_foreach(json_object_get(p->json, "seeds"), key, v)
    {
        (void)v;
        json_array_append_new(seeds, json_string(key));
    }
    const char *desc = json_string_value(json_object_get(p->json, "description"));
    return json_pack("{s:s,s:s,s:s,s:i,s:o,s:o,s:o,s:s,s:b}", "name", name, "backend", p->backend, "description",
                     desc ? desc : "", "knobs", p->nknobs, "seeds", seeds, "sizes",
                     str_array((const char(*)[32])p->sizes, p->nsizes), "configs", configs, "unit", p->unit, "baseline",
                     p->baseline[0] != 0);
}

json_t *avo_problems_list(const char *kernels_dir)
{
    name_list l = {0};
    json_t *list = json_array();
    if (!list || walk(kernels_dir, "", 0, &l) < 0)
        goto fail;
    qsort(l.names, l.n, sizeof *l.names, by_name);
    for (size_t i = 0; i < l.n; i++) {
        char dir[PATH_MAX], err[1024];
        avo_problem p;
        json_t *row;
        if (avo_paths_join(dir, sizeof dir, kernels_dir, l.names[i]) < 0) {
            row = json_pack("{s:s,s:s}", "name", l.names[i], "error", "path too long");
        } else if (avo_problem_load(&p, dir, err, sizeof err) < 0) {
            row = json_pack("{s:s,s:s}", "name", l.names[i], "error", err);
        } else {
            row = summary(&p, l.names[i]);
            avo_problem_free(&p);
        }
        if (!row || json_array_append_new(list, row) < 0)
            goto fail;
    }
    names_free(&l);
    return json_pack("{s:o}", "problems", list);
fail:
    names_free(&l);
    json_decref(list);
    return NULL;
}

/* The knob space of p's current seed: every point counted against the
 * constraints when there are at most AVO_PROBLEMS_COUNT_MAX. */
static json_t *knob_space(const avo_problem *p, const char *seed)
{
    double points = 1;
    for (int i = 0; i < p->nknobs; i++)
        points *= p->knobs[i].nvalues;
    json_t *allowed = json_null();
    if (points <= AVO_PROBLEMS_COUNT_MAX) {
        long long n = 0;
        int64_t v[AVO_PROBLEM_MAX_KNOBS];
        for (uint64_t idx = 0; idx < (uint64_t)points; idx++) {
            uint64_t r = idx;
            for (int i = 0; i < p->nknobs; i++) {
                v[i] = p->knobs[i].values[r % (uint64_t)p->knobs[i].nvalues];
                r /= (uint64_t)p->knobs[i].nvalues;
            }
            n += avo_problem_knobs_allowed(p, v) == 1;
        }
        allowed = json_integer(n);
    }
    return json_pack("{s:s,s:s,s:i,s:f,s:o}", "seed", seed, "file", p->seed, "knobs", p->nknobs, "points", points,
                     "allowed", allowed);
}

static void suggest(const name_list *l, const char *name, char *out, size_t outlen)
{
    int best = 255;
    const char *pick = NULL, *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (size_t i = 0; i < l->n; i++) {
        const char *nb = strrchr(l->names[i], '/');
        int d = avo_problems_distance(name, l->names[i]);
        if (!strcmp(nb ? nb + 1 : l->names[i], base))
            d = 1;
        if (d < best) {
            best = d;
            pick = l->names[i];
        }
    }
    int limit = (int)strlen(name) / 3;
    if (pick && best <= (limit < 2 ? 2 : limit))
        snprintf(out, outlen, "; did you mean '%s'?", pick);
    else
        snprintf(out, outlen, "; `avoctl problem list` lists them");
}

void avo_problems_suggest(const char *kernels_dir, const char *name, char *out, size_t outlen)
{
    name_list l = {0};
    snprintf(out, outlen, "; `avoctl problem list` lists them");
    if (walk(kernels_dir, "", 0, &l) == 0)
        suggest(&l, name, out, outlen);
    names_free(&l);
}

int avo_problems_get(const char *kernels_dir, const char *name, json_t **out, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    avo_problem p;
    json_t *files = NULL, *spaces = NULL;
    *out = NULL;
    int rc = avo_problem_resolve(kernels_dir, name, dir, sizeof dir, err, errlen);
    if (rc == -ENOENT) {
        char hint[300];
        avo_problems_suggest(kernels_dir, name, hint, sizeof hint);
        snprintf(err, errlen, "no problem '%s' under %s%s", name, kernels_dir, hint);
        return -ENOENT;
    }
    if (rc < 0)
        return -EINVAL;
    if (avo_problem_load(&p, dir, err, errlen) < 0)
        return -EINVAL;
    json_t *o = summary(&p, name);
    char hash[AVO_SHA256_HEX] = "";
    if (avo_package_manifest(dir, p.json, 0, &files, err, errlen) == 0)
        avo_package_hash(files, hash);
    spaces = json_array();
    if (spaces)
        json_array_append_new(spaces, knob_space(&p, "default"));
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(p.json, "seeds"), key, v)
    {
        avo_problem q;
        (void)v;
        if (avo_problem_load(&q, dir, err, errlen) < 0)
            continue;
        if (avo_problem_use_seed(&q, key, err, errlen) == 0)
            json_array_append_new(spaces, knob_space(&q, key));
        avo_problem_free(&q);
    }
    if (!o || json_object_set(o, "spec", p.json) < 0 ||
        json_object_set_new(o, "files", files ? files : json_null()) < 0 ||
        json_object_set_new(o, "package_hash", hash[0] ? json_string(hash) : json_null()) < 0 ||
        json_object_set_new(o, "knob_space", spaces) < 0) {
        json_decref(o);
        avo_problem_free(&p);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    avo_problem_free(&p);
    *out = o;
    return 0;
}
