/* The campaign's re-validation: which previous bests to measure again when the toolchain changed, and their ratios (campreval.h). */
#include "campreval.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "campaign.h"
#include "fmt.h"
#include "toolchain.h"

static const char *const mode_names[] = {"off", "on_toolchain_change", "always"};

int avoctl_campreval_mode_parse(const char *text, avoctl_campreval_mode *mode)
{
    for (size_t i = 0; text && i < sizeof mode_names / sizeof mode_names[0]; i++)
        if (!strcmp(text, mode_names[i])) {
            *mode = (avoctl_campreval_mode)i;
            return 0;
        }
    return -EINVAL;
}

const char *avoctl_campreval_mode_name(avoctl_campreval_mode mode)
{
    return (unsigned)mode < sizeof mode_names / sizeof mode_names[0] ? mode_names[mode] : "?";
}

/* The keys whose change can move a score: what compiles the kernel, what
 * runs it, what it runs on, and the harness that times it. The host CPU
 * of a GPU worker and a compiler a target does not use are left out, so a
 * CPU worker's nvcc upgrade re-validates nothing. */
static const char *const gpu_keys[] = {"nvcc", "cc", "driver", "cuda_driver", "cuda_runtime", "gpu", "avo", NULL};
static const char *const cpu_keys[] = {"cc", "cpu", "avo", NULL};

size_t avoctl_campreval_diff(const json_t *recorded, const json_t *current, const char *target, char *buf, size_t len)
{
    const char *const *keys = target && !strcmp(target, "cpu") ? cpu_keys : gpu_keys;
    size_t n = 0, used = 0;
    if (len)
        buf[0] = 0;
    for (size_t i = 0; keys[i]; i++) {
        const char *was = avoctl_fmt_str(recorded, keys[i]), *now = avoctl_fmt_str(current, keys[i]);
        if (was == now || (was && now && !strcmp(was, now)))
            continue;
        n++;
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s %s -> %s", used ? ", " : "", keys[i],
                                     was ? was : "(none)", now ? now : "(none)");
    }
    return n;
}

/* Whether a worker (a GET /v1/workers row) would claim work of target and
 * GPU model gpu (NULL: any): live (idle or busy: a draining or unhealthy
 * one claims nothing, a gone one is gone), that target, and a GPU of that
 * model, matched as avo_claim matches it. A job's toolchain pin is not
 * applied here (docs/jobs.md says so). */
static int would_claim(const json_t *w, const char *target, const char *gpu)
{
    const char *st = avoctl_fmt_str(w, "state"), *t = avoctl_fmt_str(w, "target");
    if (!st || (strcmp(st, "idle") && strcmp(st, "busy")) || !t || !target || strcmp(t, target))
        return 0;
    if (!gpu)
        return 1;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(w, "devices"), i, d)
    {
        const char *kind = avoctl_fmt_str(d, "kind"), *name = avoctl_fmt_str(d, "name");
        if (kind && !strcmp(kind, "gpu") && name && strcasestr(name, gpu))
            return 1;
    }
    return 0;
}

/* Tonight's job of problem, or NULL. */
static const json_t *job_of(const json_t *jobs, const char *problem)
{
    size_t i;
    json_t *j;
    json_array_foreach((json_t *)jobs, i, j)
    {
        const char *p = avoctl_fmt_str(j, "problem");
        if (p && !strcmp(p, problem))
            return j;
    }
    return NULL;
}

/* v, or JSON null where it is absent (json_object_set refuses NULL). */
static json_t *or_null(const json_t *v)
{
    return v ? (json_t *)v : json_null();
}

static void skip(json_t *e, const char *why)
{
    json_object_set_new(e, "action", json_string("skipped"));
    json_object_set_new(e, "reason", json_string(why));
}

