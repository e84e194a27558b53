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
    int dtype;
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

/* One thread: one 64-byte ChaCha20 block (RFC 8439's layout, as OpenSSL's
 * EVP_chacha20 with a 16-byte IV: counter word, then the three nonce
 * words), i.e. 16 elements. */
__global__ void fill_kernel(void *dst, int64_t n, fill_args a)
{
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
    const int m = n - e0 < 16 ? (int)(n - e0) : 16;
    for (int i = 0; i < m; i++) {
        const float v = __fmul_rn(unit(x[i] + s[i]), a.scale);
        const int64_t e = e0 + i;
        switch (a.dtype) {
        case DT_F32:
            ((float *)dst)[e] = v;
            break;
        case DT_F64:
            ((double *)dst)[e] = (double)v;
            break;
        case DT_F16:
            ((__half *)dst)[e] = __float2half_rn(v);
            break;
        case DT_BF16:
            ((uint16_t *)dst)[e] = to_bf16(v);
            break;
        case DT_I32:
            ((int32_t *)dst)[e] = (int32_t)__fmul_rn(v, 100.0f);
            break;
        }
    }
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
    a.dtype = dtype;
    const int64_t blocks = (n + 15) / 16;
    const int threads = 256;
    fill_kernel<<<(unsigned)((blocks + threads - 1) / threads), threads, 0, st>>>(dst, n, a);
    return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}
