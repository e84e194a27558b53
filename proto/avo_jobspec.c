/* The job spec: parsing, validation and defaults, shared by avod and avoctl (avo_jobspec.h). */
#include "avo_jobspec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_toolchain.h"

static const char *const top_fields[] = {"problem",   "operator",     "target",          "gpu",     "seed",
                                         "budget",    "target_score", "stagnation",      "islands", "migrate_every",
                                         "epsilon",   "priority",     "operator_params", "agent",   "commit",
                                         "toolchain", "name",         "labels",          NULL};
static const char *const budget_fields[] = {"evaluations", "wall_seconds", "gpu_seconds", "energy_joules",
                                            "tokens",      "cost_usd",     NULL};
static const char *const seed_fields[] = {"name", "file", "source", "candidate", "knobs", NULL};
static const char *const stagnation_fields[] = {"patience", "limit", NULL};
static const char *const param_fields[] = {"seed", "inflight", NULL};
static const char *const commit_fields[] = {"min_gain", "confidence", NULL};
static const char *const agent_fields[] = {"provider",        "max_turns",          "step_tokens",
                                           "supervise_after", "supervise_failures", "failed_steps",
                                           "backoff_s",       "backoff_max_s",      NULL};

static int check_known(json_t *obj, const char *const *known, const char *where, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
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
            snprintf(err, errlen, "%s%s%s: unknown field (expected one of: %s)", where, *where ? "." : "", key, list);
            return -EINVAL;
        }
    }
    return 0;
}

static int get_int(json_t *obj, const char *key, const char *where, long long lo, long long hi, int *out, char *err,
                   size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        snprintf(err, errlen, "%s%s: must be an integer", where, key);
        return -EINVAL;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(err, errlen, "%s%s: %lld is outside [%lld, %lld]", where, key, x, lo, hi);
        return -ERANGE;
    }
    *out = (int)x;
    return 0;
}

static int get_num(json_t *obj, const char *key, const char *where, double lo, double hi, double *out, char *err,
                   size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v)) {
        snprintf(err, errlen, "%s%s: must be a number", where, key);
        return -EINVAL;
    }
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        snprintf(err, errlen, "%s%s: %g is outside [%g, %g]", where, key, x, lo, hi);
        return -ERANGE;
    }
    *out = x;
    return 0;
}

static int has_control(const char *t)
{
    for (; *t; t++)
        if ((unsigned char)*t < 0x20 || *t == 0x7f)
            return 1;
    return 0;
}

