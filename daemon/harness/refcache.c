/* The reference cache's files: the reference's outputs kept across a job's evaluations (refcache.h). */
#include "refcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "avo_file.h"
#include "avo_hash.h"

/* Format 2: the checksum's sixteen lanes (format 1 had four and ran at a
 * third of the speed: 34 ms of a cached attention output's 136 MB). A new
 * format is also a new key (avo_refcache_init), so a file of the old one is
 * never read: it ages out. */
#define MAGIC "AVOREF2\n"
#define SUM_LANES 16

typedef struct {
    char magic[8];
    uint64_t payload; /* bytes after the header */
    uint64_t sum;     /* avo_refcache_sum of them */
    uint64_t nbufs;
} header;

static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

uint64_t avo_refcache_sum(const void *const *bufs, const size_t *bytes, int n)
{
    uint64_t total = 0x243f6a8885a308d3ull;
    for (int b = 0; b < n; b++) {
        const unsigned char *p = bufs[b];
        const size_t len = bytes[b];
        /* Independent lanes: one multiply's latency is hidden behind the
         * others', so the sum runs at about memory speed. */
        uint64_t l[SUM_LANES], w[SUM_LANES];
        for (int k = 0; k < SUM_LANES; k++)
            l[k] = (uint64_t)k + 1;
        size_t i = 0;
        for (; i + sizeof w <= len; i += sizeof w) {
            memcpy(w, p + i, sizeof w);
            for (int k = 0; k < SUM_LANES; k++)
                l[k] = mix(l[k], w[k]);
        }
        memset(w, 0, sizeof w);
        memcpy(w, p + i, len - i);
        for (int k = 0; k < SUM_LANES; k++)
            total = mix(total, mix(l[k], w[k]));
        total = mix(total, (uint64_t)len);
    }
    return total;
}

/* The sha256 (hex) of a whole file. */
static int file_sha(const char *path, char out[AVO_SHA256_HEX], char *err, size_t errlen)
{
    size_t len = 0;
    char *data = avo_file_read(path, &len);
    if (!data) {
        int e = errno ? errno : EIO;
        snprintf(err, errlen, "reference cache: cannot read %s: %s", path, strerror(e));
        return -e;
    }
    int rc = avo_hash_sha256_hex(data, len, out);
    free(data);
    if (rc) {
        snprintf(err, errlen, "reference cache: cannot hash %s", path);
        return -EIO;
    }
    return 0;
}

int avo_refcache_init(avo_refcache *c, int dirfd, uint64_t max_bytes, uint64_t job_seed, const char *ref_path,
                      const char *problem_dir, const char *device, char *err, size_t errlen)
{
    char ref_sha[AVO_SHA256_HEX], spec_sha[AVO_SHA256_HEX], spec[4200], material[512];
    memset(c, 0, sizeof *c);
    c->dirfd = -1;
    snprintf(spec, sizeof spec, "%s/problem.json", problem_dir);
    int rc = file_sha(ref_path, ref_sha, err, errlen);
    if (rc || (rc = file_sha(spec, spec_sha, err, errlen)))
        return rc;
    /* Everything a reference output depends on, besides the config and
     * the set (in the name): a new reference build, spec or device is a
     * new key, so a stale file is never read. */
    int n = snprintf(material, sizeof material, "avo-ref-2\n%llu\n%s\n%s\n%s\n", (unsigned long long)job_seed, ref_sha,
                     spec_sha, device ? device : "");
    if (n < 0 || (size_t)n >= sizeof material || avo_hash_sha256_hex(material, (size_t)n, c->key)) {
        snprintf(err, errlen, "reference cache: cannot make its key");
        return -EIO;
    }
    explicit_bzero(material, sizeof material);
    c->dirfd = dirfd;
    c->max_bytes = max_bytes;
    return 0;
}

void avo_refcache_name(const avo_refcache *c, const char *config, int set, char name[AVO_REFCACHE_NAME])
{
    char material[400], hex[AVO_SHA256_HEX] = "";
    int n = snprintf(material, sizeof material, "%s\n%s\n%d\n", c->key, config, set);
    if (n < 0 || (size_t)n >= sizeof material || avo_hash_sha256_hex(material, (size_t)n, hex))
        hex[0] = 0;
    snprintf(name, AVO_REFCACHE_NAME, "%s%s", hex[0] ? hex : "invalid", AVO_REFCACHE_SUFFIX);
}

