/* avoctl's config file of named contexts (docs/cli.md, "Contexts"):
 * $XDG_CONFIG_HOME/avo/config, else ~/.config/avo/config. Each context
 * names one avod, by url (with a token file) or by socket; "current"
 * names the one used when neither --context nor AVO_CONTEXT does. */
#ifndef AVOCTL_CONFIG_H
#define AVOCTL_CONFIG_H

#include <limits.h>
#include <stddef.h>

typedef struct {
    char name[64];
    char url[512];
    char socket[PATH_MAX];
    char token_file[PATH_MAX];
} avoctl_context;

/* The config file's path into out; -ENOENT when neither XDG_CONFIG_HOME
 * nor HOME is set. */
int avoctl_config_path(char *out, size_t len);

/* Read path and fill *ctx with the context named want (NULL: the file's
 * "current", if any). Returns 1 with *ctx filled, 0 when no context
 * applies (no file and want NULL, or no current), or -EINVAL / -ENOENT
 * with err naming the file, and the line for a bad one. */
int avoctl_config_load(const char *path, const char *want, avoctl_context *ctx, char *err, size_t errlen);

#endif
