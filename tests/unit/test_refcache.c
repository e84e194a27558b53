/* The reference cache's files (daemon/harness/refcache.c) and the worker's
 * side of it (daemon/worker/refstore.c): a file written is read back
 * exactly; a torn, flipped or short file is corrupt, never a hit; the names
 * depend on every input of the key and show none of them; the directory is
 * 0700; eviction removes the least recently used first, down to the
 * budget, and dead writers' temporary files; --ref-cache-mb's parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/harness/refcache.h"
#include "daemon/worker/refstore.h"

static char dir[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A problem dir (problem.json) and a "reference object". */
static void fixture(char *pdir, char *ref)
{
    sprintf(pdir, "%s/pkg", dir);
    mkdir(pdir, 0755);
    char path[200];
    sprintf(path, "%s/problem.json", pdir);
    write_file(path, "{\"spec\": 1}");
    sprintf(ref, "%s/ref.so", dir);
    write_file(ref, "object bytes");
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/avo-test-refcache-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int open_cache(avo_refcache *c, uint64_t seed, const char *device)
{
    char pdir[128], ref[128], err[300];
    fixture(pdir, ref);
    char err2[300];
    int fd = avo_refstore_open(dir, err2, sizeof err2);
    assert_true(fd >= 0);
    assert_int_equal(avo_refcache_init(c, fd, 1 << 20, seed, ref, pdir, device, err, sizeof err), 0);
    return fd;
}

/* Two outputs of different lengths to store: a[i] = i * step + offset,
 * b[i] = i * bstep. */
static void fill_outputs(float a[1000], float b[37], float step, float offset, float bstep)
{
    for (int i = 0; i < 1000; i++)
        a[i] = (float)i * step + offset;
    for (int i = 0; i < 37; i++)
        b[i] = (float)i * bstep;
}

static void test_roundtrip_and_corruption(void **state)
{
    (void)state;
    avo_refcache c;
    int fd = open_cache(&c, 42, "");
    float a[1000], b[37];
    fill_outputs(a, b, 0.5f, 0, -1);
    const void *in[2] = {a, b};
    size_t bytes[2] = {sizeof a, sizeof b};
    char name[AVO_REFCACHE_NAME];
    avo_refcache_name(&c, "64x64", (1 << 29) + 1, name);
    float ga[1000], gb[37];
    void *out[2] = {ga, gb};
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), -ENOENT);
    assert_int_equal(avo_refcache_store(&c, name, in, bytes, 2), 0);
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), 0);
    assert_memory_equal(ga, a, sizeof a);
    assert_memory_equal(gb, b, sizeof b);
    /* No temporary file left behind. */
    char path[300];
    snprintf(path, sizeof path, "ls %s/ref | grep -c '^tmp\\.' >/dev/null", dir);
    assert_int_not_equal(system(path), 0);

    /* One flipped bit in the payload: corrupt. */
    snprintf(path, sizeof path, "%s/ref/%s", dir, name);
    int f = open(path, O_RDWR);
    assert_true(f >= 0);
    unsigned char byte;
    assert_int_equal(pread(f, &byte, 1, 32 + 1234), 1);
    byte ^= 0x10;
    assert_int_equal(pwrite(f, &byte, 1, 32 + 1234), 1);
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), -EBADMSG);
    /* Rewritten: good again. */
    assert_int_equal(avo_refcache_store(&c, name, in, bytes, 2), 0);
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), 0);
    close(f);
    /* Short (a torn write), or sizes that do not match: corrupt. */
    f = open(path, O_RDWR);
    assert_int_equal(ftruncate(f, 32 + 100), 0);
    close(f);
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), -EBADMSG);
    assert_int_equal(avo_refcache_store(&c, name, in, bytes, 2), 0);
    size_t other[2] = {sizeof a - 4, sizeof b + 4};
    assert_int_equal(avo_refcache_load(&c, name, out, other, 2), -EBADMSG);
    close(fd);
}

/* The mapped read: the same contents and the same verdicts as a load,
 * and nothing left mapped after an error. */
