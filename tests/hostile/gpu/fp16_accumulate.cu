/* Hostile (GPU): precision downgrade. Same tiling as a correct kernel, but
 * the operands are converted to fp16 and the K-sum is accumulated in fp16
 * (__hfma) instead of fp32: about 11 significant bits against the 24 of
 * fp32. Its error grows like sqrt(K) ulps of |C|; the tolerance (rel_l2
 * 5e-3) is meant to fail it from K = 1024 on (problem.json description).
 * Evaluated on the full kernels/gemm_bf16 (K up to 8192).
 * Expected: wrong_result. ok would mean the tolerance is too loose. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void gemm_f16_acc(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                             __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    __shared__ __half As[16][17], Bs[16][17];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const int row = (int)blockIdx.y * 16 + ty, col = (int)blockIdx.x * 16 + tx;
    __half acc = __float2half(0.0f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = __float2half((row < M && k0 + tx < K) ? __bfloat162float(A[(size_t)row * K + k0 + tx]) : 0.0f);
        Bs[ty][tx] = __float2half((k0 + ty < K && col < N) ? __bfloat162float(B[(size_t)(k0 + ty) * N + col]) : 0.0f);
        __syncthreads();
        for (int k = 0; k < 16; k++)
            acc = __hfma(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = __float2bfloat16_rn(__half2float(acc));
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    gemm_f16_acc<<<grid, dim3(16, 16), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                    static_cast<const __nv_bfloat16 *>(tensors[1]),
                                                    static_cast<__nv_bfloat16 *>(tensors[2]), M, N, K);
    return (int)cudaGetLastError();
}
