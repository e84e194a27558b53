/* The quota file, parsed and checked (quota.h). */
#include "quota.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_config.h"

typedef enum { WHOLE, SECONDS, WEIGHT } kind;

static const struct {
    const char *key;   /* in the file */
    const char *field; /* in the JSON, sql/022's column */
    kind kind;
} keys[] = {
    {"jobs", "jobs", WHOLE},
    {"evals-in-flight", "evals_in_flight", WHOLE},
    {"gpu-seconds-day", "gpu_s_day", SECONDS},
    {"gpu-seconds-week", "gpu_s_week", SECONDS},
    {"share", "share", WEIGHT},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

static const char key_list[] = "jobs, evals-in-flight, gpu-seconds-day, gpu-seconds-week, share";

/* A value of its kind, or -EINVAL with the rule in err. */
static int parse_value(kind k, const char *key, const char *v, const char *where, double *out, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    int bad = end == v || errno || !isfinite(x);
    if (!bad && k == SECONDS && *end) {
        static const struct {
            char c;
            double mul;
        } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
        int found = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (end[0] == units[i].c && !end[1]) {
                x *= units[i].mul;
                found = 1;
            }
        bad = !found;
    } else if (!bad && *end) {
        bad = 1;
    }
    if (k == WHOLE && (bad || x < 0 || x != floor(x) || x > 1e9)) {
        snprintf(err, errlen, "%s: %s=%s: a limit is a whole number >= 0", where, key, v);
        return -EINVAL;
    }
    if (k == SECONDS && (bad || x < 0 || x > 1e12)) {
        snprintf(err, errlen, "%s: %s=%s: seconds >= 0, optionally with a unit s, m, h or d (3600, 60m, 1h)", where,
                 key, v);
        return -EINVAL;
    }
    if (k == WEIGHT && (bad || x <= 0 || x > 1e6)) {
        snprintf(err, errlen, "%s: %s=%s: a share is a number > 0 (a weight; default 1)", where, key, v);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

int avo_quota_parse_line(const char *line, const avo_ident *id, const char *where, json_t **out, char *err,
                         size_t errlen)
{
    char buf[1024], *save = NULL;
    if (strlen(line) >= sizeof buf) {
        snprintf(err, errlen, "%s: line longer than %zu characters", where, sizeof buf - 1);
        return -EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", line);
    char *team = strtok_r(buf, " \t", &save);
    if (!team) {
        snprintf(err, errlen, "%s: empty line", where);
        return -EINVAL;
    }
    if (strcmp(team, "*") && strcmp(team, "-") && avo_ident_team_known(id, team, where, err, errlen) < 0)
        return -EINVAL;
    json_t *o = json_pack("{s:s}", "team", !strcmp(team, "-") ? "" : team);
    if (!o)
        return -ENOMEM;
    int nlimits = 0;
    for (char *w = strtok_r(NULL, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(w, '=');
        if (!eq || eq == w || !eq[1]) {
            snprintf(err, errlen, "%s: '%s' is not key=value (keys: %s)", where, w, key_list);
            goto fail;
        }
        *eq = 0;
        int k = -1;
        for (int i = 0; i < NKEYS; i++)
            if (!strcmp(keys[i].key, w))
                k = i;
        if (k < 0) {
            snprintf(err, errlen, "%s: unknown key '%s' (keys: %s)", where, w, key_list);
            goto fail;
        }
        if (json_object_get(o, keys[k].field)) {
            snprintf(err, errlen, "%s: %s given twice", where, w);
            goto fail;
        }
        double x;
        if (parse_value(keys[k].kind, w, eq + 1, where, &x, err, errlen) < 0)
            goto fail;
        json_object_set_new(o, keys[k].field, keys[k].kind == WHOLE ? json_integer((json_int_t)x) : json_real(x));
        nlimits++;
    }
    if (!nlimits) {
        snprintf(err, errlen, "%s: team '%s' has no key=value (keys: %s)", where, team, key_list);
        goto fail;
    }
    *out = o;
    return 0;
fail:
    json_decref(o);
    return -EINVAL;
}

int avo_quota_load(const char *path, const avo_ident *id, json_t **out, char *err, size_t errlen)
{
    json_t *all = json_array();
    if (!all)
        return -ENOMEM;
    if (!path || !*path) {
        *out = all;
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "quotas %s: %s", path, strerror(errno));
        json_decref(all);
        return -ENOENT;
    }
    char line[1100], where[1200];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        snprintf(where, sizeof where, "quotas %s line %d", path, lineno);
        line[strcspn(line, "#")] = 0;
        char *s = avo_config_trim(line);
        if (!*s)
            continue;
        json_t *o = NULL;
        rc = avo_quota_parse_line(s, id, where, &o, err, errlen);
        if (rc < 0)
            break;
        const char *team = json_string_value(json_object_get(o, "team"));
        size_t i;
        json_t *prev;
        json_array_foreach(all, i, prev)
        {
            if (!strcmp(json_string_value(json_object_get(prev, "team")), team)) {
                snprintf(err, errlen, "%s: team '%s' has a line already", where, *team ? team : "-");
                rc = -EINVAL;
            }
        }
        if (rc == 0)
            json_array_append(all, o);
        json_decref(o);
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "quotas %s: read error", path);
        rc = -EIO;
    }
    fclose(f);
    if (rc < 0) {
        json_decref(all);
        return rc;
    }
    *out = all;
    return 0;
}
