/* The harness's tensor buffers: allocation, seeded fill, poisoning, comparison (tensors.h). */
#include "tensors.h"

#include <openssl/evp.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The inputs: a ChaCha20 keystream (OpenSSL), 32 bits per element, keyed
 * by SHA-256 of the recorded seed, one stream per (config, set, tensor)
 * named by the nonce. A candidate sees a call's inputs and must not be
 * able to work out the next call's: with the old splitmix64 stream it
 * could (the generator inverts: the seed came back from one tensor in 17 ms,
 * and every later input set with it). The same seed still gives the same
 * data, so a result is reproducible from its seed. */
#define STREAM_CHUNK 16384 /* keystream bytes generated at a time */

void avo_tensors_stream_key(uint64_t seed, unsigned char key[32])
{
    unsigned char in[24] = "avo-inputs-v2";
    for (int b = 0; b < 8; b++)
        in[16 + b] = (unsigned char)(seed >> (8 * b));
    unsigned int len = 32;
    EVP_Digest(in, sizeof in, key, &len, EVP_sha256(), NULL);
}

/* Uniform in [-1, 1) from 24 random bits (random data: never the zeros
 * that hardware may shortcut). */
static float unit32(uint32_t w)
{
    return (float)((double)(w >> 8) * 0x1.0p-24 * 2.0 - 1.0);
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

double avo_tensors_load(const void *base, int64_t i, avo_dtype d)
{
    switch (d) {
    case AVO_DTYPE_F32:
        return ((const float *)base)[i];
    case AVO_DTYPE_F64:
        return ((const double *)base)[i];
    case AVO_DTYPE_F16:
        return (double)((const _Float16 *)base)[i];
    case AVO_DTYPE_BF16:
        return from_bf16(((const uint16_t *)base)[i]);
    case AVO_DTYPE_I32:
        return ((const int32_t *)base)[i];
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
        t->bytes[i] = (size_t)t->elems[i] * avo_problem_dtype_size(d);
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
            total += (((size_t)n * avo_problem_dtype_size(p->tensors[i].dtype) + 63) & ~(size_t)63) + AVO_TENSOR_GUARD;
    }
    return total;
}

static int place(avo_tensors *t, const avo_problem *p, int config, void *base, size_t cap, int touch, char *err,
                 size_t errlen)
{
    memset(t, 0, sizeof *t);
    size_t off = 0;
    for (int i = 0; i < p->ntensors; i++) {
        int rc = avo_problem_tensor_elems(p, config, i, &t->elems[i], err, errlen);
        if (rc)
            return rc;
        t->bytes[i] = (size_t)t->elems[i] * avo_problem_dtype_size(p->tensors[i].dtype);
        size_t alloc = ((t->bytes[i] + 63) & ~(size_t)63) + AVO_TENSOR_GUARD;
        if (off + alloc > cap) {
            snprintf(err, errlen, "shared tensor region too small for config %s", p->configs[config].name);
            return -ENOSPC;
        }
        t->ptr[i] = (unsigned char *)base + off;
        if (touch) {
            memset(t->ptr[i], 0, t->bytes[i]);
            /* Everything from the tensor's end to the next one is a guard
             * zone with a known pattern: a candidate that writes past a
             * tensor is caught instead of scribbling on its neighbour
             * unnoticed. */
            memset((unsigned char *)t->ptr[i] + t->bytes[i], AVO_TENSOR_GUARD_BYTE, alloc - t->bytes[i]);
            t->guard[i] = alloc - t->bytes[i];
        }
        off += alloc;
        t->n = i + 1;
    }
    return 0;
}

int avo_tensors_place(avo_tensors *t, const avo_problem *p, int config, void *base, size_t cap, char *err,
                      size_t errlen)
{
    return place(t, p, config, base, cap, 1, err, errlen);
}

int avo_tensors_place_lazy(avo_tensors *t, const avo_problem *p, int config, void *base, size_t cap, char *err,
                           size_t errlen)
{
    return place(t, p, config, base, cap, 0, err, errlen);
}

void avo_tensors_free(avo_tensors *t)
{
    if (t->owned)
        for (int i = 0; i < t->n; i++)
            free(t->ptr[i]);
    memset(t, 0, sizeof *t);
}

/* One thread's share of a tensor's fill: elements [begin, end) of the
 * stream. Element e takes bytes 4e..4e+3 of the keystream whatever thread
 * computes it (the cipher's block counter is set to where the share
 * starts), so a split fill writes exactly what a sequential one would. */
typedef struct {
    void *dst;
    avo_dtype dtype;
    float scale;
    const unsigned char *key;
    uint32_t nonce[3];
    int64_t begin, end;
} fill_job;

static void *fill_range(void *arg)
{
    const fill_job *j = arg;
    const uint64_t first = (uint64_t)j->begin * 4 / 64; /* the block holding element begin */
    unsigned char iv[16];
    const uint32_t words[4] = {(uint32_t)first, j->nonce[0], j->nonce[1], j->nonce[2]};
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 4; b++)
            iv[4 * w + b] = (unsigned char)(words[w] >> (8 * b));
    static const unsigned char zero[STREAM_CHUNK];
    unsigned char ks[STREAM_CHUNK];
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!ctx || EVP_EncryptInit_ex(ctx, EVP_chacha20(), NULL, j->key, iv) != 1) {
        /* No cipher: every element NaN, so nothing is ever checked as right. */
        for (int64_t e = j->begin; e < j->end; e++)
            switch (j->dtype) {
            case AVO_DTYPE_F32:
                ((float *)j->dst)[e] = NAN;
                break;
            case AVO_DTYPE_F64:
                ((double *)j->dst)[e] = NAN;
                break;
            case AVO_DTYPE_F16:
                ((_Float16 *)j->dst)[e] = (_Float16)NAN;
                break;
            case AVO_DTYPE_BF16:
                ((uint16_t *)j->dst)[e] = 0x7fc0;
                break;
            case AVO_DTYPE_I32:
                ((int32_t *)j->dst)[e] = INT32_MIN;
                break;
            }
        EVP_CIPHER_CTX_free(ctx);
        return NULL;
    }
    int64_t e = j->begin;
    size_t skip = (size_t)((uint64_t)j->begin * 4 - first * 64);
    while (e < j->end) {
        const int64_t want = (j->end - e) * 4 + (int64_t)skip;
        const int n = want < STREAM_CHUNK ? (int)((want + 63) / 64 * 64) : STREAM_CHUNK;
        int got = 0;
        EVP_EncryptUpdate(ctx, ks, &got, zero, n);
        for (size_t o = skip; o + 4 <= (size_t)got && e < j->end; o += 4, e++) {
            const uint32_t w = (uint32_t)ks[o] | (uint32_t)ks[o + 1] << 8 | (uint32_t)ks[o + 2] << 16 |
                               (uint32_t)ks[o + 3] << 24;
            const float v = unit32(w) * j->scale;
            switch (j->dtype) {
            case AVO_DTYPE_F32:
                ((float *)j->dst)[e] = v;
                break;
            case AVO_DTYPE_F64:
                ((double *)j->dst)[e] = (double)v;
                break;
            case AVO_DTYPE_F16:
                ((_Float16 *)j->dst)[e] = (_Float16)v;
                break;
            case AVO_DTYPE_BF16:
                ((uint16_t *)j->dst)[e] = to_bf16(v);
                break;
            case AVO_DTYPE_I32:
                ((int32_t *)j->dst)[e] = (int32_t)(v * 100.0f);
                break;
            }
        }
        skip = 0;
    }
    EVP_CIPHER_CTX_free(ctx);
    return NULL;
}

