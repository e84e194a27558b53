/* avoctl's growable NUL-terminated byte buffer, and text files read as checked JSON strings (buf.h). */
#include "buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int avoctl_buf_append(avoctl_buf *b, const void *data, size_t n, size_t limit)
{
    if (limit && (n > limit || b->len > limit - n))
        return -E2BIG;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void avoctl_buf_clear(avoctl_buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = 0;
}

void avoctl_buf_free(avoctl_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* A text file's contents as a JSON string, checked where the path is
 * known (avod only sees the text and could not name the file): readable,
 * not empty, at most limit bytes, no NUL, UTF-8. Messages start with
 * "WHAT PATH: " (e.g. "--seed mine.c: the file is empty"). */
int avoctl_buf_read_text(const char *what, const char *path, size_t limit, json_t **out, char *err, size_t errlen)
{
    avoctl_buf b = {0};
    char chunk[65536];
    size_t n;
    int rc = 0;

    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return rc;
    }
    errno = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if ((rc = avoctl_buf_append(&b, chunk, n, limit)) < 0)
            break;
    if (rc == -E2BIG) {
        rc = -EFBIG;
        if (limit >= 1u << 20)
            snprintf(err, errlen, "%s %s: larger than %zu MiB; not a text file?", what, path, limit >> 20);
        else
            snprintf(err, errlen, "%s %s: larger than %zu KiB", what, path, limit >> 10);
    } else if (rc < 0) {
        snprintf(err, errlen, "out of memory reading %s %s", what, path);
    } else if (ferror(f)) {
        rc = errno ? -errno : -EIO;
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(-rc));
    } else if (b.len == 0) {
        rc = -ENODATA;
        snprintf(err, errlen, "%s %s: the file is empty", what, path);
    } else if (memchr(b.p, 0, b.len)) {
        rc = -EILSEQ;
        snprintf(err, errlen, "%s %s: contains NUL bytes; not a text file?", what, path);
    } else if (!(*out = json_stringn(b.p, b.len))) {
        /* jansson refuses anything but UTF-8, which is what the API carries. */
        rc = -EILSEQ;
        snprintf(err, errlen, "%s %s: not UTF-8 text", what, path);
    }
    fclose(f);
    avoctl_buf_free(&b);
    return rc;
}
