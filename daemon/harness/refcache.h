/* The reference cache's files (docs/evaluation.md, "Input sets"; docs/operations.md,
 * "Reference cache"): the reference's outputs on one of a job's warm-up
 * input sets, kept by the worker under <cache>/ref/ across the job's
 * evaluations so each is computed once. The checker (avo-harness) reads and
 * writes them through a directory descriptor the worker hands it (the
 * directory itself is hidden from the sandbox, and the runner never holds
 * the descriptor); the worker evicts them (least recently used first)
 * after each evaluation.
 *
 * A file's name is the sha256 of everything its contents depend on (the
 * job's seed, the reference object, the problem's spec, the device, the
 * configuration and the set) plus AVO_REFCACHE_SUFFIX, so it says nothing of
 * the seed. Its contents: a header (magic, payload length, a checksum of the
 * payload) and the reference's non-input tensors one after another. A file
 * whose length or checksum is wrong is reported as corrupt (the caller
 * recomputes and writes it again). Written to a temporary name (prefix
 * AVO_REFCACHE_TMP) and renamed into place, so a reader never sees half a
 * file. */
#ifndef AVO_REFCACHE_H
#define AVO_REFCACHE_H

#include <stddef.h>
#include <stdint.h>

#define AVO_REFCACHE_SUFFIX ".ref"
#define AVO_REFCACHE_VALID_SUFFIX ".valid" /* a validation record (avo_refcache_validated) */
#define AVO_REFCACHE_TMP "tmp."
#define AVO_REFCACHE_NAME 72 /* 64 hex digits, the suffix, NUL */

typedef struct {
    int dirfd;          /* -1: no cache */
    uint64_t max_bytes; /* what one configuration's files may take together (else not cached) */
    char key[65];       /* sha256 hex of the job's seed, the reference object, the spec and the device */
} avo_refcache;

/* The cache in directory dirfd for one evaluation: its key from the job's
 * seed, the reference object (ref_path, read whole), the problem's spec
 * (problem_dir/problem.json) and device (a GPU's name; "" on a CPU).
 * Returns 0, or a negative errno with the reason in err. */
int avo_refcache_init(avo_refcache *c, int dirfd, uint64_t max_bytes, uint64_t job_seed, const char *ref_path,
                      const char *problem_dir, const char *device, char *err, size_t errlen);

/* The file name of configuration `config`'s input set `set`. */
void avo_refcache_name(const avo_refcache *c, const char *config, int set, char name[AVO_REFCACHE_NAME]);

/* Read file `name` into the n buffers (bytes[i] each, in order). Returns 0
 * (and marks the file used now: its mtime, which eviction reads), -ENOENT
 * when there is none, -EBADMSG when it is corrupt (wrong length, magic or
 * checksum), another negative errno on a read error. */
int avo_refcache_load(const avo_refcache *c, const char *name, void *const *bufs, const size_t *bytes, int n);

/* A file mapped read-only in place (avo_refcache_map). */
typedef struct {
    void *addr; /* NULL: nothing mapped */
    size_t len;
} avo_refcache_mapping;

/* File `name` mapped instead of read (for a caller that only copies the
 * buffers elsewhere, such as a CUDA checker uploading them): the same
 * checks and results as avo_refcache_load, and on 0 bufs[i] point into
 * the mapping (bytes[i] each) until avo_refcache_unmap(m). Also -EIO when
 * a page could not be read in, and -EOPNOTSUPP where the kernel cannot
 * populate a mapping (before 5.14: read the file with avo_refcache_load).
 * On an error nothing stays mapped. */
int avo_refcache_map(const avo_refcache *c, const char *name, const size_t *bytes, int n, avo_refcache_mapping *m,
                     const void **bufs);
void avo_refcache_unmap(avo_refcache_mapping *m);

/* Write the n buffers as file `name` (a temporary file renamed into place).
 * Returns 0 or a negative errno. */
int avo_refcache_store(const avo_refcache *c, const char *name, const void *const *bufs, const size_t *bytes, int n);

/* The reference's validation against its float64 twin (docs/evaluation.md,
 * "Reference validation") kept for the key's later evaluations: a file
 * named by the hash of the key (AVO_REFCACHE_VALID_SUFFIX, evicted with the
 * outputs) holding the validation's note, in the format above.
 * avo_refcache_validated: 1 with the note when the record is there and
 * whole, else 0 (none, corrupt, unreadable: the caller validates again).
 * avo_refcache_mark_validated: write it; 0 or a negative errno. */
int avo_refcache_validated(const avo_refcache *c, char *note, size_t notelen);
int avo_refcache_mark_validated(const avo_refcache *c, const char *note);

/* The payload's checksum (64 bits, sixteen interleaved multiply-xor lanes: it
 * finds a torn or flipped file at memory speed; the candidate cannot reach
 * the files, so it need not resist forgery). */
uint64_t avo_refcache_sum(const void *const *bufs, const size_t *bytes, int n);

#endif
