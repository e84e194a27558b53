/* Problem packages (problem.json): loading, validation, sizes, knobs, rendering (avo_problem.h). */
#include "avo_problem.h"

#include "avo_paths.h"
#include "avo_policy_rules.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "avo_expr.h"
#include "avo_suggest.h"

/* One table for the dtypes: name, element size, default tolerance. The
 * defaults are what a careful reviewer would accept for a reordered sum; a
 * problem may tighten or loosen them per dtype. */
static const struct {
    const char *name;
    size_t size;
    avo_tolerance tol;
} dtypes[] = {
    [AVO_DTYPE_F32] = {"f32", 4, {1e-5, 1e-3}}, [AVO_DTYPE_F64] = {"f64", 8, {1e-12, 1e-9}},
    [AVO_DTYPE_F16] = {"f16", 2, {1e-2, 1e-1}}, [AVO_DTYPE_BF16] = {"bf16", 2, {2e-2, 2e-1}},
    [AVO_DTYPE_I32] = {"i32", 4, {0, 0}},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

/* A tensor larger than this is a spec mistake, not a workload for one box. */
#define MAX_TENSOR_BYTES (4LL << 30)

const char *avo_problem_dtype_name(avo_dtype d)
{
    return (int)d >= 0 && (int)d < NDTYPES ? dtypes[d].name : "?";
}

size_t avo_problem_dtype_size(avo_dtype d)
{
    return (int)d >= 0 && (int)d < NDTYPES ? dtypes[d].size : 0;
}

typedef struct {
    const char *file;
    char *err;
    size_t errlen;
    const char *prefix; /* before every field name: "seeds.sm90." inside a named seed */
} ctx;

static int errf(ctx *c, const char *field, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen)
        snprintf(c->err, c->errlen, "%s: %s%s: %s", c->file, c->prefix ? c->prefix : "", field, reason);
    return -EINVAL;
}

/* avo_paths_join, with err (if any) naming the path that is too long. */
static int join_path(char *out, size_t outlen, const char *dir, const char *name, char *err, size_t errlen)
{
    int rc = avo_paths_join(out, outlen, dir, name);
    if (rc && err && errlen)
        snprintf(err, errlen, "path too long (%zu bytes or more): %.200s.../%.100s", outlen, dir, name);
    return rc;
}

static int is_ident(const char *s)
{
    if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

static int copy_str(ctx *c, const char *field, json_t *v, char *dst, size_t cap, int required)
{
    if (!v) {
        if (required)
            return errf(c, field, "missing");
        return 0;
    }
    if (!json_is_string(v))
        return errf(c, field, "must be a string");
    const char *s = json_string_value(v);
    if (!*s)
        return errf(c, field, "must not be empty");
    if (strlen(s) >= cap)
        return errf(c, field, "longer than %zu characters", cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* Refuses keys the schema does not know, so a typo ("tolerence") is an
 * error instead of a silently ignored setting. */
static int check_keys(ctx *c, const char *field, json_t *obj, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                ok = 1;
        if (!ok) {
            if (field)
                return errf(c, field, "unknown field '%s'", key);
            return errf(c, key, "unknown field '%s'", key);
        }
    }
    return 0;
}

/* An optional object section ("timing", "policy", ...): 1 when absent, 0
 * when it is an object with only the allowed keys, else the error (with
 * not_object when it is no object). */
static int open_section(ctx *c, const char *field, json_t *v, const char *const *keys, const char *not_object)
{
    if (!v)
        return 1;
    if (!json_is_object(v))
        return errf(c, field, "%s", not_object);
    return check_keys(c, field, v, keys);
}

/* what[i], one object of an array of named things (tensors, knobs): an
 * object with only the allowed keys and a "name" that is an identifier,
 * copied to name. field is left naming what[i].name for the caller's next
 * message (a duplicate name). */
static int named_item(ctx *c, const char *what, size_t i, json_t *item, const char *const *keys, char *name,
                      size_t namelen, char *field, size_t fieldlen)
{
    snprintf(field, fieldlen, "%s[%zu]", what, i);
    if (!json_is_object(item))
        return errf(c, field, "must be an object");
    int rc = check_keys(c, field, item, keys);
    if (rc)
        return rc;
    snprintf(field, fieldlen, "%s[%zu].name", what, i);
    if ((rc = copy_str(c, field, json_object_get(item, "name"), name, namelen, 1)))
        return rc;
    if (!is_ident(name))
        return errf(c, field, "'%s' is not an identifier", name);
    return 0;
}

/* Every identifier in an expression must be one of names; gives the precise
 * "unknown size 'Q'" message before the evaluator sees it. */
static int check_idents(ctx *c, const char *field, const char *expr, const char *what, char names[][32], int n,
                        const avo_knob_spec *knobs, int nknobs)
{
    const char *s = expr;
    while (*s) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *e = s;
            while (isalnum((unsigned char)*e) || *e == '_')
                e++;
            int found = 0;
            for (int i = 0; i < n; i++)
                if (strlen(names[i]) == (size_t)(e - s) && strncmp(names[i], s, (size_t)(e - s)) == 0)
                    found = 1;
            for (int i = 0; i < nknobs; i++)
                if (strlen(knobs[i].name) == (size_t)(e - s) && strncmp(knobs[i].name, s, (size_t)(e - s)) == 0)
                    found = 1;
            if (!found)
                return errf(c, field, "unknown %s '%.*s'", what, (int)(e - s), s);
            s = e;
        } else if (isdigit((unsigned char)*s) || *s == '.') {
            /* skip numbers whole so "1e9" is not read as identifier "e9" */
            char *end;
            strtod(s, &end);
            s = end > s ? end : s + 1;
        } else {
            s++;
        }
    }
    return 0;
}

static int expr_field(ctx *c, const char *field, json_t *v, char **out)
{
    if (json_is_string(v)) {
        if (!*json_string_value(v))
            return errf(c, field, "must not be empty");
        *out = strdup(json_string_value(v));
    } else if (json_is_integer(v)) {
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        *out = strdup(buf);
    } else {
        return errf(c, field, "must be an expression string or an integer");
    }
    return *out ? 0 : -ENOMEM;
}

static int parse_dtype(const char *s, avo_dtype *d)
{
    for (int i = 0; i < NDTYPES; i++)
        if (strcmp(dtypes[i].name, s) == 0) {
            *d = (avo_dtype)i;
            return 0;
        }
    return -EINVAL;
}

static int parse_sizes(ctx *c, avo_problem *p, json_t *v)
{
    if (!v)
        return errf(c, "sizes", "missing");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return errf(c, "sizes", "must be a non-empty array of names");
    if (json_array_size(v) > AVO_PROBLEM_MAX_SIZES)
        return errf(c, "sizes", "more than %d sizes", AVO_PROBLEM_MAX_SIZES);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        char field[64];
        snprintf(field, sizeof field, "sizes[%zu]", i);
        int rc = copy_str(c, field, e, p->sizes[i], sizeof p->sizes[i], 1);
        if (rc)
            return rc;
        if (!is_ident(p->sizes[i]))
            return errf(c, field, "'%s' is not an identifier", p->sizes[i]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->sizes[j], p->sizes[i]) == 0)
                return errf(c, field, "duplicate size '%s'", p->sizes[i]);
        p->nsizes = (int)i + 1;
    }
    return 0;
}

