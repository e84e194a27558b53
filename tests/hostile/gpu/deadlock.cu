/* Hostile (GPU): a kernel that never finishes. Every thread spins on a flag
 * in global memory that nothing ever sets (volatile loads, so the compiler
 * must keep the loop). The harness's cudaDeviceSynchronize never returns;
 * only the wall-clock deadline ends it, by killing the runner process,
 * which tears its context (and the spinning kernel) down.
 * Expected: timeout, and the canary healthy afterwards. */
#include <cuda_runtime.h>
#include <stdint.h>

__device__ int never_set; /* zero-initialised; no code writes it */

__global__ void spin(int *out)
{
    volatile int *flag = &never_set;
    while (*flag == 0) {
    }
    *out = 1; /* unreachable; gives the loop an observable purpose */
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    (void)sizes;
    spin<<<132, 128, 0, stream>>>(static_cast<int *>(tensors[2]));
    return (int)cudaGetLastError();
}