/* One problem's entry: e has "candidate" set; cand is the candidate. */
static void plan_one(json_t *e, avoctl_campreval_mode mode, const char *problem, const json_t *cand, const json_t *jobs,
                     const json_t *workers)
{
    char why[700], diff[1024];
    if (!cand || json_is_string(json_object_get(cand, "error"))) {
        snprintf(why, sizeof why, "its previous best could not be read: %s",
                 cand ? avoctl_fmt_str(cand, "error") : "not asked");
        skip(e, why);
        return;
    }
    json_object_set(e, "job", or_null(json_object_get(cand, "job")));
    const json_t *recorded = json_object_get(cand, "toolchain");
    json_object_set(e, "recorded", or_null(recorded));
    const json_t *job = job_of(jobs, problem);
    const char *target = job ? avoctl_fmt_str(job, "target")
                             : avoctl_fmt_str(json_object_get(cand, "worker"), "target");
    const char *gpu = job ? avoctl_fmt_str(json_object_get(job, "spec"), "gpu") : NULL;
    json_object_set_new(e, "target", target ? json_string(target) : json_null());
    if (!json_is_object(recorded)) {
        skip(e, "its previous best's result has no toolchain record (evaluated before sql/018)");
        return;
    }
    if (!target) {
        skip(e, "no target to find its workers by");
        return;
    }
    const json_t *first = NULL, *changed = NULL;
    size_t live = 0, nchanged = 0, i;
    json_t *w;
    json_array_foreach((json_t *)workers, i, w)
    {
        if (!would_claim(w, target, gpu))
            continue;
        live++;
        const json_t *v = json_object_get(json_object_get(w, "toolchain"), "versions");
        char d[1024];
        /* A worker from before 018 has no record: it is not evidence of a
         * change, nor a place to measure one. */
        if (!json_is_object(v))
            continue;
        if (!first)
            first = w;
        if (avoctl_campreval_diff(recorded, v, target, d, sizeof d) > 0) {
            if (!nchanged++) {
                changed = w;
                snprintf(diff, sizeof diff, "%s", d);
            }
        }
    }
    json_object_set_new(e, "live_workers", json_integer((json_int_t)live));
    json_object_set_new(e, "changed_workers", json_integer((json_int_t)nchanged));
    if (!first) {
        snprintf(why, sizeof why, "no live worker of target %s%s%s with a recorded toolchain would claim its work",
                 target, gpu ? " and GPU " : "", gpu ? gpu : "");
        skip(e, why);
        return;
    }
    const json_t *on = changed ? changed : first;
    json_object_set(e, "worker", json_object_get(on, "id"));
    json_object_set(e, "current", json_object_get(json_object_get(on, "toolchain"), "versions"));
    json_object_set_new(e, "changes", changed ? json_string(diff) : json_null());
    json_object_set_new(e, "action", json_string(changed || mode == AVOCTL_REVAL_ALWAYS ? "revalidate" : "unchanged"));
}

json_t *avoctl_campreval_plan(avoctl_campreval_mode mode, const json_t *previous, const json_t *cands,
                              const json_t *jobs, const json_t *workers)
{
    json_t *out = json_pack("{s:s,s:{}}", "mode", avoctl_campreval_mode_name(mode), "problems");
    if (!out)
        return NULL;
    json_t *probs = json_object_get(out, "problems");
    size_t n[3] = {0, 0, 0}; /* revalidate, unchanged, skipped */
    const char *pname;
    json_t *p;
    json_object_foreach(json_object_get(previous, "problems"), pname, p)
    {
        const json_t *bc = json_object_get(p, "baseline_candidate");
        if (!json_is_integer(bc) || json_integer_value(bc) < 1)
            continue;
        json_t *e = json_pack("{s:O}", "candidate", bc);
        if (!e || json_object_set_new(probs, pname, e) < 0) {
            json_decref(out);
            return NULL;
        }
        plan_one(e, mode, pname, json_object_get(cands, pname), jobs, workers);
        const char *a = avoctl_fmt_str(e, "action");
        n[!strcmp(a, "revalidate") ? 0 : !strcmp(a, "unchanged") ? 1 : 2]++;
    }
    json_object_set_new(out, "revalidate", json_integer((json_int_t)n[0]));
    json_object_set_new(out, "unchanged", json_integer((json_int_t)n[1]));
    json_object_set_new(out, "skipped", json_integer((json_int_t)n[2]));
    char msg[300];
    if (!previous)
        snprintf(msg, sizeof msg, "no previous campaign: nothing to re-validate");
    else if (!json_object_size(probs))
        snprintf(msg, sizeof msg, "the previous campaign recorded no best candidate: nothing to re-validate");
    else if (!n[0] && !n[2])
        snprintf(msg, sizeof msg,
                 "toolchain unchanged since the previous campaign's bests (%zu problem%s): nothing "
                 "re-validated",
                 n[1], n[1] == 1 ? "" : "s");
    else if (mode == AVOCTL_REVAL_ALWAYS)
        snprintf(msg, sizeof msg, "re-validating the previous campaign's bests (%zu problem%s, as asked every time)",
                 n[0], n[0] == 1 ? "" : "s");
    else if (n[0])
        snprintf(msg, sizeof msg, "toolchain changed for %zu problem%s: re-validating the previous campaign's bests",
                 n[0], n[0] == 1 ? "" : "s");
    else
        snprintf(msg, sizeof msg, "toolchain unchanged where it could be checked; %zu problem%s not checked", n[2],
                 n[2] == 1 ? "" : "s");
    json_object_set_new(out, "message", json_string(msg));
    return out;
}

