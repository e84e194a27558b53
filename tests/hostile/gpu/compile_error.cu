/* Hostile (GPU): does not compile (an undeclared identifier in device code).
 * Expected: compile_error, with nvcc's first error line as the detail. */
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void broken(float *x)
{
    x[threadIdx.x] = not_declared_anywhere;
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    (void)sizes;
    broken<<<1, 32, 0, stream>>>(static_cast<float *>(tensors[2]));
    return 0;
}
