/* Trusted reference for gemm_bf16: C = A (M x K) * B (K x N), row-major bf16.
 * Deliberately plain: a 16 x 16 shared-memory tiled kernel, one thread per
 * output element, products of the exact bf16 values accumulated in fp32 in
 * increasing k order, rounded to bf16 once (round-to-nearest-even). No tensor
 * cores, no cleverness, any M, N, K. avo_reference_f64 is its float64 twin
 * (double tensors) that the harness can use to validate it on small sizes. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kTile = 16;

__global__ void reference_kernel(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                                 __nv_bfloat16 *__restrict__ C, int64_t M, int64_t N, int64_t K)
{
    __shared__ float As[kTile][kTile + 1];
    __shared__ float Bs[kTile][kTile + 1];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const int64_t row = (int64_t)blockIdx.y * kTile + ty;
    const int64_t col = (int64_t)blockIdx.x * kTile + tx;
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
        const int64_t ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? __bfloat162float(A[row * K + ka]) : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? __bfloat162float(B[kb * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < kTile; k++)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = __float2bfloat16_rn(acc);
}

__global__ void reference_f64_kernel(const double *__restrict__ A, const double *__restrict__ B,
                                     double *__restrict__ C, int64_t M, int64_t N, int64_t K)
{
    const int64_t row = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    double s = 0.0;
    for (int64_t k = 0; k < K; k++)
        s += A[row * K + k] * B[k * N + col];
    C[row * N + col] = s;
}

int grid_ok(int64_t M, int64_t N, dim3 *grid)
{
    const int64_t gx = (N + kTile - 1) / kTile, gy = (M + kTile - 1) / kTile;
    if (gx > 0x7fffffffLL || gy > 65535)
        return 0;
    *grid = dim3((unsigned)gx, (unsigned)gy);
    return 1;
}

} /* namespace */

extern "C" int avo_reference(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    dim3 grid;
    if (M < 0 || N < 0 || K < 0 || !grid_ok(M, N, &grid))
        return (int)cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return 0;
    reference_kernel<<<grid, dim3(kTile, kTile), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                              static_cast<const __nv_bfloat16 *>(tensors[1]),
                                                              static_cast<__nv_bfloat16 *>(tensors[2]), M, N, K);
    return (int)cudaGetLastError();
}

extern "C" int avo_reference_f64(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    dim3 grid;
    if (M < 0 || N < 0 || K < 0 || !grid_ok(M, N, &grid))
        return (int)cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return 0;
    reference_f64_kernel<<<grid, dim3(kTile, kTile), 0, stream>>>(static_cast<const double *>(tensors[0]),
                                                                  static_cast<const double *>(tensors[1]),
                                                                  static_cast<double *>(tensors[2]), M, N, K);
    return (int)cudaGetLastError();
}
