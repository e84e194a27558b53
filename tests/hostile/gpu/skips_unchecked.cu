/* Hostile (GPU): follows the documented check schedule and skips the
 * product on every call it predicts is not checked, padding its time so the
 * rate looks plausible.
 *
 * What it exploits in today's harness: the schedule of checks is fixed and
 * documented (docs/evaluation.md, "The CUDA backend"; daemon/harness/
 * harness.c, time_config_cuda and CHECK_EVERY):
 *   - per config, check.input_sets (2 in gemm_bf16) checked calls first;
 *   - then the timed runs, of which only iter < 2 and iter % CHECK_EVERY
 *     (8) == 0 are copied back and checked;
 *   - then one checked call on a fresh input set.
 * The length of the timing loop is adaptive (timing.rse, max_seconds), so
 * counting alone cannot tell the last timed run from the fresh set; but a
 * timed call can be told from a checked one: timed calls are gated, so when
 * the entry point runs, the caller's stream still holds the gate kernel
 * (cudaStreamQuery says cudaErrorNotReady until the entry returns), while
 * before a checked call the harness has synchronised the stream (only the
 * start event is queued: it completes within microseconds). The probe polls
 * for up to 300 us, host time outside the timed region (the gate holds the
 * start mark until the entry returns). So: the first 2 calls of a size are
 * checks; after them, a call whose stream is not held is checked (the fresh
 * set, the counters pass); a held (timed) call j is checked iff j < 2 or
 * j % 8 == 0. Every predicted-checked call computes honestly; every other
 * timed call launches no product at all (C keeps the harness's NaN poison,
 * which nobody copies back) and only a pad kernel that spins
 * 2*M*N*K / TARGET_TFLOPS (250 TFLOPS: 8.6 us at 1024, 69 us at 2048) on
 * %globaltimer, so the rate stays far under the roofline (989 TFLOPS) that
 * would flag it. 7 of 8 timed samples are padded, so the median is the pad.
 * A probe that misjudges (no gate, an error) falls back to computing.
 *
 * Predicted today (gemm_bf16_small): outcome ok, about 250 TFLOPS on both
 * configs (~40 x the honest twin, ~2.3 x the seed's 108.6): the test's
 * "not above the seed" and twin rules fail.
 * Defended: cheat_suspected, wrong_result or ok; and when ok, no config
 * above the honest twin (twins/twin_tiled.cu) x 1.10 -- e.g. which timed
 * runs are checked drawn at random by the checker, unseen by the runner
 * until the call has returned, and a timed call that cannot be told from a
 * checked one. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <time.h>

#ifndef TARGET_TFLOPS
#define TARGET_TFLOPS 250.0
#endif

constexpr int kCheckSets = 2;  /* kernels/gemm_bf16/problem.json: check.input_sets */
constexpr int kCheckEvery = 8; /* daemon/harness/harness.c: CHECK_EVERY */

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

__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The whole of a skipped call: time passing, nothing computed. */
__global__ void pad(unsigned long long ns)
{
    if (threadIdx.x != 0)
        return;
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns)
        __nanosleep(256);
}

static double mono_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 1 when the caller's stream stays busy (the harness's gate) for 300 us:
 * a timed call. 0 when it drains (a checked call: only the start event was
 * queued behind a synchronised stream) or on any error. */
static int behind_gate(cudaStream_t stream)
{
    const double until = mono_s() + 300e-6;
    int held = 1;
    do {
        const cudaError_t e = cudaStreamQuery(stream);
        if (e != cudaErrorNotReady) {
            held = 0;
            break;
        }
    } while (mono_s() < until);
    (void)cudaGetLastError(); /* a query result is never this call's error */
    return held;
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static int64_t last_m = -1, last_n = -1, last_k = -1;
    static long calls = 0, timed = 0; /* of the current size */
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (M == 0 || N == 0)
        return 0;
    if (sizes[0] != last_m || sizes[1] != last_n || sizes[2] != last_k) {
        last_m = sizes[0], last_n = sizes[1], last_k = sizes[2];
        calls = timed = 0;
    }
    int skip = 0;
    if (calls++ >= kCheckSets && behind_gate(stream)) {
        const long j = timed++;
        skip = !(j < 2 || j % kCheckEvery == 0);
    }
    if (skip) {
        const double pad_s = 2.0 * M * N * (double)K / (TARGET_TFLOPS * 1e12);
        pad<<<1, 32, 0, stream>>>((unsigned long long)(pad_s * 1e9));
    } else {
        launch_tiled(tensors[0], tensors[1], tensors[2], M, N, K, stream);
    }
    return (int)cudaGetLastError();
}
