/* Table-driven configuration: file, environment and flags from one table (avo_config.h). */
#include "avo_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const avo_cfg_row *find_row(const avo_cfg_row *rows, int nrows, const char *name, size_t len)
{
    for (int i = 0; i < nrows; i++)
        if (strlen(rows[i].name) == len && strncmp(rows[i].name, name, len) == 0)
            return &rows[i];
    return NULL;
}

static int set_value(const avo_cfg_row *r, void *settings, const char *val, const char *origin, char *err,
                     size_t errlen)
{
    char *dst = (char *)settings + r->offset;
    char *end;
    switch (r->type) {
    case AVO_CFG_STR:
        if (strlen(val) >= AVO_CFG_STRLEN) {
            snprintf(err, errlen, "%s: %s: value longer than %d bytes", origin, r->name, AVO_CFG_STRLEN - 1);
            return -EINVAL;
        }
        strcpy(dst, val);
        return 0;
    case AVO_CFG_INT: {
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end) {
            snprintf(err, errlen, "%s: %s: '%s' is not an integer", origin, r->name, val);
            return -EINVAL;
        }
        if (r->min <= r->max && (v < r->min || v > r->max)) {
            snprintf(err, errlen, "%s: %s: %lld is outside [%g, %g]", origin, r->name, v, r->min, r->max);
            return -ERANGE;
        }
        *(long long *)dst = v;
        return 0;
    }
    case AVO_CFG_DOUBLE: {
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end) {
            snprintf(err, errlen, "%s: %s: '%s' is not a number", origin, r->name, val);
            return -EINVAL;
        }
        if (r->min <= r->max && (v < r->min || v > r->max)) {
            snprintf(err, errlen, "%s: %s: %g is outside [%g, %g]", origin, r->name, v, r->min, r->max);
            return -ERANGE;
        }
        *(double *)dst = v;
        return 0;
    }
    case AVO_CFG_BOOL:
        if (!strcmp(val, "1") || !strcmp(val, "true") || !strcmp(val, "yes") || !strcmp(val, "on"))
            *(int *)dst = 1;
        else if (!strcmp(val, "0") || !strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "off"))
            *(int *)dst = 0;
        else {
            snprintf(err, errlen, "%s: %s: '%s' is not a boolean (true/false)", origin, r->name, val);
            return -EINVAL;
        }
        return 0;
    }
    return -EINVAL;
}

char *avo_config_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

int avo_config_file(const avo_cfg_row *rows, int nrows, void *settings, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
        return -errno;
    }
    char line[4096], origin[4200];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = avo_config_trim(line);
        if (*s == 0 || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        snprintf(origin, sizeof origin, "%s:%d", path, lineno);
        if (!eq) {
            snprintf(err, errlen, "%s: expected 'name = value'", origin);
            rc = -EINVAL;
            break;
        }
        *eq = 0;
        char *key = avo_config_trim(s), *val = avo_config_trim(eq + 1);
        const avo_cfg_row *r = find_row(rows, nrows, key, strlen(key));
        if (!r || !strcmp(r->name, "config")) {
            snprintf(err, errlen, "%s: unknown setting '%s'", origin, key);
            rc = -EINVAL;
            break;
        }
        if ((rc = set_value(r, settings, val, origin, err, errlen)) < 0)
            break;
    }
    fclose(f);
    return rc;
}

int avo_config_load(const avo_cfg_row *rows, int nrows, void *settings, int argc, char **argv, int *nrest, char *err,
                    size_t errlen)
{
    int rc;
    for (int i = 0; i < nrows; i++) {
        const char *d = rows[i].dflt ? rows[i].dflt : (rows[i].type == AVO_CFG_STR ? "" : "0");
        if ((rc = set_value(&rows[i], settings, d, "default", err, errlen)) < 0)
            return rc;
    }

    /* The config file is named by a flag or the environment, so find it first. */
    const avo_cfg_row *cfg = find_row(rows, nrows, "config", 6);
    const char *cfg_path = NULL;
    if (cfg) {
        if (cfg->env && getenv(cfg->env))
            cfg_path = getenv(cfg->env);
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--config") && i + 1 < argc)
                cfg_path = argv[i + 1];
            else if (!strncmp(argv[i], "--config=", 9))
                cfg_path = argv[i] + 9;
        }
        if (cfg_path && *cfg_path) {
            if ((rc = avo_config_file(rows, nrows, settings, cfg_path, err, errlen)) < 0)
                return rc;
            set_value(cfg, settings, cfg_path, "flag", err, errlen);
        }
    }

    for (int i = 0; i < nrows; i++) {
        const char *v = rows[i].env ? getenv(rows[i].env) : NULL;
        char origin[128];
        snprintf(origin, sizeof origin, "environment %s", rows[i].env ? rows[i].env : "");
        if (v && (rc = set_value(&rows[i], settings, v, origin, err, errlen)) < 0)
            return rc;
    }

    int out = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i == 0 || strncmp(a, "--", 2) != 0 || a[2] == 0) {
            argv[out++] = argv[i];
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const avo_cfg_row *r = find_row(rows, nrows, name, nlen);
        if (!r) {
            snprintf(err, errlen, "unknown option '%.*s' (see --help)", (int)(nlen + 2), a);
            return -EINVAL;
        }
        const char *val;
        if (eq)
            val = eq + 1;
        else if (r->type == AVO_CFG_BOOL)
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(err, errlen, "option --%s needs a value", r->name);
            return -EINVAL;
        }
        if ((rc = set_value(r, settings, val, "flag", err, errlen)) < 0)
            return rc;
    }
    argv[out] = NULL;
    if (nrest)
        *nrest = out;
    return 0;
}

void avo_config_usage(const avo_cfg_row *rows, int nrows, const char *prog, const char *synopsis)
{
    static const char *const tnames[] = {"STR", "INT", "NUM", "BOOL"};
    printf("usage: %s %s\n\noptions (also 'name = value' lines in the config file):\n", prog, synopsis);
    for (int i = 0; i < nrows; i++) {
        printf("  --%-18s %-4s %s", rows[i].name, tnames[rows[i].type], rows[i].help);
        if (rows[i].dflt && *rows[i].dflt)
            printf(" [default: %s]", rows[i].dflt);
        if (rows[i].env)
            printf(" [env: %s]", rows[i].env);
        printf("\n");
    }
}