static int parse_tensors(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"name", "dtype", "role", "shape", "scale", NULL};
    if (!v)
        return errf(c, "tensors", "missing");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return errf(c, "tensors", "must be a non-empty array");
    if (json_array_size(v) > AVO_PROBLEM_MAX_TENSORS)
        return errf(c, "tensors", "more than %d tensors", AVO_PROBLEM_MAX_TENSORS);
    int outputs = 0;
    size_t i;
    json_t *t;
    json_array_foreach(v, i, t)
    {
        char field[96];
        avo_tensor_spec *ts = &p->tensors[i];
        p->ntensors = (int)i + 1;
        int rc = named_item(c, "tensors", i, t, keys, ts->name, sizeof ts->name, field, sizeof field);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->tensors[j].name, ts->name) == 0)
                return errf(c, field, "duplicate tensor '%s'", ts->name);

        snprintf(field, sizeof field, "tensors[%zu].dtype", i);
        json_t *d = json_object_get(t, "dtype");
        if (!json_is_string(d))
            return errf(c, field, d ? "must be a string" : "missing");
        if (parse_dtype(json_string_value(d), &ts->dtype))
            return errf(c, field, "unknown dtype '%s' (f32, f64, f16, bf16, i32)", json_string_value(d));

        snprintf(field, sizeof field, "tensors[%zu].role", i);
        json_t *r = json_object_get(t, "role");
        if (!json_is_string(r))
            return errf(c, field, r ? "must be a string" : "missing");
        const char *rs = json_string_value(r);
        if (strcmp(rs, "input") == 0)
            ts->role = AVO_ROLE_INPUT;
        else if (strcmp(rs, "output") == 0)
            ts->role = AVO_ROLE_OUTPUT;
        else if (strcmp(rs, "inout") == 0)
            ts->role = AVO_ROLE_INOUT;
        else
            return errf(c, field, "unknown role '%s' (input, output, inout)", rs);
        if (ts->role != AVO_ROLE_INPUT)
            outputs++;

        snprintf(field, sizeof field, "tensors[%zu].scale", i);
        json_t *sc = json_object_get(t, "scale");
        ts->scale = 1.0;
        if (sc) {
            if (!json_is_number(sc) || !(json_number_value(sc) > 0) || json_number_value(sc) > 65504)
                return errf(c, field, "must be a number in (0, 65504]");
            if (ts->role == AVO_ROLE_OUTPUT)
                return errf(c, field, "applies to inputs (an output is poisoned, not filled)");
            ts->scale = json_number_value(sc);
        }

        snprintf(field, sizeof field, "tensors[%zu].shape", i);
        json_t *sh = json_object_get(t, "shape");
        if (!json_is_array(sh) || json_array_size(sh) == 0)
            return errf(c, field, sh ? "must be a non-empty array" : "missing");
        if (json_array_size(sh) > 8)
            return errf(c, field, "rank above 8");
        size_t k;
        json_t *dim;
        json_array_foreach(sh, k, dim)
        {
            snprintf(field, sizeof field, "tensors[%zu].shape[%zu]", i, k);
            if ((rc = expr_field(c, field, dim, &ts->shape[k])))
                return rc;
            ts->rank = (int)k + 1;
            if ((rc = check_idents(c, field, ts->shape[k], "size", p->sizes, p->nsizes, NULL, 0)))
                return rc;
        }
    }
    if (!outputs)
        return errf(c, "tensors", "no tensor has role output or inout");
    return 0;
}

static int parse_configs(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"name", "sizes", NULL};
    if (!v)
        return errf(c, "configs", "missing");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return errf(c, "configs", "must be a non-empty array");
    p->configs = calloc(json_array_size(v), sizeof *p->configs);
    if (!p->configs)
        return -ENOMEM;
    size_t i;
    json_t *cf;
    json_array_foreach(v, i, cf)
    {
        char field[128];
        avo_config_spec *cs = &p->configs[i];
        p->nconfigs = (int)i + 1;
        snprintf(field, sizeof field, "configs[%zu]", i);
        if (!json_is_object(cf))
            return errf(c, field, "must be an object");
        int rc = check_keys(c, field, cf, keys);
        if (rc)
            return rc;
        snprintf(field, sizeof field, "configs[%zu].name", i);
        if ((rc = copy_str(c, field, json_object_get(cf, "name"), cs->name, sizeof cs->name, 1)))
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->configs[j].name, cs->name) == 0)
                return errf(c, field, "duplicate config '%s'", cs->name);
        snprintf(field, sizeof field, "configs[%zu].sizes", i);
        json_t *sz = json_object_get(cf, "sizes");
        if (!json_is_object(sz))
            return errf(c, field, sz ? "must be an object {\"NAME\": value}" : "missing");
        const char *key;
        json_t *val;
        int seen[AVO_PROBLEM_MAX_SIZES] = {0};
        json_object_foreach(sz, key, val)
        {
            int found = -1;
            for (int s = 0; s < p->nsizes; s++)
                if (strcmp(p->sizes[s], key) == 0)
                    found = s;
            snprintf(field, sizeof field, "configs[%zu].sizes.%s", i, key);
            if (found < 0)
                return errf(c, field, "unknown size '%s'", key);
            /* 0 is a value (a flag such as CAUSAL); shapes are checked positive. */
            if (!json_is_integer(val) || json_integer_value(val) < 0)
                return errf(c, field, "must be a non-negative integer");
            cs->size[found] = json_integer_value(val);
            seen[found] = 1;
        }
        for (int s = 0; s < p->nsizes; s++)
            if (!seen[s]) {
                snprintf(field, sizeof field, "configs[%zu].sizes.%s", i, p->sizes[s]);
                return errf(c, field, "missing");
            }
    }
    return 0;
}

static int eval_sizes(const avo_problem *p, const int64_t *size, const char *expr, double *out, char *err,
                      size_t errlen)
{
    const char *names[AVO_PROBLEM_MAX_SIZES];
    double vals[AVO_PROBLEM_MAX_SIZES];
    for (int s = 0; s < p->nsizes; s++) {
        names[s] = p->sizes[s];
        vals[s] = (double)size[s];
    }
    avo_expr_env env = {p->nsizes, names, vals};
    return avo_expr_eval(expr, &env, out, err, errlen);
}

int avo_problem_eval_sizes(const avo_problem *p, const int64_t *size, const char *expr, double *out, char *err,
                           size_t errlen)
{
    return eval_sizes(p, size, expr, out, err, errlen);
}

int avo_problem_eval_config(const avo_problem *p, int config, const char *expr, double *out, char *err, size_t errlen)
{
    if (config < 0 || config >= p->nconfigs)
        return -EINVAL;
    return eval_sizes(p, p->configs[config].size, expr, out, err, errlen);
}

int avo_problem_tensor_elems_at(const avo_problem *p, const int64_t *size, int tensor, int64_t *elems, char *err,
                                size_t errlen)
{
    if (tensor < 0 || tensor >= p->ntensors)
        return -EINVAL;
    const avo_tensor_spec *ts = &p->tensors[tensor];
    double total = 1;
    for (int k = 0; k < ts->rank; k++) {
        double d;
        int rc = eval_sizes(p, size, ts->shape[k], &d, err, errlen);
        if (rc)
            return rc;
        if (!(d >= 1) || d != floor(d) || d > (double)INT64_MAX) {
            if (err && errlen)
                snprintf(err, errlen, "shape[%d] = %g is not a positive integer", k, d);
            return -EINVAL;
        }
        total *= d;
    }
    if (total * (double)avo_problem_dtype_size(ts->dtype) > (double)MAX_TENSOR_BYTES) {
        if (err && errlen)
            snprintf(err, errlen, "%.0f elements exceed the %lld-byte cap", total, MAX_TENSOR_BYTES);
        return -E2BIG;
    }
    *elems = (int64_t)total;
    return 0;
}