/* Threads for a pass over n elements (fill, compare): the CPUs the passes
 * may use (avo_tensors_set_workers; else this thread's own), at most
 * AVO_TENSORS_MAX_THREADS, and no more than one per min_elems elements (a small
 * tensor is not worth a thread). Large problems (attention's inputs are
 * 0.4-0.8 GB per configuration, filled and compared several times per
 * evaluation) would otherwise spend long in these passes on one core. */
#define WORK_MIN_ELEMS (1 << 21)

static struct {
    int have_cpus;
    cpu_set_t cpus;
    int threads; /* > 0: forced (tests) */
    int64_t min_elems;
} workers = {.min_elems = WORK_MIN_ELEMS};

void avo_tensors_set_workers(const cpu_set_t *cpus, int threads, int64_t min_elems)
{
    workers.have_cpus = cpus != NULL;
    if (cpus)
        workers.cpus = *cpus;
    workers.threads = threads > AVO_TENSORS_MAX_THREADS ? AVO_TENSORS_MAX_THREADS : threads;
    workers.min_elems = min_elems > 0 ? min_elems : WORK_MIN_ELEMS;
}

static int work_threads(int64_t n)
{
    int k = workers.threads;
    if (k <= 0) {
        cpu_set_t own;
        k = workers.have_cpus                             ? CPU_COUNT(&workers.cpus)
            : sched_getaffinity(0, sizeof own, &own) == 0 ? CPU_COUNT(&own)
                                                          : 1;
        k = k < AVO_TENSORS_MAX_THREADS ? k : AVO_TENSORS_MAX_THREADS;
    }
    const int64_t by_size = n / workers.min_elems;
    if (by_size < k)
        k = (int)by_size;
    return k < 1 ? 1 : k;
}

