/* A job's toolchain constraints, parsed strictly into their canonical form (avo_toolchain.h). */
#include "avo_toolchain.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *const avo_toolchain_keys[] = {"nvcc", "cc",  "driver", "cuda_driver", "cuda_runtime",
                                          "avo",  "gpu", "cpu",    NULL};

int avo_toolchain_key_kind(const char *key)
{
    for (int i = 0; avo_toolchain_keys[i]; i++)
        if (!strcmp(key, avo_toolchain_keys[i]))
            return strcmp(key, "gpu") && strcmp(key, "cpu") ? 1 : 0;
    return -1;
}

/* Decimal components separated by single dots; writes them to out.
 * Returns the number of characters consumed, or -EINVAL. */
static int parse_version(const char *s, char *out, size_t outlen)
{
    const char *p = s;
    size_t n = 0;
    int parts = 0;
    for (;;) {
        int digits = 0;
        while (isdigit((unsigned char)*p)) {
            if (++digits > 9 || n + 1 >= outlen)
                return -EINVAL;
            out[n++] = *p++;
        }
        if (!digits || ++parts > 4)
            return -EINVAL;
        if (*p != '.' || !isdigit((unsigned char)p[1]))
            break;
        if (n + 1 >= outlen)
            return -EINVAL;
        out[n++] = *p++;
    }
    out[n] = 0;
    return (int)(p - s);
}

int avo_toolchain_constraint_parse(const char *text, char *out, size_t outlen)
{
    const char *p = text;
    char op[3] = "", ver[64];
    while (isspace((unsigned char)*p))
        p++;
    if ((p[0] == '>' || p[0] == '<') && p[1] == '=') {
        op[0] = p[0], op[1] = '=', op[2] = 0;
        p += 2;
    } else if (p[0] == '>' || p[0] == '<') {
        op[0] = p[0], op[1] = 0;
        p++;
    } else if (p[0] == '=') {
        /* "=13.0" and "==13.0" mean "13.0" */
        p += p[1] == '=' ? 2 : 1;
    }
    while (isspace((unsigned char)*p))
        p++;
    int used = parse_version(p, ver, sizeof ver);
    if (used < 0)
        return -EINVAL;
    p += used;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return -EINVAL;
    if ((size_t)snprintf(out, outlen, "%s%s", op, ver) >= outlen)
        return -EINVAL;
    return 0;
}

static int one_value(const char *key, int kind, const json_t *v, json_t **out, char *err, size_t errlen)
{
    char canon[80];
    if (!json_is_string(v)) {
        snprintf(err, errlen, "toolchain.%s: must be a string%s", key,
                 kind ? " (a version constraint such as \"13.0\", \">=580\", \"<13.1\") or an array of them"
                      : " (a model name, matched as a substring)");
        return -EINVAL;
    }
    const char *s = json_string_value(v);
    if (!kind) {
        size_t l = strlen(s);
        int blank = 1;
        for (size_t i = 0; i < l; i++)
            blank &= isspace((unsigned char)s[i]) != 0;
        if (blank || l > 95) {
            snprintf(err, errlen, "toolchain.%s: must be a model name of 1 to 95 characters", key);
            return -EINVAL;
        }
        *out = json_string(s);
        return 0;
    }
    if (avo_toolchain_constraint_parse(s, canon, sizeof canon) < 0) {
        snprintf(err, errlen,
                 "toolchain.%s: malformed version constraint '%.60s' (expected [OP]VERSION: OP one of =, >=, <=, "
                 ">, <; VERSION 1 to 4 dot-separated numbers, e.g. \"13.0\", \">=580\", \"<13.1\")",
                 key, s);
        return -EINVAL;
    }
    *out = json_string(canon);
    return 0;
}

int avo_toolchain_parse(const json_t *in, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!json_is_object(in)) {
        snprintf(err, errlen, "toolchain: must be an object, e.g. {\"nvcc\": \"13.0\", \"driver\": \">=580\"}");
        return -EINVAL;
    }
    json_t *n = json_object();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v)
    {
        const int kind = avo_toolchain_key_kind(key);
        json_t *canon = NULL;
        if (kind < 0) {
            snprintf(err, errlen,
                     "toolchain.%s: unknown key (expected one of: nvcc, cc, driver, cuda_driver, cuda_runtime, avo, "
                     "gpu, cpu)",
                     key);
            goto fail;
        }
        if (json_is_array(v) && kind) {
            /* All of them hold: a range. */
            if (!json_array_size(v) || json_array_size(v) > 4) {
                snprintf(err, errlen, "toolchain.%s: an array of 1 to 4 version constraints", key);
                goto fail;
            }
            canon = json_array();
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x)
            {
                json_t *c;
                if (one_value(key, kind, x, &c, err, errlen) < 0) {
                    json_decref(canon);
                    goto fail;
                }
                json_array_append_new(canon, c);
            }
        } else if (one_value(key, kind, v, &canon, err, errlen) < 0) {
            goto fail;
        }
        json_object_set_new(n, key, canon);
    }
    *out = n;
    return 0;
fail:
    json_decref(n);
    return -EINVAL;
}

int avo_toolchain_banner_version(const char *line, char *out, size_t outlen)
{
    char best[64] = "", tok[64];
    const char *p = line;
    if (outlen)
        out[0] = 0;
    while (*p) {
        while (*p && (isspace((unsigned char)*p) || *p == ',' || *p == '(' || *p == ')'))
            p++;
        const char *start = p;
        while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != '(' && *p != ')')
            p++;
        const char *t = start;
        if (t < p && (*t == 'V' || *t == 'v'))
            t++;
        if (t < p && isdigit((unsigned char)*t)) {
            int used = parse_version(t, tok, sizeof tok);
            /* a whole token, or one followed by a suffix such as "-14" or
             * "+cu13": the leading numbers are the version */
            if (used > 0 && (t + used == p || t[used] == '-' || t[used] == '+' || t[used] == '_') &&
                (strchr(tok, '.') || !strchr(best, '.')))
                snprintf(best, sizeof best, "%s", tok);
        }
    }
    if (!best[0])
        return -ENOENT;
    snprintf(out, outlen, "%s", best);
    return 0;
}