int avo_problem_tensor_elems(const avo_problem *p, int config, int tensor, int64_t *elems, char *err, size_t errlen)
{
    if (config < 0 || config >= p->nconfigs)
        return -EINVAL;
    return avo_problem_tensor_elems_at(p, p->configs[config].size, tensor, elems, err, errlen);
}

/* Evaluating every shape and formula of every config at load time means the
 * harness never meets a spec error mid-run. */
static int check_configs(ctx *c, avo_problem *p)
{
    for (int i = 0; i < p->nconfigs; i++) {
        char field[128], why[256];
        for (int t = 0; t < p->ntensors; t++) {
            int64_t n;
            if (avo_problem_tensor_elems(p, i, t, &n, why, sizeof why)) {
                snprintf(field, sizeof field, "configs[%d] (%s)", i, p->configs[i].name);
                return errf(c, field, "tensor %s: %s", p->tensors[t].name, why);
            }
        }
        const char *formulas[2] = {p->flops, p->bytes};
        const char *fnames[2] = {"flops", "bytes"};
        for (int f = 0; f < 2; f++) {
            double v;
            if (!formulas[f])
                continue;
            if (eval_sizes(p, p->configs[i].size, formulas[f], &v, why, sizeof why))
                return errf(c, fnames[f], "%s", why);
            if (!(v > 0) || !isfinite(v)) {
                snprintf(field, sizeof field, "%s", fnames[f]);
                return errf(c, field, "evaluates to %g for config '%s' (must be > 0)", v, p->configs[i].name);
            }
        }
    }
    return 0;
}

static int parse_tolerance(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"rel_l2", "max_abs", NULL};
    for (int d = 0; d < NDTYPES; d++)
        p->tol[d] = dtypes[d].tol;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return errf(c, "tolerance", "must be an object keyed by dtype");
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val)
    {
        char field[96];
        avo_dtype d;
        snprintf(field, sizeof field, "tolerance.%s", key);
        if (parse_dtype(key, &d))
            return errf(c, field, "unknown dtype '%s'", key);
        if (!json_is_object(val))
            return errf(c, field, "must be an object {\"rel_l2\": x, \"max_abs\": y}");
        int rc = check_keys(c, field, val, keys);
        if (rc)
            return rc;
        json_t *r = json_object_get(val, "rel_l2"), *m = json_object_get(val, "max_abs");
        snprintf(field, sizeof field, "tolerance.%s.rel_l2", key);
        if (r && (!json_is_number(r) || json_number_value(r) < 0))
            return errf(c, field, "must be a number >= 0");
        snprintf(field, sizeof field, "tolerance.%s.max_abs", key);
        if (m && (!json_is_number(m) || json_number_value(m) < 0))
            return errf(c, field, "must be a number >= 0");
        if (r)
            p->tol[d].rel_l2 = json_number_value(r);
        if (m)
            p->tol[d].max_abs = json_number_value(m);
    }
    return 0;
}

static int parse_strings(ctx *c, const char *name, json_t *v, char **dst, int cap, int *n)
{
    if (!v)
        return 0;
    if (!json_is_array(v))
        return errf(c, name, "must be an array of strings");
    if ((int)json_array_size(v) > cap)
        return errf(c, name, "more than %d entries", cap);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        char field[64];
        snprintf(field, sizeof field, "%s[%zu]", name, i);
        if (!json_is_string(e) || !*json_string_value(e))
            return errf(c, field, "must be a non-empty string");
        if (!(dst[i] = strdup(json_string_value(e))))
            return -ENOMEM;
        *n = (int)i + 1;
    }
    return 0;
}

static int parse_knobs(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"name", "values", "default", NULL};
    if (!v)
        return 0;
    if (!json_is_array(v))
        return errf(c, "knobs", "must be an array");
    if (json_array_size(v) > AVO_PROBLEM_MAX_KNOBS)
        return errf(c, "knobs", "more than %d knobs", AVO_PROBLEM_MAX_KNOBS);
    size_t i;
    json_t *k;
    json_array_foreach(v, i, k)
    {
        char field[96];
        avo_knob_spec *ks = &p->knobs[i];
        int rc = named_item(c, "knobs", i, k, keys, ks->name, sizeof ks->name, field, sizeof field);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->knobs[j].name, ks->name) == 0)
                return errf(c, field, "duplicate knob '%s'", ks->name);
        snprintf(field, sizeof field, "knobs[%zu].values", i);
        json_t *vals = json_object_get(k, "values");
        if (!json_is_array(vals) || json_array_size(vals) == 0)
            return errf(c, field, vals ? "must be a non-empty array of integers" : "missing");
        if (json_array_size(vals) > AVO_PROBLEM_MAX_VALUES)
            return errf(c, field, "more than %d values", AVO_PROBLEM_MAX_VALUES);
        size_t j;
        json_t *e;
        json_array_foreach(vals, j, e)
        {
            snprintf(field, sizeof field, "knobs[%zu].values[%zu]", i, j);
            if (!json_is_integer(e))
                return errf(c, field, "must be an integer");
            ks->values[j] = json_integer_value(e);
            ks->nvalues = (int)j + 1;
        }
        snprintf(field, sizeof field, "knobs[%zu].default", i);
        json_t *d = json_object_get(k, "default");
        if (!json_is_integer(d))
            return errf(c, field, d ? "must be an integer" : "missing");
        ks->dflt = json_integer_value(d);
        int in = 0;
        for (int x = 0; x < ks->nvalues; x++)
            if (ks->values[x] == ks->dflt)
                in = 1;
        if (!in) {
            char vals[512] = "";
            for (int x = 0; x < ks->nvalues; x++)
                snprintf(vals + strlen(vals), sizeof vals - strlen(vals), "%s%lld", x ? ", " : "",
                         (long long)ks->values[x]);
            return errf(c, field, "%lld is not one of the values (allowed: %s)", (long long)ks->dflt, vals);
        }
        p->nknobs = (int)i + 1;
    }
    return 0;
}

static int parse_timing(ctx *c, avo_problem *p, json_t *timing, json_t *check)
{
    static const char *const tkeys[] = {"max_seconds", "min_runs", "rse", NULL};
    static const char *const ckeys[] = {"input_sets", "rows", NULL};
    p->timing_max_seconds = 1.0;
    p->timing_min_runs = 5;
    p->timing_rse = 0.005;
    p->check_input_sets = 2;
    int rc;
    if (timing) {
        if (!json_is_object(timing))
            return errf(c, "timing", "must be an object");
        if ((rc = check_keys(c, "timing", timing, tkeys)))
            return rc;
        json_t *v;
        if ((v = json_object_get(timing, "max_seconds"))) {
            if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 600)
                return errf(c, "timing.max_seconds", "must be a number in (0, 600]");
            p->timing_max_seconds = json_number_value(v);
        }
        if ((v = json_object_get(timing, "min_runs"))) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100000)
                return errf(c, "timing.min_runs", "must be an integer in [1, 100000]");
            p->timing_min_runs = (int)json_integer_value(v);
        }
        if ((v = json_object_get(timing, "rse"))) {
            if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) >= 1)
                return errf(c, "timing.rse", "must be a number in (0, 1)");
            p->timing_rse = json_number_value(v);
        }
    }
    if (check) {
        if (!json_is_object(check))
            return errf(c, "check", "must be an object");
        if ((rc = check_keys(c, "check", check, ckeys)))
            return rc;
        json_t *v = json_object_get(check, "input_sets");
        if (v) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64)
                return errf(c, "check.input_sets", "must be an integer in [1, 64]");
            p->check_input_sets = (int)json_integer_value(v);
        }
    }
    return 0;
}

