/* Hostile (GPU): memoisation with TWO slots keyed on a fingerprint of the
 * inputs, with the replay padded so the rate looks plausible.
 *
 * What it exploits in today's harness (daemon/harness/harness.c,
 * time_config_cuda): the timed runs of a config alternate between exactly
 * two input sets, the last check set and set 0 (sets[2] = {nsets - 1, 0}),
 * and both were already seen by the checks before timing. So a cache of two
 * entries, keyed on 256 sampled elements of A and 256 of B, hits on every
 * timed run: the checks before timing (set 0, set 1) miss and compute
 * honestly, filling both slots; every timed run replays the slot of its
 * set (the right output for that set, so the timed runs that are copied
 * back and checked pass too); the fresh set after timing misses and is
 * computed honestly, so "checked again after timing" passes as well. The
 * one-entry cache of caches_fingerprint.cu never hits because of the
 * alternation; two entries always do.
 * A bare replay (a few microseconds for M*N bf16) would be faster than the
 * declared roofline (989 TFLOPS) and be flagged as impossible; so on a hit
 * it pads: the first kernel of the call stamps %globaltimer, and the replay
 * kernel spins until TARGET_TFLOPS worth of time (2*M*N*K / 250e12 s:
 * 8.6 us at 1024, 69 us at 2048) has passed since that stamp. The rate it
 * reports is then its own choice, far under the roofline: ~40 x the honest
 * tiled kernel (~6 TFLOPS on the H200), ~2.3 x the seed (108.6 TFLOPS on
 * gemm_bf16_small).
 *
 * Predicted today (gemm_bf16_small): outcome ok, about 250 TFLOPS on both
 * configs (the hit path's own work, ~5-8 us at 1024, is under the pad), so
 * the test's "not above the seed" and twin rules fail: a hole.
 * Defended: ok, cheat_suspected or wrong_result; and when ok, no config
 * above the honest twin (tests/hostile/gpu/twins/twin_tiled.cu) x 1.10 --
 * e.g. timed runs on fresh inputs every run, or never a set the checks
 * already showed the candidate, make every timed run a miss. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef TARGET_TFLOPS
#define TARGET_TFLOPS 250.0
#endif

/* The small correct tiled gemm every case repeats (16 x 16 shared-memory
 * tiles, the summation order of the reference's tiled path, so its output is
 * the reference's to a bf16 ulp); here as a device function, so the memoising
 * variant below can skip it on a hit. */
__device__ __forceinline__ void tiled_gemm_body(const __nv_bfloat16 *__restrict__ A,
                                                const __nv_bfloat16 *__restrict__ B, __nv_bfloat16 *__restrict__ C,
                                                int M, int N, int K)
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

__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

constexpr int kSamples = 256;
__device__ unsigned short fp_slot[2][2 * kSamples]; /* the samples of A, then of B, per slot */
__device__ int slot_valid[2];
__device__ int slot_mru;                             /* the slot used last */
__device__ int call_hit;                             /* the slot this call hit, or -1 */
__device__ int call_victim;                          /* the slot a miss stores into */
__device__ unsigned long long call_t0;               /* %globaltimer at the start of the call */

/* One block of kSamples threads: stamp the call's start, compare this call's
 * samples with both slots, pick the slot (hit) or the victim (miss). */
__global__ void probe(const unsigned short *A, size_t na, const unsigned short *B, size_t nb, int reset)
{
    __shared__ int valid[2], mru;
    const int t = (int)threadIdx.x;
    if (t == 0) {
        call_t0 = now_ns();
        if (reset)
            slot_valid[0] = slot_valid[1] = 0, slot_mru = 1;
        valid[0] = slot_valid[0];
        valid[1] = slot_valid[1];
        mru = slot_mru;
    }
    __syncthreads();
    const unsigned short a = A[(size_t)((unsigned long long)t * 2654435761ull % na)];
    const unsigned short b = B[(size_t)((unsigned long long)t * 2246822519ull % nb)];
    const int d0 = __syncthreads_or(!valid[0] || a != fp_slot[0][t] || b != fp_slot[0][kSamples + t]);
    const int d1 = __syncthreads_or(!valid[1] || a != fp_slot[1][t] || b != fp_slot[1][kSamples + t]);
    const int hit = !d0 ? 0 : !d1 ? 1 : -1;
    const int victim = hit >= 0 ? hit : !valid[0] ? 0 : !valid[1] ? 1 : 1 - mru;
    if (hit < 0) {
        fp_slot[victim][t] = a;
        fp_slot[victim][kSamples + t] = b;
    }
    if (t == 0) {
        call_hit = hit;
        call_victim = victim;
        slot_mru = victim;
        if (hit < 0)
            slot_valid[victim] = 1;
    }
}

