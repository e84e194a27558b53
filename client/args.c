/* avoctl's command-line parsing: global flags and per-command options (args.h). */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_suggest.h"

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b ? b : "");
    return -EINVAL;
}

/* "--name=value" / "--name value" / "-x value": returns the value and how many
 * argv slots were used, or NULL when the value is missing. */
static const char *take_value(const char *inline_val, int i, int argc, char *const *argv, int *used)
{
    if (inline_val) {
        *used = 1;
        return inline_val;
    }
    if (i + 1 >= argc)
        return NULL;
    *used = 2;
    return argv[i + 1];
}

int avoctl_args_globals(int argc, char *const *argv, avoctl_globals *g, char *err, size_t errlen)
{
    /* The global options that take a value, and where it goes. */
    const struct {
        const char *name, *arg;
        const char **dst;
    } valued[] = {
        {"socket", "a PATH", &g->socket},
        {"url", "a value", &g->url},
        {"token-file", "a value", &g->token_file},
        {"context", "a NAME (a context of the config file)", &g->context},
    };
    static const char *const known[] = {"json",   "help", "version",    "no-color",
                                        "socket", "url",  "token-file", "context"};
    memset(g, 0, sizeof *g);
    int i = 1;
    while (i < argc) {
        const char *s = argv[i];
        if (s[0] != '-' || s[1] == 0)
            break;
        if (strcmp(s, "--") == 0)
            return i + 1;
        if (strcmp(s, "--json") == 0) {
            g->json = 1;
        } else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            g->help = 1;
        } else if (strcmp(s, "--version") == 0) {
            g->version = 1;
        } else if (strcmp(s, "--no-color") == 0) {
            g->no_color = 1;
        } else {
            size_t k = 0, nv = sizeof valued / sizeof valued[0];
            for (; k < nv; k++) {
                size_t n = strlen(valued[k].name);
                if (strncmp(s, "--", 2) == 0 && strncmp(s + 2, valued[k].name, n) == 0 &&
                    (s[2 + n] == 0 || s[2 + n] == '='))
                    break;
            }
            if (k == nv) {
                const char *eq = strchr(s, '=');
                char word[64];
                snprintf(word, sizeof word, "%.*s", (int)(eq ? eq - s : (long)strlen(s)), s + (s[1] == '-' ? 2 : 1));
                const char *near = avo_suggest(word, known, sizeof known / sizeof known[0]);
                if (near)
                    snprintf(err, errlen, "unknown global option '%s'; did you mean '--%s'?", s, near);
                else
                    snprintf(err, errlen, "unknown global option '%s'", s);
                return -EINVAL;
            }
            size_t n = strlen(valued[k].name) + 2;
            int used;
            const char *v = take_value(s[n] == '=' ? s + n + 1 : NULL, i, argc, argv, &used);
            if (!v || !*v) {
                snprintf(err, errlen, "option '--%s' needs %s", valued[k].name, valued[k].arg);
                return -EINVAL;
            }
            *valued[k].dst = v;
            i += used;
            continue;
        }
        i++;
    }
    return i;
}

/* "unknown option '--evals'" with "; did you mean '--evaluations'?" when
 * one of the command's long options (or a common one) is that close. */
static int unknown_long(const avoctl_opt *opts, const char *shown, char *err, size_t errlen)
{
    const char *names[AVOCTL_MAX_OPTS + 2] = {"json", "help"};
    size_t n = 2;
    for (int k = 0; opts && opts[k].name && n < AVOCTL_MAX_OPTS + 2; k++)
        names[n++] = opts[k].name;
    const char *near = strncmp(shown, "--", 2) == 0 ? avo_suggest(shown + 2, names, n) : NULL;
    if (near)
        snprintf(err, errlen, "unknown option '%s'; did you mean '--%s'?", shown, near);
    else
        snprintf(err, errlen, "unknown option '%s'", shown);
    return -EINVAL;
}

