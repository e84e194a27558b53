/* A job's reference outputs held in the checker's memory across
 * evaluations (resident.h). */
#include "resident.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void avo_resident_init(avo_resident *s, uint64_t budget, avo_resident_mem mem)
{
    memset(s, 0, sizeof *s);
    s->budget = budget;
    s->mem = mem;
    s->epoch = 1;
}

void avo_resident_begin(avo_resident *s)
{
    s->epoch++;
}

static uint64_t entry_bytes(const avo_resident_entry *e)
{
    uint64_t b = 0;
    for (int i = 0; i < e->n; i++)
        b += e->bytes[i];
    return b;
}

static void entry_release(avo_resident *s, int k)
{
    avo_resident_entry *e = &s->e[k];
    for (int i = 0; i < e->n; i++)
        if (e->buf[i])
            s->mem.release(s->mem.ctx, e->buf[i]);
    s->held -= entry_bytes(e);
    s->e[k] = s->e[--s->n];
}

static int find(const avo_resident *s, const char *name)
{
    for (int k = 0; k < s->n; k++)
        if (strcmp(s->e[k].name, name) == 0)
            return k;
    return -1;
}

int avo_resident_get(avo_resident *s, const char *name, const size_t *bytes, int n, const void **bufs)
{
    const int k = find(s, name);
    if (k < 0 || s->e[k].n != n)
        return 0;
    avo_resident_entry *e = &s->e[k];
    for (int i = 0; i < n; i++)
        if (e->bytes[i] != bytes[i])
            return 0;
    for (int i = 0; i < n; i++)
        bufs[i] = e->buf[i];
    e->used = ++s->tick;
    e->epoch = s->epoch;
    s->hits++;
    return 1;
}

/* The least recently used entry of an earlier evaluation (-1: none). */
static int oldest(const avo_resident *s)
{
    int o = -1;
    for (int k = 0; k < s->n; k++)
        if (s->e[k].epoch < s->epoch && (o < 0 || s->e[k].used < s->e[o].used))
            o = k;
    return o;
}

int avo_resident_put(avo_resident *s, const char *name, const void *const *src, const size_t *bytes, int n)
{
    if (n < 0 || n > AVO_PROBLEM_MAX_TENSORS || strlen(name) >= AVO_REFCACHE_NAME)
        return -EINVAL;
    uint64_t need = 0;
    for (int i = 0; i < n; i++)
        need += bytes[i];
    if (need > s->budget)
        return -E2BIG;
    int k = find(s, name);
    if (k >= 0)
        entry_release(s, k);
    /* Room enough among earlier evaluations' entries, or none evicted. */
    uint64_t freeable = 0;
    for (int i = 0; i < s->n; i++)
        if (s->e[i].epoch < s->epoch)
            freeable += entry_bytes(&s->e[i]);
    if (s->held - freeable + need > s->budget)
        return -ENOSPC;
    while (s->held + need > s->budget) {
        entry_release(s, oldest(s));
        s->evicted++;
    }
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 16;
        avo_resident_entry *g = realloc(s->e, (size_t)cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        s->e = g;
        s->cap = cap;
    }
    avo_resident_entry e = {.n = n};
    memcpy(e.name, name, strlen(name) + 1);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        e.bytes[i] = bytes[i];
        if ((rc = s->mem.alloc(s->mem.ctx, bytes[i], &e.buf[i])) == 0)
            rc = s->mem.copy(s->mem.ctx, e.buf[i], src[i], bytes[i]);
    }
    if (rc) {
        for (int i = 0; i < n; i++)
            if (e.buf[i])
                s->mem.release(s->mem.ctx, e.buf[i]);
        s->failed++;
        return rc;
    }
    e.used = ++s->tick;
    e.epoch = s->epoch;
    s->e[s->n++] = e;
    s->held += need;
    s->stored++;
    return 0;
}

void avo_resident_clear(avo_resident *s)
{
    while (s->n > 0)
        entry_release(s, s->n - 1);
}

void avo_resident_free(avo_resident *s)
{
    avo_resident_clear(s);
    free(s->e);
    s->e = NULL;
    s->cap = 0;
}
