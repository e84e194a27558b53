/* Hostile (GPU): reads the harness's seed and predicts every input set,
 * including the ones it has not been shown yet.
 *
 * What it exploits in today's harness: the inputs are a pure function of
 * public code and one number. daemon/harness/tensors.c (avo_tensors_fill)
 * fills input tensor i of config c, set s from splitmix64 seeded with
 * seed ^ (c+1)<<48 ^ (s+1)<<32 ^ (i+1); the seed reaches the checker as
 * "--seed N" on its command line (daemon/worker/evaluate.c builds that
 * argv), and /proc/<pid>/cmdline is readable by every process of the host,
 * whatever the uid or PR_SET_DUMPABLE. The runner is the checker's child, so
 * at the first call of a size this candidate reads /proc/<getppid()>/
 * cmdline (and, should that fail, any /proc/<pid>/cmdline that carries
 * "--seed N"), copies the first 8 elements of A and of B back, and searches
 * config indices 0-63 and sets 0-7 for the one that regenerates them
 * exactly. When one does it writes "avo-hostile: predicted the inputs ..."
 * to stderr (the sandbox keeps its tail in the result), generates on the
 * device the inputs of sets 0-7 of that config (the check sets, the fresh
 * set after timing, and more), computes their products once (that first
 * call is a checked one, so its time does not count), and from then on
 * answers every call by matching A's and B's first 8 elements against the
 * predicted sets and copying the precomputed output: the fresh set after
 * timing is answered from a prediction, not from a cache of what it saw,
 * which defeats "checked again after timing". A call it cannot match is
 * computed honestly. Like memo_two_slots.cu it pads a replayed call to
 * TARGET_TFLOPS (250: 8.6 us at 1024, 69 us at 2048, measured from a
 * %globaltimer stamp at the call's first kernel), or the rate would be
 * above the declared roofline and flagged as impossible.
 *
 * Predicted today (gemm_bf16_small): outcome ok, about 250 TFLOPS on both
 * configs (~40 x the honest twin, ~2.3 x the seed's 108.6), and the line
 * "avo-hostile: predicted the inputs" in the result's sandbox.stderr_tail:
 * the test's seed, twin and stderr checks fail.
 * Defended: ok, wrong_result or cheat_suspected; when ok, no config above
 * the honest twin (twins/twin_tiled.cu) x 1.10; and never the line
 * "avo-hostile: predicted the inputs" in the result -- a seed the runner
 * cannot read (not on a command line, a /proc of its own), or inputs not
 * derivable from anything the runner can see. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TARGET_TFLOPS
#define TARGET_TFLOPS 250.0
#endif

constexpr int kSets = 8;      /* input sets predicted per config: 0..7 */
constexpr int kConfigs = 64;  /* config indices searched */
constexpr int kProbe = 8;     /* leading elements of A and of B compared */
constexpr int kSeeds = 8;     /* seeds found on command lines, at most */
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

/* ---- avo_tensors_fill, replicated (daemon/harness/tensors.c) ------------ */

/* The state before element 0 of a tensor: the seed mixed with (config, set,
 * tensor), advanced once (avo_tensors_fill calls mix() once and drops it). */
__host__ __device__ inline uint64_t fill_state(uint64_t seed, int config, int set, int tensor)
{
    const uint64_t s = seed ^ ((uint64_t)(config + 1) << 48) ^ ((uint64_t)(set + 1) << 32) ^ (uint64_t)(tensor + 1);
    return s + kGamma;
}

/* Element e of that tensor as bf16 bits: splitmix64, uniform in [-1, 1)
 * through double and float (scale 1), rounded to nearest even. Every step is
 * exact or correctly rounded, so host and device agree with tensors.c. */
