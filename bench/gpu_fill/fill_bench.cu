/* The device input fill (daemon/gpu/avo_fill.cu) against its first version,
 * kept here verbatim as v1 (one thread per ChaCha20 block, one store per
 * element): bit for bit over every dtype, lengths 1 .. 4M + 3, aligned and
 * unaligned destinations; then both timed on 384 MiB of bf16 (attention's
 * inputs), interleaved, 20 rounds: median ms of each, the ratio per round
 * (new / v1) with its spread.
 *   nvcc -O2 -std=c++17 -arch=sm_90 bench/gpu_fill/fill_bench.cu daemon/gpu/avo_fill.cu -o fill_bench
 *   ./fill_bench     (prints lines; exit 1 on any mismatch) */
#include "../../daemon/gpu/avo_fill.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace v1
{
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

} // namespace v1

static const size_t esize[5] = {4, 8, 2, 2, 4};

static void launch_v1(void *dst, int64_t n, int dtype, float scale, const unsigned char key[32], cudaStream_t st)
{
    v1::fill_args a;
    for (int i = 0; i < 8; i++)
        a.key[i] = (uint32_t)key[4 * i] | (uint32_t)key[4 * i + 1] << 8 | (uint32_t)key[4 * i + 2] << 16 |
                   (uint32_t)key[4 * i + 3] << 24;
    a.nonce[0] = 11, a.nonce[1] = 22, a.nonce[2] = 3;
    a.scale = scale;
    a.dtype = dtype;
    const int64_t blocks = (n + 15) / 16;
    v1::fill_kernel<<<(unsigned)((blocks + 255) / 256), 256, 0, st>>>(dst, n, a);
}

int main()
{
    unsigned char key[32];
    for (int i = 0; i < 32; i++)
        key[i] = (unsigned char)(i * 37 + 5);
    const int64_t lens[] = {1, 15, 16, 17, 31, 1000, 4097, (4 << 20) + 3};
    int bad = 0, cases = 0;
    char *d1, *d2;
    const size_t cap = ((size_t)(4 << 20) + 64) * 8;
    cudaMalloc(&d1, cap);
    cudaMalloc(&d2, cap);
    std::vector<char> h1(cap), h2(cap);
    for (int dt = 0; dt < 5; dt++)
        for (int64_t n : lens)
            for (int off = 0; off < 3; off++) {
                const size_t at = off * esize[dt], bytes = (size_t)n * esize[dt];
                cudaMemset(d1, 0x5a, cap);
                cudaMemset(d2, 0x5a, cap);
                launch_v1(d1 + at, n, dt, 1.5f, key, 0);
                if (avo_fill_launch(d2 + at, n, dt, 1.5f, key, 11, 22, 3, 0) != 0) {
                    printf("launch failed: dtype %d n %lld\n", dt, (long long)n);
                    return 1;
                }
                cudaMemcpy(h1.data(), d1, at + bytes + 64, cudaMemcpyDeviceToHost);
                cudaMemcpy(h2.data(), d2, at + bytes + 64, cudaMemcpyDeviceToHost);
                cases++;
                if (memcmp(h1.data(), h2.data(), at + bytes + 64) != 0) {
                    bad++;
                    printf("MISMATCH dtype %d n %lld offset %d elements\n", dt, (long long)n, off);
                }
            }
    printf("bit for bit: %d cases, %d mismatches (5 dtypes, %zu lengths, offsets 0-2 elements, 64 bytes after)\n",
           cases, bad, sizeof lens / sizeof *lens);
    cudaFree(d1);
    cudaFree(d2);
    if (cudaGetLastError() != cudaSuccess)
        return 1;
    /* Timing: 384 MiB of bf16, interleaved. */
    const int64_t n = (int64_t)(384ull << 20) / 2;
    char *d;
    cudaMalloc(&d, (size_t)n * 2);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> t1, t2, ratio;
    for (int r = 0; r < 22; r++) {
        float ms[2];
        for (int k = 0; k < 2; k++) {
            const int which = (r + k) & 1; /* alternate who goes first */
            cudaEventRecord(e0);
            if (which)
                avo_fill_launch(d, n, 3, 1.0f, key, 11, 22, 3, 0);
            else
                launch_v1(d, n, 3, 1.0f, key, 0);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            cudaEventElapsedTime(&ms[which], e0, e1);
        }
        if (r < 2)
            continue; /* warm-up */
        t1.push_back(ms[0]);
        t2.push_back(ms[1]);
        ratio.push_back(ms[1] / ms[0]);
    }
    auto med = [](std::vector<float> v) {
        std::sort(v.begin(), v.end());
        return 0.5f * (v[v.size() / 2] + v[(v.size() - 1) / 2]);
    };
    std::vector<float> rs = ratio;
    std::sort(rs.begin(), rs.end());
    printf(
        "384 MiB bf16 fill: v1 median %.3f ms, new median %.3f ms; new/v1 per round: median %.3f, min %.3f, max %.3f "
        "(%zu rounds)\n",
        med(t1), med(t2), med(ratio), rs.front(), rs.back(), rs.size());
    return bad ? 1 : 0;
}