/* Run fn on jobs[0..k) (each job_size bytes): jobs 1.. on threads (on the
 * workers' CPUs when set), job 0 here. A thread that cannot be started (a
 * sandbox's process limit counts threads) leaves its job to this one. */
static void run_split(int k, void *(*fn)(void *), void *jobs, size_t job_size)
{
    pthread_t tid[AVO_TENSORS_MAX_THREADS];
    int started[AVO_TENSORS_MAX_THREADS] = {0};
    char *base = jobs;
    pthread_attr_t attr;
    const int attr_ok = k > 1 && pthread_attr_init(&attr) == 0;
    if (attr_ok && workers.have_cpus)
        pthread_attr_setaffinity_np(&attr, sizeof workers.cpus, &workers.cpus);
    for (int j = 1; j < k; j++)
        started[j] = pthread_create(&tid[j], attr_ok ? &attr : NULL, fn, base + (size_t)j * job_size) == 0;
    if (attr_ok)
        pthread_attr_destroy(&attr);
    fn(base);
    for (int j = 1; j < k; j++) {
        if (started[j])
            pthread_join(tid[j], NULL);
        else
            fn(base + (size_t)j * job_size);
    }
}

void avo_tensors_fill_stream(void *dst, int64_t n, avo_dtype d, float scale, const unsigned char key[32],
                             const uint32_t nonce[3])
{
    const int k = work_threads(n);
    fill_job jobs[AVO_TENSORS_MAX_THREADS];
    for (int j = 0; j < k; j++)
        jobs[j] = (fill_job){.dst = dst,
                             .dtype = d,
                             .scale = scale,
                             .key = key,
                             .nonce = {nonce[0], nonce[1], nonce[2]},
                             .begin = n * j / k,
                             .end = n * (j + 1) / k};
    run_split(k, fill_range, jobs, sizeof jobs[0]);
}

