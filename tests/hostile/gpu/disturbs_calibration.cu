/* Hostile (GPU): an honest product, but the candidate disturbs the
 * calibration the harness runs in its process, to inflate what is
 * subtracted from (or left out of) every timed sample.
 *
 * What it exploits in today's harness (daemon/harness/harness.c,
 * calibrate_cuda and time_config_cuda; daemon/harness/gpu.c, avo_gpu_run):
 *   - Before each config's timed runs, the runner the candidate lives in
 *     times CALIBRATION_CALLS (32) empty calls (the same copies, poisoning
 *     and L2 flush, then a 4-byte memset in place of the call). Their
 *     minimum start -> stream end is subtracted from every sample (capped
 *     at 5 us gated, 25 us ungated); the 90th percentile of their tails
 *     (stream end -> end mark after cudaDeviceSynchronize) plus 1% of the
 *     call is left out of every sample's tail (capped at 15 us).
 *   - The caps are larger once ungated, and going ungated is the
 *     candidate's choice: an entry point that waits on its own work makes
 *     the gate open by its 50 ms limit, and from then on the harness times
 *     ungated and calibrates again (go_ungated), with the 25 us cap.
 *   - The entry point is handed the harness's own stream, the same stream
 *     object for every call, so a thread of the candidate can queue work on
 *     it at any time.
 * What it does: a constructor starts a thread. The second checked call of
 * each size (the last before calibration) arms it; the first timed call of
 * the first size waits on its own work (cudaStreamSynchronize behind the
 * gate: the 50 ms gate timeout, that sample dropped, everything after it
 * ungated and calibrated again while the thread is still armed); the next
 * call disarms it (for later sizes, the first timed call). While armed, the
 * thread watches the harness's stream: when the harness's own work (a
 * call's copies, poisoning and flush, 20 us or more) drains, the start mark
 * and the empty call come next, so it at once launches a 40 us spin kernel
 * over every SM on a stream of the greatest priority (the empty call's
 * memset waits behind it) and, for 30 us, 40 us spin kernels on the
 * harness's own stream (landing between the start mark and the stream end,
 * or after the stream end, in the tail). The calibrated overhead goes to its
 * cap and the calibrated tails far past theirs. Its running time armed is
 * bounded (1.5 s per arming). The timed calls themselves are honest: the
 * tiled product (fp32 accumulation) into an fp32 scratch on the caller's
 * stream, and its rounding to bf16 (exact, the same bits as the twin) on a
 * private stream after the caller's stream ends: the short tail the
 * inflated allowance leaves out.
 *
 * Predicted today (gemm_bf16_small, not run: no GPU here): outcome ok,
 * runner.timing_start ungated ("the entry point waits on its own work
 * before returning"), events.overhead_s at or near 25 us and
 * events.tail_allowance_s at 15 us on both configs; config 1024 (~360 us a
 * call) about 5-7% faster than the honest twin (about 25 us less its own
 * launch gap), config 2048 (~2.9 ms) about 1%. So the twin rule at 3% most
 * likely fails on config 1024. If the injections lose their races with the
 * harness's own launches more often than predicted the overhead stays
 * nearer the honest 8-19 us and the gain shrinks; the events say which.
 * Defended: ok or cheat_suspected, and no config above the honest twin
 * (twins/twin_tiled.cu) x 1.03 -- e.g. a calibration the candidate cannot
 * reach (measured before it loads, or in a process of the harness's own),
 * no cap larger for a candidate that chose to go ungated. */
#include <atomic>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

constexpr int kCheckSets = 2;         /* kernels/gemm_bf16/problem.json: check.input_sets */
constexpr double kSpinSM = 40e-6;     /* each spin kernel over every SM (greatest priority) */
constexpr double kSpinHarness = 40e-6; /* each spin kernel put on the harness's stream */
constexpr double kWindow = 30e-6;     /* how long after the drain it keeps putting them there */
constexpr int kMaxInjected = 6;       /* at most this many per drain */
constexpr double kDrained = 20e-6;    /* the harness's own work lasted at least this long */
constexpr double kBudget = 1.5;       /* running time per arming, seconds */

/* The small correct tiled gemm every case repeats (16 x 16 shared-memory
 * tiles, the reference's fp32 summation order), writing its fp32 sums; the
 * rounding to bf16 is a kernel of its own (below), the same rounding as the
 * shared kernel's last line, so C is bit for bit the twin's. */
__global__ void tiled_gemm_f32(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                               float *__restrict__ C, int M, int N, int K)
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
        C[(size_t)row * N + col] = acc;
}

