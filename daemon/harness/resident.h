/* A job's reference outputs held in the checker's own memory from one
 * evaluation to the next (avo-harness --serve; docs/evaluation.md, "Input
 * sets"). The reference cache's files (refcache.h) outlive the checker
 * but cost every evaluation a read, a checksum and (CUDA) an upload per
 * warm-up set: 30 ms for each of attention's 136 MB sets on an H100. A kept
 * checker holds what it read or computed instead, in device memory for a
 * CUDA checker and host memory otherwise, bounded by a budget, the least
 * recently used set going first.
 *
 * An entry is named by its cache file's name (the hash of the job's seed,
 * the reference, the spec, the device, the configuration and the set) and
 * holds the reference's outputs one after another. Only the checker writes
 * one: from the reference it has just run, or from a cache file that passed
 * its checksum. The memory is the checker's alone (device memory of its own
 * context, never exported to a runner), and it goes with the kept state:
 * another job, reference or problem releases it (keep.c). */
#ifndef AVO_HARNESS_RESIDENT_H
#define AVO_HARNESS_RESIDENT_H

#include <stddef.h>
#include <stdint.h>

#include "avo_problem.h"
#include "refcache.h"

/* Where the entries live: alloc returns 0 with *out or a negative int;
 * copy copies bytes from src (the reference's outputs where the checker
 * has them) to dst (the store's); 0 or a negative int. ctx is theirs. */
typedef struct {
    int (*alloc)(void *ctx, size_t bytes, void **out);
    void (*release)(void *ctx, void *p);
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    void *ctx;
} avo_resident_mem;

typedef struct {
    char name[AVO_REFCACHE_NAME];
    int n;
    void *buf[AVO_PROBLEM_MAX_TENSORS];
    size_t bytes[AVO_PROBLEM_MAX_TENSORS];
    uint64_t used;  /* the tick of its latest get or put */
    uint64_t epoch; /* the evaluation (avo_resident_begin) of its latest get or put */
} avo_resident_entry;

typedef struct {
    avo_resident_mem mem;
    uint64_t budget, held, tick, epoch;
    avo_resident_entry *e;
    int n, cap;
    int hits, stored, evicted, failed; /* since init */
} avo_resident;

/* An empty store of at most budget bytes (0: holds nothing), in its first
 * evaluation. */
void avo_resident_init(avo_resident *s, uint64_t budget, avo_resident_mem mem);

/* The next evaluation begins: what the last one used may be evicted now.
 * Within an evaluation nothing it got or put is evicted for another entry
 * (an evaluation walks its configurations in order: evicting the least
 * recently used of a working set larger than the budget would miss every
 * time; this keeps what fits and misses the rest). */
void avo_resident_begin(avo_resident *s);

/* The entry `name` with n outputs of exactly bytes[i] each: 1 with bufs[i]
 * pointing at them (the store's memory: valid until the next put or
 * release), else 0. A hit is the most recently used entry from then on. */
int avo_resident_get(avo_resident *s, const char *name, const size_t *bytes, int n, const void **bufs);

/* Hold the n outputs src[i] (bytes[i] each, copied by mem.copy) as
 * `name`, replacing an entry of that name, the least recently used of the
 * entries no get or put of this evaluation touched going first while the
 * store would exceed its budget. 0; -E2BIG when they alone exceed the
 * budget, -ENOSPC when only this evaluation's entries could make room
 * (nothing evicted either way); or the allocation's or the copy's negative
 * int (the entry not held, nothing else lost). */
int avo_resident_put(avo_resident *s, const char *name, const void *const *src, const size_t *bytes, int n);

/* Every entry released; the store stays usable. */
void avo_resident_clear(avo_resident *s);

/* Every entry released and the store's own memory freed. */
void avo_resident_free(avo_resident *s);

#endif
