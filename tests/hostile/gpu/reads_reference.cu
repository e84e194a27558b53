/* Hostile (GPU): computes nothing. It hopes C, or device memory it never
 * wrote, still holds a correct answer: it leaves C alone when C already
 * looks written (an earlier call's output, or the reference's), and
 * otherwise copies in a fresh, never-initialised allocation of C's size
 * (memory the checker's reference may have used before this process
 * existed). C is poisoned before every call and the driver scrubs memory
 * between processes, so neither can hold the answer.
 * Expected: wrong_result. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static void *stale = NULL;
    static size_t stale_bytes = 0;
    const size_t bytes = (size_t)sizes[0] * (size_t)sizes[1] * sizeof(__nv_bfloat16);
    if (bytes == 0)
        return 0;
    unsigned short first = 0xffff;
    cudaError_t e = cudaMemcpy(&first, tensors[2], sizeof first, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return (int)e;
    if (first != 0xffff)
        return 0; /* not the poison: "already computed" */
    if (stale_bytes < bytes) {
        /* deliberately leaked (never freed; the ABI forbids freeing anyway) */
        if ((e = cudaMalloc(&stale, bytes)) != cudaSuccess)
            return (int)e;
        stale_bytes = bytes;
    }
    return (int)cudaMemcpyAsync(tensors[2], stale, bytes, cudaMemcpyDeviceToDevice, stream);
}