static int find_long(const avoctl_opt *opts, const char *name, size_t n)
{
    for (int k = 0; opts && opts[k].name; k++)
        if (strlen(opts[k].name) == n && strncmp(opts[k].name, name, n) == 0)
            return k;
    return -1;
}

static int find_short(const avoctl_opt *opts, char c)
{
    for (int k = 0; opts && opts[k].name; k++)
        if (opts[k].short_name == c)
            return k;
    return -1;
}

int avoctl_args_parse(const avoctl_opt *opts, int max_pos, int argc, char *const *argv, avoctl_args *a, char *err,
                      size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->opts = opts;
    if (max_pos > AVOCTL_MAX_POS)
        max_pos = AVOCTL_MAX_POS;
    int only_pos = 0;
    int i = 0;
    while (i < argc) {
        const char *s = argv[i];
        int k = -1;
        const char *inline_val = NULL;
        char shown[64];

        if (only_pos || s[0] != '-' || s[1] == 0) {
            if (a->npos >= max_pos)
                return fail(err, errlen, "unexpected argument '%s'%s", s, NULL);
            a->pos[a->npos++] = s;
            i++;
            continue;
        }
        if (strcmp(s, "--") == 0) {
            only_pos = 1;
            i++;
            continue;
        }
        if (s[1] == '-') {
            const char *name = s + 2;
            const char *eq = strchr(name, '=');
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            if (eq)
                inline_val = eq + 1;
            k = find_long(opts, name, n);
            if (k < 0 && !inline_val) {
                /* Common flags are accepted after the command as well. */
                if (strcmp(name, "json") == 0) {
                    a->json = 1;
                    i++;
                    continue;
                }
                if (strcmp(name, "help") == 0) {
                    a->help = 1;
                    i++;
                    continue;
                }
            }
            snprintf(shown, sizeof shown, "--%.*s", (int)(n < 40 ? n : 40), name);
        } else {
            if (s[2] != 0) /* no bundling: "-o" only, "-ofile" is ambiguous */
                return fail(err, errlen, "unknown option '%s'%s", s, NULL);
            k = find_short(opts, s[1]);
            if (k < 0 && s[1] == 'h') {
                a->help = 1;
                i++;
                continue;
            }
            snprintf(shown, sizeof shown, "-%c", s[1]);
        }
        if (k < 0 || k >= AVOCTL_MAX_OPTS)
            return unknown_long(opts, shown, err, errlen);
        if (!opts[k].has_arg) {
            if (inline_val)
                return fail(err, errlen, "option '%s' takes no value%s", shown, NULL);
            a->val[k] = "";
            i++;
            continue;
        }
        int used;
        const char *v = take_value(inline_val, i, argc, argv, &used);
        if (!v)
            return fail(err, errlen, "option '%s' needs a value (%s)", shown,
                        opts[k].arg_name ? opts[k].arg_name : "VALUE");
        a->val[k] = v;
        i += used;
    }
    return 0;
}

const char *avoctl_args_get(const avoctl_args *a, const char *name)
{
    int k = find_long(a->opts, name, strlen(name));
    return k < 0 || k >= AVOCTL_MAX_OPTS ? NULL : a->val[k];
}

int avoctl_args_i64(const char *what, const char *s, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min || v > max) {
        if (max == INT64_MAX)
            snprintf(err, errlen, "%s: expected an integer >= %lld, got '%s'", what, (long long)min, s ? s : "");
        else
            snprintf(err, errlen, "%s: expected an integer in [%lld, %lld], got '%s'", what, (long long)min,
                     (long long)max, s ? s : "");
        return -EINVAL;
    }
    *out = v;
    return 0;
}

int avoctl_args_double(const char *what, const char *s, double min, double max, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < min || v > max) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g], got '%s'", what, min, max, s ? s : "");
        return -EINVAL;
    }
    *out = v;
    return 0;
}
