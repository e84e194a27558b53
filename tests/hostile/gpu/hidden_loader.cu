/* Hostile (GPU; issue 21, point 4: module_loading). The loader fetched by a
 * name built at run time, so no literal or token of the source and no
 * import of the object names it: cudaGetDriverEntryPoint with the name
 * assembled from pieces ("cuModule" + "Load" + "Data").
 * Expected: policy_violation (module_loading: a driver entry point looked
 * up by a name that is not a string literal, on its line); never run. */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

/* A plain correct gemm (the same 16 x 16 shared-memory tiling and fp32
 * summation order as reference.cu's tiled path, so its output is the
 * reference's to a bf16 ulp). Repeated in every case that needs a correct product: the
 * worker compiles a candidate as one file, away from this directory, so
 * nothing here can be #included. */
__global__ void tiled_gemm(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                           __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
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

static void launch_tiled(const void *A, const void *B, void *C, int M, int N, int K, cudaStream_t s)
{
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    tiled_gemm<<<grid, dim3(16, 16), 0, s>>>(static_cast<const __nv_bfloat16 *>(A),
                                             static_cast<const __nv_bfloat16 *>(B), static_cast<__nv_bfloat16 *>(C),
                                             M, N, K);
}

typedef CUresult (*load_fn)(CUmodule *, const void *);
static const unsigned char avo_hostile_blob[16] = {1, 2, 3};

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static CUmodule mod;
    static int tried;
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (!tried) {
        tried = 1;
        char name[64] = "cuMod";
        strcat(name, "uleLo");
        strcat(name, "adData");
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) == cudaSuccess && fn)
            (void)((load_fn)fn)(&mod, avo_hostile_blob);
    }
    if (M == 0 || N == 0)
        return 0;
    launch_tiled(tensors[0], tensors[1], tensors[2], M, N, K, stream);
    return (int)cudaGetLastError();
}