/* "check.rows": {"dims": [leading shape entries], "sample": N}. Every
 * output's shape must start with the dims, textually: a row is then the
 * same contiguous run of elements in each. Outputs only (an inout's
 * unchecked rows would be its inputs), and the CUDA backend only (the
 * reference's row entry takes a device array). */
static int parse_check_rows(ctx *c, avo_problem *p, json_t *check)
{
    static const char *const keys[] = {"dims", "sample", NULL};
    json_t *v = check ? json_object_get(check, "rows") : NULL;
    p->check_rows_dims = p->check_rows_sample = 0;
    if (!v)
        return 0;
    int rc;
    if (!json_is_object(v))
        return errf(c, "check.rows", "must be an object {\"dims\": [...], \"sample\": N}");
    if ((rc = check_keys(c, "check.rows", v, keys)))
        return rc;
    if (strcmp(p->backend, "cuda") != 0)
        return errf(c, "check.rows", "row-subset checks are for cuda problems (a %s reference is checked whole)",
                    p->backend);
    json_t *dims = json_object_get(v, "dims"), *sample = json_object_get(v, "sample");
    if (!json_is_array(dims) || json_array_size(dims) < 1 || json_array_size(dims) > 8)
        return errf(c, "check.rows.dims", dims ? "must be an array of 1 to 8 shape entries" : "missing");
    const int nd = (int)json_array_size(dims);
    for (int t = 0; t < p->ntensors; t++) {
        const avo_tensor_spec *ts = &p->tensors[t];
        if (ts->role == AVO_ROLE_INPUT)
            continue;
        if (ts->role == AVO_ROLE_INOUT)
            return errf(c, "check.rows", "tensor %s is input and output; row-subset checks need outputs only",
                        ts->name);
        for (int k = 0; k < nd; k++) {
            const char *want = json_string_value(json_array_get(dims, (size_t)k));
            if (!want)
                return errf(c, "check.rows.dims", "entry %d must be a string (a shape entry)", k);
            if (k >= ts->rank || strcmp(ts->shape[k], want) != 0)
                return errf(c, "check.rows.dims",
                            "output %s's shape does not start with them (shape[%d] is '%s', not '%s')", ts->name, k,
                            k < ts->rank ? ts->shape[k] : "(none)", want);
        }
    }
    if (!sample)
        return errf(c, "check.rows.sample", "missing (the rows a timed call's check compares)");
    if (!json_is_integer(sample) || json_integer_value(sample) < 1 || json_integer_value(sample) > (1 << 20))
        return errf(c, "check.rows.sample", "must be an integer in [1, %d]", 1 << 20);
    p->check_rows_dims = nd;
    p->check_rows_sample = (int)json_integer_value(sample);
    return 0;
}

int avo_problem_rows_at(const avo_problem *p, const int64_t *size, int64_t *rows, int64_t *row_elems, char *err,
                        size_t errlen)
{
    if (!p->check_rows_dims)
        return -EINVAL;
    int first = -1;
    for (int t = 0; t < p->ntensors && first < 0; t++)
        if (p->tensors[t].role != AVO_ROLE_INPUT)
            first = t;
    double n = 1;
    for (int k = 0; k < p->check_rows_dims; k++) {
        double d;
        int rc = eval_sizes(p, size, p->tensors[first].shape[k], &d, err, errlen);
        if (rc)
            return rc;
        n *= d;
    }
    *rows = (int64_t)n;
    for (int t = 0; t < p->ntensors; t++) {
        int64_t e = 0;
        row_elems[t] = 0;
        if (p->tensors[t].role == AVO_ROLE_INPUT)
            continue;
        int rc = avo_problem_tensor_elems_at(p, size, t, &e, err, errlen);
        if (rc)
            return rc;
        row_elems[t] = e / *rows;
    }
    return 0;
}

/* A list of configuration names (field, e.g. "counters.configs"): each
 * one named sets the int at byte offset `flag` of its avo_config_spec (every
 * other one cleared); a name that is no configuration, or one listed twice,
 * is refused naming its index. */
static int mark_configs(ctx *c, avo_problem *p, const char *field, json_t *list, size_t flag)
{
#define FLAG(i) (*(int *)((char *)&p->configs[i] + flag))
    if (!json_is_array(list) || json_array_size(list) == 0)
        return errf(c, field, "must be a non-empty array of configuration names");
    for (int i = 0; i < p->nconfigs; i++)
        FLAG(i) = 0;
    size_t k;
    json_t *name;
    json_array_foreach(list, k, name)
    {
        char at[64];
        snprintf(at, sizeof at, "%s[%zu]", field, k);
        if (!json_is_string(name))
            return errf(c, at, "must be a configuration name");
        int found = 0;
        for (int i = 0; i < p->nconfigs; i++)
            if (strcmp(p->configs[i].name, json_string_value(name)) == 0) {
                if (FLAG(i))
                    return errf(c, at, "'%s' is listed twice", json_string_value(name));
                FLAG(i) = found = 1;
            }
        if (!found)
            return errf(c, at, "no configuration is named '%s'", json_string_value(name));
    }
    return 0;
#undef FLAG
}

/* "counters": {"configs": [names]}: the configurations the counters pass
 * profiles (every one by default). Each profiled configuration replays its
 * kernels once per metric pass, seconds for large ones, and the agent needs
 * the hardware's view of a few representative sizes, not of every one. */
static int parse_counters(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"configs", NULL};
    for (int i = 0; i < p->nconfigs; i++)
        p->configs[i].profile = 1;
    if (!v)
        return 0;
    int rc;
    if (!json_is_object(v))
        return errf(c, "counters", "must be an object");
    if ((rc = check_keys(c, "counters", v, keys)))
        return rc;
    json_t *list = json_object_get(v, "configs");
    if (!list)
        return 0;
    return mark_configs(c, p, "counters.configs", list, offsetof(avo_config_spec, profile));
}

/* One entry of a {"SIZE": value} object in section: the size's index,
 * its value (an integer >= min, else `range` is the error) in *v; an
 * error naming SECTION.SIZE for a size the problem does not declare. */
static int size_value(ctx *c, const avo_problem *p, const char *section, const char *key, json_t *val, int64_t min,
                      const char *range, int64_t *v)
{
    char field[96];
    snprintf(field, sizeof field, "%s.%s", section, key);
    for (int s = 0; s < p->nsizes; s++)
        if (strcmp(p->sizes[s], key) == 0) {
            if (!json_is_integer(val) || json_integer_value(val) < min)
                return errf(c, field, "%s", range);
            *v = json_integer_value(val);
            return s;
        }
    return errf(c, field, "unknown size '%s'", key);
}

