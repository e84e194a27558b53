#include "tensors.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: tiny, good enough to make inputs non-trivial, and fully
 * determined by the recorded seed. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1): never zeros, which hardware may shortcut. */
static float unit(uint64_t *s)
{
    return (float)((double)(mix(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double load(const void *base, int64_t i, avo_dtype d)
{
    switch (d) {
    case AVO_DTYPE_F32: return ((const float *)base)[i];
    case AVO_DTYPE_F64: return ((const double *)base)[i];
    case AVO_DTYPE_F16: return (double)((const _Float16 *)base)[i];
    case AVO_DTYPE_BF16: return from_bf16(((const uint16_t *)base)[i]);
    case AVO_DTYPE_I32: return ((const int32_t *)base)[i];
    }
    return NAN;
}

int avo_tensors_alloc_at(avo_tensors *t, const avo_problem *p, const int64_t *size, int dtype_override, char *err,
                         size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->owned = 1;
    for (int i = 0; i < p->ntensors; i++) {
        int rc = avo_problem_tensor_elems_at(p, size, i, &t->elems[i], err, errlen);
        if (rc) {
            avo_tensors_free(t);
            return rc;
        }
        avo_dtype d = dtype_override >= 0 ? (avo_dtype)dtype_override : p->tensors[i].dtype;
        t->bytes[i] = (size_t)t->elems[i] * avo_dtype_size(d);
        /* 64-byte alignment: what a vectorised candidate may assume. */
        size_t alloc = (t->bytes[i] + 63) & ~(size_t)63;
        t->ptr[i] = aligned_alloc(64, alloc);
        t->n = i + 1;
        if (!t->ptr[i]) {
            snprintf(err, errlen, "cannot allocate %zu bytes for tensor %s", alloc, p->tensors[i].name);
            avo_tensors_free(t);
            return -ENOMEM;
        }
        memset(t->ptr[i], 0, alloc);
    }
    return 0;
}

int avo_tensors_alloc(avo_tensors *t, const avo_problem *p, int config, char *err, size_t errlen)
{
    if (config < 0 || config >= p->nconfigs)
        return -EINVAL;
    return avo_tensors_alloc_at(t, p, p->configs[config].size, -1, err, errlen);
}

size_t avo_tensors_span(const avo_problem *p, int config)
{
    size_t total = 0;
    for (int i = 0; i < p->ntensors; i++) {
        int64_t n = 0;
        if (avo_problem_tensor_elems(p, config, i, &n, NULL, 0) == 0)
            total += (((size_t)n * avo_dtype_size(p->tensors[i].dtype) + 63) & ~(size_t)63) + AVO_TENSOR_GUARD;
    }
    return total;
}

int avo_tensors_place(avo_tensors *t, const avo_problem *p, int config, void *base, size_t cap, char *err,
                      size_t errlen)
{
    memset(t, 0, sizeof *t);
    size_t off = 0;
    for (int i = 0; i < p->ntensors; i++) {
        int rc = avo_problem_tensor_elems(p, config, i, &t->elems[i], err, errlen);
        if (rc)
            return rc;
        t->bytes[i] = (size_t)t->elems[i] * avo_dtype_size(p->tensors[i].dtype);
        size_t alloc = ((t->bytes[i] + 63) & ~(size_t)63) + AVO_TENSOR_GUARD;
        if (off + alloc > cap) {
            snprintf(err, errlen, "shared tensor region too small for config %s", p->configs[config].name);
            return -ENOSPC;
        }
        t->ptr[i] = (unsigned char *)base + off;
        memset(t->ptr[i], 0, t->bytes[i]);
        /* Everything from the tensor's end to the next one is a guard zone
         * with a known pattern: a candidate that writes past a tensor is
         * caught instead of scribbling on its neighbour unnoticed. */
        memset((unsigned char *)t->ptr[i] + t->bytes[i], AVO_TENSOR_GUARD_BYTE, alloc - t->bytes[i]);
        t->guard[i] = alloc - t->bytes[i];
        off += alloc;
        t->n = i + 1;
    }
    return 0;
}

void avo_tensors_free(avo_tensors *t)
{
    if (t->owned)
        for (int i = 0; i < t->n; i++)
            free(t->ptr[i]);
    memset(t, 0, sizeof *t);
}

void avo_tensors_fill(avo_tensors *t, const avo_problem *p, uint64_t seed, int config, int set)
{
    for (int i = 0; i < t->n; i++) {
        if (p->tensors[i].role == AVO_ROLE_OUTPUT)
            continue;
        uint64_t s = seed ^ ((uint64_t)(config + 1) << 48) ^ ((uint64_t)(set + 1) << 32) ^ (uint64_t)(i + 1);
        mix(&s);
        const float scale = (float)p->tensors[i].scale;
        for (int64_t e = 0; e < t->elems[i]; e++) {
            float v = unit(&s) * scale;
            switch (p->tensors[i].dtype) {
            case AVO_DTYPE_F32: ((float *)t->ptr[i])[e] = v; break;
            case AVO_DTYPE_F64: ((double *)t->ptr[i])[e] = (double)v; break;
            case AVO_DTYPE_F16: ((_Float16 *)t->ptr[i])[e] = (_Float16)v; break;
            case AVO_DTYPE_BF16: ((uint16_t *)t->ptr[i])[e] = to_bf16(v); break;
            case AVO_DTYPE_I32: ((int32_t *)t->ptr[i])[e] = (int32_t)(v * 100.0f); break;
            }
        }
    }
}

void avo_tensors_poison(avo_tensors *t, const avo_problem *p)
{
    for (int i = 0; i < t->n; i++) {
        if (p->tensors[i].role != AVO_ROLE_OUTPUT)
            continue;
        int64_t n = t->elems[i];
        switch (p->tensors[i].dtype) {
        case AVO_DTYPE_F32: {
            uint32_t *u = t->ptr[i];
            for (int64_t e = 0; e < n; e++)
                u[e] = 0x7fc5a5a5u;
            break;
        }
        case AVO_DTYPE_F64: {
            uint64_t *u = t->ptr[i];
            for (int64_t e = 0; e < n; e++)
                u[e] = 0x7ff8a5a5a5a5a5a5ull;
            break;
        }
        case AVO_DTYPE_F16:
        case AVO_DTYPE_BF16: {
            uint16_t *u = t->ptr[i];
            const uint16_t pat = p->tensors[i].dtype == AVO_DTYPE_F16 ? 0x7e5a : 0x7fc5;
            for (int64_t e = 0; e < n; e++)
                u[e] = pat;
            break;
        }
        case AVO_DTYPE_I32: {
            int32_t *u = t->ptr[i];
            for (int64_t e = 0; e < n; e++)
                u[e] = 0x5a5a5a5a;
            break;
        }
        }
    }
}

void avo_tensors_copy_inputs(avo_tensors *dst, const avo_tensors *src, const avo_problem *p)
{
    for (int i = 0; i < src->n && i < dst->n; i++)
        if (p->tensors[i].role != AVO_ROLE_OUTPUT)
            memcpy(dst->ptr[i], src->ptr[i], src->bytes[i]);
}

int avo_tensors_inputs_changed(const avo_tensors *t, const avo_tensors *pristine, const avo_problem *p,
                               int64_t *elem)
{
    for (int i = 0; i < t->n; i++) {
        if (p->tensors[i].role != AVO_ROLE_INPUT)
            continue;
        if (memcmp(t->ptr[i], pristine->ptr[i], t->bytes[i]) == 0)
            continue;
        size_t es = avo_dtype_size(p->tensors[i].dtype);
        const unsigned char *a = t->ptr[i], *b = pristine->ptr[i];
        *elem = 0;
        for (int64_t e = 0; e < t->elems[i]; e++)
            if (memcmp(a + e * es, b + e * es, es) != 0) {
                *elem = e;
                break;
            }
        return i;
    }
    return -1;
}

/* got holds dtype gd; want holds dtype wd (the same, or f64 for the twin). */
static void compare(const void *got, avo_dtype gd, const void *want, avo_dtype wd, int64_t n, avo_tolerance tol,
                    avo_check *out)
{
    memset(out, 0, sizeof *out);
    double num = 0, den = 0;
    for (int64_t e = 0; e < n; e++) {
        double g = load(got, e, gd), w = load(want, e, wd);
        if (!isfinite(g)) {
            out->nonfinite = 1;
            out->worst = e;
            out->got = g;
            out->want = w;
            out->rel_l2 = INFINITY;
            out->max_abs = INFINITY;
            return;
        }
        double diff = fabs(g - w);
        num += diff * diff;
        den += w * w;
        if (diff > out->max_abs || e == 0) {
            out->max_abs = diff;
            out->worst = e;
            out->got = g;
            out->want = w;
        }
    }
    out->rel_l2 = den > 0 ? sqrt(num) / sqrt(den) : sqrt(num);
    out->pass = out->rel_l2 <= tol.rel_l2 && out->max_abs <= tol.max_abs;
}

void avo_tensors_compare(const void *got, const void *want, int64_t n, avo_dtype d, avo_tolerance tol,
                         avo_check *out)
{
    compare(got, d, want, d, n, tol, out);
}

void avo_tensors_compare_f64(const void *got, avo_dtype d, const double *want, int64_t n, avo_tolerance tol,
                             avo_check *out)
{
    compare(got, d, want, AVO_DTYPE_F64, n, tol, out);
}

void avo_tensors_to_f64(const void *src, avo_dtype d, int64_t n, double *dst)
{
    for (int64_t e = 0; e < n; e++)
        dst[e] = load(src, e, d);
}

int avo_tensors_guard_broken(const avo_tensors *t, int64_t *byte)
{
    for (int i = 0; i < t->n; i++) {
        const unsigned char *g = (const unsigned char *)t->ptr[i] + t->bytes[i];
        for (size_t k = 0; k < t->guard[i]; k++)
            if (g[k] != AVO_TENSOR_GUARD_BYTE) {
                if (byte)
                    *byte = (int64_t)k;
                return i;
            }
    }
    return -1;
}
