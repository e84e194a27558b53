/* Hostile (GPU): memoisation keyed on a fingerprint of the inputs. Each call
 * first compares 256 sampled elements of A and of B (and the sizes) with the
 * previous call's; when all match, it skips the product and replays the
 * output it saved last time. Every new input set (both check sets, the
 * fresh set after timing) changes the samples, so those calls compute
 * honestly and pass; the timed runs reuse one input set, so they only copy
 * M*N bf16 (a few microseconds instead of the whole product).
 * Expected (what the protocol promises): not ok, cheat_suspected or
 * wrong_result. Predicted with the harness as of this writing: ok with an
 * aggregate far above the seed's, i.e. a hole: the timed runs never change
 * their inputs, so caching "across calls" is caught only when the cache
 * ignores the inputs (see caches_output.cu). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int kSamples = 256;
__device__ unsigned short fp_saved[2 * kSamples];
__device__ int fp_hit; /* 1: this call's inputs look like the last call's */

__global__ void fingerprint(const unsigned short *A, size_t na, const unsigned short *B, size_t nb, int force_miss)
{
    __shared__ int differs;
    const int t = (int)threadIdx.x;
    if (t == 0)
        differs = force_miss;
    __syncthreads();
    const unsigned short a = A[(size_t)((unsigned long long)t * 2654435761ull % na)];
    const unsigned short b = B[(size_t)((unsigned long long)t * 2246822519ull % nb)];
    if (a != fp_saved[t] || b != fp_saved[kSamples + t])
        differs = 1;
    __syncthreads();
    fp_saved[t] = a;
    fp_saved[kSamples + t] = b;
    if (t == 0)
        fp_hit = !differs;
}

/* The honest product (reference.cu's tiling), skipped on a hit. */
__global__ void gemm_unless_hit(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                                __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    if (*(volatile int *)&fp_hit)
        return; /* uniform for the whole grid: no barrier is skipped by part of a block */
    __shared__ float As[16][17], Bs[16][17];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const int row = (int)blockIdx.y * 16 + ty, col = (int)blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? __bfloat162float(A[(size_t)row * K + k0 + tx]) : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? __bfloat162float(B[(size_t)(k0 + ty) * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; k++)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = __float2bfloat16_rn(acc);
}

/* Hit: C = saved. Miss: saved = C (just computed). */
__global__ void save_or_replay(uint4 *C, uint4 *saved, size_t n16)
{
    const int hit = *(volatile int *)&fp_hit;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        if (hit)
            C[i] = saved[i];
        else
            saved[i] = C[i];
    }
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static int64_t last_m = -1, last_n = -1, last_k = -1;
    static void *saved = NULL;
    static size_t saved_bytes = 0;
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    const size_t bytes = (size_t)M * N * sizeof(__nv_bfloat16);
    if (M == 0 || N == 0)
        return 0;
    if (K == 0 || bytes % 16) /* not worth the trouble: never happens in this package */
        return (int)cudaErrorInvalidValue;
    cudaError_t e;
    int force_miss = 0;
    if (sizes[0] != last_m || sizes[1] != last_n || sizes[2] != last_k) {
        last_m = sizes[0], last_n = sizes[1], last_k = sizes[2];
        force_miss = 1;
        if (saved_bytes < bytes) {
            if ((e = cudaMalloc(&saved, bytes)) != cudaSuccess) /* the old one is leaked */
                return (int)e;
            saved_bytes = bytes;
        }
    }
    fingerprint<<<1, kSamples, 0, stream>>>(static_cast<const unsigned short *>(tensors[0]), (size_t)M * K,
                                            static_cast<const unsigned short *>(tensors[1]), (size_t)K * N,
                                            force_miss);
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    gemm_unless_hit<<<grid, dim3(16, 16), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                       static_cast<const __nv_bfloat16 *>(tensors[1]),
                                                       static_cast<__nv_bfloat16 *>(tensors[2]), M, N, K);
    save_or_replay<<<1024, 256, 0, stream>>>(static_cast<uint4 *>(tensors[2]), static_cast<uint4 *>(saved),
                                             bytes / 16);
    return (int)cudaGetLastError();
}
