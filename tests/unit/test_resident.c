/* The kept checker's store of reference outputs (daemon/harness/resident.c):
 * what is put is got back exactly and only under its name and sizes; the
 * budget holds, the least recently used (a get counts as a use) going
 * first, but never one the same evaluation used (a cycle over more than
 * fits keeps what fits); outputs larger than the budget are refused with
 * nothing evicted;
 * a failed allocation or copy holds nothing and loses nothing else; a
 * name put again is replaced; clear and free release every buffer. The
 * memory here is the host's, through the same hooks a CUDA checker gives
 * device memory by. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/harness/resident.h"

/* Host memory, counting live buffers; fail_alloc / fail_copy: the n-th
 * call from now fails (0: none). */
static int live, fail_alloc, fail_copy;

static int t_alloc(void *ctx, size_t bytes, void **out)
{
    (void)ctx;
    if (fail_alloc && --fail_alloc == 0) {
        *out = NULL;
        return -ENOMEM;
    }
    *out = malloc(bytes ? bytes : 1);
    live += *out != NULL;
    return *out ? 0 : -ENOMEM;
}

static void t_release(void *ctx, void *p)
{
    (void)ctx;
    live--;
    free(p);
}

static int t_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (fail_copy && --fail_copy == 0)
        return -EIO;
    memcpy(dst, src, bytes);
    return 0;
}

static avo_resident_mem mem(void)
{
    return (avo_resident_mem){t_alloc, t_release, t_copy, NULL};
}

static int setup(void **state)
{
    (void)state;
    live = fail_alloc = fail_copy = 0;
    return 0;
}

/* An entry of two outputs (a bytes, b bytes), filled with byte v. */
static int put2(avo_resident *s, const char *name, size_t a, size_t b, int v)
{
    char *x = malloc(a), *y = malloc(b);
    memset(x, v, a);
    memset(y, v + 1, b);
    const void *src[2] = {x, y};
    const size_t bytes[2] = {a, b};
    int rc = avo_resident_put(s, name, src, bytes, 2);
    free(x);
    free(y);
    return rc;
}

/* 1 when name is held with outputs of a and b bytes filled with v, v + 1. */
static int has2(avo_resident *s, const char *name, size_t a, size_t b, int v)
{
    const size_t bytes[2] = {a, b};
    const void *bufs[2];
    if (!avo_resident_get(s, name, bytes, 2, bufs))
        return 0;
    for (size_t i = 0; i < a; i++)
        if (((const unsigned char *)bufs[0])[i] != (unsigned char)v)
            return -1;
    for (size_t i = 0; i < b; i++)
        if (((const unsigned char *)bufs[1])[i] != (unsigned char)(v + 1))
            return -1;
    return 1;
}

static void put_get_exact(void **state)
{
    (void)state;
    avo_resident s;
    avo_resident_init(&s, 1000, mem());
    assert_int_equal(put2(&s, "a", 100, 10, 7), 0);
    assert_int_equal(has2(&s, "a", 100, 10, 7), 1);
    assert_int_equal(has2(&s, "b", 100, 10, 7), 0); /* another name */
    assert_int_equal(has2(&s, "a", 100, 11, 7), 0); /* other sizes: another computation */
    const size_t one[1] = {100};
    const void *b1[1];
    assert_int_equal(avo_resident_get(&s, "a", one, 1, b1), 0); /* another count */
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.held, 110);
    assert_int_equal(live, 2);
    /* Put again: replaced, not doubled. */
    assert_int_equal(put2(&s, "a", 100, 10, 9), 0);
    assert_int_equal(has2(&s, "a", 100, 10, 9), 1);
    assert_int_equal(s.held, 110);
    assert_int_equal(live, 2);
    avo_resident_free(&s);
    assert_int_equal(live, 0);
}