static json_t *todo_pick(const char *problem, const json_t *e)
{
    const char *a = avoctl_fmt_str(e, "action");
    if (!a || strcmp(a, "revalidate"))
        return NULL;
    return json_pack("{s:s,s:O,s:O}", "problem", problem, "candidate", json_object_get(e, "candidate"), "worker",
                     json_object_get(e, "worker"));
}

json_t *avoctl_campreval_todo(const json_t *plan)
{
    return avoctl_campaign_problem_list(plan, todo_pick);
}

int avoctl_campreval_finish(json_t *plan, const json_t *revs)
{
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    size_t measured = 0;
    const char *pname;
    json_t *e;
    json_object_foreach(json_object_get(plan, "problems"), pname, e)
    {
        const json_t *rv = json_object_get(revs, pname);
        if (!rv)
            continue;
        if (json_is_string(json_object_get(rv, "error"))) {
            json_object_set(e, "error", json_object_get(rv, "error"));
            continue;
        }
        /* a re-validation of one candidate has one entry */
        const json_t *en = json_array_get(json_object_get(rv, "entries"), 0);
        const json_t *ratio = json_object_get(en, "ratio");
        const json_t *rec = json_object_get(en, "recorded");
        int rc = json_object_set(e, "revalidation", or_null(json_object_get(rv, "id"))) |
                 json_object_set(e, "state", or_null(json_object_get(rv, "state"))) |
                 json_object_set(e, "outcome", or_null(json_object_get(en, "outcome"))) |
                 json_object_set(e, "recorded_aggregate", or_null(json_object_get(rec, "aggregate"))) |
                 json_object_set(e, "aggregate", or_null(json_object_get(en, "aggregate"))) |
                 json_object_set(e, "ratio", json_is_number(ratio) ? (json_t *)ratio : json_null()) |
                 json_object_set(e, "toolchain", or_null(json_object_get(en, "toolchain"))) |
                 json_object_set(e, "unit", or_null(json_object_get(rv, "unit")));
        if (rc)
            return -ENOMEM;
        if (json_is_number(ratio) && json_number_value(ratio) > 0) {
            const double r = json_number_value(ratio);
            sum += log(r);
            lo = r < lo ? r : lo;
            hi = r > hi ? r : hi;
            measured++;
        }
    }
    int rc = json_object_set_new(plan, "measured", json_integer((json_int_t)measured)) |
             json_object_set_new(plan, "geomean_ratio",
                                 measured ? json_real(exp(sum / (double)measured)) : json_null()) |
             json_object_set_new(plan, "min_ratio", measured ? json_real(lo) : json_null()) |
             json_object_set_new(plan, "max_ratio", measured ? json_real(hi) : json_null());
    return rc ? -ENOMEM : 0;
}

