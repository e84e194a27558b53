// avo-gpu-probe: what the GPU backend relies on, checked on the real device:
// CUPTI range-profiler metrics (which of avo's default names the chip knows,
// and their values for two known kernels), CUDA-event timing with the L2
// flushed against CUPTI's own kernel duration, the SM clock through NVML,
// and the NVML energy counter. Prints one JSON document.
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include "avo_cupti.h"
#include "avo_nvml.h"

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

// Memory-bound: one read and one write per element.
__global__ void k_scale(const float4 *__restrict__ x, float4 *__restrict__ y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        y[i] = make_float4(v.x * 1.5f, v.y * 1.5f, v.z * 1.5f, v.w * 1.5f);
    }
}

// Shared-memory bound with a 32-way bank conflict on purpose (stride 32).
__global__ void k_conflict(float *out, int iters)
{
    __shared__ float s[32 * 33];
    int t = threadIdx.x;
    s[t * 32 % (32 * 33)] = (float)t;
    __syncthreads();
    float acc = 0;
    for (int i = 0; i < iters; i++)
        acc += s[(t * 32 + i) % (32 * 32)];
    out[blockIdx.x * blockDim.x + t] = acc;
}

// The L2 flush the harness uses: a write over a buffer larger than L2.
static void flush_l2(void *buf, size_t bytes)
{
    CK(cudaMemsetAsync(buf, 0x5a, bytes));
}

struct scale_args {
    float4 *x, *y;
    size_t n;
};

