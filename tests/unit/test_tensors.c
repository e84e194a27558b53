/* The harness's input fill (daemon/harness/tensors.c): a tensor large
 * enough to be filled by several threads holds exactly the sequential
 * ChaCha20 keystream the recorded seed names, element by element, so a
 * result stays reproducible from its seed whatever the number of CPUs;
 * a tensor's "scale" stretches the range; a comparison split across
 * threads reports what a sequential pass would (the first non-finite
 * element, else the first element of the largest error). Run from the
 * repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>

#include "avo_problem.h"
#include "daemon/harness/tensors.h"

/* The stream as the docs define it, computed here in one pass: ChaCha20,
 * key SHA-256("avo-inputs-v2" padded to 16 bytes, then the seed's 8 bytes
 * little-endian), nonce (config + 1, set + 1, tensor + 1), 4 bytes an
 * element. */
static void keystream(uint64_t seed, int config, int set, int tensor, unsigned char *out, size_t n)
{
    unsigned char in[24] = "avo-inputs-v2", key[32], iv[16] = {0};
    for (int b = 0; b < 8; b++)
        in[16 + b] = (unsigned char)(seed >> (8 * b));
    unsigned int len = 32;
    EVP_Digest(in, sizeof in, key, &len, EVP_sha256(), NULL);
    const uint32_t w[3] = {(uint32_t)config + 1, (uint32_t)set + 1, (uint32_t)tensor + 1};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++)
            iv[4 + 4 * i + b] = (unsigned char)(w[i] >> (8 * b));
    unsigned char *zero = calloc(1, n);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int got = 0;
    assert_int_equal(EVP_EncryptInit_ex(ctx, EVP_chacha20(), NULL, key, iv), 1);
    assert_int_equal(EVP_EncryptUpdate(ctx, out, &got, zero, (int)n), 1);
    EVP_CIPHER_CTX_free(ctx);
    free(zero);
}

static void test_parallel_fill_is_the_sequential_stream(void **state)
{
    (void)state;
    avo_problem p;
    char err[512] = "";
    if (avo_problem_load(&p, "kernels/cpu/sgemm", err, sizeof err))
        fail_msg("%s", err);
    const int64_t size[] = {2500, 7, 2100}; /* A: 5.25M floats */
    avo_tensors t = {0};
    if (avo_tensors_alloc_at(&t, &p, size, -1, err, sizeof err))
        fail_msg("%s", err);
    const uint64_t seed = 0x1234abcdULL;
    avo_tensors_set_workers(NULL, 7, 1000); /* seven shares whatever the CPUs */
    avo_tensors_fill(&t, &p, seed, 3, 1);
    avo_tensors_set_workers(NULL, 0, 0);
    for (int i = 0; i < 2; i++) {
        unsigned char *ks = malloc((size_t)t.elems[i] * 4);
        keystream(seed, 3, 1, i, ks, (size_t)t.elems[i] * 4);
        const float *got = t.ptr[i];
        for (int64_t e = 0; e < t.elems[i]; e++) {
            uint32_t w;
            memcpy(&w, ks + 4 * e, 4); /* little-endian host */
            const float want = (float)((double)(w >> 8) * 0x1.0p-24 * 2.0 - 1.0);
            if (memcmp(&got[e], &want, sizeof want) != 0)
                fail_msg("tensor %d element %lld: %.9g, the stream gives %.9g", i, (long long)e, got[e], want);
        }
        free(ks);
    }
    /* Another set or another seed: other data. */
    avo_tensors u = {0};
    if (avo_tensors_alloc_at(&u, &p, size, -1, err, sizeof err))
        fail_msg("%s", err);
    avo_tensors_fill(&u, &p, seed, 3, 2);
    assert_true(memcmp(t.ptr[0], u.ptr[0], 1024) != 0);
    avo_tensors_fill(&u, &p, seed + 1, 3, 1);
    assert_true(memcmp(t.ptr[0], u.ptr[0], 1024) != 0);
    avo_tensors_free(&u);
    avo_tensors_free(&t);
    avo_problem_free(&p);
}

