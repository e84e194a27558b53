/* The worker's side of the reference cache (daemon/harness/refcache.h,
 * docs/operations.md "Reference cache"): the directory <cache>/ref, owned by
 * the worker, mode 0700, hidden from every sandbox with the rest of the
 * cache and handed to the checker as an open descriptor; and its budget,
 * kept by evicting the least recently used files after each evaluation. */
#ifndef AVO_REFSTORE_H
#define AVO_REFSTORE_H

#include <stddef.h>
#include <stdint.h>

/* The worker's default budget (--ref-cache-mb). */
#define AVO_REFSTORE_DEFAULT_MB 8192

/* Temporary files older than this are a writer's that died: removed. */
#define AVO_REFSTORE_TMP_AGE_S 3600

/* <cache_dir>/ref created if missing, its mode set to 0700, opened as a
 * directory (close on exec). Returns the descriptor, or a negative errno
 * with the reason in err. */
int avo_refstore_open(const char *cache_dir, char *err, size_t errlen);

/* Remove the least recently used cache files (oldest mtime first: a read
 * marks a file used) until the rest take at most budget bytes, and dead
 * writers' temporary files. Returns how many files were removed (their
 * bytes in *freed, what is left in *kept; either may be NULL), or a
 * negative errno. */
int avo_refstore_evict(int dirfd, uint64_t budget, uint64_t *freed, uint64_t *kept);

/* "--ref-cache-mb" values: an integer in [0, 2^40) (0 turns the cache off).
 * Returns 0 with *mb, or -EINVAL. */
int avo_refstore_parse_mb(const char *s, long long *mb);

#endif
