/* Table-driven configuration (Redis style): one row per setting with its name,
 * type, default, environment variable and help. The same table parses the
 * config file ("name = value" lines, '#' comments), the environment and the
 * command-line flags ("--name value" or "--name=value"), in that order of
 * increasing precedence, and prints the usage text, so they cannot drift. */
#ifndef AVO_CONFIG_H
#define AVO_CONFIG_H

#include <stddef.h>

typedef enum { AVO_CFG_STR, AVO_CFG_INT, AVO_CFG_DOUBLE, AVO_CFG_BOOL } avo_cfg_type;

typedef struct {
    const char *name; /* flag and file key */
    avo_cfg_type type;
    size_t offset;    /* into the settings struct */
    const char *dflt; /* NULL = unset (empty string for STR) */
    const char *env;  /* environment variable or NULL */
    double min, max;  /* bounds for numbers (min > max = unbounded) */
    const char *help;
} avo_cfg_row;

/* Strings in the settings struct are fixed char[AVO_CFG_STRLEN] arrays. */
#define AVO_CFG_STRLEN 1024

/* Apply defaults, then the file named by the "config" row (if present and
 * set), then the environment, then argv flags. Arguments that are not flags
 * are left in argv, compacted, and their count returned in *nrest.
 * Returns 0 or a negative int with a one-line message in err. */
int avo_config_load(const avo_cfg_row *rows, int nrows, void *settings, int argc, char **argv, int *nrest, char *err,
                    size_t errlen);

/* Parse one "name = value" file into settings. */
int avo_config_file(const avo_cfg_row *rows, int nrows, void *settings, const char *path, char *err, size_t errlen);

void avo_config_usage(const avo_cfg_row *rows, int nrows, const char *prog, const char *synopsis);

/* s without its leading and trailing white space, in place (config lines:
 * avod's and the workers' files, avoctl's contexts). */
char *avo_config_trim(char *s);

#endif