static void test_map(void **state)
{
    (void)state;
    avo_refcache c;
    int fd = open_cache(&c, 42, "");
    float a[1000], b[37];
    fill_outputs(a, b, 0.25f, 1, -3);
    const void *in[2] = {a, b};
    size_t bytes[2] = {sizeof a, sizeof b};
    char name[AVO_REFCACHE_NAME];
    avo_refcache_name(&c, "map", 3, name);
    avo_refcache_mapping m;
    const void *got[2] = {NULL, NULL};
    assert_int_equal(avo_refcache_map(&c, name, bytes, 2, &m, got), -ENOENT);
    assert_null(m.addr);
    assert_int_equal(avo_refcache_store(&c, name, in, bytes, 2), 0);
    assert_int_equal(avo_refcache_map(&c, name, bytes, 2, &m, got), 0);
    assert_non_null(m.addr);
    assert_memory_equal(got[0], a, sizeof a);
    assert_memory_equal(got[1], b, sizeof b);
    avo_refcache_unmap(&m);
    assert_null(m.addr);
    avo_refcache_unmap(&m); /* twice: harmless */
    /* Sizes that do not match the file's (the same total, or another):
     * corrupt, nothing mapped. */
    size_t other[2] = {sizeof a + 4, sizeof b - 4}, longer[2] = {sizeof a, sizeof b + 4};
    assert_int_equal(avo_refcache_map(&c, name, other, 2, &m, got), -EBADMSG);
    assert_null(m.addr);
    assert_int_equal(avo_refcache_map(&c, name, longer, 2, &m, got), -EBADMSG);
    assert_null(m.addr);
    assert_int_equal(avo_refcache_map(&c, name, bytes, 1, &m, got), -EBADMSG);
    assert_null(m.addr);
    /* A flipped bit in the last buffer's last byte: corrupt. */
    char path[300];
    snprintf(path, sizeof path, "%s/ref/%s", dir, name);
    int f = open(path, O_RDWR);
    assert_true(f >= 0);
    unsigned char byte;
    const off_t last = 32 + (off_t)sizeof a + (off_t)sizeof b - 1;
    assert_int_equal(pread(f, &byte, 1, last), 1);
    byte ^= 0x01;
    assert_int_equal(pwrite(f, &byte, 1, last), 1);
    close(f);
    assert_int_equal(avo_refcache_map(&c, name, bytes, 2, &m, got), -EBADMSG);
    assert_null(m.addr);
    /* The load agrees. */
    float ga[1000], gb[37];
    void *out[2] = {ga, gb};
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), -EBADMSG);
    /* A file of the first format (its magic) whole and of the right
     * length: neither read nor mapped. */
    assert_int_equal(avo_refcache_store(&c, name, in, bytes, 2), 0);
    f = open(path, O_RDWR);
    assert_true(f >= 0);
    assert_int_equal(pwrite(f, "AVOREF1\n", 8, 0), 8);
    close(f);
    assert_int_equal(avo_refcache_map(&c, name, bytes, 2, &m, got), -EBADMSG);
    assert_null(m.addr);
    assert_int_equal(avo_refcache_load(&c, name, out, bytes, 2), -EBADMSG);
    close(fd);
}

/* The checksum sees a change in every lane and in the tail. */
static void test_sum_lanes(void **state)
{
    (void)state;
    unsigned char buf[16 * 8 * 3 + 5];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 7 + 1);
    const void *bufs[1] = {buf};
    size_t bytes[1] = {sizeof buf};
    const uint64_t s0 = avo_refcache_sum(bufs, bytes, 1);
    for (size_t i = 0; i < sizeof buf; i++) {
        buf[i] ^= 0x80;
        assert_true(avo_refcache_sum(bufs, bytes, 1) != s0);
        buf[i] ^= 0x80;
    }
    assert_true(avo_refcache_sum(bufs, bytes, 1) == s0);
}