int avo_jobspec_label_key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n < 1 || n > AVO_JOBSPEC_LABEL_KEY_MAX || !((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9')))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || strchr("._/-", k[i])))
            return 0;
    return 1;
}

/* "name" and "labels": what people call a job and filter by. */
static int parse_name_labels(json_t *in, avo_jobspec *s, char *err, size_t errlen)
{
    json_t *nm = json_object_get(in, "name"), *lb = json_object_get(in, "labels");
    if (nm) {
        if (!json_is_string(nm) || json_string_length(nm) < 1 || json_string_length(nm) > AVO_JOBSPEC_NAME_MAX ||
            has_control(json_string_value(nm))) {
            snprintf(err, errlen, "name: must be a string of 1 to %d characters without control characters",
                     AVO_JOBSPEC_NAME_MAX);
            return -EINVAL;
        }
        snprintf(s->name, sizeof s->name, "%s", json_string_value(nm));
    }
    if (!lb)
        return 0;
    if (!json_is_object(lb)) {
        snprintf(err, errlen, "labels: must be an object of strings, e.g. {\"campaign\": \"nightly\"}");
        return -EINVAL;
    }
    if (json_object_size(lb) > AVO_JOBSPEC_LABELS_MAX) {
        snprintf(err, errlen, "labels: at most %d labels", AVO_JOBSPEC_LABELS_MAX);
        return -EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(lb, k, v)
    {
        if (!avo_jobspec_label_key_ok(k)) {
            snprintf(err, errlen,
                     "labels.%.70s: a label key is 1 to %d characters a-z 0-9 . _ / - starting with a "
                     "letter or digit",
                     k, AVO_JOBSPEC_LABEL_KEY_MAX);
            return -EINVAL;
        }
        if (!json_is_string(v) || json_string_length(v) > AVO_JOBSPEC_LABEL_VALUE_MAX ||
            has_control(json_string_value(v))) {
            snprintf(err, errlen,
                     "labels.%s: a label value is a string of at most %d characters without control "
                     "characters",
                     k, AVO_JOBSPEC_LABEL_VALUE_MAX);
            return -EINVAL;
        }
    }
    s->labels = json_incref(lb);
    return 0;
}

/* where: the object's own path ("seed.") for messages, "" at the top level */
static int get_str(json_t *obj, const char *where, const char *key, char *out, size_t outlen, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0) {
        snprintf(err, errlen, "%s%s: must be a non-empty string", where, key);
        return -EINVAL;
    }
    if (json_string_length(v) >= outlen) {
        snprintf(err, errlen, "%s%s: longer than %zu characters", where, key, outlen - 1);
        return -EINVAL;
    }
    snprintf(out, outlen, "%s", json_string_value(v));
    return 0;
}

/* commit: {"min_gain": G in [0, 1), "confidence": C in (0, 1)}, both
 * optional; the bounds are open where a value would make the rule
 * meaningless (a confidence of 1, a gain of 100%). */
static int parse_commit(json_t *c, avo_jobspec *s, char *err, size_t errlen)
{
    int rc;
    s->min_gain = -1;
    s->confidence = AVO_COMMIT_CONFIDENCE;
    if (!c)
        return 0;
    if (!json_is_object(c)) {
        snprintf(err, errlen, "commit: must be an object like {\"min_gain\": 0.005, \"confidence\": 0.95}");
        return -EINVAL;
    }
    if ((rc = check_known(c, commit_fields, "commit", err, errlen)) < 0 ||
        (rc = get_num(c, "min_gain", "commit.", -1e300, 1e300, &s->min_gain, err, errlen)) < 0 ||
        (rc = get_num(c, "confidence", "commit.", -1e300, 1e300, &s->confidence, err, errlen)) < 0)
        return rc;
    if (json_object_get(c, "min_gain") && !(s->min_gain >= 0 && s->min_gain < 1)) {
        snprintf(err, errlen, "commit.min_gain must be in [0, 1) (a fraction: 0.005 is 0.5%%), not %g", s->min_gain);
        return -ERANGE;
    }
    if (!(s->confidence > 0 && s->confidence < 1)) {
        snprintf(err, errlen, "commit.confidence must be in (0, 1) (0.95 is 95%%), not %g", s->confidence);
        return -ERANGE;
    }
    return 0;
}

void avo_jobspec_commit_resolve(avo_jobspec *s, json_t *normalized, int cuda)
{
    if (s->min_gain < 0)
        s->min_gain = cuda ? AVO_COMMIT_MIN_GAIN_CUDA : AVO_COMMIT_MIN_GAIN_CPU;
    if (normalized)
        json_object_set_new(normalized, "commit",
                            json_pack("{s:f,s:f}", "min_gain", s->min_gain, "confidence", s->confidence));
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

/* seed: {"file": NAME, "source": TEXT} (what `avoctl submit --seed FILE`
 * sends), or {"candidate": ID} (transfer), each optionally with "knobs" to
 * start the tune operator from and "name", one of the package's named seeds
 * (its file, knobs and constraints; a source or candidate given beside it
 * replaces only the file). The name and knobs are checked against the
 * problem by the caller, which has it loaded. */
static int parse_seed(json_t *sd, avo_jobspec *s, char *err, size_t errlen)
{
    int rc;
    if (!sd)
        return 0;
    if (!json_is_object(sd)) {
        snprintf(err, errlen,
                 "seed: must be an object like {\"file\": \"x.c\", \"source\": \"...\"} or "
                 "{\"candidate\": 12}");
        return -EINVAL;
    }
    if ((rc = check_known(sd, seed_fields, "seed", err, errlen)) < 0 ||
        (rc = get_str(sd, "seed.", "name", s->seed_name, sizeof s->seed_name, err, errlen)) < 0)
        return rc;
    json_t *src = json_object_get(sd, "source"), *cand = json_object_get(sd, "candidate");
    json_t *knobs = json_object_get(sd, "knobs");
    if (src && cand) {
        snprintf(err, errlen, "seed: give either source (a file) or candidate (transfer), not both");
        return -EINVAL;
    }
    if (src) {
        if (!json_is_string(src) || json_string_length(src) == 0) {
            snprintf(err, errlen, "seed.source: must be the seed file's non-empty text");
            return -EINVAL;
        }
        if (json_string_length(src) > 4u << 20) {
            snprintf(err, errlen, "seed.source: %zu bytes is more than the 4 MiB a candidate may have",
                     json_string_length(src));
            return -EINVAL;
        }
        if (strlen(json_string_value(src)) != json_string_length(src)) {
            snprintf(err, errlen, "seed.source: contains a NUL byte (not a source file?)");
            return -EINVAL;
        }
        if ((rc = get_str(sd, "seed.", "file", s->seed_file, sizeof s->seed_file, err, errlen)) < 0)
            return rc;
        if (!s->seed_file[0])
            snprintf(s->seed_file, sizeof s->seed_file, "seed");
        if (!(s->seed_source = strdup(json_string_value(src))))
            return -ENOMEM;
    } else if (json_object_get(sd, "file")) {
        snprintf(err, errlen, "seed.file: needs seed.source, the file's text (avoctl submit --seed FILE sends both)");
        return -EINVAL;
    }
    if (cand) {
        if (!json_is_integer(cand) || json_integer_value(cand) <= 0) {
            snprintf(err, errlen, "seed.candidate: must be a candidate id (a positive integer)");
            return -EINVAL;
        }
        s->seed_candidate = json_integer_value(cand);
    }
    if (knobs) {
        if (!json_is_object(knobs)) {
            snprintf(err, errlen, "seed.knobs: must be an object like {\"BM\": 64}");
            return -EINVAL;
        }
        const char *k;
        json_t *v;
        json_object_foreach(knobs, k, v)
        {
            if (!json_is_integer(v)) {
                snprintf(err, errlen, "seed.knobs.%s: must be an integer", k);
                return -EINVAL;
            }
        }
        s->seed_knobs = json_incref(knobs);
    }
    return 0;
}

static void set_defaults(avo_jobspec *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->op, sizeof s->op, "tune");
    s->evaluations = 30;
    s->islands = 1;
    s->inflight = 1;
    s->migrate_every = 4;
    s->patience = 8;
    s->agent_max_turns = 40;
    s->agent_step_tokens = 500000;
    s->agent_supervise_after = 3;
    s->agent_supervise_failures = 4;
    s->agent_failed_steps = 3;
    s->agent_backoff_s = 2;
    s->agent_backoff_max_s = 60;
}

/* What is optimised, by which operator, for which target and toolchain. */
static int parse_problem_operator(json_t *in, avo_jobspec *s, char *err, size_t errlen)
{
    int rc;
    if (!json_is_object(in)) {
        snprintf(err, errlen, "job spec: must be a JSON object");
        return -EINVAL;
    }
    if ((rc = check_known(in, top_fields, "", err, errlen)) < 0)
        return rc;
    if (!json_object_get(in, "problem")) {
        snprintf(err, errlen, "problem: required (e.g. \"cpu/sgemm\")");
        return -EINVAL;
    }
    if ((rc = get_str(in, "", "problem", s->problem, sizeof s->problem, err, errlen)) < 0 ||
        (rc = get_str(in, "", "operator", s->op, sizeof s->op, err, errlen)) < 0 ||
        (rc = get_str(in, "", "target", s->target, sizeof s->target, err, errlen)) < 0 ||
        (rc = get_str(in, "", "gpu", s->gpu, sizeof s->gpu, err, errlen)) < 0)
        return rc;
    if (json_object_get(in, "toolchain") &&
        (rc = avo_toolchain_parse(json_object_get(in, "toolchain"), &s->toolchain, err, errlen)) < 0)
        return rc;
    if (strcmp(s->op, "tune") != 0 && strcmp(s->op, "agent") != 0) {
        snprintf(err, errlen, "operator: unknown operator '%s' (available: tune, agent)", s->op);
        return -EINVAL;
    }
    return 0;
}

static int parse_agent(json_t *in, avo_jobspec *s, int agent, char *err, size_t errlen)
{
    int rc;
    json_t *ag = json_object_get(in, "agent");
    if (ag && !agent) {
        snprintf(err, errlen, "agent: applies to agent jobs only (this job's operator is '%s')", s->op);
        return -EINVAL;
    }
    if (agent) {
        if (!json_is_object(ag) || !json_object_get(ag, "provider")) {
            snprintf(err, errlen,
                     "agent: an agent job needs {\"provider\": NAME} (one of avod's configured "
                     "providers; docs/agent.md)");
            return -EINVAL;
        }
        if ((rc = check_known(ag, agent_fields, "agent", err, errlen)) < 0 ||
            (rc = get_str(ag, "agent.", "provider", s->agent_provider, sizeof s->agent_provider, err, errlen)) < 0 ||
            (rc = get_int(ag, "max_turns", "agent.", 1, 10000, &s->agent_max_turns, err, errlen)) < 0 ||
            (rc = get_int(ag, "step_tokens", "agent.", 1000, 100000000, &s->agent_step_tokens, err, errlen)) < 0 ||
            (rc = get_int(ag, "supervise_after", "agent.", 1, 1000, &s->agent_supervise_after, err, errlen)) < 0 ||
            (rc = get_int(ag, "supervise_failures", "agent.", 1, 1000, &s->agent_supervise_failures, err, errlen)) <
                0 ||
            (rc = get_int(ag, "failed_steps", "agent.", 1, 100, &s->agent_failed_steps, err, errlen)) < 0 ||
            (rc = get_int(ag, "backoff_s", "agent.", 0, 3600, &s->agent_backoff_s, err, errlen)) < 0 ||
            (rc = get_int(ag, "backoff_max_s", "agent.", 0, 86400, &s->agent_backoff_max_s, err, errlen)) < 0)
            return rc;
        if (s->agent_backoff_max_s < s->agent_backoff_s) {
            snprintf(err, errlen, "agent.backoff_max_s: %d is under agent.backoff_s (%d)", s->agent_backoff_max_s,
                     s->agent_backoff_s);
            return -EINVAL;
        }
    }
    return 0;
}

static int parse_budget(json_t *in, avo_jobspec *s, int agent, char *err, size_t errlen)
{
    int rc;
    json_t *b = json_object_get(in, "budget");
    if (b) {
        if (!json_is_object(b)) {
            snprintf(err, errlen, "budget: must be an object like {\"evaluations\": 30}");
            return -EINVAL;
        }
        if ((rc = check_known(b, budget_fields, "budget", err, errlen)) < 0 ||
            (rc = get_int(b, "evaluations", "budget.", 1, AVO_JOBSPEC_MAX_COUNT, &s->evaluations, err, errlen)) < 0 ||
            (rc = get_num(b, "wall_seconds", "budget.", AVO_JOBSPEC_MIN_SECONDS, AVO_JOBSPEC_MAX_SECONDS,
                          &s->wall_seconds, err, errlen)) < 0 ||
            (rc = get_num(b, "gpu_seconds", "budget.", AVO_JOBSPEC_MIN_SECONDS, AVO_JOBSPEC_MAX_SECONDS,
                          &s->gpu_seconds, err, errlen)) < 0 ||
            (rc = get_num(b, "energy_joules", "budget.", 1, AVO_JOBSPEC_MAX_JOULES, &s->energy_joules, err, errlen)) <
                0)
            return rc;
        /* LLM budgets bound the agent operator; a tune job spends none. */
        const char *llm = json_object_get(b, "tokens") ? "tokens" : json_object_get(b, "cost_usd") ? "cost_usd" : NULL;
        if (agent) {
            if ((rc = get_num(b, "tokens", "budget.", 1, 1e15, &s->tokens, err, errlen)) < 0 ||
                (rc = get_num(b, "cost_usd", "budget.", 0.0001, 1e9, &s->cost_usd, err, errlen)) < 0)
                return rc;
        } else if (llm) {
            snprintf(err, errlen, "budget.%s: applies to agent jobs only (operator '%s' makes no LLM calls)", llm,
                     s->op);
            return -EINVAL;
        }
    }
    return 0;
}

/* How the search runs: when it stops early, its islands, priority, commit
 * rule and random seed. */
static int parse_search(json_t *in, avo_jobspec *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = get_num(in, "target_score", "", 1e-12, 1e300, &s->target_score, err, errlen)) < 0 ||
        (rc = get_int(in, "migrate_every", "", 1, AVO_JOBSPEC_MAX_COUNT, &s->migrate_every, err, errlen)) < 0)
        return rc;
    json_t *sg = json_object_get(in, "stagnation");
    if (sg) {
        if (!json_is_object(sg)) {
            snprintf(err, errlen, "stagnation: must be an object like {\"patience\": 8, \"limit\": 40}");
            return -EINVAL;
        }
        if ((rc = check_known(sg, stagnation_fields, "stagnation", err, errlen)) < 0 ||
            (rc = get_int(sg, "patience", "stagnation.", 1, AVO_JOBSPEC_MAX_COUNT, &s->patience, err, errlen)) < 0 ||
            (rc = get_int(sg, "limit", "stagnation.", 1, AVO_JOBSPEC_MAX_COUNT, &s->stagnation_limit, err, errlen)) < 0)
            return rc;
    }

    if ((rc = get_int(in, "islands", "", 1, AVO_JOBSPEC_MAX_ISLANDS, &s->islands, err, errlen)) < 0 ||
        (rc = get_num(in, "epsilon", "", 0, 0.5, &s->epsilon, err, errlen)) < 0 ||
        (rc = get_int(in, "priority", "", -AVO_JOBSPEC_MAX_PRIORITY, AVO_JOBSPEC_MAX_PRIORITY, &s->priority, err,
                      errlen)) < 0 ||
        (rc = parse_commit(json_object_get(in, "commit"), s, err, errlen)) < 0)
        return rc;
    json_t *p = json_object_get(in, "operator_params");
    if (p) {
        if (!json_is_object(p)) {
            snprintf(err, errlen, "operator_params: must be an object");
            return -EINVAL;
        }
        if ((rc = check_known(p, param_fields, "operator_params", err, errlen)) < 0)
            return rc;
        json_t *sd = json_object_get(p, "seed");
        if (sd) {
            if (!json_is_integer(sd) || json_integer_value(sd) < 0) {
                snprintf(err, errlen, "operator_params.seed: must be a non-negative integer");
                return -EINVAL;
            }
            s->rng_seed = (uint64_t)json_integer_value(sd);
        }
        json_t *fl = json_object_get(p, "inflight");
        if (fl) {
            if (!json_is_integer(fl) || json_integer_value(fl) < 1 ||
                json_integer_value(fl) > AVO_JOBSPEC_MAX_INFLIGHT) {
                snprintf(err, errlen, "operator_params.inflight: must be an integer from 1 to %d",
                         AVO_JOBSPEC_MAX_INFLIGHT);
                return -EINVAL;
            }
            s->inflight = (int)json_integer_value(fl);
        }
    }
    return 0;
}