/* "screen.check_sizes": {SIZE: cap}: every config outside the screen is
 * checked before the screen with each named size capped (a cheap stand-in,
 * docs/evaluation.md, "Screening"); every tensor must still have a shape
 * there. */
static int parse_check_sizes(ctx *c, avo_problem *p, json_t *v)
{
    if (!json_is_object(v) || json_object_size(v) == 0)
        return errf(c, "screen.check_sizes", "must be a non-empty object {\"SIZE\": cap}");
    int64_t cap[AVO_PROBLEM_MAX_SIZES];
    for (int s = 0; s < p->nsizes; s++)
        cap[s] = INT64_MAX;
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val)
    {
        int64_t value;
        const int s = size_value(c, p, "screen.check_sizes", key, val, 1,
                                 "must be a positive integer (the most this size is when checked before the screen)",
                                 &value);
        if (s < 0)
            return s;
        cap[s] = value;
    }
    for (int k = 0; k < p->nconfigs; k++) {
        avo_config_spec *cs = &p->configs[k];
        if (cs->screen)
            continue;
        for (int s = 0; s < p->nsizes; s++) {
            cs->check_size[s] = cs->size[s] < cap[s] ? cs->size[s] : cap[s];
            cs->has_check_size |= cs->check_size[s] != cs->size[s];
        }
        for (int t = 0; t < p->ntensors && cs->has_check_size; t++) {
            int64_t n = 0;
            char why[256] = "no elements";
            if (avo_problem_tensor_elems_at(p, cs->check_size, t, &n, why, sizeof why) || n < 1)
                return errf(c, "screen.check_sizes", "config %s, tensor %s: %s", cs->name, p->tensors[t].name, why);
        }
    }
    return 0;
}

/* "screen": {"configs": [names], "runs": N[, "check_sizes": {...}]}
 * (docs/evaluation.md, "Screening"): the configurations a paired evaluation
 * times first, and how many pairs each gets there. Both required; parsed
 * after "timing", since runs must reach timing.min_runs. */
static int parse_screen(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"configs", "runs", "check_sizes", NULL};
    p->screen_runs = 0;
    if (!v)
        return 0;
    int rc;
    if (!json_is_object(v))
        return errf(c, "screen", "must be an object");
    if ((rc = check_keys(c, "screen", v, keys)))
        return rc;
    json_t *list = json_object_get(v, "configs"), *runs = json_object_get(v, "runs");
    if (!list)
        return errf(c, "screen.configs", "missing (the configurations the screen times)");
    if ((rc = mark_configs(c, p, "screen.configs", list, offsetof(avo_config_spec, screen))))
        return rc;
    const int min = p->timing_min_runs > AVO_PROBLEM_SCREEN_MIN_RUNS ? p->timing_min_runs : AVO_PROBLEM_SCREEN_MIN_RUNS;
    if (!runs)
        return errf(c, "screen.runs", "missing (the pairs each screen configuration gets)");
    if (!json_is_integer(runs) || json_integer_value(runs) < min ||
        json_integer_value(runs) > AVO_PROBLEM_SCREEN_MAX_RUNS)
        return errf(c, "screen.runs",
                    "must be an integer in [%d, %d] (at least timing.min_runs and the %d pairs "
                    "an interval needs)",
                    min, AVO_PROBLEM_SCREEN_MAX_RUNS, AVO_PROBLEM_SCREEN_MIN_RUNS);
    p->screen_runs = (int)json_integer_value(runs);
    json_t *caps = json_object_get(v, "check_sizes");
    return caps ? parse_check_sizes(c, p, caps) : 0;
}

/* "validate": {"sizes": {...}}: one small size vector, every size given, on
 * which every tensor shape must evaluate like a config's. */
static int parse_validate(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"sizes", NULL};
    int rc = open_section(c, "validate", v, keys, "must be an object {\"sizes\": {...}}");
    if (rc)
        return rc > 0 ? 0 : rc;
    json_t *sz = json_object_get(v, "sizes");
    if (!json_is_object(sz))
        return errf(c, "validate.sizes", sz ? "must be an object {\"NAME\": value}" : "missing");
    const char *key;
    json_t *val;
    char field[96];
    int seen[AVO_PROBLEM_MAX_SIZES] = {0};
    json_object_foreach(sz, key, val)
    {
        int64_t value;
        const int s = size_value(c, p, "validate.sizes", key, val, 0, "must be a non-negative integer", &value);
        if (s < 0)
            return s;
        p->validate_size[s] = value;
        seen[s] = 1;
    }
    for (int s = 0; s < p->nsizes; s++)
        if (!seen[s]) {
            snprintf(field, sizeof field, "validate.sizes.%s", p->sizes[s]);
            return errf(c, field, "missing");
        }
    for (int t = 0; t < p->ntensors; t++) {
        int64_t n;
        char why[256];
        if (avo_problem_tensor_elems_at(p, p->validate_size, t, &n, why, sizeof why))
            return errf(c, "validate.sizes", "tensor %s: %s", p->tensors[t].name, why);
    }
    p->has_validate = 1;
    return 0;
}

/* "policy": {"relax": {"RULE": "why", ...}}: the candidate-policy rules
 * (avo_policy_rules.h) this problem lifts, each with the reason written
 * down, so a relaxation is always documented where it is made. An unknown
 * rule is refused naming the field and the rules there are. */
static int parse_policy(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"relax", NULL};
    int rc = open_section(c, "policy", v, keys, "must be an object");
    if (rc)
        return rc > 0 ? 0 : rc;
    json_t *relax = json_object_get(v, "relax");
    if (!relax)
        return 0;
    if (!json_is_object(relax))
        return errf(c, "policy.relax", "must be an object {\"RULE\": \"why it is relaxed\"}");
    const char *key;
    json_t *why;
    json_object_foreach(relax, key, why)
    {
        const int r = avo_policy_rules_lookup(key);
        if (r < 0) {
            char names[256] = "";
            size_t n = 0;
            for (int i = 0; i < AVO_POLICY_NRULES && n < sizeof names; i++)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", avo_policy_rules_name(i));
            char field[160];
            snprintf(field, sizeof field, "policy.relax.%.120s", key);
            return errf(c, field, "unknown rule '%s' (%s)", key, names);
        }
        if (!json_is_string(why) || !*json_string_value(why)) {
            char field[160];
            snprintf(field, sizeof field, "policy.relax.%s", key);
            return errf(c, field, "must be a non-empty string saying why the rule is relaxed");
        }
        p->policy_relax |= 1u << r;
    }
    return 0;
}

/* "roofline": {"gflops": X, "gbps": Y}: at least one, each > 0 and backed by
 * the matching formula, or the fraction could not be computed. */
