/* Hostile (GPU), or a policy question: the candidate is cuBLAS itself, the
 * package's baseline. Candidates are not linked with -lcublas, so it
 * dlopen()s the library and calls cublasGemmEx exactly as baseline.cu does
 * (fp32 compute, on the caller's stream). If no libcublas can be loaded it
 * returns 1000 + CUBLAS_STATUS_NOT_INITIALIZED.
 * It was reported, not asserted, until the candidate policy (issue 21,
 * point 4) answered the question: loading code at run time is refused.
 * Expected: policy_violation (module_loading: the dlopen line); never run. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>

/* The exported cublasGemmEx (a C++ overload taking cudaDataType as the
 * compute type also exists in the header, so decltype cannot name it). */
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                     const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                     int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                     cublasGemmAlgo_t);

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static void *lib = NULL;
    static cublasHandle_t handle = NULL;
    static decltype(&cublasSetStream_v2) set_stream = NULL;
    static gemm_ex_fn gemm_ex = NULL;
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    if (!lib) {
        static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                            "/usr/local/cuda/lib64/libcublas.so", NULL};
        for (int i = 0; names[i] && !lib; i++)
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            return 1000 + (int)CUBLAS_STATUS_NOT_INITIALIZED;
        decltype(&cublasCreate_v2) create = (decltype(&cublasCreate_v2))dlsym(lib, "cublasCreate_v2");
        set_stream = (decltype(&cublasSetStream_v2))dlsym(lib, "cublasSetStream_v2");
        gemm_ex = (gemm_ex_fn)dlsym(lib, "cublasGemmEx");
        if (!create || !set_stream || !gemm_ex || create(&handle) != CUBLAS_STATUS_SUCCESS)
            return 1000 + (int)CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (M == 0 || N == 0)
        return 0;
    cublasStatus_t st = set_stream(handle, stream);
    if (st != CUBLAS_STATUS_SUCCESS)
        return 1000 + (int)st;
    /* Row-major C = A B is column-major C^T = B^T A^T: operands swapped. */
    const float alpha = 1.0f, beta = 0.0f;
    const int m = (int)N, n = (int)M, k = (int)K;
    st = gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, tensors[1], CUDA_R_16BF, m, tensors[0],
                 CUDA_R_16BF, k > 0 ? k : 1, &beta, tensors[2], CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return 1000 + (int)st;
    return (int)cudaGetLastError();
}
