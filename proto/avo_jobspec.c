#include "avo_jobspec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const top_fields[] = {"problem", "operator", "target", "budget", "islands",
                                         "epsilon", "priority", "operator_params", NULL};
static const char *const budget_fields[] = {"evaluations", "wall_seconds", NULL};
static const char *const param_fields[] = {"seed", NULL};

static int check_known(json_t *obj, const char *const *known, const char *where, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; known[i]; i++)
            if (!strcmp(key, known[i]))
                ok = 1;
        if (!ok) {
            char list[256] = "";
            for (int i = 0; known[i]; i++) {
                strncat(list, known[i], sizeof list - strlen(list) - 3);
                if (known[i + 1])
                    strncat(list, ", ", sizeof list - strlen(list) - 1);
            }
            snprintf(err, errlen, "%s%s%s: unknown field (expected one of: %s)", where, *where ? "." : "",
                     key, list);
            return -22;
        }
    }
    return 0;
}

static int get_int(json_t *obj, const char *key, const char *where, long long lo, long long hi,
                   int *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        snprintf(err, errlen, "%s%s: must be an integer", where, key);
        return -22;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(err, errlen, "%s%s: %lld is outside [%lld, %lld]", where, key, x, lo, hi);
        return -34;
    }
    *out = (int)x;
    return 0;
}

static int get_num(json_t *obj, const char *key, const char *where, double lo, double hi, double *out,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v)) {
        snprintf(err, errlen, "%s%s: must be a number", where, key);
        return -22;
    }
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        snprintf(err, errlen, "%s%s: %g is outside [%g, %g]", where, key, x, lo, hi);
        return -34;
    }
    *out = x;
    return 0;
}

static int get_str(json_t *obj, const char *key, char *out, size_t outlen, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0) {
        snprintf(err, errlen, "%s: must be a non-empty string", key);
        return -22;
    }
    if (json_string_length(v) >= outlen) {
        snprintf(err, errlen, "%s: longer than %zu characters", key, outlen - 1);
        return -22;
    }
    snprintf(out, outlen, "%s", json_string_value(v));
    return 0;
}

int avo_jobspec_target_valid(const char *t)
{
    if (!strcmp(t, "cpu"))
        return 1;
    if (strncmp(t, "sm_", 3) != 0 || !t[3])
        return 0;
    for (const char *c = t + 3; *c; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return strlen(t) <= 8;
}

int avo_jobspec_parse(json_t *in, avo_jobspec *s, json_t **normalized, char *err, size_t errlen)
{
    int rc;
    memset(s, 0, sizeof *s);
    snprintf(s->op, sizeof s->op, "tune");
    s->evaluations = 30;
    s->islands = 1;

    if (!json_is_object(in)) {
        snprintf(err, errlen, "job spec: must be a JSON object");
        return -22;
    }
    if ((rc = check_known(in, top_fields, "", err, errlen)) < 0)
        return rc;
    if (!json_object_get(in, "problem")) {
        snprintf(err, errlen, "problem: required (e.g. \"cpu/sgemm\")");
        return -22;
    }
    if ((rc = get_str(in, "problem", s->problem, sizeof s->problem, err, errlen)) < 0 ||
        (rc = get_str(in, "operator", s->op, sizeof s->op, err, errlen)) < 0 ||
        (rc = get_str(in, "target", s->target, sizeof s->target, err, errlen)) < 0)
        return rc;
    if (strcmp(s->op, "tune") != 0) {
        snprintf(err, errlen, "operator: unknown operator '%s' (available: tune)", s->op);
        return -22;
    }
    if (s->target[0] && !avo_jobspec_target_valid(s->target)) {
        snprintf(err, errlen, "target: unknown target '%s' (cpu, or a GPU architecture like sm_90)", s->target);
        return -22;
    }
    json_t *b = json_object_get(in, "budget");
    if (b) {
        if (!json_is_object(b)) {
            snprintf(err, errlen, "budget: must be an object like {\"evaluations\": 30}");
            return -22;
        }
        if ((rc = check_known(b, budget_fields, "budget", err, errlen)) < 0 ||
            (rc = get_int(b, "evaluations", "budget.", 1, 1000000, &s->evaluations, err, errlen)) < 0 ||
            (rc = get_num(b, "wall_seconds", "budget.", 1, 1e9, &s->wall_seconds, err, errlen)) < 0)
            return rc;
    }
    if ((rc = get_int(in, "islands", "", 1, 256, &s->islands, err, errlen)) < 0 ||
        (rc = get_num(in, "epsilon", "", 0, 0.5, &s->epsilon, err, errlen)) < 0 ||
        (rc = get_int(in, "priority", "", -1000, 1000, &s->priority, err, errlen)) < 0)
        return rc;
    json_t *p = json_object_get(in, "operator_params");
    if (p) {
        if (!json_is_object(p)) {
            snprintf(err, errlen, "operator_params: must be an object");
            return -22;
        }
        if ((rc = check_known(p, param_fields, "operator_params", err, errlen)) < 0)
            return rc;
        json_t *sd = json_object_get(p, "seed");
        if (sd) {
            if (!json_is_integer(sd) || json_integer_value(sd) < 0) {
                snprintf(err, errlen, "operator_params.seed: must be a non-negative integer");
                return -22;
            }
            s->rng_seed = (uint64_t)json_integer_value(sd);
        }
    }
    if (normalized) {
        json_t *n = json_pack("{s:s,s:s,s:s,s:{s:i},s:i,s:f,s:i,s:{s:I}}", "problem", s->problem,
                              "operator", s->op, "target", s->target[0] ? s->target : "", "budget", "evaluations",
                              s->evaluations, "islands", s->islands, "epsilon", s->epsilon, "priority",
                              s->priority, "operator_params", "seed", (json_int_t)s->rng_seed);
        if (!n)
            return -12;
        if (s->wall_seconds > 0)
            json_object_set_new(json_object_get(n, "budget"), "wall_seconds", json_real(s->wall_seconds));
        *normalized = n;
    }
    return 0;
}
