/* Bearer-token files read by avod and avoctl (avo_tokens.h). */
#include "avo_tokens.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int avo_tokens_principal_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > AVO_PRINCIPAL_MAX || !isalnum((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
            return 0;
    return 1;
}

/* The attributes after the token on one line (t: the rest of the line). */
static int parse_attrs(char *t, avo_token *tok, const char *path, int lineno, char *err, size_t errlen)
{
    char *save = NULL;
    for (char *w = strtok_r(t, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *val = NULL;
        if (!strncmp(w, "principal=", 10))
            val = tok->principal, w += 10;
        else if (!strncmp(w, "team=", 5))
            val = tok->team, w += 5;
        else if (!strcmp(w, "admin")) {
            tok->admin = 1;
            continue;
        } else {
            char shown[40];
            snprintf(shown, sizeof shown, "%.*s", (int)strcspn(w, "="), w);
            snprintf(err, errlen,
                     "token file %s line %d: unknown attribute '%s' (expected principal=NAME, team=NAME, admin)", path,
                     lineno, shown);
            return -EINVAL;
        }
        if (*val) {
            snprintf(err, errlen, "token file %s line %d: %s given twice", path, lineno,
                     val == tok->team ? "team=" : "principal=");
            return -EINVAL;
        }
        if (!avo_tokens_principal_name_ok(w)) {
            snprintf(err, errlen,
                     "token file %s line %d: %s: a name is 1 to %d characters A-Z a-z 0-9 . _ - starting with a "
                     "letter or digit",
                     path, lineno, val == tok->team ? "team=" : "principal=", AVO_PRINCIPAL_MAX);
            return -EINVAL;
        }
        snprintf(val, AVO_PRINCIPAL_MAX + 1, "%s", w);
    }
    if ((tok->team[0] || tok->admin) && !tok->principal[0]) {
        snprintf(err, errlen, "token file %s line %d: %s needs principal=NAME", path, lineno,
                 tok->team[0] ? "team=" : "admin");
        return -EINVAL;
    }
    return 0;
}

int avo_tokens_load(const char *path, avo_token *tokens, int require_owner, char *err, size_t errlen)
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
        if (!*t || *t == '#')
            continue;
        size_t tl = strcspn(t, " \t");
        if (tl < 16 || tl > AVO_TOKEN_MAX) {
            snprintf(err, errlen, "token file %s line %d: a token is 16 to %d characters without blanks", path, lineno,
                     AVO_TOKEN_MAX);
            rc = -EINVAL;
            break;
        }
        if (n == AVO_TOKENS_MAX) {
            snprintf(err, errlen, "token file %s line %d: more than %d tokens", path, lineno, AVO_TOKENS_MAX);
            rc = -EINVAL;
            break;
        }
        avo_token *tok = &tokens[n];
        memset(tok, 0, sizeof *tok);
        tok->line = lineno;
        memcpy(tok->token, t, tl);
        if ((rc = parse_attrs(t + tl, tok, path, lineno, err, errlen)) < 0)
            break;
        for (int i = 0; i < n; i++)
            if (!strcmp(tokens[i].token, tok->token)) {
                snprintf(err, errlen, "token file %s line %d: the same token as line %d", path, lineno, tokens[i].line);
                rc = -EINVAL;
            }
        if (rc < 0)
            break;
        n++;
    }
    fclose(f);
    explicit_bzero(line, sizeof line);
    if (rc < 0)
        explicit_bzero(tokens, sizeof *tokens * (size_t)(n + (n < AVO_TOKENS_MAX)));
    if (!rc && n == 0) {
        snprintf(err, errlen, "token file %s: no token in it", path);
        rc = -EINVAL;
    }
    return rc < 0 ? rc : n;
}