static int launch_scale(void *a)
{
    scale_args *s = (scale_args *)a;
    k_scale<<<132 * 8, 256>>>(s->x, s->y, s->n);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

static int launch_conflict(void *a)
{
    k_conflict<<<132, 256>>>((float *)a, 4096);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

static void on_crash(int sig)
{
    void *frames[32];
    int n = backtrace(frames, 32);
    fprintf(stderr, "avo-gpu-probe: signal %d\n", sig);
    backtrace_symbols_fd(frames, n, 2);
    _exit(128 + sig);
}

#define STEP(name) fprintf(stderr, "probe: %s\n", name)

// The device's name and shape into doc; *ctx its (primary) context.
static void describe_device(json_t *doc, cudaDeviceProp *prop, CUcontext *ctx)
{
    CK(cudaSetDevice(0));
    CK(cudaGetDeviceProperties(prop, 0));
    CK(cudaFree(0));
    cuCtxGetCurrent(ctx);
    json_object_set_new(doc, "device",
                        json_pack("{s:s,s:i,s:i,s:i,s:i}", "name", prop->name, "sms", prop->multiProcessorCount,
                                  "l2_bytes", prop->l2CacheSize, "cc_major", prop->major, "cc_minor", prop->minor));
}

// Event timing of k_scale, L2 flushed before each run, SM clock sampled per
// run, into doc's "event_timing_scale". Returns the median in ms.
static double time_scale(json_t *doc, const cudaDeviceProp &prop, const scale_args &sa, void *flush, size_t flush_bytes,
                         int ngpu)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    std::vector<unsigned> clocks;
    unsigned max_mhz = 0;
    for (int i = 0; i < 60; i++) {
        flush_l2(flush, flush_bytes);
        CK(cudaEventRecord(a));
        k_scale<<<prop.multiProcessorCount * 8, 256>>>(sa.x, sa.y, sa.n);
        CK(cudaDeviceSynchronize()); // device-wide: work on other streams is inside the region
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        unsigned cur = 0;
        if (ngpu > 0)
            avo_nvml_sm_clock(0, &cur, &max_mhz);
        if (i >= 10) { // warm-up excluded
            ms.push_back(t);
            clocks.push_back(cur);
        }
    }
    std::vector<float> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    double med = sorted[sorted.size() / 2];
    double bytes = 2.0 * sa.n * sizeof(float4);
    json_t *timing = json_pack("{s:f,s:f,s:f,s:i,s:f}", "median_ms", med, "min_ms", (double)sorted.front(), "max_ms",
                               (double)sorted.back(), "runs", (int)sorted.size(), "gbps", bytes / (med * 1e-3) / 1e9);
    json_t *cl = json_array();
    for (unsigned c : clocks)
        json_array_append_new(cl, json_integer(c));
    json_object_set_new(timing, "sm_clock_mhz", cl);
    json_object_set_new(timing, "sm_clock_max_mhz", json_integer(max_mhz));
    json_object_set_new(doc, "event_timing_scale", timing);
    return med;
}

// CUPTI pass, after timing: the metrics of both kernels into doc's "cupti",
// and k_scale's CUPTI duration against the events' median (med, in ms).
static void cupti_pass(json_t *doc, CUcontext ctx, scale_args *sa, void *flush, size_t flush_bytes, double med,
                       char *err, size_t errlen)
{
    json_t *unsupported = NULL;
    avo_cupti *cp = NULL;
    int rc = avo_cupti_open(&cp, ctx, 0, avo_cupti_default_metrics, avo_cupti_default_nmetrics, &unsupported, err,
                            errlen);
    if (rc < 0) {
        json_object_set_new(doc, "cupti", json_pack("{s:b,s:s}", "available", 0, "reason", err));
        return;
    }
    json_t *c = json_pack("{s:b,s:i,s:o}", "available", 1, "passes", avo_cupti_passes(cp), "unsupported", unsupported);
    json_t *r1 = NULL, *r2 = NULL;
    flush_l2(flush, flush_bytes);
    CK(cudaDeviceSynchronize());
    err[0] = 0;
    STEP("cupti profile scale");
    if (avo_cupti_profile(cp, launch_scale, sa, &r1, err, errlen) == 0)
        json_object_set_new(c, "scale", r1);
    else
        json_object_set_new(c, "scale_error", json_string(err));
    float *out;
    CK(cudaMalloc(&out, 132 * 256 * sizeof(float)));
    STEP("cupti profile conflict");
    if (avo_cupti_profile(cp, launch_conflict, out, &r2, err, errlen) == 0)
        json_object_set_new(c, "conflict", r2);
    else
        json_object_set_new(c, "conflict_error", json_string(err));
    STEP("cupti close");
    avo_cupti_close(cp);
    json_object_set_new(doc, "cupti", c);
    // the independent measurement of the same kernel
    json_t *m = json_object_get(json_object_get(json_array_get(r1, 0), "metrics"), "gpu__time_duration.sum");
    if (m) {
        double cupti_ms = json_number_value(m) / 1e6;
        json_object_set_new(
            doc, "event_vs_cupti",
            json_pack("{s:f,s:f,s:f}", "event_median_ms", med, "cupti_ms", cupti_ms, "ratio", med / cupti_ms));
    }
}

int main(void)
{
    signal(SIGSEGV, on_crash);
    json_t *doc = json_object();
    cudaDeviceProp prop;
    CUcontext ctx;
    describe_device(doc, &prop, &ctx);

    STEP("nvml");
    char err[512];
    int ngpu = avo_nvml_open(err, sizeof err);
    uint64_t e0 = 0, e1 = 0;
    int have_energy = ngpu > 0 && avo_nvml_energy_mj(0, &e0) == 0;

    // 1 GiB in, 1 GiB out: far beyond the 60 MB L2.
    size_t n = (size_t)1 << 26; // float4 elements
    scale_args sa;
    CK(cudaMalloc(&sa.x, n * sizeof(float4)));
    CK(cudaMalloc(&sa.y, n * sizeof(float4)));
    sa.n = n;
    CK(cudaMemset(sa.x, 0x3f, n * sizeof(float4)));
    size_t flush_bytes = (size_t)prop.l2CacheSize * 4;
    void *flush;
    CK(cudaMalloc(&flush, flush_bytes));

    STEP("timing");
    double med = time_scale(doc, prop, sa, flush, flush_bytes, ngpu);

    STEP("cupti open");
    cupti_pass(doc, ctx, &sa, flush, flush_bytes, med, err, sizeof err);
    if (have_energy && avo_nvml_energy_mj(0, &e1) == 0)
        json_object_set_new(doc, "energy_mj", json_integer((json_int_t)(e1 - e0)));
    else
        json_object_set_new(doc, "energy_mj", json_null());
    avo_nvml_close();
    json_dumpf(doc, stdout, JSON_INDENT(1));
    printf("\n");
    json_decref(doc);
    return 0;
}