static void test_names(void **state)
{
    (void)state;
    avo_refcache c1, c2, c3;
    int f1 = open_cache(&c1, 42, ""), f2 = open_cache(&c2, 43, ""), f3 = open_cache(&c3, 42, "NVIDIA H200");
    char n1[AVO_REFCACHE_NAME], n2[AVO_REFCACHE_NAME], n3[AVO_REFCACHE_NAME], n4[AVO_REFCACHE_NAME],
        n5[AVO_REFCACHE_NAME], again[AVO_REFCACHE_NAME];
    avo_refcache_name(&c1, "a", 5, n1);
    avo_refcache_name(&c2, "a", 5, n2);
    avo_refcache_name(&c3, "a", 5, n3);
    avo_refcache_name(&c1, "b", 5, n4);
    avo_refcache_name(&c1, "a", 6, n5);
    avo_refcache_name(&c1, "a", 5, again);
    assert_string_equal(n1, again);
    assert_string_not_equal(n1, n2); /* the job's seed */
    assert_string_not_equal(n1, n3); /* the device */
    assert_string_not_equal(n1, n4); /* the config */
    assert_string_not_equal(n1, n5); /* the set */
    assert_int_equal(strlen(n1), 64 + strlen(AVO_REFCACHE_SUFFIX));
    assert_int_equal(strspn(n1, "0123456789abcdef"), 64); /* a hash: nothing of the seed readable */
    /* Another reference object: another key. */
    char pdir[128], ref[128], err[300];
    fixture(pdir, ref);
    write_file(ref, "another object");
    avo_refcache c4;
    assert_int_equal(avo_refcache_init(&c4, f1, 1, 42, ref, pdir, "", err, sizeof err), 0);
    assert_string_not_equal(c4.key, c1.key);
    struct stat st;
    char path[128];
    snprintf(path, sizeof path, "%s/ref", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    close(f1);
    close(f2);
    close(f3);
}

static void make_file(int dfd, const char *name, size_t bytes, time_t mtime)
{
    int f = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(f >= 0);
    assert_int_equal(ftruncate(f, (off_t)bytes), 0);
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    assert_int_equal(futimens(f, ts), 0);
    close(f);
}

static int exists(int dfd, const char *name)
{
    return faccessat(dfd, name, F_OK, 0) == 0;
}

static void test_evict_lru(void **state)
{
    (void)state;
    char err[300];
    int fd = avo_refstore_open(dir, err, sizeof err);
    assert_true(fd >= 0);
    const time_t now = time(NULL);
    char names[4][AVO_REFCACHE_NAME];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%064d%s", i, AVO_REFCACHE_SUFFIX);
        make_file(fd, names[i], 1000, now - 100 + i * 10); /* names[0] the least recently used */
    }
    make_file(fd, "tmp.dead.ref", 500, now - 2 * AVO_REFSTORE_TMP_AGE_S);
    make_file(fd, "tmp.live.ref", 500, now);
    make_file(fd, "unrelated.txt", 9999, now - 1000);
    uint64_t freed = 0, kept = 0;
    int n = avo_refstore_evict(fd, 2500, &freed, &kept);
    assert_int_equal(n, 3); /* the two oldest, and the dead writer's */
    assert_int_equal(freed, 2500);
    assert_int_equal(kept, 2000);
    assert_false(exists(fd, names[0]));
    assert_false(exists(fd, names[1]));
    assert_true(exists(fd, names[2]));
    assert_true(exists(fd, names[3]));
    assert_false(exists(fd, "tmp.dead.ref"));
    assert_true(exists(fd, "tmp.live.ref"));
    assert_true(exists(fd, "unrelated.txt"));
    /* Within the budget: nothing goes. */
    assert_int_equal(avo_refstore_evict(fd, 1 << 20, NULL, NULL), 0);
    /* A read makes a file the most recently used. */
    avo_refcache c;
    int cf = open_cache(&c, 7, "");
    char a[64] = "x", got[64];
    const void *in[1] = {a};
    void *out[1] = {got};
    size_t bytes[1] = {sizeof a};
    char nm[AVO_REFCACHE_NAME];
    avo_refcache_name(&c, "c", 1, nm);
    assert_int_equal(avo_refcache_store(&c, nm, in, bytes, 1), 0);
    struct timespec old[2] = {{now - 500, 0}, {now - 500, 0}};
    assert_int_equal(utimensat(fd, nm, old, 0), 0);
    assert_int_equal(avo_refcache_load(&c, nm, out, bytes, 1), 0);
    assert_int_equal(avo_refstore_evict(fd, 1000 + 32 + sizeof a, NULL, NULL), 1);
    assert_true(exists(fd, nm));
    assert_true(exists(fd, names[3]));
    assert_false(exists(fd, names[2]));
    close(cf);
    close(fd);
}

static void test_parse_mb(void **state)
{
    (void)state;
    long long mb = -1;
    assert_int_equal(avo_refstore_parse_mb("0", &mb), 0);
    assert_int_equal(mb, 0);
    assert_int_equal(avo_refstore_parse_mb("8192", &mb), 0);
    assert_int_equal(mb, 8192);
    const char *bad[] = {"", "-1", "+5", "abc", "12MB", "1e3", "1099511627776", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(avo_refstore_parse_mb(bad[i], &mb), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_and_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_map, setup, teardown),
        cmocka_unit_test(test_sum_lanes),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evict_lru, setup, teardown),
        cmocka_unit_test(test_parse_mb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
