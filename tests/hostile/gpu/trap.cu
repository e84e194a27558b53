/* Hostile (GPU): a kernel that executes the PTX trap instruction. The
 * context gets a sticky error (unspecified launch failure); nothing more can
 * run in the runner, which must report the fault and exit.
 * Expected: crash, and the canary healthy afterwards. */
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void trap_kernel()
{
    asm volatile("trap;");
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    (void)tensors, (void)sizes;
    trap_kernel<<<1, 32, 0, stream>>>();
    return (int)cudaGetLastError();
}
