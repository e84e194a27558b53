/* Seed for cpu/softmax: Y[r, :] = softmax(X[r, :]), row-major [R, C],
 * float32. Correct for any sizes and every allowed knob combination; the
 * tune operator prepends "#define NAME value" lines. The defaults are a
 * deliberately mediocre point: three passes over memory, scalar loops with
 * one dependent accumulator, libm expf (a call per element, which the
 * compiler will not vectorise without -ffast-math). */
#include <math.h>
#include <stdint.h>

#ifndef PASSES
#define PASSES 3 /* 3: max, exp+sum (into Y), scale; 2: online max+sum, then write */
#endif
#ifndef VEC
#define VEC 1 /* independent lanes per loop step (partial maxima and sums) */
#endif
#ifndef EXP
#define EXP 0 /* 0: libm expf; 1: inline polynomial exp, vectorisable */
#endif

/* Online softmax folds each block's maximum into the running sum once per
 * block (one rescale), not once per element. */
#define BLOCK (VEC * 16)

#if EXP == 1
/* exp(x) for x <= 0 (all this kernel needs): x = n*ln2 + r, |r| <= ln2/2,
 * degree-7 Taylor polynomial for e^r (truncation < 1e-8 relative), 2^n
 * built in the exponent bits. Clamped below at -87 so 2^n stays normal;
 * e^-87 is 1.6e-38, far below any tolerance. No branches: vectorises. */
static inline float exp_neg(float x)
{
    x = x < -87.0f ? -87.0f : x;
    /* Round to nearest by the 1.5 * 2^23 trick: no libm call, vectorises. */
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union {
        uint32_t u;
        float f;
    } s = {.u = (uint32_t)((int32_t)n + 127) << 23};
    return p * s.f;
}
#define EXPF(x) exp_neg(x)
#else
#define EXPF(x) expf(x)
#endif

static float row_max(const float *restrict x, int64_t n)
{
    float m[VEC];
    for (int u = 0; u < VEC; u++)
        m[u] = -INFINITY;
    int64_t c = 0;
    for (; c + VEC <= n; c += VEC)
        for (int u = 0; u < VEC; u++)
            m[u] = x[c + u] > m[u] ? x[c + u] : m[u];
    for (; c < n; c++)
        m[0] = x[c] > m[0] ? x[c] : m[0];
    float r = m[0];
    for (int u = 1; u < VEC; u++)
        r = m[u] > r ? m[u] : r;
    return r;
}

static float row_expsum(const float *restrict x, int64_t n, float mx)
{
    float s[VEC] = {0};
    int64_t c = 0;
    for (; c + VEC <= n; c += VEC)
        for (int u = 0; u < VEC; u++)
            s[u] += EXPF(x[c + u] - mx);
    for (; c < n; c++)
        s[0] += EXPF(x[c] - mx);
    float r = 0;
    for (int u = 0; u < VEC; u++)
        r += s[u];
    return r;
}

#if PASSES == 3
static void row_softmax(const float *restrict x, float *restrict y, int64_t n)
{
    const float mx = row_max(x, n);
    float s[VEC] = {0};
    int64_t c = 0;
    for (; c + VEC <= n; c += VEC)
        for (int u = 0; u < VEC; u++) {
            const float e = EXPF(x[c + u] - mx);
            y[c + u] = e;
            s[u] += e;
        }
    for (; c < n; c++) {
        const float e = EXPF(x[c] - mx);
        y[c] = e;
        s[0] += e;
    }
    float sum = 0;
    for (int u = 0; u < VEC; u++)
        sum += s[u];
    const float inv = 1.0f / sum;
    for (c = 0; c < n; c++)
        y[c] *= inv;
}
#else
static void row_softmax(const float *restrict x, float *restrict y, int64_t n)
{
    float mx = -INFINITY, sum = 0;
    for (int64_t b = 0; b < n; b += BLOCK) {
        const int64_t len = n - b < BLOCK ? n - b : BLOCK;
        const float bm = row_max(x + b, len);
        if (bm > mx) {
            sum *= EXPF(mx - bm); /* exp(-inf) = 0 on the first block */
            mx = bm;
        }
        sum += row_expsum(x + b, len, mx);
    }
    const float inv = 1.0f / sum;
    int64_t c = 0;
    for (; c + VEC <= n; c += VEC)
        for (int u = 0; u < VEC; u++)
            y[c + u] = EXPF(x[c + u] - mx) * inv;
    for (; c < n; c++)
        y[c] = EXPF(x[c] - mx) * inv;
}
#endif

int softmax(void *const *tensors, const int64_t *sizes)
{
    const float *restrict X = tensors[0];
    float *restrict Y = tensors[1];
    const int64_t R = sizes[0], C = sizes[1];
    for (int64_t r = 0; r < R; r++)
        row_softmax(X + r * C, Y + r * C, C);
    return 0;
}