static int parse_roofline(ctx *c, avo_problem *p, json_t *v)
{
    static const char *const keys[] = {"gflops", "gbps", NULL};
    int rc = open_section(c, "roofline", v, keys, "must be an object {\"gflops\": x, \"gbps\": y}");
    if (rc)
        return rc > 0 ? 0 : rc;
    json_t *g = json_object_get(v, "gflops"), *b = json_object_get(v, "gbps");
    if (!g && !b)
        return errf(c, "roofline", "needs \"gflops\" or \"gbps\"");
    if (g && (!json_is_number(g) || !(json_number_value(g) > 0) || !isfinite(json_number_value(g))))
        return errf(c, "roofline.gflops", "must be a number > 0");
    if (b && (!json_is_number(b) || !(json_number_value(b) > 0) || !isfinite(json_number_value(b))))
        return errf(c, "roofline.gbps", "must be a number > 0");
    if (g && !p->flops)
        return errf(c, "roofline.gflops", "needs a \"flops\" formula");
    if (b && !p->bytes)
        return errf(c, "roofline.gbps", "needs a \"bytes\" formula");
    p->roofline_gflops = g ? json_number_value(g) : 0;
    p->roofline_gbps = b ? json_number_value(b) : 0;
    return 0;
}

/* A file name inside the problem directory: no separators, no dot-dot. */
static int parse_filename(ctx *c, const char *field, json_t *v, char *dst, size_t cap, const char *dir)
{
    int rc = copy_str(c, field, v, dst, cap, 1);
    if (rc)
        return rc;
    if (strchr(dst, '/') || strcmp(dst, "..") == 0 || strcmp(dst, ".") == 0)
        return errf(c, field, "'%s' must be a file name inside the problem directory", dst);
    char path[PATH_MAX];
    if (join_path(path, sizeof path, dir, dst, NULL, 0) < 0) {
        errf(c, field, "path too long: %.200s.../%s", dir, dst);
        return -ENAMETOOLONG;
    }
    if (access(path, R_OK) != 0)
        return errf(c, field, "cannot read %s: %s", path, strerror(errno));
    return 0;
}

static void derive_name(avo_problem *p)
{
    const char *k = NULL, *s = p->dir;
    while ((s = strstr(s, "/kernels/")))
        k = s++;
    const char *name = k ? k + strlen("/kernels/") : strrchr(p->dir, '/');
    if (!k && name)
        name++;
    const char *src = name && *name ? name : p->dir;
    size_t n = strlen(src);
    if (n >= sizeof p->name)
        n = sizeof p->name - 1;
    memcpy(p->name, src, n);
    p->name[n] = 0;
}

/* The seed a job starts from and the knob space tune searches around it:
 * file, knobs and constraints, from the top level (file_key "seed") or from
 * one entry of "seeds" (file_key "file"). Replaces what p held. Constraints
 * must parse, and the seed's own knob values must be allowed, or the tune
 * operator would start outside its search space. */
static int parse_seed(ctx *c, avo_problem *p, json_t *obj, const char *file_key)
{
    for (int i = 0; i < 16; i++) {
        free(p->constraints[i]);
        p->constraints[i] = NULL;
    }
    p->nconstraints = 0;
    p->nknobs = 0;
    memset(p->knobs, 0, sizeof p->knobs);
    int rc;
    if ((rc = parse_filename(c, file_key, json_object_get(obj, file_key), p->seed, sizeof p->seed, p->dir)) ||
        (rc = parse_knobs(c, p, json_object_get(obj, "knobs"))) ||
        (rc = parse_strings(c, "constraints", json_object_get(obj, "constraints"), p->constraints, 16,
                            &p->nconstraints)))
        return rc;
    const char *names[AVO_PROBLEM_MAX_KNOBS];
    double vals[AVO_PROBLEM_MAX_KNOBS];
    for (int k = 0; k < p->nknobs; k++) {
        names[k] = p->knobs[k].name;
        vals[k] = (double)p->knobs[k].dflt;
    }
    avo_expr_env env = {p->nknobs, names, vals};
    for (int i = 0; i < p->nconstraints; i++) {
        char field[64], why[256];
        snprintf(field, sizeof field, "constraints[%d]", i);
        if ((rc = check_idents(c, field, p->constraints[i], "knob", NULL, 0, p->knobs, p->nknobs)))
            return rc;
        double v;
        if (avo_expr_eval(p->constraints[i], &env, &v, why, sizeof why))
            return errf(c, field, "%s", why);
        if (v == 0)
            return errf(c, field, "the knob defaults violate '%s'", p->constraints[i]);
    }
    return 0;
}

/* "seeds": {"NAME": {"file", "knobs", "constraints", "description"}, ...}:
 * further seeds of the same problem, each with its own knob space (a job
 * picks one with seed.name). Each is checked now, on a scratch copy, so a
 * broken one fails the package at load rather than a job later. */
static int check_named_seeds(ctx *c, const avo_problem *p, json_t *j)
{
    static const char *const keys[] = {"file", "description", "knobs", "constraints", NULL};
    json_t *seeds = json_object_get(j, "seeds");
    if (!seeds)
        return 0;
    if (!json_is_object(seeds) || json_object_size(seeds) == 0)
        return errf(c, "seeds", "must be an object of named seeds, like {\"sm90\": {\"file\": ...}}");
    avo_problem *scratch = calloc(1, sizeof *scratch);
    if (!scratch)
        return -ENOMEM;
    memcpy(scratch->dir, p->dir, sizeof scratch->dir);
    const char *name;
    json_t *v;
    int rc = 0;
    json_object_foreach(seeds, name, v)
    {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "seeds.%.64s.", name);
        ctx sc = *c;
        sc.prefix = prefix;
        if (!is_ident(name) || strlen(name) >= sizeof p->seed_name)
            rc = errf(c, "seeds", "'%s' is not a seed name (an identifier of at most %zu characters)", name,
                      sizeof p->seed_name - 1);
        else if (!json_is_object(v))
            rc = errf(c, "seeds", "'%s' must be an object", name);
        else if (json_object_get(v, "description") && !json_is_string(json_object_get(v, "description")))
            rc = errf(&sc, "description", "must be a string");
        else if (!(rc = check_keys(&sc, NULL, v, keys)))
            rc = parse_seed(&sc, scratch, v, "file");
        if (rc)
            break;
    }
    for (int i = 0; i < 16; i++)
        free(scratch->constraints[i]);
    free(scratch);
    return rc;
}

int avo_problem_use_seed(avo_problem *p, const char *name, char *err, size_t errlen)
{
    if (!name || !*name)
        return 0;
    json_t *seeds = json_object_get(p->json, "seeds");
    json_t *v = json_object_get(seeds, name);
    if (!v) {
        char names[512] = "";
        const char *k;
        json_t *x;
        json_object_foreach(seeds, k, x)
        {
            size_t n = strlen(names);
            snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", k);
        }
        snprintf(err, errlen, "problem '%s' has no seed named '%s' (%s%s)", p->name, name,
                 names[0] ? "its named seeds: " : "it declares none besides its default seed", names);
        return -ENOENT;
    }
    char file[PATH_MAX], prefix[128];
    if (join_path(file, sizeof file, p->dir, "problem.json", err, errlen) < 0)
        return -ENAMETOOLONG;
    snprintf(prefix, sizeof prefix, "seeds.%s.", name);
    ctx c = {file, err, errlen, prefix};
    int rc = parse_seed(&c, p, v, "file");
    if (rc == 0)
        snprintf(p->seed_name, sizeof p->seed_name, "%s", name);
    return rc;
}

/* text NULL: <dir>/problem.json as it is on disk; else that file's text
 * as a job pinned it (the other files are still looked up in dir). */
