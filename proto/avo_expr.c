/* Arithmetic expressions over named variables for problem specs (avo_expr.h). */
#include "avo_expr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Recursive descent, one function per precedence level (lowest first):
 * or -> and -> cmp -> add -> mul -> unary -> primary. Errors stop at the
 * first failure; later levels check p->failed so a bad token is reported once. */
typedef struct {
    const char *src;
    const char *s;
    const avo_expr_env *env;
    int failed;
    char *err;
    size_t errlen;
} parser;

/* Nesting is capped so a hostile spec cannot exhaust the stack. */
#define MAX_DEPTH 64

static double fail(parser *p, int code, const char *fmt, const char *arg)
{
    if (!p->failed) {
        p->failed = code;
        if (p->err && p->errlen) {
            char what[160];
            snprintf(what, sizeof what, fmt, arg ? arg : "");
            snprintf(p->err, p->errlen, "%s at column %d", what, (int)(p->s - p->src) + 1);
        }
    }
    return 0;
}

static void skip_ws(parser *p)
{
    while (isspace((unsigned char)*p->s))
        p->s++;
}

/* Consumes op when it is next (and not the start of a longer operator that
 * shares its prefix, e.g. "<" vs "<="). */
static int accept(parser *p, const char *op)
{
    skip_ws(p);
    size_t n = strlen(op);
    if (strncmp(p->s, op, n) != 0)
        return 0;
    if (n == 1 && (op[0] == '<' || op[0] == '>' || op[0] == '!' || op[0] == '=') && p->s[1] == '=')
        return 0;
    p->s += n;
    return 1;
}

static double parse_or(parser *p, int depth);

static double parse_primary(parser *p, int depth)
{
    skip_ws(p);
    const char *c = p->s;
    if (*c == '(') {
        p->s++;
        double v = parse_or(p, depth + 1);
        if (p->failed)
            return 0;
        if (!accept(p, ")"))
            return fail(p, -EINVAL, "expected ')'%s", NULL);
        return v;
    }
    if (isdigit((unsigned char)*c) || *c == '.') {
        char *end;
        errno = 0;
        double v = strtod(c, &end);
        if (end == c || errno)
            return fail(p, -EINVAL, "bad number%s", NULL);
        p->s = end;
        return v;
    }
    if (isalpha((unsigned char)*c) || *c == '_') {
        const char *e = c;
        while (isalnum((unsigned char)*e) || *e == '_')
            e++;
        char name[64];
        size_t n = (size_t)(e - c);
        if (n >= sizeof name)
            return fail(p, -EINVAL, "name too long%s", NULL);
        memcpy(name, c, n);
        name[n] = 0;
        for (int i = 0; p->env && i < p->env->n; i++) {
            if (strcmp(p->env->names[i], name) == 0) {
                p->s = e;
                return p->env->values[i];
            }
        }
        return fail(p, -ENOENT, "unknown name '%s'", name);
    }
    if (*c == 0)
        return fail(p, -EINVAL, "unexpected end of expression%s", NULL);
    char tok[2] = {*c, 0};
    return fail(p, -EINVAL, "unexpected '%s'", tok);
}

static double parse_unary(parser *p, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(p, -E2BIG, "expression nested too deeply%s", NULL);
    if (accept(p, "-"))
        return -parse_unary(p, depth + 1);
    if (accept(p, "+"))
        return parse_unary(p, depth + 1);
    if (accept(p, "!"))
        return parse_unary(p, depth + 1) == 0 ? 1 : 0;
    return parse_primary(p, depth);
}

static double parse_mul(parser *p, int depth)
{
    double v = parse_unary(p, depth);
    while (!p->failed) {
        if (accept(p, "*")) {
            v *= parse_unary(p, depth);
        } else if (accept(p, "/") || accept(p, "%")) {
            char op = p->s[-1];
            const char *at = p->s;
            double r = parse_unary(p, depth);
            if (p->failed)
                break;
            if (r == 0) {
                p->s = at;
                return fail(p, -EDOM, "division by zero%s", NULL);
            }
            v = op == '/' ? v / r : fmod(v, r);
        } else {
            break;
        }
    }
    return v;
}

static double parse_add(parser *p, int depth)
{
    double v = parse_mul(p, depth);
    while (!p->failed) {
        if (accept(p, "+"))
            v += parse_mul(p, depth);
        else if (accept(p, "-"))
            v -= parse_mul(p, depth);
        else
            break;
    }
    return v;
}

static double parse_cmp(parser *p, int depth)
{
    double v = parse_add(p, depth);
    while (!p->failed) {
        if (accept(p, "<="))
            v = v <= parse_add(p, depth);
        else if (accept(p, ">="))
            v = v >= parse_add(p, depth);
        else if (accept(p, "=="))
            v = v == parse_add(p, depth);
        else if (accept(p, "!="))
            v = v != parse_add(p, depth);
        else if (accept(p, "<"))
            v = v < parse_add(p, depth);
        else if (accept(p, ">"))
            v = v > parse_add(p, depth);
        else
            break;
    }
    return v;
}

static double parse_and(parser *p, int depth)
{
    double v = parse_cmp(p, depth);
    while (!p->failed && accept(p, "&&")) {
        /* Both sides are always parsed (no short circuit) so a syntax error on
         * the right is reported whatever the left evaluates to. */
        double r = parse_cmp(p, depth);
        v = (v != 0 && r != 0) ? 1 : 0;
    }
    return v;
}

static double parse_or(parser *p, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(p, -E2BIG, "expression nested too deeply%s", NULL);
    double v = parse_and(p, depth);
    while (!p->failed && accept(p, "||")) {
        double r = parse_and(p, depth);
        v = (v != 0 || r != 0) ? 1 : 0;
    }
    return v;
}

int avo_expr_eval(const char *expr, const avo_expr_env *env, double *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!expr) {
        if (err && errlen)
            snprintf(err, errlen, "no expression");
        return -EINVAL;
    }
    parser p = {.src = expr, .s = expr, .env = env, .err = err, .errlen = errlen};
    double v = parse_or(&p, 0);
    if (!p.failed) {
        skip_ws(&p);
        if (*p.s) {
            char tok[2] = {*p.s, 0};
            fail(&p, -EINVAL, "unexpected '%s'", tok);
        }
    }
    if (p.failed)
        return p.failed;
    if (out)
        *out = v;
    return 0;
}
