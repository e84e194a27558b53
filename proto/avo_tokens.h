/* Bearer-token files, read by avod (its TCP listener's tokens) and by
 * avoctl (the token it sends). One token per line, blank lines and '#'
 * comments skipped; a token is 16 to AVO_TOKEN_MAX characters without
 * blanks. After the token, blank-separated attributes say who holds it:
 *
 *     TOKEN principal=alice team=ml admin
 *
 * principal=NAME and team=NAME are names of 1 to AVO_PRINCIPAL_MAX
 * characters [A-Za-z0-9._-] starting with a letter or digit; "admin" marks
 * an administrator token. team= and admin need principal=. A bare token
 * line (the format before principals) still works: its holder is the
 * principal "anonymous", in no team, not an admin. Whether a team is known
 * is avod's business (ident.h), not this parser's. A token file is a
 * password file: it must not be readable by others. */
#ifndef AVO_TOKENS_H
#define AVO_TOKENS_H

#include <stddef.h>

#define AVO_TOKEN_MAX 255
/* Tokens at once in one file (old and new during a rotation, several people). */
#define AVO_TOKENS_MAX 64
#define AVO_PRINCIPAL_MAX 63

typedef struct {
    char token[AVO_TOKEN_MAX + 1];
    char principal[AVO_PRINCIPAL_MAX + 1]; /* "" on a bare line */
    char team[AVO_PRINCIPAL_MAX + 1];      /* "" = none */
    int admin;
    int line; /* in the file, for messages */
} avo_token;

/* Read path into tokens (at most AVO_TOKENS_MAX). require_owner: the file
 * must also belong to the effective user (avod: its own access control).
 * Returns how many (at least one), or a negative int with the reason, the
 * file and the line in err. Never puts a token in err. */
int avo_tokens_load(const char *path, avo_token *tokens, int require_owner, char *err, size_t errlen);

/* 1 when s is a valid principal or team name (see above), else 0. */
int avo_tokens_principal_name_ok(const char *s);

#endif