static json_t *normalized_seed(const avo_jobspec *s)
{
    json_t *sd = json_object();
    if (s->seed_name[0])
        json_object_set_new(sd, "name", json_string(s->seed_name));
    if (s->seed_file[0])
        json_object_set_new(sd, "file", json_string(s->seed_file));
    if (s->seed_candidate > 0)
        json_object_set_new(sd, "candidate", json_integer(s->seed_candidate));
    if (s->seed_knobs)
        json_object_set(sd, "knobs", s->seed_knobs);
    return sd;
}

/* The spec with every default filled in, as stored and shown. NULL: out of
 * memory. */
static json_t *normalize(const avo_jobspec *s, int agent)
{
    json_t *n = json_pack("{s:s,s:s,s:s,s:{s:i},s:i,s:i,s:f,s:i,s:{s:i},s:{s:I}}", "problem", s->problem, "operator",
                          s->op, "target", s->target[0] ? s->target : "", "budget", "evaluations", s->evaluations,
                          "islands", s->islands, "migrate_every", s->migrate_every, "epsilon", s->epsilon, "priority",
                          s->priority, "stagnation", "patience", s->patience, "operator_params", "seed",
                          (json_int_t)s->rng_seed);
    if (n)
        json_object_set_new(json_object_get(n, "operator_params"), "inflight", json_integer(s->inflight));
    if (!n)
        return NULL;
    json_t *nb = json_object_get(n, "budget");
    if (s->wall_seconds > 0)
        json_object_set_new(nb, "wall_seconds", json_real(s->wall_seconds));
    if (s->gpu_seconds > 0)
        json_object_set_new(nb, "gpu_seconds", json_real(s->gpu_seconds));
    if (s->energy_joules > 0)
        json_object_set_new(nb, "energy_joules", json_real(s->energy_joules));
    if (s->tokens > 0)
        json_object_set_new(nb, "tokens", json_integer((json_int_t)s->tokens));
    if (s->cost_usd > 0)
        json_object_set_new(nb, "cost_usd", json_real(s->cost_usd));
    if (agent)
        json_object_set_new(n, "agent",
                            json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "provider", s->agent_provider, "max_turns",
                                      s->agent_max_turns, "step_tokens", s->agent_step_tokens, "supervise_after",
                                      s->agent_supervise_after, "supervise_failures", s->agent_supervise_failures,
                                      "failed_steps", s->agent_failed_steps, "backoff_s", s->agent_backoff_s,
                                      "backoff_max_s", s->agent_backoff_max_s));
    if (s->stagnation_limit > 0)
        json_object_set_new(json_object_get(n, "stagnation"), "limit", json_integer(s->stagnation_limit));
    if (s->target_score > 0)
        json_object_set_new(n, "target_score", json_real(s->target_score));
    if (s->gpu[0])
        json_object_set_new(n, "gpu", json_string(s->gpu));
    if (s->toolchain)
        json_object_set(n, "toolchain", s->toolchain);
    if (s->name[0])
        json_object_set_new(n, "name", json_string(s->name));
    if (s->labels)
        json_object_set(n, "labels", s->labels);
    /* min_gain only once the backend resolves it (avo_jobspec_commit_resolve) */
    json_object_set_new(n, "commit", json_pack("{s:f}", "confidence", s->confidence));
    if (s->min_gain >= 0)
        json_object_set_new(json_object_get(n, "commit"), "min_gain", json_real(s->min_gain));
    if (s->seed_name[0] || s->seed_file[0] || s->seed_candidate > 0 || s->seed_knobs)
        json_object_set_new(n, "seed", normalized_seed(s));
    return n;
}

