/* Bearer-token files, read by avod (its TCP listener's tokens) and by
 * avoctl (the token it sends): one token per line, blank lines and '#'
 * comments skipped, each 16 to AVO_TOKEN_MAX characters without blanks. A
 * token file is a password file: it must not be readable by others. */
#ifndef AVO_TOKENS_H
#define AVO_TOKENS_H

#include <stddef.h>

#define AVO_TOKEN_MAX 255
/* Tokens at once in one file (old and new during a rotation). */
#define AVO_TOKENS_MAX 8

/* Read path into tokens (at most AVO_TOKENS_MAX). require_owner: the file
 * must also belong to the effective user (avod: its own access control).
 * Returns how many (at least one), or a negative int with the reason in
 * err. Never puts a token in err. */
int avo_tokens_load(const char *path, char tokens[][AVO_TOKEN_MAX + 1], int require_owner, char *err,
                    size_t errlen);

#endif
