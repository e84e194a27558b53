/* On a GPU host: the device comparisons (daemon/gpu/avo_compare.h) against
 * the rule the host applies, element by element. avo_compare_equal finds
 * the first differing element of two buffers (a candidate that changed its
 * inputs): aligned buffers go a 16-byte word at a time, with a tail and an
 * unaligned pair element by element. Each case below flips bytes at known
 * places and wants the first of their elements back; a comparison that
 * misses one, or names a later one, fails. avo_compare_run is checked
 * against the host's sums. Prints "ok - ..." / "not ok - ..." lines and
 * exits 1 if any failed.
 *   build/tests/gpu/test_compare */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "avo_compare.h"

static int fails, passes;

static void report(int ok, const char *what)
{
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
    ok ? passes++ : fails++;
}

/* a and b: bytes + 32 on the device each; the pair compared starts at
 * offset off (a) and off (b) of them. */
static int64_t first_diff(unsigned char *da, unsigned char *db, const unsigned char *ha, const unsigned char *hb,
                          size_t bytes, size_t off, size_t es, void *scratch)
{
    if (cudaMemcpy(da, ha, bytes + 32, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(db, hb, bytes + 32, cudaMemcpyHostToDevice) != cudaSuccess)
        return -2;
    int64_t first = -3;
    if (avo_compare_equal(da + off, db + off, (int64_t)(bytes / es), es, scratch, 0, &first) != 0)
        return -2;
    return first;
}

static void equal_cases(void)
{
    const size_t sizes[] = {0, 2, 14, 16, 18, 30, 32, 48, 4096 + 6, (size_t)3 << 20, ((size_t)3 << 20) + 10};
    const size_t ess[] = {1, 2, 4, 8};
    const size_t offs[] = {0, 2, 16};
    size_t maxb = ((size_t)3 << 20) + 64;
    unsigned char *ha = (unsigned char *)malloc(maxb + 32), *hb = (unsigned char *)malloc(maxb + 32);
    unsigned char *da = NULL, *db = NULL;
    void *scratch = NULL;
    if (!ha || !hb || cudaMalloc(&da, maxb + 32) != cudaSuccess || cudaMalloc(&db, maxb + 32) != cudaSuccess ||
        cudaMalloc(&scratch, avo_compare_scratch_bytes() + 64) != cudaSuccess) {
        report(0, "avo_compare_equal: buffers");
        return;
    }
    for (size_t i = 0; i < maxb + 32; i++)
        ha[i] = (unsigned char)(i * 131 + 7);
    int wrong = 0, cases = 0;
    char what[300] = "";
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t e = 0; e < sizeof ess / sizeof *ess; e++)
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++) {
                const size_t es = ess[e], off = offs[o], bytes = sizes[s] / es * es;
                if (off % es)
                    continue;
                /* Equal, apart from bytes past the end that must not count. */
                memcpy(hb, ha, maxb + 32);
                hb[off + bytes] ^= 1;
                int64_t got = first_diff(da, db, ha, hb, bytes, off, es, scratch);
                cases++;
                if (got != -1 && !wrong++)
                    snprintf(what, sizeof what, "equal %zu bytes (es %zu, offset %zu): %lld", bytes, es, off,
                             (long long)got);
                /* One byte, then a second later one: the first flipped wins. */
                const size_t at[] = {0, 1, 15, 16, 17, bytes / 2, bytes - 1};
                for (size_t k = 0; k < sizeof at / sizeof *at && bytes; k++) {
                    if (at[k] >= bytes)
                        continue;
                    memcpy(hb, ha, maxb + 32);
                    hb[off + at[k]] ^= 0x80;
                    if (at[k] + 37 < bytes)
                        hb[off + at[k] + 37] ^= 1;
                    got = first_diff(da, db, ha, hb, bytes, off, es, scratch);
                    cases++;
                    if (got != (int64_t)(at[k] / es) && !wrong++)
                        snprintf(what, sizeof what, "%zu bytes (es %zu, offset %zu), byte %zu flipped: %lld, not %zu",
                                 bytes, es, off, at[k], (long long)got, at[k] / es);
                }
            }
    char line[400];
    snprintf(line, sizeof line, "avo_compare_equal: the first differing element in %d cases (aligned words, tails, "
                                "unaligned pairs, 1-8 byte elements)%s%s", cases, wrong ? "; first wrong: " : "", what);
    report(!wrong, line);
    cudaFree(da);
    cudaFree(db);
    cudaFree(scratch);
    free(ha);
    free(hb);
}

/* avo_compare_run on f32: the sums and the worst element as the host's. */
static void run_case(void)
{
    const int64_t n = 100003;
    float *h = (float *)malloc(2 * n * sizeof *h), *dg = NULL, *dw = NULL;
    void *scratch = NULL;
    if (!h || cudaMalloc(&dg, n * sizeof *dg) != cudaSuccess || cudaMalloc(&dw, n * sizeof *dw) != cudaSuccess ||
        cudaMalloc(&scratch, avo_compare_scratch_bytes() + 64) != cudaSuccess) {
        report(0, "avo_compare_run: buffers");
        return;
    }
    float *got = h, *want = h + n;
    double num = 0, den = 0, mx = 0;
    int64_t worst = -1;
    for (int64_t i = 0; i < n; i++) {
        want[i] = (float)sin((double)i);
        got[i] = want[i] + (float)((i % 97) * 1e-6);
        const double d = fabs((double)got[i] - want[i]);
        num += d * d;
        den += (double)want[i] * want[i];
        if (worst < 0 || d > mx)
            mx = d, worst = i;
    }
    avo_compare_sums s;
    const int rc = cudaMemcpy(dg, got, n * sizeof *dg, cudaMemcpyHostToDevice) == cudaSuccess &&
                           cudaMemcpy(dw, want, n * sizeof *dw, cudaMemcpyHostToDevice) == cudaSuccess
                       ? avo_compare_run(dg, dw, n, 0, scratch, 0, &s)
                       : -1;
    char line[300];
    snprintf(line, sizeof line, "avo_compare_run: sums and the worst element as the host's (worst %lld / %lld)",
             rc ? -9LL : (long long)s.worst, (long long)worst);
    report(rc == 0 && fabs(s.num - num) <= 1e-9 * num && fabs(s.den - den) <= 1e-9 * den && s.max_abs == mx &&
               s.worst == worst && s.nonfinite == -1,
           line);
    cudaFree(dg);
    cudaFree(dw);
    cudaFree(scratch);
    free(h);
}

int main(void)
{
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev < 1) {
        printf("not ok - no CUDA device\n");
        return 1;
    }
    equal_cases();
    run_case();
    printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}