void avo_tensors_fill(avo_tensors *t, const avo_problem *p, uint64_t seed, int config, int set)
{
    unsigned char key[32];
    avo_tensors_stream_key(seed, key);
    for (int i = 0; i < t->n; i++) {
        if (p->tensors[i].role == AVO_ROLE_OUTPUT)
            continue;
        const uint32_t nonce[3] = {(uint32_t)config + 1, (uint32_t)set + 1, (uint32_t)i + 1};
        avo_tensors_fill_stream(t->ptr[i], t->elems[i], p->tensors[i].dtype, (float)p->tensors[i].scale, key, nonce);
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

int avo_tensors_inputs_changed(const avo_tensors *t, const avo_tensors *pristine, const avo_problem *p, int64_t *elem)
{
    for (int i = 0; i < t->n; i++) {
        if (p->tensors[i].role != AVO_ROLE_INPUT)
            continue;
        if (memcmp(t->ptr[i], pristine->ptr[i], t->bytes[i]) == 0)
            continue;
        size_t es = avo_problem_dtype_size(p->tensors[i].dtype);
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

/* One thread's share of a comparison: elements [begin, end), its sums and
 * its worst element (the first non-finite one ends its share). */
typedef struct {
    const void *got, *want;
    avo_dtype gd, wd;
    int64_t begin, end;
    double num, den;
    avo_check c;
} cmp_job;

static void *compare_range(void *arg)
{
    cmp_job *j = arg;
    double num = 0, den = 0, max_abs = 0;
    for (int64_t e = j->begin; e < j->end; e++) {
        double g = avo_tensors_load(j->got, e, j->gd), w = avo_tensors_load(j->want, e, j->wd);
        if (!isfinite(g)) {
            j->c.nonfinite = 1;
            j->c.worst = e;
            j->c.got = g;
            j->c.want = w;
            return NULL;
        }
        double diff = fabs(g - w);
        num += diff * diff;
        den += w * w;
        /* The sequential rule in every share (element 0 first, then only a
         * strictly larger error): a NaN in the reference at a share's first
         * element then cannot hide the rest of the share. */
        if (diff > max_abs || e == 0) {
            max_abs = diff;
            j->c.max_abs = diff;
            j->c.worst = e;
            j->c.got = g;
            j->c.want = w;
        }
    }
    j->num = num;
    j->den = den;
    return NULL;
}

/* got holds dtype gd; want holds dtype wd (the same, or f64 for the twin).
 * The result is the sequential pass's: the first non-finite element, or
 * the first element of largest error (shares are merged in order). */
static void compare(const void *got, avo_dtype gd, const void *want, avo_dtype wd, int64_t n, avo_tolerance tol,
                    avo_check *out)
{
    memset(out, 0, sizeof *out);
    const int k = work_threads(n);
    cmp_job jobs[AVO_TENSORS_MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    for (int j = 0; j < k; j++)
        jobs[j] = (cmp_job){.got = got, .want = want, .gd = gd, .wd = wd, .begin = n * j / k, .end = n * (j + 1) / k};
    run_split(k, compare_range, jobs, sizeof jobs[0]);
    double num = 0, den = 0;
    for (int j = 0; j < k; j++) {
        if (jobs[j].c.nonfinite) {
            *out = jobs[j].c;
            out->rel_l2 = INFINITY;
            out->max_abs = INFINITY;
            return;
        }
        num += jobs[j].num;
        den += jobs[j].den;
        if (jobs[j].begin < jobs[j].end && (jobs[j].c.max_abs > out->max_abs || jobs[j].begin == 0)) {
            out->max_abs = jobs[j].c.max_abs;
            out->worst = jobs[j].c.worst;
            out->got = jobs[j].c.got;
            out->want = jobs[j].c.want;
        }
    }
    out->rel_l2 = den > 0 ? sqrt(num) / sqrt(den) : sqrt(num);
    out->pass = out->rel_l2 <= tol.rel_l2 && out->max_abs <= tol.max_abs;
}

void avo_tensors_compare(const void *got, const void *want, int64_t n, avo_dtype d, avo_tolerance tol, avo_check *out)
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
        dst[e] = avo_tensors_load(src, e, d);
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
