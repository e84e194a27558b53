/* The agent's tools without I/O: declarations, argument checks, working copy, problem text (agenttools.h). */
#include "agenttools.h"

#include "agent_internal.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One table declares each tool to the model, checks its calls and names
 * its handler, so the schema the model sees, the rules it is held to and
 * what runs cannot drift apart. */
typedef struct {
    const char *name;
    const char *type; /* "string" or "integer" */
    const char *desc;
    int required;
    long long min, max; /* integers: value range; strings: length range (bytes) */
    const char *oneof;  /* strings: the allowed values, "|"-separated, or NULL */
} arg_spec;

typedef struct {
    const char *name;
    avo_agenttools_fn *run; /* agentexec.c */
    const char *desc;
    arg_spec args[4];
} tool_spec;

#define MAXS AVO_AGENT_MAX_ARG
#define ID_MAX 9007199254740991LL /* 2^53 - 1: ids survive a round trip through any JSON parser */

static const tool_spec tools[] = {
    {"problem",
     agent_tool_problem,
     "The problem: what the entry point computes and its exact signature, the sizes and configurations it is "
     "timed on, how it is scored, the tolerances, and the seed's knobs.",
     {{0}}},
    {"lineage",
     agent_tool_lineage,
     "The job's lineage: committed versions with their scores and notes, the island's best, and one-line "
     "summaries of recent failed attempts.",
     {{"island", "integer", "island to show (default: this step's)", 0, 0, 4095, NULL},
      {"limit", "integer", "most recent entries to show (default 20)", 0, 1, 200, NULL}}},
    {"read_candidate",
     agent_tool_read_candidate,
     "The full source of a candidate by id, or of the working copy when no id is given.",
     {{"candidate", "integer", "candidate id (omit for the working copy)", 0, 1, ID_MAX, NULL}}},
    {"diff",
     agent_tool_diff,
     "A unified diff between two candidates, or from a candidate to the working copy when `to` is omitted.",
     {{"from", "integer", "candidate id", 1, 1, ID_MAX, NULL},
      {"to", "integer", "candidate id (omit for the working copy)", 0, 1, ID_MAX, NULL}}},
    {"search_knowledge",
     agent_tool_search_knowledge,
     "Full-text search of the knowledge base (hardware notes, documentation excerpts, past committed cases): "
     "ranked hits with highlighted snippets and their ids.",
     {{"query", "string", "words to search for", 1, 1, 512, NULL},
      {"limit", "integer", "most hits to return (default 8)", 0, 1, 50, NULL}}},
    {"read_knowledge",
     agent_tool_read_knowledge,
     "One knowledge-base entry in full, by an id search_knowledge returned.",
     {{"id", "integer", "entry id", 1, 1, ID_MAX, NULL}}},
    {"write_source",
     agent_tool_write_source,
     "Replace the whole working copy with this source.",
     {{"source", "string", "the complete source file", 1, 1, MAXS, NULL}}},
    {"edit_source",
     agent_tool_edit_source,
     "Replace exactly one occurrence of `search` in the working copy with `replace`. The search text must match "
     "exactly, whitespace and line breaks included, and occur once; otherwise nothing changes and the error says "
     "why.",
     {{"search", "string", "the exact text to replace", 1, 1, MAXS, NULL},
      {"replace", "string", "its replacement (may be empty)", 1, 0, MAXS, NULL}}},
    {"compile",
     agent_tool_compile,
     "Compile the working copy as a worker would: the compiler's messages and, for CUDA, the ptxas report "
     "(registers, shared memory, spills, stack) per kernel.",
     {{0}}},
    {"disassemble",
     agent_tool_disassemble,
     "SASS of the compiled working copy: the lines matching a regular expression.",
     {{"pattern", "string", "extended regular expression, e.g. HGMMA|LDL|STL", 1, 1, 256, NULL},
      {"kernel", "string", "only this kernel (a substring of its mangled name)", 0, 1, 256, NULL}}},
    {"evaluate",
     agent_tool_evaluate,
     "Evaluate the working copy on a worker: correctness on fresh random inputs against the reference, then "
     "timing on every configuration, paired with the island's best. Where the problem declares a screen, a "
     "few configurations are timed first and a version slower than the best beyond noise stops there: the "
     "result says it was screened out, by how much, and which configurations were not timed. Returns the "
     "outcome, the score and per-configuration times, and the candidate id to commit. Costs one evaluation "
     "of the job's budget.",
     {{0}}},
    {"profile",
     agent_tool_profile,
     "Hardware counters (CUPTI) of the last evaluated working copy on one configuration: SM and DRAM "
     "throughput, occupancy, bank conflicts, tensor-pipe activity, stall reasons. Runs as a task of its own on a "
     "worker (checked calls, then the counters pass) and waits for it; costs no evaluation.",
     {{"config", "string", "configuration name (default: the largest)", 0, 1, 64, NULL}}},
    {"microbenchmark",
     agent_tool_microbenchmark,
     "Compile and run a standalone program in the worker's sandbox and return its output, to probe the hardware "
     "(latency, bandwidth, instruction throughput). It does not touch the lineage.",
     {{"source", "string", "a complete program with main()", 1, 1, MAXS, NULL},
      {"language", "string", "c or cuda", 1, 1, 8, "c|cuda"}}},
    {"commit",
     agent_tool_commit,
     "Commit an evaluated candidate to the lineage, with notes for later steps (what changed and why it is "
     "faster). Accepted only if it passed every check and is faster than the island's best beyond the noise (its "
     "speed ratio, timed paired against the best, has a lower confidence bound above the job's minimum gain); "
     "otherwise the reason is returned and nothing changes. A commit ends the step.",
     {{"candidate", "integer", "the id evaluate returned", 1, 1, ID_MAX, NULL},
      {"notes", "string", "what changed and why", 1, 1, 4096, NULL}}},
    {"give_up",
     agent_tool_give_up,
     "End this step without a commit, with a one-line reason later steps will read.",
     {{"reason", "string", "why, in one line", 1, 1, 1024, NULL}}},
};
#define NTOOLS (sizeof tools / sizeof tools[0])

