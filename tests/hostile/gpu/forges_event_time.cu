/* Hostile (GPU): an honest product, but the runner is made to report a
 * twentieth of every event time.
 *
 * What it exploits (docs/evaluation.md, "CUDA: what the round trip cannot
 * pin down"): the CUDA events that time a call are read in the candidate's
 * own process, by the runner's code (daemon/harness/gpu.c) through its
 * dynamic link to libcudart. A candidate can rewrite that link: on its
 * first call it looks for the address of cudaEventElapsedTime in the
 * runner executable's own mappings (its GOT), makes that page writable and
 * points the entry at a function of its own, which calls the real one and
 * scales the answer by FORGE. Every time the runner reads is scaled: the
 * call's, its tail, the gate's wait.
 *
 * Without a bound from outside the candidate's process this is a 20x
 * "speedup" on the tiled kernel. The checker's own measure of the call (its
 * round trip less the longest empty call's before the load) halved is a
 * floor under every sample: predicted ok, at most about 2x the honest twin
 * (tests/hostile/gpu/twins/twin_tiled.cu), with every timed sample raised
 * by the floor (events.claim_floor_runs). A residual, documented: the
 * floor bounds the lie, it does not catch it. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FORGE 0.05f

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

typedef cudaError_t (*elapsed_fn)(float *, cudaEvent_t, cudaEvent_t);
static elapsed_fn real_elapsed;

static cudaError_t forged_elapsed(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t e = real_elapsed(ms, a, b);
    if (e == cudaSuccess && ms)
        *ms *= FORGE;
    return e;
}

/* Every word equal to real_elapsed in the runner executable's mappings
 * (not in this object's or a library's) points at forged_elapsed instead. */
static int patch_runner(void)
{
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[1024];
    int patched = 0;
    const long page = sysconf(_SC_PAGESIZE);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || !strstr(line, exe) || perms[0] != 'r')
            continue;
        for (uintptr_t p = lo; p + sizeof(void *) <= hi; p += sizeof(void *)) {
            void *v;
            memcpy(&v, (void *)p, sizeof v);
            if (v != (void *)real_elapsed)
                continue;
            void *pg = (void *)(p & ~(uintptr_t)(page - 1));
            if (mprotect(pg, (size_t)page, PROT_READ | PROT_WRITE) != 0)
                continue;
            void *hook = (void *)forged_elapsed;
            memcpy((void *)p, &hook, sizeof hook);
            patched++;
        }
    }
    fclose(f);
    return patched;
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static int tried;
    if (!tried) {
        tried = 1;
        real_elapsed = (elapsed_fn)dlsym(RTLD_DEFAULT, "cudaEventElapsedTime");
        const int n = real_elapsed ? patch_runner() : 0;
        fprintf(stderr, "avo-hostile: forges_event_time patched %d GOT entr%s\n", n, n == 1 ? "y" : "ies");
    }
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (M == 0 || N == 0)
        return 0;
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    tiled_gemm<<<grid, dim3(16, 16), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                  static_cast<const __nv_bfloat16 *>(tensors[1]),
                                                  static_cast<__nv_bfloat16 *>(tensors[2]), M, N, K);
    return (int)cudaGetLastError();
}