static int read_full(int fd, void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EBADMSG; /* shorter than its header says */
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* File `name` opened and its header read and checked against the file's
 * length and the buffers' sizes: *fd open on its payload. 0, or -ENOENT,
 * -EBADMSG or another negative errno (nothing left open). */
static int open_checked(const avo_refcache *c, const char *name, const size_t *bytes, int n, header *h, int *fd)
{
    *fd = -1;
    if (c->dirfd < 0)
        return -ENOENT;
    int f = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (f < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    uint64_t payload = 0;
    for (int i = 0; i < n; i++)
        payload += bytes[i];
    struct stat st;
    int rc = 0;
    if (fstat(f, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != sizeof *h + payload)
        rc = -EBADMSG;
    else if ((rc = read_full(f, h, sizeof *h)) == 0 &&
             (memcmp(h->magic, MAGIC, sizeof h->magic) != 0 || h->payload != payload || h->nbufs != (uint64_t)n))
        rc = -EBADMSG;
    if (rc)
        close(f);
    else
        *fd = f;
    return rc;
}

int avo_refcache_load(const avo_refcache *c, const char *name, void *const *bufs, const size_t *bytes, int n)
{
    header h;
    int fd, rc = open_checked(c, name, bytes, n, &h, &fd);
    if (rc)
        return rc;
    for (int i = 0; i < n && !rc; i++)
        rc = read_full(fd, bufs[i], bytes[i]);
    if (!rc && avo_refcache_sum((const void *const *)bufs, bytes, n) != h.sum)
        rc = -EBADMSG;
    if (!rc)
        futimens(fd, NULL); /* used now: the least recently used go first */
    close(fd);
    return rc;
}

int avo_refcache_map(const avo_refcache *c, const char *name, const size_t *bytes, int n, avo_refcache_mapping *m,
                     const void **bufs)
{
    m->addr = NULL;
    m->len = 0;
    header h;
    int fd, rc = open_checked(c, name, bytes, n, &h, &fd);
    if (rc)
        return rc;
    /* The file's pages as they sit in the page cache: no copy into a
     * buffer of the checker's. A private read-only mapping: a writer
     * replaces a file by renaming a new one over it and eviction unlinks,
     * so these pages never change under the reader. Populated with
     * MADV_POPULATE_READ, not MAP_POPULATE: a page that cannot be read (an
     * I/O error, a file cut short since its fstat) is then an error here,
     * not a SIGBUS in the sum or the upload, which would end the checker
     * and be reported as the candidate's crash. */
    const size_t len = sizeof h + h.payload;
    void *addr = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
        rc = -errno;
        goto out;
    }
    m->addr = addr;
    m->len = len;
    if (madvise(m->addr, m->len, MADV_POPULATE_READ) != 0) {
        /* EINVAL: a kernel before 5.14; the caller reads the file. */
        rc = errno == EINVAL ? -EOPNOTSUPP : -EIO;
        avo_refcache_unmap(m);
        goto out;
    }
    size_t off = sizeof h;
    for (int i = 0; i < n; i++) {
        bufs[i] = (const unsigned char *)m->addr + off;
        off += bytes[i];
    }
    if (avo_refcache_sum(bufs, bytes, n) != h.sum) {
        avo_refcache_unmap(m);
        rc = -EBADMSG;
        goto out;
    }
    futimens(fd, NULL);
out:
    close(fd);
    return rc;
}

void avo_refcache_unmap(avo_refcache_mapping *m)
{
    if (m->addr)
        munmap(m->addr, m->len);
    m->addr = NULL;
    m->len = 0;
}

int avo_refcache_store(const avo_refcache *c, const char *name, const void *const *bufs, const size_t *bytes, int n)
{
    if (c->dirfd < 0)
        return -EBADF;
    header h = {.payload = 0, .sum = avo_refcache_sum(bufs, bytes, n), .nbufs = (uint64_t)n};
    memcpy(h.magic, MAGIC, sizeof h.magic);
    for (int i = 0; i < n; i++)
        h.payload += bytes[i];
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = (uint64_t)getpid();
    char tmp[AVO_REFCACHE_NAME + 40];
    snprintf(tmp, sizeof tmp, "%s%016llx.%s", AVO_REFCACHE_TMP, (unsigned long long)r, name);
    int fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = avo_file_write_all(fd, &h, sizeof h);
    for (int i = 0; i < n && !rc; i++)
        rc = avo_file_write_all(fd, bufs[i], bytes[i]);
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && renameat(c->dirfd, tmp, c->dirfd, name) != 0)
        rc = -errno;
    if (rc)
        unlinkat(c->dirfd, tmp, 0);
    return rc;
}

/* The record's payload: the note in a fixed-size buffer, NUL-padded. */
#define VALID_NOTE_BYTES 512

static void valid_name(const avo_refcache *c, char name[AVO_REFCACHE_NAME])
{
    avo_refcache_name(c, "(reference validation)", -1, name);
    const size_t sl = strlen(AVO_REFCACHE_SUFFIX), len = strlen(name);
    snprintf(name + len - sl, AVO_REFCACHE_NAME - (len - sl), "%s", AVO_REFCACHE_VALID_SUFFIX);
}

int avo_refcache_validated(const avo_refcache *c, char *note, size_t notelen)
{
    char name[AVO_REFCACHE_NAME], buf[VALID_NOTE_BYTES];
    void *bufs[1] = {buf};
    const size_t bytes[1] = {sizeof buf};
    if (c->dirfd < 0)
        return 0;
    valid_name(c, name);
    if (avo_refcache_load(c, name, bufs, bytes, 1) != 0 || memchr(buf, 0, sizeof buf) == NULL || !buf[0])
        return 0;
    snprintf(note, notelen, "%s", buf);
    return 1;
}

int avo_refcache_mark_validated(const avo_refcache *c, const char *note)
{
    char name[AVO_REFCACHE_NAME], buf[VALID_NOTE_BYTES] = {0};
    const void *bufs[1] = {buf};
    const size_t bytes[1] = {sizeof buf};
    if (c->dirfd < 0)
        return -EBADF;
    snprintf(buf, sizeof buf, "%s", note);
    valid_name(c, name);
    return avo_refcache_store(c, name, bufs, bytes, 1);
}