static int nargs(const tool_spec *t)
{
    int n = 0;
    while (n < 4 && t->args[n].name)
        n++;
    return n;
}

static json_t *arg_schema(const arg_spec *a)
{
    json_t *o = json_pack("{s:s,s:s}", "type", a->type, "description", a->desc);
    if (!o)
        return NULL;
    if (!strcmp(a->type, "integer")) {
        json_object_set_new(o, "minimum", json_integer(a->min));
        json_object_set_new(o, "maximum", json_integer(a->max));
    } else if (a->oneof) {
        json_t *e = json_array();
        char buf[64];
        snprintf(buf, sizeof buf, "%s", a->oneof);
        for (char *save = NULL, *v = strtok_r(buf, "|", &save); v; v = strtok_r(NULL, "|", &save))
            json_array_append_new(e, json_string(v));
        json_object_set_new(o, "enum", e);
    } else {
        json_object_set_new(o, "maxLength", json_integer(a->max));
    }
    return o;
}

json_t *avo_agenttools_schema(void)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < NTOOLS; i++) {
        const tool_spec *t = &tools[i];
        json_t *props = json_object(), *req = json_array();
        for (int k = 0; k < nargs(t); k++) {
            json_object_set_new(props, t->args[k].name, arg_schema(&t->args[k]));
            if (t->args[k].required)
                json_array_append_new(req, json_string(t->args[k].name));
        }
        json_t *schema = json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties", props, "required", req,
                                   "additionalProperties", 0);
        if (!schema || json_array_append_new(out, json_pack("{s:s,s:s,s:o}", "name", t->name, "description", t->desc,
                                                            "schema", schema)) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static const tool_spec *tool_find(const char *name)
{
    for (size_t i = 0; name && i < NTOOLS; i++)
        if (!strcmp(tools[i].name, name))
            return &tools[i];
    return NULL;
}

avo_agenttools_fn *avo_agenttools_handler(const char *name)
{
    const tool_spec *t = tool_find(name);
    return t ? t->run : NULL;
}

/* "a (integer), b (string)" for messages. */
static void arg_list(const tool_spec *t, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = 0;
    for (int k = 0; k < nargs(t) && n < outlen; k++)
        n += (size_t)snprintf(out + n, outlen - n, "%s%s (%s%s)", k ? ", " : "", t->args[k].name, t->args[k].type,
                              t->args[k].required ? ", required" : "");
    if (!nargs(t))
        snprintf(out, outlen, "none");
}

int avo_agenttools_check(const char *name, json_t *args, char *err, size_t errlen)
{
    const tool_spec *t = tool_find(name);
    if (!t) {
        char names[512] = "";
        size_t n = 0;
        for (size_t i = 0; i < NTOOLS && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", tools[i].name);
        snprintf(err, errlen, "there is no tool '%.64s'; the tools are: %s", name ? name : "", names);
        return -ENOENT;
    }
    char list[512];
    arg_list(t, list, sizeof list);
    if (args && !json_is_object(args)) {
        snprintf(err, errlen, "%s: the arguments must be a JSON object; arguments: %s", t->name, list);
        return -EINVAL;
    }
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v)
    {
        int known = 0;
        for (int k = 0; k < nargs(t); k++)
            known |= !strcmp(t->args[k].name, key);
        if (!known) {
            snprintf(err, errlen, "%s: unknown argument '%.64s'; arguments: %s", t->name, key, list);
            return -EINVAL;
        }
    }
    for (int k = 0; k < nargs(t); k++) {
        const arg_spec *a = &t->args[k];
        v = json_object_get(args, a->name);
        if (!v) {
            if (a->required) {
                snprintf(err, errlen, "%s: missing argument '%s' (%s): %s", t->name, a->name, a->type, a->desc);
                return -EINVAL;
            }
            continue;
        }
        if (!strcmp(a->type, "integer")) {
            if (!json_is_integer(v) || json_integer_value(v) < a->min || json_integer_value(v) > a->max) {
                snprintf(err, errlen, "%s: '%s' must be an integer from %lld to %lld (%s)", t->name, a->name, a->min,
                         a->max, a->desc);
                return -EINVAL;
            }
            continue;
        }
        if (!json_is_string(v)) {
            snprintf(err, errlen, "%s: '%s' must be a string (%s)", t->name, a->name, a->desc);
            return -EINVAL;
        }
        size_t len = json_string_length(v);
        if ((long long)len < a->min || (long long)len > a->max) {
            snprintf(err, errlen, "%s: '%s' is %zu bytes; it must be %lld to %lld", t->name, a->name, len, a->min,
                     a->max);
            return -EINVAL;
        }
        if (strlen(json_string_value(v)) != len) {
            snprintf(err, errlen, "%s: '%s' contains a NUL character", t->name, a->name);
            return -EINVAL;
        }
        if (a->oneof) {
            char pat[64];
            snprintf(pat, sizeof pat, "|%s|", a->oneof);
            char want[80];
            snprintf(want, sizeof want, "|%.60s|", json_string_value(v));
            if (!strstr(pat, want)) {
                snprintf(err, errlen, "%s: '%s' must be one of %s, not '%.60s'", t->name, a->name, a->oneof,
                         json_string_value(v));
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* ---- the working copy ------------------------------------------------------ */

static int line_of(const char *s, const char *at)
{
    int line = 1;
    for (const char *c = s; c < at; c++)
        line += *c == '\n';
    return line;
}

static int lines_in(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n + (s[-1] != '\n');
}

int avo_agenttools_ws_write(avo_agenttools_ws *w, const char *text, char *msg, size_t msglen)
{
    if (!text || !*text) {
        snprintf(msg, msglen, "write_source: the source is empty; nothing changed");
        return -EINVAL;
    }
    char *n = strdup(text);
    if (!n) {
        snprintf(msg, msglen, "write_source: out of memory");
        return -ENOMEM;
    }
    free(w->src);
    w->src = n;
    w->version++;
    snprintf(msg, msglen, "the working copy is now version %d (%d lines, %zu bytes)", w->version, lines_in(n),
             strlen(n));
    return 0;
}

int avo_agenttools_ws_edit(avo_agenttools_ws *w, const char *search, const char *replace, char *msg, size_t msglen)
{
    if (!w->src) {
        snprintf(msg, msglen, "edit_source: there is no working copy yet; write_source first");
        return -EINVAL;
    }
    if (!search || !*search) {
        snprintf(msg, msglen, "edit_source: 'search' is empty; give the exact text to replace");
        return -EINVAL;
    }
    /* Every position counts, overlapping ones too: "exactly one place"
     * must not depend on how a scan happens to step. */
    const char *first = NULL, *second = NULL;
    int count = 0;
    for (const char *p = strstr(w->src, search); p; p = strstr(p + 1, search)) {
        if (!first)
            first = p;
        else if (!second)
            second = p;
        count++;
    }
    if (count == 0) {
        snprintf(msg, msglen,
                 "edit_source: the search text is not in the working copy (version %d); it must match "
                 "exactly, whitespace and line breaks included (read_candidate shows the current text); nothing "
                 "changed",
                 w->version);
        return -ENOENT;
    }
    if (count > 1) {
        snprintf(msg, msglen,
                 "edit_source: the search text occurs %d times (lines %d and %d%s); include more of the "
                 "surrounding text so it matches once; nothing changed",
                 count, line_of(w->src, first), line_of(w->src, second), count > 2 ? ", ..." : "");
        return -EEXIST;
    }
    size_t pre = (size_t)(first - w->src), sl = strlen(search), rl = strlen(replace ? replace : "");
    size_t total = strlen(w->src) - sl + rl;
    char *n = malloc(total + 1);
    if (!n) {
        snprintf(msg, msglen, "edit_source: out of memory");
        return -ENOMEM;
    }
    memcpy(n, w->src, pre);
    memcpy(n + pre, replace ? replace : "", rl);
    memcpy(n + pre + rl, first + sl, strlen(first + sl) + 1);
    const int line = line_of(w->src, first);
    free(w->src);
    w->src = n;
    w->version++;
    snprintf(msg, msglen, "edited at line %d; the working copy is now version %d (%d lines)", line, w->version,
             *n ? lines_in(n) : 0);
    return 0;
}

void avo_agenttools_ws_free(avo_agenttools_ws *w)
{
    free(w->src);
    w->src = NULL;
    w->version = 0;
}

/* ---- the problem as text -------------------------------------------------------- */

static const char *role_name(avo_role r)
{
    return r == AVO_ROLE_INPUT ? "input" : r == AVO_ROLE_OUTPUT ? "output" : "input and output";
}

char *avo_agenttools_problem_text(const avo_problem *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    const int cuda = !strcmp(p->backend, "cuda");
    const char *desc = json_string_value(json_object_get(p->json, "description"));
    fprintf(f, "Problem %s (%s backend).\n", p->name, p->backend);
    if (desc)
        fprintf(f, "%s\n", desc);
    fprintf(f,
            "\nThe candidate is one %s source file that exports:\n    %sint %s(void *const *tensors, "
            "const int64_t *sizes%s);\n",
            cuda ? "CUDA" : "C", cuda ? "extern \"C\" " : "", p->entry, cuda ? ", cudaStream_t stream" : "");
    fprintf(f,
            "returning 0 on success. tensors[i] are the tensors below, in order (%s memory); sizes[j] are the "
            "sizes below, in order.%s\n",
            cuda ? "device" : "host", cuda ? " Work must be queued on `stream` (or finished before returning)." : "");
    fprintf(f, "\nSizes:");
    for (int i = 0; i < p->nsizes; i++)
        fprintf(f, " %s", p->sizes[i]);
    fprintf(f, "\nTensors (row-major):\n");
    for (int t = 0; t < p->ntensors; t++) {
        const avo_tensor_spec *ts = &p->tensors[t];
        fprintf(f, "    tensors[%d] %s: %s, %s, shape [", t, ts->name, avo_problem_dtype_name(ts->dtype),
                role_name(ts->role));
        for (int k = 0; k < ts->rank; k++)
            fprintf(f, "%s%s", k ? ", " : "", ts->shape[k]);
        fprintf(f, "]\n");
    }
    fprintf(f, "Configurations (each checked and timed):\n");
    for (int c = 0; c < p->nconfigs; c++) {
        fprintf(f, "    %s:", p->configs[c].name);
        for (int i = 0; i < p->nsizes; i++)
            fprintf(f, " %s=%lld", p->sizes[i], (long long)p->configs[c].size[i]);
        fprintf(f, "\n");
    }
    fprintf(f,
            "Score: %s at the median time per configuration (%s = %s per call), higher is better; the "
            "aggregate over configurations decides commits.\n",
            p->unit, !strcmp(p->score_metric, "flops") ? "FLOP" : "bytes",
            !strcmp(p->score_metric, "flops") ? p->flops : p->bytes);
    fprintf(f, "Correctness: fresh random inputs each evaluation, outputs poisoned before each call, inputs must "
               "stay unchanged; tolerance per output dtype:");
    int shown[5] = {0};
    for (int t = 0; t < p->ntensors; t++) {
        avo_dtype d = p->tensors[t].dtype;
        if (p->tensors[t].role != AVO_ROLE_INPUT && !shown[d]) {
            shown[d] = 1;
            fprintf(f, " %s rel_l2 <= %g, max_abs <= %g;", avo_problem_dtype_name(d), p->tol[d].rel_l2,
                    p->tol[d].max_abs);
        }
    }
    fprintf(f, "\nSeed: %s%s%s%s.\n", p->seed, p->seed_name[0] ? " (the package's seed '" : "", p->seed_name,
            p->seed_name[0] ? "')" : "");
    if (p->nknobs) {
        fprintf(f, "Its knobs (#define NAME value before the source; the tune operator searches them):\n");
        for (int k = 0; k < p->nknobs; k++) {
            fprintf(f, "    %s in {", p->knobs[k].name);
            for (int v = 0; v < p->knobs[k].nvalues; v++)
                fprintf(f, "%s%lld", v ? ", " : "", (long long)p->knobs[k].values[v]);
            fprintf(f, "}, default %lld\n", (long long)p->knobs[k].dflt);
        }
        for (int i = 0; i < p->nconstraints; i++)
            fprintf(f, "    constraint: %s\n", p->constraints[i]);
    }
    /* The candidate policy (docs/evaluation.md, "Policy"): what this
     * problem relaxes, with the package's reason. */
    fprintf(f, "Candidate policy: refused as policy_violation: undocumented PTX instructions, embedded "
               "ELF/cubin/fatbin images, loading code at run time, including host files.");
    json_t *relax = json_object_get(json_object_get(p->json, "policy"), "relax");
    const char *rule;
    json_t *why;
    json_object_foreach(relax, rule, why)
        fprintf(f, " Relaxed here: %s (%s).", rule, json_string_value(why) ? json_string_value(why) : "");
    fprintf(f, "\n");
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ---- disassemble ------------------------------------------------------------ */

/* The function a header line opens, or NULL: cuobjdump's "Function : NAME",
 * objdump's "0000000000001139 <NAME>:". */
static int function_header(const char *line, char *name, size_t namelen)
{
    const char *f = strstr(line, "Function : ");
    if (f) {
        snprintf(name, namelen, "%s", f + 11);
        name[strcspn(name, " \t\r")] = 0;
        return 1;
    }
    const char *p = line;
    while (*p && strchr("0123456789abcdef", *p))
        p++;
    if (p == line || strncmp(p, " <", 2) != 0)
        return 0;
    const char *end = strstr(p, ">:");
    if (!end || end[2])
        return 0;
    snprintf(name, namelen, "%.*s", (int)(end - p - 2), p + 2);
    return 1;
}

/* An instruction line with its encoding comment cut off, or NULL for
 * anything else (headers, encoding-only lines, blank lines). */
static const char *instruction(char *line)
{
    char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p || !strncmp(p, "/* 0x", 5) || !strncmp(p, ".", 1) || !strncmp(p, "code for", 8) ||
        !strncmp(p, "Disassembly", 11))
        return NULL;
    char *semi = strrchr(p, ';');
    char *enc = strstr(p, "/* 0x");
    if (semi && enc && enc > semi)
        *enc = 0;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        p[--n] = 0;
    /* cuobjdump lines open with the offset in a comment, objdump lines with
     * "address:". */
    if (!strncmp(p, "/*", 2) || strchr(p, ':'))
        return p;
    return NULL;
}

int avo_agenttools_disasm_filter(const char *text, const char *pattern, const char *kernel, char **out, char *err,
                                 size_t errlen)
{
    regex_t re;
    int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char why[200];
        regerror(rc, &re, why, sizeof why);
        snprintf(err, errlen, "disassemble: pattern is not an extended regular expression (%s)", why);
        return -EINVAL;
    }
    char *body = NULL, *copy = strdup(text ? text : "");
    size_t blen = 0;
    FILE *f = copy ? open_memstream(&body, &blen) : NULL;
    if (!f) {
        free(copy);
        regfree(&re);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    char fn[512] = "", names[1024] = "";
    int in_fn = 0, want = 0, fns = 0, fns_matched = 0, shown = 0, matched = 0, header_done = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[512];
        if (function_header(line, name, sizeof name)) {
            snprintf(fn, sizeof fn, "%s", name);
            in_fn = 1;
            fns++;
            want = !kernel || strstr(fn, kernel) != NULL;
            header_done = 0;
            if (want && strlen(names) + strlen(fn) + 3 < sizeof names)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", fn);
            continue;
        }
        const char *ins = in_fn && want ? instruction(line) : NULL;
        if (!ins || regexec(&re, ins, 0, NULL, 0) != 0)
            continue;
        matched++;
        if (shown >= AVO_AGENT_DISASM_LINES)
            continue;
        if (!header_done) {
            fprintf(f, "== %s\n", fn);
            header_done = 1;
            fns_matched++;
        }
        fprintf(f, "%s\n", ins);
        shown++;
    }
    fclose(f);
    free(copy);
    regfree(&re);
    if (kernel && !names[0]) {
        free(body);
        snprintf(err, errlen, "disassemble: no function name contains \"%s\" (%d functions in the object)", kernel,
                 fns);
        return -EINVAL;
    }
    char *o = NULL;
    int n;
    if (!matched)
        n = asprintf(&o, "no instruction matches /%s/ in %s", pattern, names[0] ? names : "the object");
    else
        n = asprintf(&o, "%d instruction%s match /%s/%s:\n%s%s", matched, matched == 1 ? "" : "s", pattern,
                     kernel ? " in the named kernel" : "", body ? body : "",
                     matched > shown ? "... more lines not shown: narrow the pattern or name a kernel\n" : "");
    free(body);
    if (n < 0) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    *out = o;
    return 0;
}

/* ---- profile ---------------------------------------------------------------- */

static void print_metrics(FILE *f, json_t *m, const char *indent)
{
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v)
    {
        if (json_is_number(v))
            fprintf(f, "%s%s = %.6g\n", indent, k, json_number_value(v));
        else if (json_is_string(v))
            fprintf(f, "%s%s = %s\n", indent, k, json_string_value(v));
        else if (json_is_boolean(v))
            fprintf(f, "%s%s = %s\n", indent, k, json_is_true(v) ? "true" : "false");
    }
}

int avo_agenttools_profile_text(const json_t *result, long long candidate, const char *config, char **out, char *err,
                                size_t errlen)
{
    json_t *configs = json_object_get(result, "configs"), *c = NULL, *x;
    size_t i;
    const char *outcome = json_string_value(json_object_get(result, "outcome"));
    if (outcome && strcmp(outcome, "ok") != 0) {
        snprintf(err, errlen, "profile: candidate %lld did not pass its checked calls (outcome %s): %s", candidate,
                 outcome, json_string_value(json_object_get(result, "detail")) ?: "no detail");
        return -EINVAL;
    }
    char names[512] = "";
    double longest = -1;
    json_array_foreach(configs, i, x)
    {
        const char *name = json_string_value(json_object_get(x, "name"));
        if (!name)
            continue;
        if (strlen(names) + strlen(name) + 3 < sizeof names)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", name);
        double t = json_number_value(json_object_get(x, "median_s"));
        /* Ties (a profile run has no times) go to the later, larger one. */
        if (config ? !strcmp(name, config) : t >= longest) {
            c = x;
            longest = t;
        }
    }
    if (!c) {
        if (config)
            snprintf(err, errlen, "profile: candidate %lld has no configuration \"%s\" (it has: %s)", candidate, config,
                     names[0] ? names : "none");
        else
            snprintf(err, errlen, "profile: candidate %lld has no timed configuration (outcome %s)", candidate,
                     json_string_value(json_object_get(result, "outcome")) ?: "unknown");
        return -EINVAL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    const char *name = json_string_value(json_object_get(c, "name"));
    if (json_is_number(json_object_get(c, "median_s")))
        fprintf(f, "counters of candidate %lld, configuration %s (median %.6g s):\n", candidate, name,
                json_number_value(json_object_get(c, "median_s")));
    else
        fprintf(f, "counters of candidate %lld, configuration %s (profile run, %lld checked calls):\n", candidate, name,
                (long long)json_integer_value(json_object_get(c, "calls")));
    json_t *ctr = json_object_get(c, "counters"), *top = json_object_get(result, "counters");
    json_t *kernels = json_object_get(ctr, "kernels");
    if (json_is_array(kernels) && json_array_size(kernels)) {
        /* A GPU: CUPTI's ranges, one per kernel launch. */
        fprintf(f, "source: %s, %lld replay passes\n",
                json_string_value(json_object_get(ctr, "source")) ?: "CUPTI range profiler",
                (long long)json_integer_value(json_object_get(ctr, "passes")));
        json_array_foreach(kernels, i, x)
        {
            fprintf(f, "kernel %zu: %s\n", i + 1, json_string_value(json_object_get(x, "range")) ?: "?");
            print_metrics(f, json_object_get(x, "metrics"), "  ");
        }
        json_t *un = json_object_get(ctr, "unsupported");
        if (json_array_size(un)) {
            char *t = json_dumps(un, JSON_COMPACT);
            fprintf(f, "not supported on this GPU: %s\n", t ? t : "");
            free(t);
        }
    } else if (json_is_object(ctr) && !json_is_false(json_object_get(ctr, "available"))) {
        print_metrics(f, ctr, "  ");
    } else {
        const char *why = json_string_value(json_object_get(ctr, "reason"));
        if (!why)
            why = json_string_value(json_object_get(top, "reason"));
        fprintf(f, "no hardware counters: %s\n", why ? why : "the worker reported none");
        /* A CPU's software events (task clock) may still have been read. */
        if (json_is_object(ctr))
            print_metrics(f, ctr, "  ");
    }
    if (json_is_object(top) && !json_is_array(kernels)) {
        /* The CPU's perf events: what the worker could read. */
        json_t *ev = json_object_get(top, "events");
        if (json_array_size(ev)) {
            char *t = json_dumps(ev, JSON_COMPACT);
            fprintf(f, "events the worker reads: %s\n", t ? t : "");
            free(t);
        }
    }
    fclose(f);
    *out = buf;
    return 0;
}

char *avo_agenttools_eval_text(const avo_commit_params *cp, const json_t *result, const char *state, long long cand,
                               double best, long long best_cand, int *failed)
{
    json_t *r = (json_t *)result;
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    const char *detail = json_string_value(json_object_get(r, "detail"));
    const char *unit = json_string_value(json_object_get(r, "unit"));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "candidate %lld: outcome %s", cand, outcome ? outcome : state);
    if (outcome && !strcmp(outcome, "ok")) {
        /* What the commit tool would decide now, so the agent knows before it asks. */
        const double agg = json_number_value(json_object_get(r, "aggregate"));
        const json_t *screen = json_object_get(r, "screen");
        avo_commit_verdict v;
        char why[1024];
        avo_commit_judge(cp, json_object_get(r, "paired"), agg, best, best_cand, &v);
        if (json_is_true(json_object_get(r, "screened_out")))
            fprintf(f,
                    ", screened out: aggregate %.6g %s over the screen's %zu configurations only (partial; the "
                    "island's best is %.6g over all of them)\n",
                    agg, unit ? unit : "", json_array_size(json_object_get(screen, "configs")), best);
        else
            fprintf(f, ", aggregate %.6g %s (the island's best is %.6g)%s\n", agg, unit ? unit : "", best,
                    json_is_object(screen) ? "; it passed the screen and was timed on every configuration" : "");
        if (v.commit) {
            fprintf(f, "commit rule: %s; a commit would be accepted",
                    v.paired ? "a significant paired gain" : "above the needed aggregate");
        } else {
            avo_commit_explain(cp, &v, cand, agg, best, why, sizeof why);
            fprintf(f, "commit rule: %s", why);
        }
    }
    fprintf(f, "\n");
    if (detail && *detail)
        fprintf(f, "detail: %s\n", detail);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "configs"), i, c)
    {
        if (!i)
            fprintf(f, "per configuration (score, median seconds):\n");
        if (json_is_false(json_object_get(c, "timed")))
            fprintf(f, "  %s: not timed (screened out; its checked calls were correct)\n",
                    json_string_value(json_object_get(c, "name")));
        else
            fprintf(f, "  %s: %.6g, %.6g\n", json_string_value(json_object_get(c, "name")),
                    json_number_value(json_object_get(c, "score")), json_number_value(json_object_get(c, "median_s")));
    }
    const char *log = json_string_value(json_object_get(json_object_get(r, "compile"), "log"));
    if (log && *log && outcome && strcmp(outcome, "ok") != 0)
        fprintf(f, "compiler output (end):\n%s\n", strlen(log) > 3000 ? log + strlen(log) - 3000 : log);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    *failed = !(outcome && !strcmp(outcome, "ok"));
    return buf;
}
