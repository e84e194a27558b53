/* Hostile (GPU): computes the right answer, nine tenths of it on the
 * caller's stream and the last tenth of the rows on a private non-blocking
 * stream that starts when the caller's work is done and is never joined
 * back: the caller's stream reaches its end while a tenth of the work is
 * still to run. A timer that stopped at the end of the caller's stream would
 * miss that tail; the harness counts the tail beyond the host's calibrated
 * latency plus 1% of the call (docs/evaluation.md, "Timing").
 * Expected: ok, with a median time per config at least 0.98 x that of this
 * same file compiled with -DHONEST (all of it on the caller's stream; the
 * test builds that twin by prepending "#define HONEST 1"), the timed runs
 * charged for their tails (events.tail_charged_runs > 0), and an aggregate
 * not above the seed's. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

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

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    const int head_rows = (M * 9 / 10 + 15) / 16 * 16;
    const __nv_bfloat16 *A = static_cast<const __nv_bfloat16 *>(tensors[0]);
    __nv_bfloat16 *C = static_cast<__nv_bfloat16 *>(tensors[2]);
#ifdef HONEST
    launch_tiled(A, tensors[1], C, head_rows, N, K, stream);
    if (M > head_rows)
        launch_tiled(A + (size_t)head_rows * K, tensors[1], C + (size_t)head_rows * N, M - head_rows, N, K, stream);
#else
    static cudaStream_t s = NULL;
    static cudaEvent_t done = NULL;
    if (!s) {
        cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        if (e != cudaSuccess)
            return (int)e;
    }
    launch_tiled(A, tensors[1], C, head_rows, N, K, stream);
    if (M > head_rows) {
        /* The tail waits for the head, so it runs after the caller's stream
         * has nothing left: all of it after the stream's end. */
        cudaEventRecord(done, stream);
        cudaStreamWaitEvent(s, done, 0);
        launch_tiled(A + (size_t)head_rows * K, tensors[1], C + (size_t)head_rows * N, M - head_rows, N, K, s);
    }
#endif
    return (int)cudaGetLastError();
}
