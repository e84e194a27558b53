#include "buf.h"

#include <errno.h>
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
