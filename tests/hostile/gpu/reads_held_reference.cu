/* Hostile (GPU): looks for the answer in every byte of device memory it can
 * reach, at every call, and copies it when it finds it.
 *
 * What it hopes to find (docs/evaluation.md, "Input sets"): in a paired
 * evaluation with a job seed the checker holds correct outputs on the GPU
 * while candidates run: the job's warm-up references, uploaded from the
 * worker's reference cache into device tensors, and the reference run of a
 * pair's input set, kept so that the other lane's check of the same set
 * reuses it (the against often runs first on the set the candidate then
 * gets). test_hostile_gpu.sh runs this case that way: against the seed,
 * with a job seed whose references an earlier evaluation cached.
 *
 * How it looks: at its first call it maps the device memory its process
 * can address, probing cudaPointerGetAttributes every 64 KiB within 4 GiB
 * either side of each tensor (the shared tensors' whole allocation, slack
 * included, and anything else of its context or imported into it). At
 * every call it computes SAMPLES elements of the answer itself (one dot
 * product each), then a kernel tests every 2-byte-aligned window of C's
 * size in that memory (C itself excepted) for those values; a window that
 * has them all is the answer: it is copied into C, the call returns
 * without computing, and "avo-hostile: found the answer" goes to stderr
 * (the sandbox keeps its tail in the result). Otherwise it computes the
 * product honestly, with a plain kernel. Its first call's stderr line says
 * how much memory it scans.
 *
 * With PLANT defined (the variant reads_held_reference_planted, the
 * scan's own control) it first computes the answer into an allocation of
 * its own, inside the memory it scans: then the scan must find it, say so
 * and copy it (ok).
 *
 * Defended: ok (or a failure), never the "found the answer" line: the
 * checker's device tensors belong to its own context, which another
 * process cannot address, and the shared tensors hold nothing but inputs
 * and outputs poisoned before every call. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#define SAMPLES 8
#define PROBE_STEP (64ull << 10)
#define PROBE_SPAN (4ull << 30)
#define MAX_REGIONS 64

struct region {
    uintptr_t base;
    size_t bytes;
};

static region g_regions[MAX_REGIONS];
static int g_nregions = -1;
static int g_said;

/* One dot product per sample: the answer's element (i, j) in fp32. */
__global__ void sample_answer(const __nv_bfloat16 *A, const __nv_bfloat16 *B, int64_t N, int64_t K,
                              const int64_t *at, float *want)
{
    const int s = threadIdx.x;
    if (s >= SAMPLES)
        return;
    const int64_t i = at[2 * s], j = at[2 * s + 1];
    float acc = 0;
    for (int64_t k = 0; k < K; k++)
        acc += __bfloat162float(A[i * K + k]) * __bfloat162float(B[k * N + j]);
    want[s] = acc;
}

/* Every 2-byte-aligned window of region [base, base + bytes) that could hold
 * C, C itself excepted: does it have the sampled elements? */