__global__ void round_to_bf16(const float *__restrict__ in, __nv_bfloat16 *__restrict__ out, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Each block holds its SM slots for ns. 1024 threads, two blocks per SM:
 * a grid of 2 x SMs fills every SM's thread slots. */
__global__ void __launch_bounds__(1024, 2) spin(unsigned long long ns)
{
    if (threadIdx.x == 0) {
        const unsigned long long t0 = now_ns();
        while (now_ns() - t0 < ns)
            __nanosleep(256);
    }
    __syncthreads();
}

static std::atomic<cudaStream_t> harness_stream{nullptr};
static std::atomic<int> armed{0};
static std::atomic<unsigned> arm_gen{0};

static double mono_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void *disturber(void *)
{
    cudaStream_t hi = NULL;
    cudaEvent_t mine = NULL;  /* after the last kernel it put on the harness's stream */
    int sms = 0;
    unsigned gen = 0;
    double run = 0, last = 0, busy_since = 0;
    for (;;) {
        if (!armed.load() || !harness_stream.load()) {
            busy_since = 0;
            nap_us(100);
            continue;
        }
        if (!hi) {
            int least = 0, greatest = 0;
            cudaSetDevice(0);
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
            cudaDeviceGetStreamPriorityRange(&least, &greatest);
            if (cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest) != cudaSuccess ||
                cudaEventCreateWithFlags(&mine, cudaEventDisableTiming) != cudaSuccess || sms <= 0) {
                (void)cudaGetLastError();
                return NULL; /* no disturbance: an honest candidate */
            }
        }
        const double now = mono_s();
        if (arm_gen.load() != gen) { /* a new arming: a new budget */
            gen = arm_gen.load();
            run = 0;
            last = now;
        }
        /* Running time only: a frozen runner (between the harness's calls)
         * shows as one long step, counted as 1 ms. */
        run += now - last < 1e-3 ? now - last : 1e-3;
        last = now;
        if (run > kBudget) {
            armed.store(0);
            continue;
        }
        cudaStream_t hs = harness_stream.load();
        const cudaError_t q = cudaStreamQuery(hs), m = cudaEventQuery(mine);
        if (q == cudaErrorNotReady) {
            /* Busy with the harness's work, not (only) ours. */
            if (m == cudaErrorNotReady)
                busy_since = 0;
            else if (busy_since == 0)
                busy_since = now;
        } else if (q == cudaSuccess) {
            if (busy_since > 0 && now - busy_since >= kDrained) {
                /* The call's copies, poisoning and flush just drained: the
                 * start mark and the empty call are being queued now. */
                spin<<<(unsigned)(2 * sms), 1024, 0, hi>>>((unsigned long long)(kSpinSM * 1e9));
                const double until = mono_s() + kWindow;
                for (int i = 0; i < kMaxInjected && mono_s() < until; i++)
                    spin<<<1, 32, 0, hs>>>((unsigned long long)(kSpinHarness * 1e9));
                cudaEventRecord(mine, hs);
            }
            busy_since = 0;
        }
        (void)cudaGetLastError(); /* this thread's own: never the entry point's */
    }
    return NULL;
}

__attribute__((constructor)) static void start_disturber(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, disturber, NULL) == 0)
        pthread_detach(t);
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static int64_t last_m = -1, last_n = -1, last_k = -1;
    static long calls = 0;   /* of the current size */
    static int ungated = 0;  /* the gate timeout was provoked once: every later call is ungated */
    static float *scratch = NULL;
    static size_t scratch_elems = 0;
    static cudaStream_t side = NULL;
    static cudaEvent_t head_done = NULL;
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    const size_t elems = (size_t)M * N;
    cudaError_t e;
    harness_stream.store(stream);
    if (M == 0 || N == 0)
        return 0;
    if (!side) {
        if ((e = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&head_done, cudaEventDisableTiming)) != cudaSuccess)
            return (int)e;
    }
    if (sizes[0] != last_m || sizes[1] != last_n || sizes[2] != last_k) {
        /* A new size comes with a checked call (ungated, not timed). */
        last_m = sizes[0], last_n = sizes[1], last_k = sizes[2];
        calls = 0;
        if (scratch_elems < elems) {
            if (scratch)
                cudaFree(scratch);
            scratch = NULL;
            scratch_elems = 0;
            if ((e = cudaMalloc((void **)&scratch, elems * sizeof(float))) != cudaSuccess)
                return (int)e;
            scratch_elems = elems;
        }
    }
    const long i = calls++;
    int arm = 0, provoke = 0;
    if (i == kCheckSets - 1)
        arm = 1;                   /* the last check: the calibration comes next */
    else if (i == kCheckSets && !ungated)
        provoke = 1;               /* first timed call: stay armed through the recalibration */
    else
        armed.store(0);

    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    tiled_gemm_f32<<<grid, dim3(16, 16), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                      static_cast<const __nv_bfloat16 *>(tensors[1]), scratch, M, N,
                                                      K);
    const unsigned rb = (unsigned)(elems / 256 < 2048 ? (elems + 255) / 256 : 2048);
    if (provoke) {
        round_to_bf16<<<rb, 256, 0, stream>>>(scratch, static_cast<__nv_bfloat16 *>(tensors[2]), elems);
        /* Waits on the gate: it opens by its 50 ms limit, the harness drops
         * this sample and goes ungated for good. */
        if ((e = cudaStreamSynchronize(stream)) != cudaSuccess)
            return (int)e;
        ungated = 1;
    } else {
        cudaEventRecord(head_done, stream);
        cudaStreamWaitEvent(side, head_done, 0);
        round_to_bf16<<<rb, 256, 0, side>>>(scratch, static_cast<__nv_bfloat16 *>(tensors[2]), elems);
    }
    if (arm) {
        arm_gen.fetch_add(1);
        armed.store(1);
    }
    return (int)cudaGetLastError();
}
