/* A checked call's output and input comparisons on the device (avo_compare.h). */
#include "avo_compare.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

enum { DT_F32, DT_F64, DT_F16, DT_BF16, DT_I32 }; /* avo_dtype's values */
enum { BLOCKS = 512, THREADS = 256, WORD_BLOCKS = 2048 };

struct partial {
    double num, den, max_abs;
    long long worst, nonfinite;
};

__device__ __forceinline__ double load(const void *p, long long e, int d)
{
    switch (d) {
    case DT_F32:
        return ((const float *)p)[e];
    case DT_F64:
        return ((const double *)p)[e];
    case DT_F16:
        return __half2float(((const __half *)p)[e]);
    case DT_BF16:
        return __uint_as_float((unsigned)((const unsigned short *)p)[e] << 16);
    default:
        return ((const int *)p)[e];
    }
}

/* Keeps the larger error, the earlier element on a tie. */
__device__ __forceinline__ void take_max(double &m, long long &w, double m2, long long w2)
{
    if (w2 >= 0 && (w < 0 || m2 > m || (m2 == m && w2 < w))) {
        m = m2;
        w = w2;
    }
}

__device__ __forceinline__ void take_min(long long &a, long long b)
{
    if (b >= 0 && (a < 0 || b < a))
        a = b;
}

/* rows NULL: elements 0 .. n - 1; else the n = nrows * row_elems elements
 * of the listed rows. */
__global__ void compare_kernel(const void *got, const void *want, long long n, int d, const long long *rows,
                               long long row_elems, partial *out)
{
    double num = 0, den = 0, mx = 0;
    long long worst = -1, nonfinite = -1;
    for (long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x) {
        const long long e = rows ? rows[x / row_elems] * row_elems + x % row_elems : x;
        const double g = load(got, e, d), w = load(want, e, d);
        if (!isfinite(g)) {
            if (nonfinite < 0)
                nonfinite = e;
            continue;
        }
        const double diff = fabs(g - w);
        num += diff * diff;
        den += w * w;
        if (!isnan(diff) && (worst < 0 || diff > mx)) {
            mx = diff;
            worst = e;
        }
    }
    __shared__ partial sh[THREADS];
    sh[threadIdx.x] = partial{num, den, mx, worst, nonfinite};
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            partial &a = sh[threadIdx.x];
            const partial &b = sh[threadIdx.x + s];
            a.num += b.num;
            a.den += b.den;
            take_max(a.max_abs, a.worst, b.max_abs, b.worst);
            take_min(a.nonfinite, b.nonfinite);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = sh[0];
}

/* Elements base .. base + n - 1 of a and b one by one (es bytes each): an
 * unaligned pair, or the tail after the words below. */
__global__ void equal_kernel(const unsigned char *a, const unsigned char *b, long long base, long long n, int es,
                             unsigned long long *first)
{
    for (long long e = base + (long long)blockIdx.x * blockDim.x + threadIdx.x; e < base + n;
         e += (long long)gridDim.x * blockDim.x) {
        bool same;
        switch (es) {
        case 2:
            same = ((const unsigned short *)a)[e] == ((const unsigned short *)b)[e];
            break;
        case 4:
            same = ((const unsigned *)a)[e] == ((const unsigned *)b)[e];
            break;
        case 8:
            same = ((const unsigned long long *)a)[e] == ((const unsigned long long *)b)[e];
            break;
        default:
            same = true;
            for (int k = 0; k < es; k++)
                same &= a[e * es + k] == b[e * es + k];
        }
        if (!same)
            atomicMin(first, (unsigned long long)e);
    }
}

/* The first byte where two 32-bit words differ (little-endian: the lowest
 * set bit of their xor), x != y. */
__device__ __forceinline__ int first_byte(unsigned x, unsigned y)
{
    return (__ffs(x ^ y) - 1) >> 3;
}

/* words 16-byte words of a and b, both 16-byte aligned, es dividing 16:
 * element by element the comparison read 2 bytes a load (bf16), about 3x
 * slower than the memory allows (an H100 compared attention's 384 MiB of
 * inputs after every checked call in 0.78 ms: docs/benchmarks.md). */