static void test_scale(void **state)
{
    (void)state;
    avo_problem p;
    char err[512] = "";
    if (avo_problem_load(&p, "kernels/cpu/sgemm", err, sizeof err))
        fail_msg("%s", err);
    p.tensors[0].scale = 4.0;
    const int64_t size[] = {1000, 10, 1000};
    avo_tensors t = {0};
    if (avo_tensors_alloc_at(&t, &p, size, -1, err, sizeof err))
        fail_msg("%s", err);
    avo_tensors_fill(&t, &p, 7, 0, 0);
    float lo = 0, hi = 0, lo1 = 0, hi1 = 0;
    for (int64_t e = 0; e < t.elems[0]; e++) {
        const float v = ((float *)t.ptr[0])[e], w = ((float *)t.ptr[1])[e % t.elems[1]];
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        lo1 = w < lo1 ? w : lo1, hi1 = w > hi1 ? w : hi1;
    }
    assert_true(lo >= -4.0f && lo < -3.99f && hi < 4.0f && hi > 3.99f);
    assert_true(lo1 >= -1.0f && lo1 < -0.99f && hi1 < 1.0f && hi1 > 0.99f);
    avo_tensors_free(&t);
    avo_problem_free(&p);
}

static void test_split_compare(void **state)
{
    (void)state;
    avo_tensors_set_workers(NULL, 7, 1000); /* seven shares whatever the CPUs */
    const int64_t n = 5 * 1000 * 1000;
    float *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
    assert_non_null(got);
    assert_non_null(want);
    double num = 0, den = 0;
    for (int64_t e = 0; e < n; e++) {
        want[e] = (float)((e % 1000) - 500) / 250.0f;
        got[e] = want[e] + ((e % 7) == 0 ? 1e-3f : 0.0f);
    }
    /* The largest error twice, late: the first of them is the worst. */
    got[1000001] = want[1000001] + 0.5f;
    got[4900000] = want[4900000] + 0.5f;
    for (int64_t e = 0; e < n; e++) {
        const double d = (double)got[e] - want[e];
        num += d * d;
        den += (double)want[e] * want[e];
    }
    avo_tolerance tol = {.rel_l2 = 1e-2, .max_abs = 1.0};
    avo_check c;
    avo_tensors_compare(got, want, n, AVO_DTYPE_F32, tol, &c);
    assert_int_equal(c.worst, 1000001);
    assert_true(fabs(c.max_abs - 0.5) < 1e-6 && !c.nonfinite && c.pass);
    assert_true(fabs(c.rel_l2 - sqrt(num) / sqrt(den)) < 1e-9 * c.rel_l2);
    /* A NaN in the reference at the first element of a share: the rest of
     * that share still counts (the largest error, later, is reported). */
    const int64_t share1 = n / 7;
    want[share1] = NAN;
    got[share1 + 10] = want[share1 + 10] + 0.75f;
    avo_tensors_compare(got, want, n, AVO_DTYPE_F32, tol, &c);
    assert_int_equal(c.worst, share1 + 10);
    assert_true(fabs(c.max_abs - 0.75) < 1e-6 && !c.pass);
    want[share1] = 0.0f;
    /* Non-finite elements in two shares: the first is reported. */
    got[4500000] = NAN;
    got[2 * share1 + 5] = INFINITY;
    avo_tensors_compare(got, want, n, AVO_DTYPE_F32, tol, &c);
    assert_true(c.nonfinite && !c.pass && isinf(c.rel_l2));
    assert_int_equal(c.worst, 2 * share1 + 5);
    avo_tensors_set_workers(NULL, 0, 0);
    free(got);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_fill_is_the_sequential_stream),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_split_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
