/* A growable byte buffer, always NUL-terminated so text can be used in place.
 * Zero-initialise it; avoctl_buf_free() is its one release function. */
#ifndef AVOCTL_BUF_H
#define AVOCTL_BUF_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    char *p;
    size_t len;
    size_t cap;
} avoctl_buf;

/* Append n bytes. Returns 0, -ENOMEM, or -E2BIG when len would pass limit
 * (0 = no limit): peers are not trusted to bound their own output. */
int avoctl_buf_append(avoctl_buf *b, const void *data, size_t n, size_t limit);
void avoctl_buf_clear(avoctl_buf *b);
void avoctl_buf_free(avoctl_buf *b);

/* A text file's contents as a JSON string, checked where the path is known:
 * readable, not empty, at most limit bytes, no NUL, UTF-8. Returns 0 or a
 * negative errno with "WHAT PATH: reason" in err (WHAT: "--seed", ...). */
int avoctl_buf_read_text(const char *what, const char *path, size_t limit, json_t **out, char *err, size_t errlen);

#endif
