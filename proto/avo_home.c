/* Where avo keeps its state ($AVO_HOME), one rule for avod and avoctl (avo_home.h). */
#include "avo_home.h"

#include "avo_paths.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int put(char *out, size_t len, const char *a, const char *b)
{
    int n = snprintf(out, len, "%s%s", a, b);
    if (n < 0)
        return -EINVAL;
    return (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int avo_home_default(char *out, size_t len)
{
    const char *v;

    if (!out || len == 0)
        return -EINVAL;
    if ((v = nonempty_env("AVO_HOME")))
        return put(out, len, v, "");
    /* euid, not uid: a setuid or sudo'd process acts with root's files. */
    if (geteuid() == 0)
        return put(out, len, "/var/lib/avo", "");
    if ((v = nonempty_env("XDG_STATE_HOME")))
        return put(out, len, v, "/avo");
    if ((v = nonempty_env("HOME")))
        return put(out, len, v, "/.local/state/avo");
    /* Services started without an environment still have a passwd entry. */
    struct passwd *pw = getpwuid(geteuid());
    if (pw && pw->pw_dir && *pw->pw_dir)
        return put(out, len, pw->pw_dir, "/.local/state/avo");
    return -ENOENT;
}

int avo_home_path(const char *name, char *out, size_t len)
{
    char home[PATH_MAX];
    int rc = avo_home_default(home, sizeof home);
    return rc < 0 ? rc : avo_paths_join(out, len, home, name);
}