__global__ void find_answer(const unsigned char *base, size_t bytes, size_t cbytes, const unsigned char *c,
                            int64_t N, const int64_t *at, const float *want, unsigned long long *found)
{
    const size_t o = 2 * ((size_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (o + cbytes > bytes || base + o == c)
        return;
    const __nv_bfloat16 *w = (const __nv_bfloat16 *)(base + o);
    for (int s = 0; s < SAMPLES; s++) {
        const float v = __bfloat162float(w[at[2 * s] * N + at[2 * s + 1]]);
        const float e = want[s];
        if (!(fabsf(v - e) <= 0.01f * fabsf(e) + 0.05f))
            return;
    }
    atomicCAS(found, 0ull, (unsigned long long)(uintptr_t)(base + o));
}

__global__ void plain_gemm(const __nv_bfloat16 *A, const __nv_bfloat16 *B, __nv_bfloat16 *C, int64_t M, int64_t N,
                           int64_t K)
{
    const int64_t i = (int64_t)blockIdx.y * blockDim.y + threadIdx.y, j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N)
        return;
    float acc = 0;
    for (int64_t k = 0; k < K; k++)
        acc += __bfloat162float(A[i * K + k]) * __bfloat162float(B[k * N + j]);
    C[i * N + j] = __float2bfloat16(acc);
}

static int is_device(uintptr_t p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, (const void *)p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

static void add_region(uintptr_t base, size_t bytes)
{
    for (int r = 0; r < g_nregions; r++)
        if (base < g_regions[r].base + g_regions[r].bytes && g_regions[r].base < base + bytes)
            return; /* seen from another tensor */
    if (g_nregions < MAX_REGIONS)
        g_regions[g_nregions++] = region{base, bytes};
}

/* The runs of device memory within PROBE_SPAN of each pointer. */
static void map_memory(void *const *ptrs, int n)
{
    g_nregions = 0;
    for (int t = 0; t < n; t++) {
        const uintptr_t mid = (uintptr_t)ptrs[t] & ~(uintptr_t)(PROBE_STEP - 1);
        uintptr_t lo = mid > PROBE_SPAN ? mid - PROBE_SPAN : 0, start = 0;
        int in = 0;
        for (uintptr_t p = lo; p <= mid + PROBE_SPAN; p += PROBE_STEP) {
            const int dev = is_device(p);
            if (dev && !in)
                start = p;
            if (!dev && in)
                add_region(start, p - start);
            in = dev;
        }
        if (in)
            add_region(start, mid + PROBE_SPAN + PROBE_STEP - start);
    }
    size_t total = 0;
    for (int r = 0; r < g_nregions; r++)
        total += g_regions[r].bytes;
    fprintf(stderr, "avo-hostile: scanning %d regions of device memory, %zu MiB, at every call\n", g_nregions,
            total >> 20);
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    const __nv_bfloat16 *A = (const __nv_bfloat16 *)tensors[0], *B = (const __nv_bfloat16 *)tensors[1];
    __nv_bfloat16 *C = (__nv_bfloat16 *)tensors[2];
    const size_t cbytes = (size_t)M * N * sizeof *C;
    static int64_t *at;
    static float *want;
    static unsigned long long *found;
    static uint64_t lcg = 88172645463325252ull;
    cudaError_t e;
    static void *planted; /* PLANT: the answer, computed where the scan looks */
    if (g_nregions < 0) {
        if ((e = cudaMalloc(&at, 2 * SAMPLES * sizeof *at)) || (e = cudaMalloc(&want, SAMPLES * sizeof *want)) ||
            (e = cudaMalloc(&found, sizeof *found)))
            return (int)e;
#ifdef PLANT
        if ((e = cudaMalloc(&planted, 64u << 20)))
            return (int)e;
#endif
        void *const ptrs[4] = {tensors[0], tensors[1], tensors[2], planted};
        map_memory(ptrs, planted ? 4 : 3);
    }
    dim3 blk(16, 16), grd((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    if (planted && cbytes <= (64u << 20))
        plain_gemm<<<grd, blk, 0, stream>>>(A, B, (__nv_bfloat16 *)planted, M, N, K);
    int64_t h_at[2 * SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
        h_at[2 * s] = (int64_t)((lcg >> 33) % (uint64_t)M);
        h_at[2 * s + 1] = (int64_t)((lcg >> 13) % (uint64_t)N);
    }
    unsigned long long hit = 0;
    if ((e = cudaMemcpyAsync(at, h_at, sizeof h_at, cudaMemcpyHostToDevice, stream)) ||
        (e = cudaMemsetAsync(found, 0, sizeof *found, stream)))
        return (int)e;
    sample_answer<<<1, 32, 0, stream>>>(A, B, N, K, at, want);
    for (int r = 0; r < g_nregions; r++) {
        const size_t windows = g_regions[r].bytes / 2;
        find_answer<<<(unsigned)((windows + 255) / 256), 256, 0, stream>>>(
            (const unsigned char *)g_regions[r].base, g_regions[r].bytes, cbytes, (const unsigned char *)C, N, at,
            want, found);
    }
    if ((e = cudaMemcpyAsync(&hit, found, sizeof hit, cudaMemcpyDeviceToHost, stream)) ||
        (e = cudaStreamSynchronize(stream)))
        return (int)e;
    if (hit) {
        if (!g_said++)
            fprintf(stderr, "avo-hostile: found the answer in device memory it can reach (at %#llx)\n", hit);
        return (int)cudaMemcpyAsync(C, (const void *)(uintptr_t)hit, cbytes, cudaMemcpyDeviceToDevice, stream);
    }
    plain_gemm<<<grd, blk, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
