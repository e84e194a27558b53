/* Where avo keeps its state (socket, embedded database, caches). avod and
 * avoctl must agree on this without talking to each other, so the rule lives
 * here once:
 *   $AVO_HOME if set and non-empty;
 *   else /var/lib/avo when running as root (the system service);
 *   else ${XDG_STATE_HOME:-$HOME/.local/state}/avo (a per-user daemon). */
#ifndef AVO_HOME_H
#define AVO_HOME_H

#include <stddef.h>

/* The API socket's file name inside AVO_HOME. */
#define AVO_SOCKET_NAME "avod.sock"

/* Write the state directory into out. Returns 0, -ENAMETOOLONG when it does
 * not fit, or -ENOENT when no home directory can be determined. Does not
 * create the directory. */
int avo_home_default(char *out, size_t len);

/* Write "<avo_home_default()>/<name>" into out; same errors. */
int avo_home_path(const char *name, char *out, size_t len);

#endif
