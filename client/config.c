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

int avoctl_config_load(const char *path, const char *want, avoctl_context *ctx, char *err, size_t errlen)
{
    static avoctl_context all[MAX_CONTEXTS];
    char line[8192], current[64] = "";
    int n = 0, lineno = 0, rc = 0, cur_line = 0;
    FILE *f = fopen(path, "r");

    memset(ctx, 0, sizeof *ctx);
    if (!f) {
        if (errno == ENOENT && !want)
            return 0;
        snprintf(err, errlen, "%s: %s%s", path, strerror(errno),
                 errno == ENOENT ? " (--context and AVO_CONTEXT name a context of this file)" : "");
        return errno == ENOENT ? -ENOENT : -EINVAL;
    }
    avoctl_context *c = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, errlen, "%s:%d: line too long", path, lineno);
            rc = -EINVAL;
            goto done;
        }
        char *s = avo_config_trim(line);
        if (!*s || *s == '#')
            continue;
        if (*s == '[') {
            char name[128];
            char *end = strchr(s, ']');
            if (!end || end[1] || sscanf(s, "[context %127[^] ]]", name) != 1) {
                snprintf(err, errlen, "%s:%d: expected a section like [context NAME], got '%.80s'", path, lineno, s);
                rc = -EINVAL;
                goto done;
            }
            if (strlen(name) >= sizeof c->name) {
                snprintf(err, errlen, "%s:%d: context name too long", path, lineno);
                rc = -EINVAL;
                goto done;
            }
            for (int i = 0; i < n; i++)
                if (!strcmp(all[i].name, name)) {
                    snprintf(err, errlen, "%s:%d: context '%s' is defined twice", path, lineno, name);
                    rc = -EINVAL;
                    goto done;
                }
            if (n == MAX_CONTEXTS) {
                snprintf(err, errlen, "%s:%d: more than %d contexts", path, lineno, MAX_CONTEXTS);
                rc = -EINVAL;
                goto done;
            }
            c = &all[n++];
            memset(c, 0, sizeof *c);
            snprintf(c->name, sizeof c->name, "%s", name);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected KEY = VALUE or [context NAME], got '%.80s'", path, lineno, s);
            rc = -EINVAL;
            goto done;
        }
        *eq = 0;
        char *key = avo_config_trim(s), *val = avo_config_trim(eq + 1);
        if (!*val) {
            snprintf(err, errlen, "%s:%d: '%s' has no value", path, lineno, key);
            rc = -EINVAL;
            goto done;
        }
        int bad = 0;
        if (!c) {
            if (strcmp(key, "current") != 0) {
                snprintf(err, errlen, "%s:%d: '%s' outside a [context NAME] section (only 'current' may be)", path,
                         lineno, key);
                rc = -EINVAL;
                goto done;
            }
            snprintf(current, sizeof current, "%s", val);
            cur_line = lineno;
        } else if (!strcmp(key, "url")) {
            if (strncmp(val, "http://", 7) && strncmp(val, "https://", 8)) {
                snprintf(err, errlen, "%s:%d: url wants http://HOST:PORT, got '%.80s'", path, lineno, val);
                rc = -EINVAL;
                goto done;
            }
            bad = set_path(c->url, sizeof c->url, val);
        } else if (!strcmp(key, "socket")) {
            bad = set_path(c->socket, sizeof c->socket, val);
        } else if (!strcmp(key, "token_file")) {
            bad = set_path(c->token_file, sizeof c->token_file, val);
        } else {
            static const char *const keys[] = {"url", "socket", "token_file"};
            const char *near = avo_suggest(key, keys, 3);
            snprintf(err, errlen, "%s:%d: unknown key '%s' (keys: url, socket, token_file)%s%s%s", path, lineno, key,
                     near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
            rc = -EINVAL;
            goto done;
        }
        if (bad) {
            snprintf(err, errlen, "%s:%d: value too long", path, lineno);
            rc = -EINVAL;
            goto done;
        }
        if (c && c->url[0] && c->socket[0]) {
            snprintf(err, errlen, "%s:%d: context '%s' has both url and socket; give one", path, lineno, c->name);
            rc = -EINVAL;
            goto done;
        }
    }
    if (!want && !current[0])
        goto done;
    const char *name = want ? want : current;
    for (int i = 0; i < n; i++)
        if (!strcmp(all[i].name, name)) {
            if (!all[i].url[0] && !all[i].socket[0]) {
                snprintf(err, errlen, "%s: context '%s' names neither url nor socket", path, name);
                rc = -EINVAL;
                goto done;
            }
            *ctx = all[i];
            rc = 1;
            goto done;
        }
    const char *names[MAX_CONTEXTS];
    char list[512] = "";
    for (int i = 0; i < n; i++) {
        names[i] = all[i].name;
        size_t used = strlen(list);
        if (snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", all[i].name) < 0)
            break;
    }
    const char *near = avo_suggest(name, names, (size_t)n);
    if (want)
        snprintf(err, errlen, "%s: no context '%s' (contexts: %s)%s%s%s", path, name, n ? list : "none",
                 near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    else
        snprintf(err, errlen, "%s:%d: current = %s: no such context (contexts: %s)", path, cur_line, name,
                 n ? list : "none");
    rc = -EINVAL;
done:
    fclose(f);
    return rc;
}
