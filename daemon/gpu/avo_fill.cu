/* Input tensors generated on the device, bit for bit the host's ChaCha20 fill (avo_fill.h). */
#include "avo_fill.h"

#include <errno.h>
#include <string.h>

#include <cuda_fp16.h>

/* The avo_dtype values (proto/avo_problem.h), which this file cannot
 * include (C, not C++ headers). */
enum { DT_F32, DT_F64, DT_F16, DT_BF16, DT_I32 };

struct fill_args {
    uint32_t key[8];
    uint32_t nonce[3];
    float scale;
};

__device__ __forceinline__ uint32_t rotl(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

#define QR(a, b, c, d)                                                                                                 \
    a += b, d ^= a, d = rotl(d, 16), c += d, b ^= c, b = rotl(b, 12), a += b, d ^= a, d = rotl(d, 8), c += d, b ^= c,  \
                    b = rotl(b, 7)

/* The host's unit32: the top 24 bits as k * 2^-23 - 1, exact in float. */
__device__ __forceinline__ float unit(uint32_t w)
{
    return __fsub_rn(__fmul_rn((float)(w >> 8), 0x1.0p-23f), 1.0f);
}

__device__ __forceinline__ uint16_t to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* Element i of a block (value v) in dtype D's storage. */
template <int D> struct elem;
template <> struct elem<DT_F32> {
    typedef float T;
    __device__ static T of(float v)
    {
        return v;
    }
};
template <> struct elem<DT_F64> {
    typedef double T;
    __device__ static T of(float v)
    {
        return (double)v;
    }
};
template <> struct elem<DT_F16> {
    typedef uint16_t T;
    __device__ static T of(float v)
    {
        return __half_as_ushort(__float2half_rn(v));
    }
};
template <> struct elem<DT_BF16> {
    typedef uint16_t T;
    __device__ static T of(float v)
    {
        return to_bf16(v);
    }
};
template <> struct elem<DT_I32> {
    typedef int32_t T;
    __device__ static T of(float v)
    {
        return (int32_t)__fmul_rn(v, 100.0f);
    }
};

/* One thread: one 64-byte ChaCha20 block (RFC 8439's layout, as OpenSSL's
 * EVP_chacha20 with a 16-byte IV: counter word, then the three nonce
 * words), i.e. 16 elements. A whole block at a 16-byte-aligned address is
 * written with 16-byte stores (2-byte elements one by one left a 32-byte
 * stride between a thread's stores and the next's: attention's 384 MiB of
 * bf16 inputs, regenerated before every call, were the call's largest
 * cost after the kernel); a partial or unaligned one element by element. */
template <int D> __global__ void fill_kernel(void *dst, int64_t n, fill_args a)
{
    typedef typename elem<D>::T T;
    const int64_t blk = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t e0 = blk * 16;
    if (e0 >= n)
        return;
    uint32_t x[16], s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
    for (int i = 0; i < 8; i++)
        s[4 + i] = a.key[i];
    s[12] = (uint32_t)blk;
    s[13] = a.nonce[0];
    s[14] = a.nonce[1];
    s[15] = a.nonce[2];
    for (int i = 0; i < 16; i++)
        x[i] = s[i];
    for (int r = 0; r < 10; r++) {
        QR(x[0], x[4], x[8], x[12]);
        QR(x[1], x[5], x[9], x[13]);
        QR(x[2], x[6], x[10], x[14]);
        QR(x[3], x[7], x[11], x[15]);
        QR(x[0], x[5], x[10], x[15]);
        QR(x[1], x[6], x[11], x[12]);
        QR(x[2], x[7], x[8], x[13]);
        QR(x[3], x[4], x[9], x[14]);
    }
    T v[16];
#pragma unroll
    for (int i = 0; i < 16; i++)
        v[i] = elem<D>::of(__fmul_rn(unit(x[i] + s[i]), a.scale));
    T *out = (T *)dst + e0;
    if (n - e0 >= 16 && ((uintptr_t)out & 15) == 0) {
        uint4 w[sizeof v / 16];
        memcpy(w, v, sizeof v);
#pragma unroll
        for (int k = 0; k < (int)(sizeof v / 16); k++)
            ((uint4 *)out)[k] = w[k];
        return;
    }
    const int m = n - e0 < 16 ? (int)(n - e0) : 16;
    for (int i = 0; i < m; i++)
        out[i] = v[i];
}

int avo_fill_launch(void *dst, int64_t n, int dtype, float scale, const unsigned char key[32], uint32_t nonce0,
                    uint32_t nonce1, uint32_t nonce2, cudaStream_t st)
{
    if (dtype < DT_F32 || dtype > DT_I32 || n < 0 || (n + 15) / 16 > (int64_t)UINT32_MAX + 1)
        return -EINVAL;
    if (n == 0)
        return 0;
    fill_args a;
    for (int i = 0; i < 8; i++)
        a.key[i] = (uint32_t)key[4 * i] | (uint32_t)key[4 * i + 1] << 8 | (uint32_t)key[4 * i + 2] << 16 |
                   (uint32_t)key[4 * i + 3] << 24;
    a.nonce[0] = nonce0;
    a.nonce[1] = nonce1;
    a.nonce[2] = nonce2;
    a.scale = scale;
    const int64_t blocks = (n + 15) / 16;
    const int threads = 256;
    const unsigned grid = (unsigned)((blocks + threads - 1) / threads);
    switch (dtype) {
    case DT_F32:
        fill_kernel<DT_F32><<<grid, threads, 0, st>>>(dst, n, a);
        break;
    case DT_F64:
        fill_kernel<DT_F64><<<grid, threads, 0, st>>>(dst, n, a);
        break;
    case DT_F16:
        fill_kernel<DT_F16><<<grid, threads, 0, st>>>(dst, n, a);
        break;
    case DT_BF16:
        fill_kernel<DT_BF16><<<grid, threads, 0, st>>>(dst, n, a);
        break;
    default:
        fill_kernel<DT_I32><<<grid, threads, 0, st>>>(dst, n, a);
        break;
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}
