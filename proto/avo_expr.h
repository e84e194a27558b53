/* Integer/real arithmetic expressions over named variables, used for tensor
 * shapes, FLOP and byte formulas and knob constraints in problem specs.
 * Grammar: numbers, identifiers, + - * / %, comparison (< <= > >= == !=),
 * && ||, unary -, !, parentheses. */
#ifndef AVO_EXPR_H
#define AVO_EXPR_H

#include <stddef.h>

typedef struct {
    int n;
    const char *const *names;
    const double *values;
} avo_expr_env;

/* Evaluate expr. Returns 0 and sets *out, or a negative int with a message in
 * err naming the position and cause (unknown name, syntax error, divide by 0). */
int avo_expr_eval(const char *expr, const avo_expr_env *env, double *out, char *err, size_t errlen);

#endif