static const char *const top_keys[] = {
    "name",       "description", "backend",      "entry",     "sizes",     "tensors",  "configs",
    "flops",      "bytes",       "score_metric", "tolerance", "reference", "seed",     "cflags",
    "knobs",      "constraints", "timing",       "check",     "validate",  "roofline", "language",
    "nvcc_flags", "baseline",    "seeds",        "counters",  "screen",    "policy",   NULL};

/* problem.json (or text) read into p->json: an object of known keys. */
static int read_problem_json(ctx *c, avo_problem *p, const char *dir, const char *file, const char *text)
{
    if (!realpath(dir, p->dir))
        return errf(c, "problem", "cannot open directory: %s", strerror(errno));
    json_error_t je;
    p->json = text ? json_loads(text, JSON_REJECT_DUPLICATES, &je) : json_load_file(file, JSON_REJECT_DUPLICATES, &je);
    if (!p->json) {
        if (!text && access(file, R_OK) != 0)
            return errf(c, "problem", "cannot read: %s", strerror(errno));
        return errf(c, "json", "%s (line %d, column %d)", je.text, je.line, je.column);
    }
    if (!json_is_object(p->json))
        return errf(c, "json", "top level must be an object");
    return check_keys(c, NULL, p->json, top_keys);
}

/* Name, backend and language (with the compiler flags that go with it),
 * baseline and entry point. */
static int parse_identity(ctx *c, avo_problem *p, const char *dir)
{
    json_t *j = p->json;
    int rc;
    derive_name(p);
    if (json_object_get(j, "name") &&
        (rc = copy_str(c, "name", json_object_get(j, "name"), p->name, sizeof p->name, 1)))
        return rc;
    json_t *desc = json_object_get(j, "description");
    if (desc && !json_is_string(desc))
        return errf(c, "description", "must be a string");
    if ((rc = copy_str(c, "backend", json_object_get(j, "backend"), p->backend, sizeof p->backend, 1)))
        return rc;
    if (strcmp(p->backend, "cpu") != 0 && strcmp(p->backend, "cuda") != 0)
        return errf(c, "backend", "unknown backend '%s' (cpu, cuda)", p->backend);
    /* CUDA problems compile with nvcc: their flags are "nvcc_flags" (the
     * worker adds -gencode for its own GPU); "cflags" belongs to cpu ones. */
    int cuda = strcmp(p->backend, "cuda") == 0;
    json_t *lang = json_object_get(j, "language");
    if (lang && (!json_is_string(lang) || strcmp(json_string_value(lang), cuda ? "cuda" : "c") != 0))
        return errf(c, "language", "must be \"%s\" for backend \"%s\"", cuda ? "cuda" : "c", p->backend);
    if (json_object_get(j, cuda ? "cflags" : "nvcc_flags"))
        return errf(c, cuda ? "cflags" : "nvcc_flags", "not used by backend \"%s\" (use \"%s\")", p->backend,
                    cuda ? "nvcc_flags" : "cflags");
    if (json_object_get(j, "baseline") &&
        (rc = parse_filename(c, "baseline", json_object_get(j, "baseline"), p->baseline, sizeof p->baseline, dir)))
        return rc;
    if ((rc = copy_str(c, "entry", json_object_get(j, "entry"), p->entry, sizeof p->entry, 1)))
        return rc;
    if (!is_ident(p->entry))
        return errf(c, "entry", "'%s' is not a C identifier", p->entry);
    return 0;
}

/* The work per call (flops, bytes: expressions of the sizes) and which of
 * them the score is, with its unit. */
static int parse_score(ctx *c, avo_problem *p)
{
    json_t *j = p->json;
    int rc;
    json_t *f = json_object_get(j, "flops"), *b = json_object_get(j, "bytes");
    if ((f && (rc = expr_field(c, "flops", f, &p->flops))) || (b && (rc = expr_field(c, "bytes", b, &p->bytes))))
        return rc;
    if ((p->flops && (rc = check_idents(c, "flops", p->flops, "size", p->sizes, p->nsizes, NULL, 0))) ||
        (p->bytes && (rc = check_idents(c, "bytes", p->bytes, "size", p->sizes, p->nsizes, NULL, 0))))
        return rc;
    if ((rc = copy_str(c, "score_metric", json_object_get(j, "score_metric"), p->score_metric, sizeof p->score_metric,
                       1)))
        return rc;
    if (strcmp(p->score_metric, "flops") == 0) {
        snprintf(p->unit, sizeof p->unit, "GFLOP/s");
        if (!p->flops)
            return errf(c, "flops", "missing (score_metric is \"flops\")");
    } else if (strcmp(p->score_metric, "bytes") == 0) {
        snprintf(p->unit, sizeof p->unit, "GB/s");
        if (!p->bytes)
            return errf(c, "bytes", "missing (score_metric is \"bytes\")");
    } else {
        return errf(c, "score_metric", "unknown metric '%s' (flops, bytes)", p->score_metric);
    }
    return 0;
}

/* How a candidate is built, checked, timed and judged. */
static int parse_evaluation(ctx *c, avo_problem *p, const char *dir)
{
    json_t *j = p->json;
    int cuda = strcmp(p->backend, "cuda") == 0;
    int rc;
    if ((rc = check_configs(c, p)) || (rc = parse_tolerance(c, p, json_object_get(j, "tolerance"))) ||
        (rc = parse_filename(c, "reference", json_object_get(j, "reference"), p->reference, sizeof p->reference,
                             dir)) ||
        (rc = parse_seed(c, p, j, "seed")) || (rc = check_named_seeds(c, p, j)) ||
        (rc = parse_strings(c, cuda ? "nvcc_flags" : "cflags", json_object_get(j, cuda ? "nvcc_flags" : "cflags"),
                            p->cflags, 32, &p->ncflags)) ||
        (rc = parse_timing(c, p, json_object_get(j, "timing"), json_object_get(j, "check"))) ||
        (rc = parse_check_rows(c, p, json_object_get(j, "check"))) ||
        (rc = parse_validate(c, p, json_object_get(j, "validate"))) ||
        (rc = parse_counters(c, p, json_object_get(j, "counters"))) ||
        (rc = parse_screen(c, p, json_object_get(j, "screen"))) ||
        (rc = parse_policy(c, p, json_object_get(j, "policy"))) ||
        (rc = parse_roofline(c, p, json_object_get(j, "roofline"))))
        return rc;
    return 0;
}

static int problem_load(avo_problem *p, const char *dir, const char *text, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    char file[PATH_MAX];
    if (join_path(file, sizeof file, dir, "problem.json", err, errlen) < 0)
        return -ENAMETOOLONG;
    ctx c = {file, err, errlen, NULL};
    int rc;
    if ((rc = read_problem_json(&c, p, dir, file, text)) || (rc = parse_identity(&c, p, dir)) ||
        (rc = parse_sizes(&c, p, json_object_get(p->json, "sizes"))) ||
        (rc = parse_tensors(&c, p, json_object_get(p->json, "tensors"))) ||
        (rc = parse_configs(&c, p, json_object_get(p->json, "configs"))) || (rc = parse_score(&c, p)) ||
        (rc = parse_evaluation(&c, p, dir)))
        avo_problem_free(p);
    return rc;
}

int avo_problem_load(avo_problem *p, const char *dir, char *err, size_t errlen)
{
    return problem_load(p, dir, NULL, err, errlen);
}

int avo_problem_load_text(avo_problem *p, const char *dir, const char *text, char *err, size_t errlen)
{
    return problem_load(p, dir, text, err, errlen);
}