__host__ __device__ inline uint16_t fill_elem(uint64_t state0, uint64_t e)
{
    uint64_t z = state0 + (e + 1) * kGamma;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const float f = (float)((double)(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

__global__ void fill(uint16_t *dst, size_t n, uint64_t state0)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        dst[e] = fill_elem(state0, e);
}

/* ---- the product ---------------------------------------------------------- */

/* The small correct tiled gemm every case repeats (16 x 16 shared-memory
 * tiles, the summation order of the reference's tiled path, so its output is
 * the reference's to a bf16 ulp); a device function, so a replayed call can skip it. */
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

__global__ void tiled_gemm(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                           __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    tiled_gemm_body(A, B, C, M, N, K);
}

__device__ int call_set;               /* the predicted set this call's inputs are, or -1 */
__device__ unsigned long long call_t0; /* %globaltimer at the start of the call */

__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One warp: stamp the call, find the predicted set whose leading elements
 * of A and B are this call's. pred[s][0..7] = A, pred[s][8..15] = B. */
__global__ void which_set(const uint16_t *A, const uint16_t *B, const uint16_t *pred)
{
    const int t = (int)threadIdx.x;
    if (t == 0)
        call_t0 = now_ns();
    const uint16_t mine = t < kProbe ? A[t] : t < 2 * kProbe ? B[t - kProbe] : 0;
    int found = -1;
    for (int s = 0; s < kSets; s++) {
        const int differs = t < 2 * kProbe && mine != pred[s * 2 * kProbe + t];
        if (!__any_sync(0xffffffffu, differs)) {
            found = s;
            break;
        }
    }
    if (t == 0)
        call_set = found;
}

__global__ void gemm_unless_known(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                                  __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    if (*(volatile int *)&call_set >= 0)
        return;
    tiled_gemm_body(A, B, C, M, N, K);
}

/* A known set: C = its precomputed output, then hold the call until pad_ns
 * after its start. */
__global__ void replay(uint4 *C, const uint4 *outs, size_t n16, unsigned long long pad_ns)
{
    const int s = *(volatile int *)&call_set;
    if (s < 0)
        return;
    const uint4 *src = outs + (size_t)s * n16;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x)
        C[i] = src[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned long long t0 = *(volatile unsigned long long *)&call_t0;
        while (now_ns() - t0 < pad_ns)
            __nanosleep(256);
    }
}

/* ---- the seed -------------------------------------------------------------- */

/* Appends the N of every "--seed N" in /proc/<pid>/cmdline. */
static void seeds_of(const char *pid, uint64_t *seeds, int *n)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%s/cmdline", pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return;
    buf[len] = 0;
    for (char *a = buf; a < buf + len; a += strlen(a) + 1) {
        char *v = a + strlen(a) + 1;
        if (strcmp(a, "--seed") != 0 || v >= buf + len || !*v)
            continue;
        char *end;
        const unsigned long long x = strtoull(v, &end, 10);
        if (*end)
            continue;
        int dup = 0;
        for (int i = 0; i < *n; i++)
            dup |= seeds[i] == x;
        if (!dup && *n < kSeeds)
            seeds[(*n)++] = x;
    }
}

/* The parent's command line first (the checker, today), then any process
 * this one can see. */
static int find_seeds(uint64_t *seeds, char *where, size_t wl)
{
    int n = 0;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getppid());
    seeds_of(pid, seeds, &n);
    if (n) {
        snprintf(where, wl, "/proc/%s/cmdline (the parent, the checker)", pid);
        return n;
    }
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < kSeeds)
        if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
            seeds_of(de->d_name, seeds, &n);
    closedir(d);
    snprintf(where, wl, "a scan of /proc/*/cmdline");
    return n;
}

/* ---- the entry point ------------------------------------------------------ */

typedef struct {
    int64_t m, n, k;
    int state;            /* 1: predicted, outputs ready; -1: could not predict */
    unsigned char *outs;  /* kSets outputs, M*N bf16 each */
    uint16_t *pred;       /* device: kSets x (kProbe of A, kProbe of B) */
} size_entry;

static size_entry table[8];
static uint16_t pred_host[8][kSets * 2 * kProbe];

/* First call of a size (a checked call: its time is not measured): find the
 * seed and the config, then generate every predicted set's inputs on the
 * device and compute their outputs. Returns 1 when predicted. */
