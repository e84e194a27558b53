#include "spec.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"

/* Integral seconds stay JSON integers so the daemon may type-check them. */
static json_t *number(double v)
{
    if (v == floor(v) && fabs(v) < 9e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static int set(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}

int avoctl_spec_build(const avoctl_spec_flags *f, json_t **spec, char *err, size_t errlen)
{
    int64_t evals = 0, islands = 0, prio = 0;
    double wall = 0, eps = 0;
    json_t *out = NULL, *budget = NULL;
    int rc;

    /* Validate everything before touching the caller's object. */
    if (f->problem && !*f->problem) {
        snprintf(err, errlen, "--problem: must not be empty");
        return -EINVAL;
    }
    if (f->operator_name && !*f->operator_name) {
        snprintf(err, errlen, "--operator: must not be empty");
        return -EINVAL;
    }
    if ((f->evaluations &&
         (rc = avoctl_parse_i64("--evaluations", f->evaluations, 1, INT32_MAX, &evals, err, errlen)) < 0) ||
        (f->islands &&
         (rc = avoctl_parse_i64("--islands", f->islands, 1, 4096, &islands, err, errlen)) < 0) ||
        (f->priority &&
         (rc = avoctl_parse_i64("--priority", f->priority, -1000000, 1000000, &prio, err, errlen)) < 0) ||
        (f->wall && (rc = avoctl_parse_double("--wall", f->wall, 0.001, 1e9, &wall, err, errlen)) < 0) ||
        (f->epsilon && (rc = avoctl_parse_double("--epsilon", f->epsilon, 0, 1, &eps, err, errlen)) < 0))
        return rc;

    out = *spec ? json_incref(*spec) : json_object();
    if (!out || !json_is_object(out)) {
        snprintf(err, errlen, "job spec: expected a JSON object");
        rc = out ? -EINVAL : -ENOMEM;
        goto cleanup;
    }
    rc = 0;
    if (f->problem)
        rc = rc ? rc : set(out, "problem", json_string(f->problem));
    if (f->operator_name)
        rc = rc ? rc : set(out, "operator", json_string(f->operator_name));
    if (!rc && (f->evaluations || f->wall)) {
        budget = json_object_get(out, "budget");
        if (json_is_object(budget)) {
            json_incref(budget);
        } else {
            budget = json_object();
            if (!budget || json_object_set(out, "budget", budget) != 0)
                rc = -ENOMEM;
        }
        if (f->evaluations)
            rc = rc ? rc : set(budget, "evaluations", json_integer(evals));
        if (f->wall)
            rc = rc ? rc : set(budget, "wall_seconds", number(wall));
    }
    if (f->islands)
        rc = rc ? rc : set(out, "islands", json_integer(islands));
    if (f->epsilon)
        rc = rc ? rc : set(out, "epsilon", json_real(eps));
    if (f->priority)
        rc = rc ? rc : set(out, "priority", json_integer(prio));
    if (rc < 0) {
        snprintf(err, errlen, "out of memory building the job spec");
        goto cleanup;
    }
    if (!*spec)
        *spec = json_incref(out);

cleanup:
    json_decref(budget);
    json_decref(out);
    return rc;
}