int avo_jobspec_parse(json_t *in, avo_jobspec *s, json_t **normalized, char *err, size_t errlen)
{
    int rc;
    set_defaults(s);
    if ((rc = parse_problem_operator(in, s, err, errlen)) < 0)
        return rc;
    const int agent = !strcmp(s->op, "agent");
    if ((rc = parse_agent(in, s, agent, err, errlen)) < 0)
        return rc;
    if (s->target[0] && !avo_jobspec_target_valid(s->target)) {
        snprintf(err, errlen, "target: unknown target '%s' (cpu, or a GPU architecture like sm_90)", s->target);
        return -EINVAL;
    }
    if ((rc = parse_budget(in, s, agent, err, errlen)) < 0 || (rc = parse_search(in, s, err, errlen)) < 0)
        return rc;
    if ((rc = parse_name_labels(in, s, err, errlen)) < 0) {
        avo_jobspec_clear(s);
        return rc;
    }
    /* Last: it is the only part that allocates. */
    if ((rc = parse_seed(json_object_get(in, "seed"), s, err, errlen)) < 0) {
        avo_jobspec_clear(s);
        return rc;
    }
    if (normalized) {
        json_t *n = normalize(s, agent);
        if (!n) {
            avo_jobspec_clear(s);
            return -ENOMEM;
        }
        *normalized = n;
    }
    return 0;
}

void avo_jobspec_clear(avo_jobspec *s)
{
    free(s->seed_source);
    s->seed_source = NULL;
    json_decref(s->seed_knobs);
    s->seed_knobs = NULL;
    json_decref(s->toolchain);
    s->toolchain = NULL;
    json_decref(s->labels);
    s->labels = NULL;
}
