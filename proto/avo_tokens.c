/* Bearer-token files read by avod and avoctl (avo_tokens.h). */
#include "avo_tokens.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int avo_tokens_load(const char *path, char tokens[][AVO_TOKEN_MAX + 1], int require_owner, char *err,
                    size_t errlen)
{
    FILE *f = fopen(path, "r");
    struct stat st;
    if (!f || fstat(fileno(f), &st) < 0) {
        int e = errno;
        snprintf(err, errlen, "token file %s: %s", path, strerror(e));
        if (f)
            fclose(f);
        return -e;
    }
    /* Checked on the open file, so what is read is what was checked. */
    if ((st.st_mode & 007) || (require_owner && st.st_uid != geteuid())) {
        fclose(f);
        snprintf(err, errlen, "token file %s: must be %snot readable by others (chmod 600)", path,
                 require_owner ? "owned by this user and " : "");
        return -EPERM;
    }
    char line[1024];
    int n = 0, lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *t = line + strspn(line, " \t");
        t[strcspn(t, "\r\n")] = 0;
        for (size_t k = strlen(t); k > 0 && (t[k - 1] == ' ' || t[k - 1] == '\t'); k--)
            t[k - 1] = 0;
        if (!*t || *t == '#')
            continue;
        if (strlen(t) < 16 || strlen(t) > AVO_TOKEN_MAX || strpbrk(t, " \t")) {
            snprintf(err, errlen, "token file %s line %d: a token is 16 to %d characters without blanks", path,
                     lineno, AVO_TOKEN_MAX);
            rc = -EINVAL;
            break;
        }
        if (n == AVO_TOKENS_MAX) {
            snprintf(err, errlen, "token file %s: more than %d tokens", path, AVO_TOKENS_MAX);
            rc = -EINVAL;
            break;
        }
        snprintf(tokens[n++], AVO_TOKEN_MAX + 1, "%s", t);
    }
    fclose(f);
    explicit_bzero(line, sizeof line);
    if (!rc && n == 0) {
        snprintf(err, errlen, "token file %s: no token in it", path);
        rc = -EINVAL;
    }
    return rc < 0 ? rc : n;
}
