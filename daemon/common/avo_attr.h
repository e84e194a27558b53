/* Attributes the code relies on: a function whose failure must be handled
 * says so, and the compiler (with -Werror) refuses a caller that drops the
 * result, as PgBouncer's _MUSTCHECK does. */
#ifndef AVO_ATTR_H
#define AVO_ATTR_H

/* On database queries, process starts and writes: a result that can be
 * ignored is written `(void)f(...)` with a comment saying why. */
#define AVO_MUSTCHECK __attribute__((warn_unused_result))

#endif
