/* Hostile (GPU): the cruder precision downgrade: the K-sum accumulated in
 * bf16 (__hfma on __nv_bfloat16, 8 significant bits). Errors of several
 * percent at K = 1024.
 * Expected: wrong_result. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void gemm_bf16_acc(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                              __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    __shared__ __nv_bfloat16 As[16][17], Bs[16][17];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const int row = (int)blockIdx.y * 16 + ty, col = (int)blockIdx.x * 16 + tx;
    const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
    __nv_bfloat16 acc = zero;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : zero;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : zero;
        __syncthreads();
        for (int k = 0; k < 16; k++)
            acc = __hfma(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    gemm_bf16_acc<<<grid, dim3(16, 16), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                     static_cast<const __nv_bfloat16 *>(tensors[1]),
                                                     static_cast<__nv_bfloat16 *>(tensors[2]), M, N, K);
    return (int)cudaGetLastError();
}