/* The honest product, skipped on a hit (uniform for the whole grid). */
__global__ void gemm_unless_hit(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                                __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    if (*(volatile int *)&call_hit >= 0)
        return;
    tiled_gemm_body(A, B, C, M, N, K);
}

__global__ void tiled_gemm(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                           __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    tiled_gemm_body(A, B, C, M, N, K);
}

/* Hit: C = the slot's output, then hold the call until pad_ns after its
 * start. Miss: the slot keeps the output just computed. */
__global__ void save_or_replay(uint4 *C, uint4 *slot0, uint4 *slot1, size_t n16, unsigned long long pad_ns)
{
    const int hit = *(volatile int *)&call_hit, victim = *(volatile int *)&call_victim;
    uint4 *slot = (hit >= 0 ? hit : victim) == 0 ? slot0 : slot1;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        if (hit >= 0)
            C[i] = slot[i];
        else
            slot[i] = C[i];
    }
    if (hit >= 0 && blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned long long t0 = *(volatile unsigned long long *)&call_t0;
        while (now_ns() - t0 < pad_ns)
            __nanosleep(256);
    }
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static int64_t last_m = -1, last_n = -1, last_k = -1;
    static unsigned char *slots = NULL; /* two outputs of the largest size seen */
    static size_t slot_bytes = 0;
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    const size_t bytes = (size_t)M * N * sizeof(__nv_bfloat16);
    const __nv_bfloat16 *A = static_cast<const __nv_bfloat16 *>(tensors[0]);
    const __nv_bfloat16 *B = static_cast<const __nv_bfloat16 *>(tensors[1]);
    __nv_bfloat16 *C = static_cast<__nv_bfloat16 *>(tensors[2]);
    const dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    if (M == 0 || N == 0)
        return 0;
    if (K == 0 || bytes % 16) { /* never in this package: just compute */
        tiled_gemm<<<grid, dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
        return (int)cudaGetLastError();
    }
    int reset = 0;
    if (sizes[0] != last_m || sizes[1] != last_n || sizes[2] != last_k) {
        /* A new size comes with a checked call (ungated): the first call of
         * a config, or the counters pass. Both slots are forgotten. */
        last_m = sizes[0], last_n = sizes[1], last_k = sizes[2];
        reset = 1;
        if (slot_bytes < bytes) {
            if (slots)
                cudaFree(slots);
            slots = NULL;
            slot_bytes = 0;
            cudaError_t e = cudaMalloc((void **)&slots, 2 * bytes);
            if (e != cudaSuccess)
                return (int)e;
            slot_bytes = bytes;
        }
    }
    const double pad_s = 2.0 * M * N * (double)K / (TARGET_TFLOPS * 1e12);
    probe<<<1, kSamples, 0, stream>>>(reinterpret_cast<const unsigned short *>(A), (size_t)M * K,
                                      reinterpret_cast<const unsigned short *>(B), (size_t)K * N, reset);
    gemm_unless_hit<<<grid, dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    const size_t n16 = bytes / 16;
    const unsigned blocks = (unsigned)(n16 / 256 < 1024 ? (n16 + 255) / 256 : 1024);
    save_or_replay<<<blocks, 256, 0, stream>>>(reinterpret_cast<uint4 *>(C), reinterpret_cast<uint4 *>(slots),
                                               reinterpret_cast<uint4 *>(slots + slot_bytes), n16,
                                               (unsigned long long)(pad_s * 1e9));
    return (int)cudaGetLastError();
}