static void budget_lru(void **state)
{
    (void)state;
    avo_resident s;
    avo_resident_init(&s, 300, mem());
    assert_int_equal(put2(&s, "a", 90, 10, 1), 0);
    assert_int_equal(put2(&s, "b", 90, 10, 2), 0);
    assert_int_equal(put2(&s, "c", 90, 10, 3), 0);
    assert_int_equal(s.held, 300);
    /* Within the evaluation that put them, none is evicted for another. */
    assert_int_equal(put2(&s, "x", 90, 10, 9), -ENOSPC);
    assert_int_equal(s.evicted, 0);
    avo_resident_begin(&s);
    /* a used last: b is the least recently used and goes for d. */
    assert_int_equal(has2(&s, "a", 90, 10, 1), 1);
    assert_int_equal(put2(&s, "d", 90, 10, 4), 0);
    assert_int_equal(has2(&s, "b", 90, 10, 2), 0);
    assert_int_equal(has2(&s, "a", 90, 10, 1), 1);
    assert_int_equal(has2(&s, "c", 90, 10, 3), 1);
    assert_int_equal(has2(&s, "d", 90, 10, 4), 1);
    assert_int_equal(s.evicted, 1);
    assert_true(s.held <= s.budget);
    /* A larger one takes two places: not while all are this evaluation's;
     * in the next, the two least recently used go. */
    assert_int_equal(put2(&s, "e", 150, 10, 5), -ENOSPC);
    assert_int_equal(s.evicted, 1);
    avo_resident_begin(&s);
    assert_int_equal(put2(&s, "e", 150, 10, 5), 0);
    assert_int_equal(s.evicted, 3);
    assert_int_equal(has2(&s, "d", 90, 10, 4), 1);
    assert_int_equal(has2(&s, "e", 150, 10, 5), 1);
    assert_true(s.held <= s.budget);
    avo_resident_free(&s);
    assert_int_equal(live, 0);
}

/* Evaluations walking three configurations through a store with room for
 * two: the first two stay and hit in every later evaluation, the third
 * misses, and nothing is evicted (least recently used over a cycle would
 * evict the one needed next and miss every time). */
static void cyclic_keeps_what_fits(void **state)
{
    (void)state;
    avo_resident s;
    avo_resident_init(&s, 250, mem());
    int hits = 0;
    for (int ev = 0; ev < 4; ev++) {
        avo_resident_begin(&s);
        const char *names[] = {"c1", "c2", "c3"};
        for (int c = 0; c < 3; c++) {
            int h = has2(&s, names[c], 90, 10, c);
            assert_true(h >= 0);
            hits += h;
            if (!h)
                (void)put2(&s, names[c], 90, 10, c);
        }
    }
    assert_int_equal(hits, 6); /* c1 and c2 in each of the three later evaluations */
    assert_int_equal(s.evicted, 0);
    avo_resident_free(&s);
    assert_int_equal(live, 0);
}

static void too_big_evicts_nothing(void **state)
{
    (void)state;
    avo_resident s;
    avo_resident_init(&s, 300, mem());
    assert_int_equal(put2(&s, "a", 90, 10, 1), 0);
    assert_int_equal(put2(&s, "big", 300, 1, 2), -E2BIG);
    assert_int_equal(has2(&s, "a", 90, 10, 1), 1);
    assert_int_equal(s.evicted, 0);
    avo_resident_free(&s);
    /* Budget 0: holds nothing. */
    avo_resident_init(&s, 0, mem());
    assert_int_equal(put2(&s, "a", 1, 1, 1), -E2BIG);
    assert_int_equal(live, 0);
    avo_resident_free(&s);
}

static void failures_hold_nothing(void **state)
{
    (void)state;
    avo_resident s;
    avo_resident_init(&s, 1000, mem());
    assert_int_equal(put2(&s, "a", 100, 10, 1), 0);
    fail_alloc = 2; /* the second output's allocation */
    assert_int_equal(put2(&s, "b", 100, 10, 2), -ENOMEM);
    assert_int_equal(has2(&s, "b", 100, 10, 2), 0);
    assert_int_equal(live, 2);
    fail_copy = 1;
    assert_int_equal(put2(&s, "c", 100, 10, 3), -EIO);
    assert_int_equal(has2(&s, "c", 100, 10, 3), 0);
    assert_int_equal(live, 2);
    assert_int_equal(s.failed, 2);
    assert_int_equal(has2(&s, "a", 100, 10, 1), 1);
    assert_int_equal(s.held, 110);
    avo_resident_clear(&s);
    assert_int_equal(live, 0);
    assert_int_equal(s.held, 0);
    /* Still usable after a clear. */
    assert_int_equal(put2(&s, "a", 5, 5, 1), 0);
    assert_int_equal(has2(&s, "a", 5, 5, 1), 1);
    avo_resident_free(&s);
    assert_int_equal(live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(put_get_exact, setup),          cmocka_unit_test_setup(budget_lru, setup),
        cmocka_unit_test_setup(cyclic_keeps_what_fits, setup), cmocka_unit_test_setup(too_big_evicts_nothing, setup),
        cmocka_unit_test_setup(failures_hold_nothing, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
