#include "agenttools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One table declares each tool to the model and checks its calls, so the
 * schema the model sees and the rules it is held to cannot drift apart. */
typedef struct {
    const char *name;
    const char *type;        /* "string" or "integer" */
    const char *desc;
    int required;
    long long min, max;      /* integers: value range; strings: length range (bytes) */
    const char *oneof;       /* strings: the allowed values, "|"-separated, or NULL */
} arg_spec;

typedef struct {
    const char *name;
    const char *desc;
    arg_spec args[4];
} tool_spec;

#define MAXS AVO_AGENT_MAX_ARG
#define ID_MAX 9007199254740991LL /* 2^53 - 1: ids survive a round trip through any JSON parser */

static const tool_spec tools[] = {
    {"problem",
     "The problem: what the entry point computes and its exact signature, the sizes and configurations it is "
     "timed on, how it is scored, the tolerances, and the seed's knobs.",
     {{0}}},
    {"lineage",
     "The job's lineage: committed versions with their scores and notes, the island's best, and one-line "
     "summaries of recent failed attempts.",
     {{"island", "integer", "island to show (default: this step's)", 0, 0, 4095, NULL},
      {"limit", "integer", "most recent entries to show (default 20)", 0, 1, 200, NULL}}},
    {"read_candidate", "The full source of a candidate by id, or of the working copy when no id is given.",
     {{"candidate", "integer", "candidate id (omit for the working copy)", 0, 1, ID_MAX, NULL}}},
    {"diff", "A unified diff between two candidates, or from a candidate to the working copy when `to` is omitted.",
     {{"from", "integer", "candidate id", 1, 1, ID_MAX, NULL},
      {"to", "integer", "candidate id (omit for the working copy)", 0, 1, ID_MAX, NULL}}},
    {"search_knowledge",
     "Full-text search of the knowledge base (hardware notes, documentation excerpts, past committed cases): "
     "ranked hits with highlighted snippets and their ids.",
     {{"query", "string", "words to search for", 1, 1, 512, NULL},
      {"limit", "integer", "most hits to return (default 8)", 0, 1, 50, NULL}}},
    {"read_knowledge", "One knowledge-base entry in full, by an id search_knowledge returned.",
     {{"id", "integer", "entry id", 1, 1, ID_MAX, NULL}}},
    {"write_source", "Replace the whole working copy with this source.",
     {{"source", "string", "the complete source file", 1, 1, MAXS, NULL}}},
    {"edit_source",
     "Replace exactly one occurrence of `search` in the working copy with `replace`. The search text must match "
     "exactly, whitespace and line breaks included, and occur once; otherwise nothing changes and the error says "
     "why.",
     {{"search", "string", "the exact text to replace", 1, 1, MAXS, NULL},
      {"replace", "string", "its replacement (may be empty)", 1, 0, MAXS, NULL}}},
    {"compile",
     "Compile the working copy as a worker would: the compiler's messages and, for CUDA, the ptxas report "
     "(registers, shared memory, spills, stack) per kernel.",
     {{0}}},
    {"disassemble", "SASS of the compiled working copy: the lines matching a regular expression.",
     {{"pattern", "string", "extended regular expression, e.g. HGMMA|LDL|STL", 1, 1, 256, NULL},
      {"kernel", "string", "only this kernel (a substring of its mangled name)", 0, 1, 256, NULL}}},
    {"evaluate",
     "Evaluate the working copy on a worker: correctness on fresh random inputs against the reference, then "
     "timing on every configuration. Returns the outcome, the score and per-configuration times, and the "
     "candidate id to commit. Costs one evaluation of the job's budget.",
     {{0}}},
    {"profile",
     "Hardware counters (CUPTI) of the last evaluated working copy on one configuration: SM and DRAM "
     "throughput, occupancy, bank conflicts, tensor-pipe activity, stall reasons.",
     {{"config", "string", "configuration name (default: the largest)", 0, 1, 64, NULL}}},
    {"microbenchmark",
     "Compile and run a standalone program in the worker's sandbox and return its output, to probe the hardware "
     "(latency, bandwidth, instruction throughput). It does not touch the lineage.",
     {{"source", "string", "a complete program with main()", 1, 1, MAXS, NULL},
      {"language", "string", "c or cuda", 1, 1, 8, "c|cuda"}}},
    {"commit",
     "Commit an evaluated candidate to the lineage, with notes for later steps (what changed and why it is "
     "faster). Accepted only if it passed every check and scores at least the island's best; otherwise the reason "
     "is returned and nothing changes. A commit ends the step.",
     {{"candidate", "integer", "the id evaluate returned", 1, 1, ID_MAX, NULL},
      {"notes", "string", "what changed and why", 1, 1, 4096, NULL}}},
    {"give_up", "End this step without a commit, with a one-line reason later steps will read.",
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

json_t *avo_agent_tools(void)
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
        if (!schema || json_array_append_new(out, json_pack("{s:s,s:s,s:o}", "name", t->name, "description",
                                                            t->desc, "schema", schema)) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
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

int avo_agent_tool_check(const char *name, json_t *args, char *err, size_t errlen)
{
    const tool_spec *t = NULL;
    for (size_t i = 0; i < NTOOLS; i++)
        if (name && !strcmp(tools[i].name, name))
            t = &tools[i];
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
    json_object_foreach(args, key, v) {
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

int avo_agent_ws_write(avo_agent_ws *w, const char *text, char *msg, size_t msglen)
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

int avo_agent_ws_edit(avo_agent_ws *w, const char *search, const char *replace, char *msg, size_t msglen)
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
        snprintf(msg, msglen, "edit_source: the search text is not in the working copy (version %d); it must match "
                 "exactly, whitespace and line breaks included (read_candidate shows the current text); nothing "
                 "changed", w->version);
        return -ENOENT;
    }
    if (count > 1) {
        snprintf(msg, msglen, "edit_source: the search text occurs %d times (lines %d and %d%s); include more of the "
                 "surrounding text so it matches once; nothing changed", count, line_of(w->src, first),
                 line_of(w->src, second), count > 2 ? ", ..." : "");
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

void avo_agent_ws_free(avo_agent_ws *w)
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

char *avo_agent_problem_text(const avo_problem *p)
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
    fprintf(f, "\nThe candidate is one %s source file that exports:\n    %sint %s(void *const *tensors, "
               "const int64_t *sizes%s);\n",
            cuda ? "CUDA" : "C", cuda ? "extern \"C\" " : "", p->entry, cuda ? ", cudaStream_t stream" : "");
    fprintf(f, "returning 0 on success. tensors[i] are the tensors below, in order (%s memory); sizes[j] are the "
               "sizes below, in order.%s\n",
            cuda ? "device" : "host",
            cuda ? " Work must be queued on `stream` (or finished before returning)." : "");
    fprintf(f, "\nSizes:");
    for (int i = 0; i < p->nsizes; i++)
        fprintf(f, " %s", p->sizes[i]);
    fprintf(f, "\nTensors (row-major):\n");
    for (int t = 0; t < p->ntensors; t++) {
        const avo_tensor_spec *ts = &p->tensors[t];
        fprintf(f, "    tensors[%d] %s: %s, %s, shape [", t, ts->name, avo_dtype_name(ts->dtype),
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
    fprintf(f, "Score: %s at the median time per configuration (%s = %s per call), higher is better; the "
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
            fprintf(f, " %s rel_l2 <= %g, max_abs <= %g;", avo_dtype_name(d), p->tol[d].rel_l2, p->tol[d].max_abs);
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
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
