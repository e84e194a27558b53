/* Command-line parsing for avoctl: the global flags before the command and a
 * small table-driven option parser for each command. Hand-rolled rather than
 * getopt_long because it must name the offending argument in its own words,
 * keep no global state (the unit tests call it repeatedly) and accept the
 * common flags (--json, -h) after the command too. */
#ifndef AVOCTL_ARGS_H
#define AVOCTL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define AVOCTL_MAX_OPTS 32
#define AVOCTL_MAX_POS 64

typedef struct {
    const char *name; /* long name without "--"; NULL ends a table */
    char short_name;  /* 0 when there is none */
    int has_arg;
    const char *arg_name; /* for help, e.g. "N" */
    const char *help;
} avoctl_opt;

typedef struct {
    const avoctl_opt *opts;
    const char *val[AVOCTL_MAX_OPTS]; /* by index into opts; "" for a set flag */
    const char *pos[AVOCTL_MAX_POS];
    int npos;
    int json;
    int help;
} avoctl_args;

typedef struct {
    int json;
    int help;
    int version;
    const char *socket;     /* NULL: the avo_home default */
    const char *url;        /* avod's TCP listener (--url, AVO_URL); NULL: the socket */
    const char *token_file; /* its bearer token (--token-file, AVO_TOKEN_FILE) */
    const char *context;    /* a named context of the config file (--context, AVO_CONTEXT) */
    int no_color;           /* --no-color */
} avoctl_globals;

/* Parse the flags before the command. Returns the index of the command in
 * argv (argc when there is none) or -EINVAL with a message in err. */
int avoctl_args_globals(int argc, char *const *argv, avoctl_globals *g, char *err, size_t errlen);

/* Parse a command's arguments (argv[0] is the first one after the command).
 * opts may be NULL. "--" ends options; "-" is a positional (stdin). Returns 0
 * or -EINVAL with err naming the argument. */
int avoctl_args_parse(const avoctl_opt *opts, int max_pos, int argc, char *const *argv, avoctl_args *a, char *err,
                      size_t errlen);

/* The value of option name, or NULL when it was not given. */
const char *avoctl_args_get(const avoctl_args *a, const char *name);

/* Strict number parsing; what names the argument in the error message. */
int avoctl_args_i64(const char *what, const char *s, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen);
int avoctl_args_double(const char *what, const char *s, double min, double max, double *out, char *err, size_t errlen);

#endif
