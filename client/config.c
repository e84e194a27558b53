/* avoctl's config file of named contexts: parsing and lookup (config.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_config.h"
#include "avo_suggest.h"

#define MAX_CONTEXTS 64

int avoctl_config_path(char *out, size_t len)
{
    const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;
    if (x && *x == '/')
        n = snprintf(out, len, "%s/avo/config", x);
    else if (home && *home)
        n = snprintf(out, len, "%s/.config/avo/config", home);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* "~/x" is relative to HOME, as a shell would read it. */
static int set_path(char *dst, size_t len, const char *v)
{
    const char *home = getenv("HOME");
    int n = v[0] == '~' && v[1] == '/' && home ? snprintf(dst, len, "%s%s", home, v + 1) : snprintf(dst, len, "%s", v);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The file as read so far: its contexts, the one being filled and the
 * top-level 'current'. */
typedef struct {
    const char *path;
    avoctl_context *all;
    int n;
    avoctl_context *c; /* the section being read; NULL before the first */
    char current[64];
    int cur_line;
    int lineno;
    char *err;
    size_t errlen;
} cfg_file;

/* "[context NAME]": a new context, named once. */
static int parse_section(cfg_file *p, const char *s)
{
    char name[128];
    const char *end = strchr(s, ']');
    if (!end || end[1] || sscanf(s, "[context %127[^] ]]", name) != 1) {
        snprintf(p->err, p->errlen, "%s:%d: expected a section like [context NAME], got '%.80s'", p->path, p->lineno,
                 s);
        return -EINVAL;
    }
    if (strlen(name) >= sizeof p->all[0].name) {
        snprintf(p->err, p->errlen, "%s:%d: context name too long", p->path, p->lineno);
        return -EINVAL;
    }
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->all[i].name, name)) {
            snprintf(p->err, p->errlen, "%s:%d: context '%s' is defined twice", p->path, p->lineno, name);
            return -EINVAL;
        }
    if (p->n == MAX_CONTEXTS) {
        snprintf(p->err, p->errlen, "%s:%d: more than %d contexts", p->path, p->lineno, MAX_CONTEXTS);
        return -EINVAL;
    }
    p->c = &p->all[p->n++];
    memset(p->c, 0, sizeof *p->c);
    snprintf(p->c->name, sizeof p->c->name, "%s", name);
    return 0;
}

/* One KEY = VALUE of the current section (or 'current' before any). */
static int set_key(cfg_file *p, const char *key, const char *val)
{
    avoctl_context *c = p->c;
    int bad = 0;
    if (!c) {
        if (strcmp(key, "current") != 0) {
            snprintf(p->err, p->errlen, "%s:%d: '%s' outside a [context NAME] section (only 'current' may be)", p->path,
                     p->lineno, key);
            return -EINVAL;
        }
        snprintf(p->current, sizeof p->current, "%s", val);
        p->cur_line = p->lineno;
    } else if (!strcmp(key, "url")) {
        if (strncmp(val, "http://", 7) && strncmp(val, "https://", 8)) {
            snprintf(p->err, p->errlen, "%s:%d: url wants http://HOST:PORT, got '%.80s'", p->path, p->lineno, val);
            return -EINVAL;
        }
        bad = set_path(c->url, sizeof c->url, val);
    } else if (!strcmp(key, "socket")) {
        bad = set_path(c->socket, sizeof c->socket, val);
    } else if (!strcmp(key, "token_file")) {
        bad = set_path(c->token_file, sizeof c->token_file, val);
    } else {
        static const char *const keys[] = {"url", "socket", "token_file"};
        const char *near = avo_suggest(key, keys, 3);
        snprintf(p->err, p->errlen, "%s:%d: unknown key '%s' (keys: url, socket, token_file)%s%s%s", p->path, p->lineno,
                 key, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        return -EINVAL;
    }
    if (bad) {
        snprintf(p->err, p->errlen, "%s:%d: value too long", p->path, p->lineno);
        return -EINVAL;
    }
    if (c && c->url[0] && c->socket[0]) {
        snprintf(p->err, p->errlen, "%s:%d: context '%s' has both url and socket; give one", p->path, p->lineno,
                 c->name);
        return -EINVAL;
    }
    return 0;
}

static int parse_setting(cfg_file *p, char *s)
{
    char *eq = strchr(s, '=');
    if (!eq) {
        snprintf(p->err, p->errlen, "%s:%d: expected KEY = VALUE or [context NAME], got '%.80s'", p->path, p->lineno,
                 s);
        return -EINVAL;
    }
    *eq = 0;
    char *key = avo_config_trim(s), *val = avo_config_trim(eq + 1);
    if (!*val) {
        snprintf(p->err, p->errlen, "%s:%d: '%s' has no value", p->path, p->lineno, key);
        return -EINVAL;
    }
    return set_key(p, key, val);
}

static int read_contexts(cfg_file *p, FILE *f)
{
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        p->lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(p->err, p->errlen, "%s:%d: line too long", p->path, p->lineno);
            return -EINVAL;
        }
        char *s = avo_config_trim(line);
        int rc = 0;
        if (!*s || *s == '#')
            continue;
        if (*s == '[')
            rc = parse_section(p, s);
        else
            rc = parse_setting(p, s);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A context that is not in the file, with the ones that are. */
static int no_such_context(cfg_file *p, const char *name, int wanted)
{
    const char *names[MAX_CONTEXTS];
    char list[512] = "";
    for (int i = 0; i < p->n; i++) {
        names[i] = p->all[i].name;
        size_t used = strlen(list);
        if (snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", p->all[i].name) < 0)
            break;
    }
    const char *near = avo_suggest(name, names, (size_t)p->n);
    if (wanted)
        snprintf(p->err, p->errlen, "%s: no context '%s' (contexts: %s)%s%s%s", p->path, name, p->n ? list : "none",
                 near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    else
        snprintf(p->err, p->errlen, "%s:%d: current = %s: no such context (contexts: %s)", p->path, p->cur_line, name,
                 p->n ? list : "none");
    return -EINVAL;
}

/* The context asked for (or 'current'): 1 with *ctx, 0 when none is. */
static int pick_context(cfg_file *p, const char *want, avoctl_context *ctx)
{
    if (!want && !p->current[0])
        return 0;
    const char *name = want ? want : p->current;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->all[i].name, name)) {
            if (!p->all[i].url[0] && !p->all[i].socket[0]) {
                snprintf(p->err, p->errlen, "%s: context '%s' names neither url nor socket", p->path, name);
                return -EINVAL;
            }
            *ctx = p->all[i];
            return 1;
        }
    return no_such_context(p, name, want != NULL);
}

int avoctl_config_load(const char *path, const char *want, avoctl_context *ctx, char *err, size_t errlen)
{
    static avoctl_context all[MAX_CONTEXTS];
    cfg_file p = {.path = path, .all = all, .err = err, .errlen = errlen};
    FILE *f = fopen(path, "r");

    memset(ctx, 0, sizeof *ctx);
    if (!f) {
        if (errno == ENOENT && !want)
            return 0;
        snprintf(err, errlen, "%s: %s%s", path, strerror(errno),
                 errno == ENOENT ? " (--context and AVO_CONTEXT name a context of this file)" : "");
        return errno == ENOENT ? -ENOENT : -EINVAL;
    }
    int rc = read_contexts(&p, f);
    if (rc == 0)
        rc = pick_context(&p, want, ctx);
    fclose(f);
    return rc;
}