int avo_problem_config_index(const avo_problem *p, const char *name, char *err, size_t errlen)
{
    char names[600] = "";
    size_t n = 0;
    for (int c = 0; c < p->nconfigs; c++) {
        if (strcmp(p->configs[c].name, name) == 0)
            return c;
        if (n < sizeof names) {
            int w = snprintf(names + n, sizeof names - n, "%s%s", c ? ", " : "", p->configs[c].name);
            n += w > 0 ? (size_t)w : 0;
        }
    }
    snprintf(err, errlen, "problem %s has no configuration '%s' (it has: %s)", p->name, name, names);
    return -ENOENT;
}

void avo_problem_free(avo_problem *p)
{
    if (!p)
        return;
    for (int t = 0; t < AVO_PROBLEM_MAX_TENSORS; t++)
        for (int k = 0; k < 8; k++)
            free(p->tensors[t].shape[k]);
    free(p->configs);
    free(p->flops);
    free(p->bytes);
    for (int i = 0; i < 32; i++)
        free(p->cflags[i]);
    for (int i = 0; i < 16; i++)
        free(p->constraints[i]);
    json_decref(p->json);
    memset(p, 0, sizeof *p);
}

/* The package under kernels_root (one or two levels down: "cpu/sgemm")
 * whose name is nearest to a mistyped one; "" when none is close. */
static void nearest_problem(const char *kernels_root, const char *name, char *out, size_t outlen)
{
    static const char *const pats[] = {"%s/*/problem.json", "%s/*/*/problem.json"};
    const char *names[256];
    size_t n = 0, root = strlen(kernels_root) + 1, tail = strlen("/problem.json");
    glob_t g[2];
    int ok[2] = {0, 0};
    out[0] = 0;
    for (int i = 0; i < 2; i++) {
        char pat[PATH_MAX];
        int len = snprintf(pat, sizeof pat, pats[i], kernels_root);
        /* no suggestion from a pattern that does not fit */
        ok[i] = len >= 0 && (size_t)len < sizeof pat && glob(pat, 0, NULL, &g[i]) == 0;
        for (size_t k = 0; ok[i] && k < g[i].gl_pathc && n < 256; k++) {
            char *path = g[i].gl_pathv[k];
            size_t len = strlen(path);
            if (len > root + tail) {
                path[len - tail] = 0; /* glob's own copy */
                names[n++] = path + root;
            }
        }
    }
    const char *best = avo_suggest(name, names, n);
    if (best)
        snprintf(out, outlen, "%s", best);
    for (int i = 0; i < 2; i++)
        if (ok[i])
            globfree(&g[i]);
}

int avo_problem_resolve(const char *kernels_root, const char *name, char *out, size_t outlen, char *err, size_t errlen)
{
    if (!name || !*name || name[0] == '/') {
        snprintf(err, errlen, "problem name '%s' must be relative, e.g. cpu/sgemm", name ? name : "");
        return -EINVAL;
    }
    for (const char *s = name; *s; s++) {
        if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '-' || *s == '.' || *s == '/')) {
            snprintf(err, errlen, "problem name '%s' has a character outside [A-Za-z0-9_./-]", name);
            return -EINVAL;
        }
    }
    /* Each path segment must be a plain name: no "", ".", "..". */
    const char *seg = name;
    while (1) {
        const char *e = strchr(seg, '/');
        size_t n = e ? (size_t)(e - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
            snprintf(err, errlen, "problem name '%s' must not contain empty, '.' or '..' segments", name);
            return -EINVAL;
        }
        if (!e)
            break;
        seg = e + 1;
    }
    if (join_path(out, outlen, kernels_root, name, err, errlen) < 0)
        return -ENAMETOOLONG;
    char file[PATH_MAX];
    if (join_path(file, sizeof file, out, "problem.json", err, errlen) < 0)
        return -ENAMETOOLONG;
    if (access(file, R_OK) != 0) {
        char near[256];
        nearest_problem(kernels_root, name, near, sizeof near);
        snprintf(err, errlen, "unknown problem '%s' (no %s)%s%s%s", name, file, near[0] ? "; did you mean '" : "", near,
                 near[0] ? "'?" : "");
        return -ENOENT;
    }
    return 0;
}

int avo_problem_knobs_allowed(const avo_problem *p, const int64_t *values)
{
    const char *names[AVO_PROBLEM_MAX_KNOBS];
    double vals[AVO_PROBLEM_MAX_KNOBS];
    for (int k = 0; k < p->nknobs; k++) {
        int in = 0;
        for (int x = 0; x < p->knobs[k].nvalues; x++)
            if (p->knobs[k].values[x] == values[k])
                in = 1;
        if (!in)
            return 0;
        names[k] = p->knobs[k].name;
        vals[k] = (double)values[k];
    }
    avo_expr_env env = {p->nknobs, names, vals};
    for (int i = 0; i < p->nconstraints; i++) {
        double v;
        int rc = avo_expr_eval(p->constraints[i], &env, &v, NULL, 0);
        if (rc)
            return rc;
        if (v == 0)
            return 0;
    }
    return 1;
}

int avo_problem_constraint_failed(const avo_problem *p, const int64_t *values)
{
    const char *names[AVO_PROBLEM_MAX_KNOBS];
    double vals[AVO_PROBLEM_MAX_KNOBS];
    for (int k = 0; k < p->nknobs; k++) {
        names[k] = p->knobs[k].name;
        vals[k] = (double)values[k];
    }
    avo_expr_env env = {p->nknobs, names, vals};
    for (int i = 0; i < p->nconstraints; i++) {
        double v;
        if (avo_expr_eval(p->constraints[i], &env, &v, NULL, 0) != 0 || v == 0)
            return i;
    }
    return -1;
}

#define RENDER_HEADER "/* avo knobs */\n"

int avo_problem_render(const avo_problem *p, const int64_t *values, const char *seed_src, const char *seed_name,
                       char **out)
{
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -ENOMEM;
    fputs(RENDER_HEADER, f);
    for (int k = 0; k < p->nknobs; k++)
        fprintf(f, "#define %s %lld\n", p->knobs[k].name, (long long)values[k]);
    /* Compiler messages name the file the seed came from. */
    if (!seed_name || !*seed_name)
        seed_name = p->seed[0] ? p->seed : "seed.c";
    fputs("#line 1 \"", f);
    for (const char *c = seed_name; *c; c++)
        if (*c != '"' && *c != '\\' && *c != '\n')
            fputc(*c, f);
    fputs("\"\n", f);
    fputs(seed_src ? seed_src : "", f);
    if (fclose(f) != 0) {
        free(buf);
        return -ENOMEM;
    }
    *out = buf;
    return 0;
}

const char *avo_problem_unrender(const char *src)
{
    if (strncmp(src, RENDER_HEADER, strlen(RENDER_HEADER)) != 0)
        return src;
    const char *line = strstr(src, "\n#line 1 ");
    const char *nl = line ? strchr(line + 1, '\n') : NULL;
    return nl ? nl + 1 : src;
}

void avo_problem_start_knobs(const avo_problem *p, json_t *knobs, int64_t *values)
{
    for (int i = 0; i < p->nknobs; i++) {
        json_t *x = json_object_get(knobs, p->knobs[i].name);
        values[i] = json_is_integer(x) ? json_integer_value(x) : p->knobs[i].dflt;
    }
}
