/* Building a job spec from `avoctl submit` flags (spec.h). */
#include "spec.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "avo_jobspec.h"
#include "buf.h"

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

/* The object under key, created when absent (or not an object: the
 * daemon would refuse it anyway). Returns a new reference, or NULL. */
static json_t *sub_object(json_t *obj, const char *key)
{
    json_t *o = json_object_get(obj, key);
    if (json_is_object(o))
        return json_incref(o);
    o = json_object();
    if (o && json_object_set(obj, key, o) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

typedef struct {
    int64_t evals, islands, prio, seed_cand, patience, stag_limit, migrate;
    double wall, eps, target, gpu, energy, min_gain, confidence;
} parsed;

static int parse_flags(const avoctl_spec_flags *f, parsed *p, char *err, size_t errlen)
{
    static const struct {
        size_t off;
        const char *name;
        int64_t min, max;
        size_t dst;
    } ints[] = {
        {offsetof(avoctl_spec_flags, evaluations), "--evaluations", 1, AVO_JOBSPEC_MAX_COUNT, offsetof(parsed, evals)},
        {offsetof(avoctl_spec_flags, islands), "--islands", 1, AVO_JOBSPEC_MAX_ISLANDS, offsetof(parsed, islands)},
        {offsetof(avoctl_spec_flags, priority), "--priority", -AVO_JOBSPEC_MAX_PRIORITY, AVO_JOBSPEC_MAX_PRIORITY,
         offsetof(parsed, prio)},
        {offsetof(avoctl_spec_flags, seed_candidate), "--seed-candidate", 1, INT64_MAX, offsetof(parsed, seed_cand)},
        {offsetof(avoctl_spec_flags, patience), "--patience", 1, AVO_JOBSPEC_MAX_COUNT, offsetof(parsed, patience)},
        {offsetof(avoctl_spec_flags, stagnation_limit), "--stagnation-limit", 1, AVO_JOBSPEC_MAX_COUNT,
         offsetof(parsed, stag_limit)},
        {offsetof(avoctl_spec_flags, migrate_every), "--migrate-every", 1, AVO_JOBSPEC_MAX_COUNT,
         offsetof(parsed, migrate)},
    };
    static const struct {
        size_t off;
        const char *name;
        double min, max;
        size_t dst;
    } nums[] = {
        {offsetof(avoctl_spec_flags, wall), "--wall", AVO_JOBSPEC_MIN_SECONDS, AVO_JOBSPEC_MAX_SECONDS,
         offsetof(parsed, wall)},
        {offsetof(avoctl_spec_flags, epsilon), "--epsilon", 0, 0.5, offsetof(parsed, eps)},
        {offsetof(avoctl_spec_flags, target_score), "--target-score", 1e-12, 1e300, offsetof(parsed, target)},
        {offsetof(avoctl_spec_flags, gpu_seconds), "--gpu-seconds", AVO_JOBSPEC_MIN_SECONDS, AVO_JOBSPEC_MAX_SECONDS,
         offsetof(parsed, gpu)},
        {offsetof(avoctl_spec_flags, energy_joules), "--energy-joules", 1, AVO_JOBSPEC_MAX_JOULES,
         offsetof(parsed, energy)},
        {offsetof(avoctl_spec_flags, min_gain), "--min-gain", 0, 1, offsetof(parsed, min_gain)},
        {offsetof(avoctl_spec_flags, confidence), "--confidence", 0, 1, offsetof(parsed, confidence)},
    };

    memset(p, 0, sizeof *p);
    if (f->problem && !*f->problem) {
        snprintf(err, errlen, "--problem: must not be empty");
        return -EINVAL;
    }
    if (f->operator_name && !*f->operator_name) {
        snprintf(err, errlen, "--operator: must not be empty");
        return -EINVAL;
    }
    if (f->seed_file && !*f->seed_file) {
        snprintf(err, errlen, "--seed: needs a FILE");
        return -EINVAL;
    }
    if (f->seed_name && !*f->seed_name) {
        snprintf(err, errlen, "--seed-name: needs a NAME (one of the problem's named seeds)");
        return -EINVAL;
    }
    if (f->seed_file && f->seed_candidate) {
        snprintf(err, errlen, "--seed and --seed-candidate: give one seed, not both");
        return -EINVAL;
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const char *s = *(const char *const *)((const char *)f + ints[i].off);
        if (s && avoctl_args_i64(ints[i].name, s, ints[i].min, ints[i].max, (int64_t *)((char *)p + ints[i].dst), err,
                                 errlen) < 0)
            return -EINVAL;
    }
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *s = *(const char *const *)((const char *)f + nums[i].off);
        if (s && avoctl_args_double(nums[i].name, s, nums[i].min, nums[i].max, (double *)((char *)p + nums[i].dst), err,
                                    errlen) < 0)
            return -EINVAL;
    }
    /* Open ends the table's closed ranges cannot say. */
    if (f->min_gain && !(p->min_gain < 1)) {
        snprintf(err, errlen, "--min-gain: must be in [0, 1) (a fraction: 0.005 is 0.5%%)");
        return -EINVAL;
    }
    if (f->confidence && !(p->confidence > 0 && p->confidence < 1)) {
        snprintf(err, errlen, "--confidence: must be in (0, 1) (0.95 is 95%%)");
        return -EINVAL;
    }
    return 0;
}

/* "--label K=V,K2=V2" as an object; the keys checked as avod checks them. */
static int parse_labels(const char *text, json_t **out, char *err, size_t errlen)
{
    char buf[2048], *save = NULL;
    if (strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "--label: longer than %zu characters", sizeof buf - 1);
        return -EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", text);
    json_t *l = json_object();
    for (char *w = strtok_r(buf, ",", &save); l && w; w = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(w, '=');
        if (eq)
            *eq = 0;
        if (!eq || !avo_jobspec_label_key_ok(w)) {
            snprintf(err, errlen,
                     "--label: '%.80s' is not KEY=VALUE with a key of a-z 0-9 . _ / - "
                     "(several: K=V,K2=V2)",
                     w);
            json_decref(l);
            return -EINVAL;
        }
        json_object_set_new(l, w, json_string(eq + 1));
    }
    if (!l || json_object_size(l) == 0) {
        snprintf(err, errlen, "--label: needs KEY=VALUE");
        json_decref(l);
        return -EINVAL;
    }
    *out = l;
    return 0;
}

/* Every flag checked and the seed file read, before the caller's object is
 * touched. */
static int read_flags(const avoctl_spec_flags *f, parsed *p, json_t **labels, json_t **source, char *err, size_t errlen)
{
    int rc;
    if ((rc = parse_flags(f, p, err, errlen)) < 0)
        return rc;
    if (f->name && !*f->name) {
        snprintf(err, errlen, "--name: must not be empty");
        return -EINVAL;
    }
    if (f->labels && (rc = parse_labels(f->labels, labels, err, errlen)) < 0)
        return rc;
    if (f->seed_file &&
        (rc = avoctl_buf_read_text("--seed", f->seed_file, AVOCTL_SEED_FILE_LIMIT, source, err, errlen)) < 0) {
        json_decref(*labels);
        *labels = NULL;
        return rc;
    }
    return 0;
}

static int set_budget(json_t *out, const avoctl_spec_flags *f, const parsed *p)
{
    if (!(f->evaluations || f->wall || f->gpu_seconds || f->energy_joules))
        return 0;
    json_t *budget = sub_object(out, "budget");
    int rc = budget ? 0 : -ENOMEM;
    if (f->evaluations)
        rc = rc ? rc : set(budget, "evaluations", json_integer(p->evals));
    if (f->wall)
        rc = rc ? rc : set(budget, "wall_seconds", number(p->wall));
    if (f->gpu_seconds)
        rc = rc ? rc : set(budget, "gpu_seconds", number(p->gpu));
    if (f->energy_joules)
        rc = rc ? rc : set(budget, "energy_joules", number(p->energy));
    json_decref(budget);
    return rc;
}

static int set_stagnation(json_t *out, const avoctl_spec_flags *f, const parsed *p)
{
    if (!(f->patience || f->stagnation_limit))
        return 0;
    json_t *stag = sub_object(out, "stagnation");
    int rc = stag ? 0 : -ENOMEM;
    if (f->patience)
        rc = rc ? rc : set(stag, "patience", json_integer(p->patience));
    if (f->stagnation_limit)
        rc = rc ? rc : set(stag, "limit", json_integer(p->stag_limit));
    json_decref(stag);
    return rc;
}

static int set_commit(json_t *out, const avoctl_spec_flags *f, const parsed *p)
{
    if (!(f->min_gain || f->confidence))
        return 0;
    json_t *commit = sub_object(out, "commit");
    int rc = commit ? 0 : -ENOMEM;
    if (f->min_gain)
        rc = rc ? rc : set(commit, "min_gain", json_real(p->min_gain));
    if (f->confidence)
        rc = rc ? rc : set(commit, "confidence", json_real(p->confidence));
    json_decref(commit);
    return rc;
}

static int set_seed(json_t *out, const avoctl_spec_flags *f, const parsed *p, json_t *source)
{
    json_t *seed = NULL;
    int rc = 0;
    if (f->seed_file || f->seed_candidate) {
        /* The two kinds of seed exclude each other (avod refuses both). */
        if (!(seed = sub_object(out, "seed"))) {
            rc = -ENOMEM;
        } else if (f->seed_file) {
            json_object_del(seed, "candidate");
            rc = set(seed, "file", json_string(basename(f->seed_file)));
            rc = rc ? rc : set(seed, "source", json_incref(source));
        } else {
            json_object_del(seed, "file");
            json_object_del(seed, "source");
            rc = set(seed, "candidate", json_integer(p->seed_cand));
        }
    }
    if (!rc && f->seed_name) {
        if (!seed && !(seed = sub_object(out, "seed")))
            rc = -ENOMEM;
        else
            rc = set(seed, "name", json_string(f->seed_name));
    }
    json_decref(seed);
    return rc;
}

/* The top-level search settings, the name and the labels (merged into
 * those the spec has). */
static int set_search(json_t *out, const avoctl_spec_flags *f, const parsed *p, json_t *labels)
{
    int rc = 0;
    if (f->target_score)
        rc = rc ? rc : set(out, "target_score", number(p->target));
    if (f->islands)
        rc = rc ? rc : set(out, "islands", json_integer(p->islands));
    if (f->migrate_every)
        rc = rc ? rc : set(out, "migrate_every", json_integer(p->migrate));
    if (f->epsilon)
        rc = rc ? rc : set(out, "epsilon", json_real(p->eps));
    if (f->priority)
        rc = rc ? rc : set(out, "priority", json_integer(p->prio));
    if (f->name)
        rc = rc ? rc : set(out, "name", json_string(f->name));
    if (labels) {
        json_t *have = json_object_get(out, "labels");
        if (json_is_object(have))
            rc = rc ? rc : json_object_update(have, labels);
        else
            rc = rc ? rc : set(out, "labels", json_incref(labels));
    }
    return rc;
}

int avoctl_spec_build(const avoctl_spec_flags *f, json_t **spec, char *err, size_t errlen)
{
    parsed p;
    json_t *labels = NULL, *source = NULL;
    int rc = read_flags(f, &p, &labels, &source, err, errlen);
    if (rc < 0)
        return rc;

    json_t *out = *spec ? json_incref(*spec) : json_object();
    if (!out || !json_is_object(out)) {
        snprintf(err, errlen, "job spec: expected a JSON object");
        rc = out ? -EINVAL : -ENOMEM;
        goto cleanup;
    }
    if (f->problem)
        rc = set(out, "problem", json_string(f->problem));
    if (f->operator_name)
        rc = rc ? rc : set(out, "operator", json_string(f->operator_name));
    rc = rc ? rc : set_budget(out, f, &p);
    rc = rc ? rc : set_stagnation(out, f, &p);
    rc = rc ? rc : set_commit(out, f, &p);
    rc = rc ? rc : set_seed(out, f, &p, source);
    rc = rc ? rc : set_search(out, f, &p, labels);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory building the job spec");
        goto cleanup;
    }
    if (!*spec)
        *spec = json_incref(out);

cleanup:
    json_decref(labels);
    json_decref(source);
    json_decref(out);
    return rc;
}