__global__ void equal_words_kernel(const uint4 *a, const uint4 *b, long long words, int es, unsigned long long *first)
{
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < words;
         w += (long long)gridDim.x * blockDim.x) {
        const uint4 x = a[w], y = b[w];
        int byte = -1;
        if (x.x != y.x)
            byte = first_byte(x.x, y.x);
        else if (x.y != y.y)
            byte = 4 + first_byte(x.y, y.y);
        else if (x.z != y.z)
            byte = 8 + first_byte(x.z, y.z);
        else if (x.w != y.w)
            byte = 12 + first_byte(x.w, y.w);
        if (byte >= 0)
            atomicMin(first, (unsigned long long)((w * 16 + byte) / es));
    }
}

extern "C" size_t avo_compare_scratch_bytes(void)
{
    return BLOCKS * sizeof(partial);
}

static int compare(const void *got, const void *want, long long n, int dtype, const long long *rows,
                   long long row_elems, void *scratch, cudaStream_t st, avo_compare_sums *out)
{
    if (dtype < DT_F32 || dtype > DT_I32)
        return -EINVAL;
    static partial host[BLOCKS];
    compare_kernel<<<BLOCKS, THREADS, 0, st>>>(got, want, n, dtype, rows, row_elems, (partial *)scratch);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpyAsync(host, scratch, sizeof host, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
        cudaStreamSynchronize(st) != cudaSuccess)
        return -EIO;
    partial t = {0, 0, 0, -1, -1};
    for (int b = 0; b < BLOCKS; b++) {
        t.num += host[b].num;
        t.den += host[b].den;
        if (host[b].worst >= 0 &&
            (t.worst < 0 || host[b].max_abs > t.max_abs || (host[b].max_abs == t.max_abs && host[b].worst < t.worst))) {
            t.max_abs = host[b].max_abs;
            t.worst = host[b].worst;
        }
        if (host[b].nonfinite >= 0 && (t.nonfinite < 0 || host[b].nonfinite < t.nonfinite))
            t.nonfinite = host[b].nonfinite;
    }
    *out = avo_compare_sums{t.num, t.den, t.max_abs, t.worst, t.nonfinite};
    return 0;
}

extern "C" int avo_compare_run(const void *got, const void *want, int64_t n, int dtype, void *scratch, cudaStream_t st,
                               avo_compare_sums *out)
{
    return compare(got, want, (long long)n, dtype, nullptr, 1, scratch, st, out);
}

extern "C" int avo_compare_run_rows(const void *got, const void *want, const int64_t *rows, int64_t nrows,
                                    int64_t row_elems, int dtype, void *scratch, cudaStream_t st, avo_compare_sums *out)
{
    if (row_elems < 1 || nrows < 0)
        return -EINVAL;
    return compare(got, want, (long long)(nrows * row_elems), dtype, (const long long *)rows, (long long)row_elems,
                   scratch, st, out);
}

extern "C" int avo_compare_equal(const void *a, const void *b, int64_t n, size_t elem_size, void *scratch,
                                 cudaStream_t st, int64_t *first)
{
    unsigned long long none = ~0ull, got = 0;
    unsigned long long *d = (unsigned long long *)scratch;
    if (cudaMemcpyAsync(d, &none, sizeof none, cudaMemcpyHostToDevice, st) != cudaSuccess)
        return -EIO;
    const int es = (int)elem_size;
    long long head = 0; /* elements compared a word at a time */
    if (es > 0 && 16 % es == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0) {
        const long long words = (long long)n * es / 16;
        head = words * 16 / es;
        if (words > 0)
            equal_words_kernel<<<WORD_BLOCKS, THREADS, 0, st>>>((const uint4 *)a, (const uint4 *)b, words, es, d);
    }
    if (n > head)
        equal_kernel<<<BLOCKS, THREADS, 0, st>>>((const unsigned char *)a, (const unsigned char *)b, head,
                                                 (long long)n - head, es, d);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpyAsync(&got, d, sizeof got, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
        cudaStreamSynchronize(st) != cudaSuccess)
        return -EIO;
    *first = got == none ? -1 : (int64_t)got;
    return 0;
}