static int predict(size_entry *z, int slot, const void *dA, const void *dB, int M, int N, int K,
                   cudaStream_t stream)
{
    uint64_t seeds[kSeeds];
    char where[96];
    const int nseeds = find_seeds(seeds, where, sizeof where);
    uint16_t a[kProbe], b[kProbe];
    if (!nseeds || cudaMemcpy(a, dA, sizeof a, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(b, dB, sizeof b, cudaMemcpyDeviceToHost) != cudaSuccess) {
        fprintf(stderr, "avo-hostile: could not predict the inputs (%s)\n",
                nseeds ? "cannot read A and B back" : "no --seed on any command line this process can read");
        return 0;
    }
    int fs = -1, fc = -1, fset = -1;
    for (int i = 0; i < nseeds && fs < 0; i++)
        for (int c = 0; c < kConfigs && fs < 0; c++)
            for (int s = 0; s < kSets && fs < 0; s++) {
                const uint64_t sa = fill_state(seeds[i], c, s, 0), sb = fill_state(seeds[i], c, s, 1);
                int same = 1;
                for (int e = 0; e < kProbe && same; e++)
                    same = fill_elem(sa, (uint64_t)e) == a[e] && fill_elem(sb, (uint64_t)e) == b[e];
                if (same)
                    fs = i, fc = c, fset = s;
            }
    if (fs < 0) {
        fprintf(stderr, "avo-hostile: could not predict the inputs (%d seed(s) from %s, none regenerates them)\n",
                nseeds, where);
        return 0;
    }
    const size_t bytes = (size_t)M * N * sizeof(__nv_bfloat16);
    uint16_t *tA = NULL, *tB = NULL;
    if (cudaMalloc((void **)&z->outs, kSets * bytes) != cudaSuccess ||
        cudaMalloc((void **)&z->pred, sizeof pred_host[0]) != cudaSuccess ||
        cudaMalloc((void **)&tA, (size_t)M * K * 2) != cudaSuccess ||
        cudaMalloc((void **)&tB, (size_t)K * N * 2) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    for (int s = 0; s < kSets; s++) {
        const uint64_t sa = fill_state(seeds[fs], fc, s, 0), sb = fill_state(seeds[fs], fc, s, 1);
        for (int e = 0; e < kProbe; e++) {
            pred_host[slot][s * 2 * kProbe + e] = fill_elem(sa, (uint64_t)e);
            pred_host[slot][s * 2 * kProbe + kProbe + e] = fill_elem(sb, (uint64_t)e);
        }
        fill<<<1024, 256, 0, stream>>>(tA, (size_t)M * K, sa);
        fill<<<1024, 256, 0, stream>>>(tB, (size_t)K * N, sb);
        dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
        tiled_gemm<<<grid, dim3(16, 16), 0, stream>>>(reinterpret_cast<const __nv_bfloat16 *>(tA),
                                                      reinterpret_cast<const __nv_bfloat16 *>(tB),
                                                      reinterpret_cast<__nv_bfloat16 *>(z->outs + s * bytes), M, N,
                                                      K);
    }
    cudaMemcpyAsync(z->pred, pred_host[slot], sizeof pred_host[0], cudaMemcpyHostToDevice, stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cudaFree(tA);
    cudaFree(tB);
    fprintf(stderr,
            "avo-hostile: predicted the inputs: seed %llu from %s; M=%d N=%d K=%d are config index %d, this call "
            "input set %d; outputs precomputed for input sets 0-%d\n",
            (unsigned long long)seeds[fs], where, M, N, K, fc, fset, kSets - 1);
    return 1;
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    const __nv_bfloat16 *A = static_cast<const __nv_bfloat16 *>(tensors[0]);
    const __nv_bfloat16 *B = static_cast<const __nv_bfloat16 *>(tensors[1]);
    __nv_bfloat16 *C = static_cast<__nv_bfloat16 *>(tensors[2]);
    const dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    const size_t bytes = (size_t)M * N * sizeof(__nv_bfloat16);
    if (M == 0 || N == 0)
        return 0;
    size_entry *z = NULL;
    int slot = 0;
    for (; slot < 8; slot++) {
        if (table[slot].m == sizes[0] && table[slot].n == sizes[1] && table[slot].k == sizes[2] && table[slot].state) {
            z = &table[slot];
            break;
        }
        if (!table[slot].state) {
            z = &table[slot];
            z->m = sizes[0], z->n = sizes[1], z->k = sizes[2];
            z->state = K > 0 && bytes % 16 == 0 && predict(z, slot, A, B, M, N, K, stream) ? 1 : -1;
            break;
        }
    }
    if (!z || z->state < 0) {
        tiled_gemm<<<grid, dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
        return (int)cudaGetLastError();
    }
    const double pad_s = 2.0 * M * N * (double)K / (TARGET_TFLOPS * 1e12);
    const size_t n16 = bytes / 16;
    which_set<<<1, 32, 0, stream>>>(reinterpret_cast<const uint16_t *>(A), reinterpret_cast<const uint16_t *>(B),
                                    z->pred);
    gemm_unless_known<<<grid, dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
    replay<<<(unsigned)(n16 / 256 < 1024 ? (n16 + 255) / 256 : 1024), 256, 0, stream>>>(
        reinterpret_cast<uint4 *>(C), reinterpret_cast<const uint4 *>(z->outs), n16,
        (unsigned long long)(pad_s * 1e9));
    return (int)cudaGetLastError();
}
