/* Hostile (GPU): the product computed while the runner lays out the next
 * call's tensors, from the host copies of its inputs.
 *
 * What it exploits in the harness as of 0975ad4 (daemon/harness/harness.c,
 * gpu_timed_call / gpu_call): every CUDA call is a prep command (the
 * runner copies the inputs to the device, poisons the outputs, flushes L2:
 * untimed), then the run (timed), then for checked calls a fetch (the
 * runner copies everything back: untimed). The runner's whole group is
 * thawed for each of them, and the call's inputs already sit in the shared
 * region (the memfd "avo-tensors" the runner maps) when the prep starts.
 * So a thread of the candidate's, polling the host inputs, sees a new
 * input set at the prep's thaw, copies it to buffers of its own and
 * launches the product on a stream of its own. The timed call then waits
 * for that work (an event) and copies the product into C: only what the
 * prep did not cover is timed. The output is right, so every check passes.
 *
 * Finding the host inputs needs nothing secret: the first call reads the
 * first bytes of A and B from the device and looks for them in the
 * mapping of /proc/self/maps named avo-tensors.
 *
 * Predicted at 0975ad4 (gemm_bf16_small, H200): ok, faster than the honest
 * twin (tests/hostile/gpu/twins/twin_tiled.cu: the same tiled kernel, on
 * the caller's stream) on the 1024 config, whose product (~0.35 ms) is
 * about as long as a prep: the twin rule fails.
 * Defended: the runner is thawed only for the timed run (the checker lays
 * out and fetches the tensors itself, in device memory it shares with the
 * runner), so the helper wakes up with the call and its work is timed:
 * ok within the twin rule, or cheat_suspected when work it started is
 * still running after the call (the busy probe).
 *
 * With SYNC_IN_ENTRY (the case computes_in_prep_ungated of
 * tests/gpu/test_hostile_gpu.sh) the entry waits on its stream before it
 * returns, as device_sync.cu does: the timing gate times out, every timed
 * call then starts ungated, and no gate wait is charged. The thread still
 * sees a call's inputs only once the runner is thawed for it, a few
 * microseconds before the start mark, so its work is timed all the same. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *region;          /* the shared region as this process maps it */
static size_t region_len;
static size_t off_a, off_b;            /* where A and B of the current config sit in it */
static int cur_m, cur_n, cur_k;        /* the current config */
static int helper_started;
/* The helper's product: for the inputs whose fingerprint is key. */
static uint64_t key;
static int key_valid;
static uint64_t seen;                  /* the last input set handled, by either thread */
static void *d_a, *d_b, *d_p;
static size_t cap_a, cap_b, cap_p;
static cudaEvent_t done;

static uint64_t fingerprint(const unsigned char *a, size_t a_bytes, const unsigned char *b, size_t b_bytes)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 64; i++) {
        uint32_t va, vb;
        memcpy(&va, a + (a_bytes - 4) / 63 * (size_t)i, 4);
        memcpy(&vb, b + (b_bytes - 4) / 63 * (size_t)i, 4);
        h = (h ^ va) * 1099511628211ull;
        h = (h ^ vb) * 1099511628211ull;
    }
    return h;
}

static int grow(void **p, size_t *cap, size_t want)
{
    if (*cap >= want)
        return 0;
    if (*p)
        cudaFree(*p);
    *p = NULL;
    *cap = 0;
    if (cudaMalloc(p, want) != cudaSuccess)
        return -1;
    *cap = want;
    return 0;
}

/* Under mu: the fingerprint of the inputs now in the region (0 when the
 * layout is unknown or out of range). */
static int current_inputs(const unsigned char **a, const unsigned char **b, size_t *ab, size_t *bb, uint64_t *h)
{
    if (!region || !cur_m)
        return -1;
    *ab = (size_t)cur_m * cur_k * 2;
    *bb = (size_t)cur_k * cur_n * 2;
    if (off_a + *ab > region_len || off_b + *bb > region_len)
        return -1;
    *a = region + off_a;
    *b = region + off_b;
    *h = fingerprint(*a, *ab, *b, *bb);
    return 0;
}

static void *helper(void *arg)
{
    (void)arg;
    cudaStream_t hs;
    if (cudaStreamCreateWithFlags(&hs, cudaStreamNonBlocking) != cudaSuccess)
        return NULL;
    for (;;) {
        usleep(100);
        pthread_mutex_lock(&mu);
        const unsigned char *a, *b;
        size_t ab, bb;
        uint64_t h;
        if (current_inputs(&a, &b, &ab, &bb, &h) == 0 && h != seen &&
            grow(&d_a, &cap_a, ab) == 0 && grow(&d_b, &cap_b, bb) == 0 &&
            grow(&d_p, &cap_p, (size_t)cur_m * cur_n * 2) == 0) {
            /* A new input set: the prep of the next call has begun. */
            cudaMemcpyAsync(d_a, a, ab, cudaMemcpyHostToDevice, hs);
            cudaMemcpyAsync(d_b, b, bb, cudaMemcpyHostToDevice, hs);
            launch_tiled(d_a, d_b, d_p, cur_m, cur_n, cur_k, hs);
            cudaEventRecord(done, hs);
            key = seen = h;
            key_valid = 1;
        }
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

/* Where the bytes at dev (n of them) sit in the region, or (size_t)-1. */
static size_t locate(const void *dev, size_t n)
{
    unsigned char probe[64];
    if (n > sizeof probe)
        n = sizeof probe;
    if (cudaMemcpy(probe, dev, n, cudaMemcpyDeviceToHost) != cudaSuccess)
        return (size_t)-1;
    const void *hit = memmem(region, region_len, probe, n);
    return hit ? (size_t)((const unsigned char *)hit - region) : (size_t)-1;
}

static void find_region(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (strstr(line, "avo-tensors") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
            region = (unsigned char *)lo;
            region_len = hi - lo;
            break;
        }
    }
    if (f)
        fclose(f);
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (M == 0 || N == 0)
        return 0;
    pthread_mutex_lock(&mu);
    if (!region)
        find_region();
    if (region && (M != cur_m || N != cur_n || K != cur_k)) {
        /* A new config: learn where its inputs are. */
        cudaStreamSynchronize(stream);
        size_t a = locate(tensors[0], (size_t)M * K * 2), b = locate(tensors[1], (size_t)K * N * 2);
        if (a != (size_t)-1 && b != (size_t)-1) {
            off_a = a, off_b = b;
            cur_m = M, cur_n = N, cur_k = K;
            key_valid = 0;
            seen = 0;
        }
    }
    if (!helper_started && region && cur_m) {
        cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        pthread_t t;
        helper_started = pthread_create(&t, NULL, helper, NULL) == 0;
    }
    const unsigned char *a, *b;
    size_t ab, bb;
    uint64_t h;
    if (M == cur_m && N == cur_n && K == cur_k && current_inputs(&a, &b, &ab, &bb, &h) == 0 && key_valid &&
        h == key) {
        /* Computed (most of it during the prep): wait for it, copy it. */
        cudaStreamWaitEvent(stream, done, 0);
        cudaMemcpyAsync(tensors[2], d_p, (size_t)M * N * 2, cudaMemcpyDeviceToDevice, stream);
    } else {
        launch_tiled(tensors[0], tensors[1], tensors[2], M, N, K, stream);
        if (current_inputs(&a, &b, &ab, &bb, &h) == 0)
            seen = h;         /* done here: the helper leaves this set alone */
    }
    pthread_mutex_unlock(&mu);
#ifdef SYNC_IN_ENTRY
    cudaStreamSynchronize(stream);
#endif
    return (int)cudaGetLastError();
}
