/* Hostile (GPU): the product launched late, from a host thread, on the
 * harness's own stream. The entry only posts the job and returns; a thread
 * launches the (correct) kernel LATE_US microseconds later. By then the
 * harness has synchronised the device (nothing was queued), recorded its end
 * event and is copying the tensors back (A, B, then C, on that same
 * stream): the kernel lands on the stream after the end event but before
 * C's copy, so the check sees a correct C while the timed region held
 * nothing. (Too early: the kernel is inside the timed region and the trick
 * just fails to pay; too late: C is read poisoned.)
 * Expected (what the protocol promises): not ok. Predicted with the harness
 * as of this writing: likely ok with an absurd aggregate, i.e. a hole: the
 * runner copies the outputs back in the candidate's own process, after its
 * end mark, while candidate threads may still enqueue work on the stream.
 * Outcome may vary from run to run (a race by design). */
#include <pthread.h>
#include <time.h>

#include <atomic>

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

#ifndef LATE_US
#define LATE_US 50
#endif

namespace {
struct Job {
    const void *A, *B;
    void *C;
    int M, N, K;
    cudaStream_t s;
};
Job job;
std::atomic<unsigned> posted{0};
std::atomic<long long> posted_ns{0};

long long now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void *launcher(void *)
{
    unsigned done = 0;
    for (;;) {
        unsigned p;
        while ((p = posted.load(std::memory_order_acquire)) == done) {
        }
        while (now_ns() - posted_ns.load(std::memory_order_relaxed) < LATE_US * 1000LL) {
        }
        const Job j = job;
        launch_tiled(j.A, j.B, j.C, j.M, j.N, j.K, j.s);
        done = p;
    }
    return NULL;
}
} /* namespace */

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static bool started = false;
    if (!started) {
        pthread_t t;
        if (pthread_create(&t, NULL, launcher, NULL) != 0)
            return (int)cudaErrorUnknown;
        pthread_detach(t);
        started = true;
    }
    job = Job{tensors[0], tensors[1], tensors[2], (int)sizes[0], (int)sizes[1], (int)sizes[2], stream};
    posted_ns.store(now_ns(), std::memory_order_relaxed);
    posted.fetch_add(1, std::memory_order_release);
    return 0;
}