/* A toolchain label for a markdown cell (no '|'). */
static void md_label(const json_t *v, char *buf, size_t len)
{
    avoctl_toolchain_label(v, buf, len);
    for (char *p = buf; *p; p++)
        if (*p == '|')
            *p = '/';
}

static void md_num(FILE *out, const json_t *v)
{
    if (json_is_number(v))
        fprintf(out, "%.6g", json_number_value(v));
    else
        fputs("-", out);
}

void avoctl_campreval_markdown(const json_t *plan, FILE *out)
{
    fprintf(out, "\n## Re-validation (%s)\n\n%s.\n", avoctl_fmt_str(plan, "mode") ? avoctl_fmt_str(plan, "mode") : "?",
            avoctl_fmt_str(plan, "message") ? avoctl_fmt_str(plan, "message") : "?");
    if (!json_integer_value(json_object_get(plan, "revalidate")) &&
        !json_integer_value(json_object_get(plan, "skipped")))
        return;
    fprintf(out, "\nThe previous campaign's best of each problem evaluated again on a live worker; ratio = new / "
                 "recorded aggregate, unpaired (a few percent is noise; `avoctl compare` decides).\n\n"
                 "| problem | candidate | worker | recorded | new | ratio | toolchain now | recorded on | changes |\n"
                 "|---|---|---|---|---|---|---|---|---|\n");
    const char *pname;
    json_t *e;
    json_object_foreach(json_object_get(plan, "problems"), pname, e)
    {
        const char *a = avoctl_fmt_str(e, "action");
        char now[512], was[512];
        md_label(json_object_get(e, "toolchain") ? json_object_get(e, "toolchain") : json_object_get(e, "current"), now,
                 sizeof now);
        md_label(json_object_get(e, "recorded"), was, sizeof was);
        fprintf(out, "| %s | %lld | ", pname, (long long)json_integer_value(json_object_get(e, "candidate")));
        md_num(out, json_object_get(e, "worker"));
        fputs(" | ", out);
        if (a && !strcmp(a, "skipped")) {
            fprintf(out, "- | - | - | not re-validated: %s | %s | |\n",
                    avoctl_fmt_str(e, "reason") ? avoctl_fmt_str(e, "reason") : "?", was);
            continue;
        }
        if (a && !strcmp(a, "unchanged")) {
            fprintf(out, "- | - | - | unchanged: %s | %s | |\n", now, was);
            continue;
        }
        md_num(out, json_object_get(e, "recorded_aggregate"));
        fputs(" | ", out);
        const char *oc = avoctl_fmt_str(e, "outcome"), *st = avoctl_fmt_str(e, "state");
        if (avoctl_fmt_str(e, "error"))
            fprintf(out, "not measured: %s", avoctl_fmt_str(e, "error"));
        else if (oc && strcmp(oc, "ok"))
            fprintf(out, "%s", oc);
        else if (json_is_number(json_object_get(e, "aggregate")))
            md_num(out, json_object_get(e, "aggregate"));
        else
            fprintf(out, "%s when the campaign stopped waiting", st ? st : "not measured");
        fputs(" | ", out);
        if (json_is_number(json_object_get(e, "ratio")))
            fprintf(out, "x%.4f", json_number_value(json_object_get(e, "ratio")));
        else
            fputs("-", out);
        fprintf(out, " | %s | %s | %s |\n", now, was,
                avoctl_fmt_str(e, "changes") ? avoctl_fmt_str(e, "changes") : "(none)");
    }
    if (json_is_number(json_object_get(plan, "geomean_ratio")))
        fprintf(out, "\nGeometric mean of the ratios: x%.4f over %lld (min x%.4f, max x%.4f).\n",
                json_number_value(json_object_get(plan, "geomean_ratio")),
                (long long)json_integer_value(json_object_get(plan, "measured")),
                json_number_value(json_object_get(plan, "min_ratio")),
                json_number_value(json_object_get(plan, "max_ratio")));
    else if (json_integer_value(json_object_get(plan, "revalidate")))
        fputs("\nNo ratio was measured.\n", out);
}
