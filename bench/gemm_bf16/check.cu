/* Standalone check + benchmark for kernels/gemm_bf16 (no avo libraries).
 *
 * Linked with one build of the seed (gemm_bf16, knobs fixed by -D at compile
 * time), the reference (avo_reference, avo_reference_f64) and the cuBLAS
 * baseline (avo_baseline). For every configuration given on the command line:
 *   1. fills A and B on the GPU with random non-zero bf16 in [-1, 1) (a fixed
 *      counter-based hash, so every setting sees the same data), keeps a host
 *      copy of both;
 *   2. poisons the outputs (0xFFFF = bf16 NaN), runs the reference; on small
 *      sizes also checks the reference against a float64 CPU product;
 *   3. poisons, runs candidate and baseline on a non-default stream, compares
 *      each with the reference: relative L2, max abs, NaN/Inf count (an
 *      unwritten element stays NaN);
 *   4. timed configurations: warm-up, then >= 20 runs, each after a 256 MB
 *      memset that evicts the 50 MB L2, one event pair per run, median;
 *   5. checks again after timing (output cached across calls) and verifies
 *      the inputs are unchanged.
 * Prints one "RESULT" line per configuration (tab-separated, parsed by
 * run.sh) and exits 0 only if every check passed.
 *
 * usage: check [--label NAME] [--min-runs N] CONFIG...
 *   CONFIG = MxNxK (checked and timed) or cMxNxK (checked only)
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream);
extern "C" int avo_reference(void *const *tensors, const int64_t *sizes, cudaStream_t stream);
extern "C" int avo_baseline(void *const *tensors, const int64_t *sizes, cudaStream_t stream);

typedef int (*gemm_fn)(void *const *, const int64_t *, cudaStream_t);

/* Tolerances of kernels/gemm_bf16/problem.json ("bf16"); see its description. */
static const double kTolRelL2 = 5e-3;
static const double kTolMaxAbs = 2.0;
static const size_t kFlushBytes = 256u << 20;
static const double kCpuCheckMacs = 3e8; /* float64 CPU check of the reference up to this size */

#define CK(call)                                                                                          \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            printf("RESULT\t%s\t%s\tcuda_error\t-\t-\t-\t-\t-\t-\t-\n", g_label, g_config);              \
            exit(2);                                                                                      \
        }                                                                                                 \
    } while (0)

static const char *g_label = "?";
static char g_config[64] = "-";

static __device__ __host__ inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [-1, 1) from 24 random bits, never exactly zero (zeros would
 * hide unwritten outputs and make the tensor cores look faster). */
__global__ void fill_kernel(__nv_bfloat16 *p, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix64(seed * 0x100000001b3ull ^ mix64(i));
        float v = (float)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
        if (v == 0.0f)
            v = 0.0009765625f;
        p[i] = __float2bfloat16_rn(v);
    }
}

static inline double bf2d(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return (double)f;
}

struct Cmp {
    double rel_l2, max_abs;
    long long bad;  /* NaN or Inf in the result */
    long long worst;
    bool pass;
};

static Cmp compare(const std::vector<uint16_t> &got, const std::vector<double> &want)
{
    Cmp c = {0, 0, 0, 0, false};
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double g = bf2d(got[i]), w = want[i];
        if (!std::isfinite(g)) {
            if (c.bad++ == 0)
                c.worst = (long long)i;
            continue;
        }
        const double d = fabs(g - w);
        num += d * d;
        den += w * w;
        if (d > c.max_abs) {
            c.max_abs = d;
            if (!c.bad)
                c.worst = (long long)i;
        }
    }
    c.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    if (c.bad)
        c.rel_l2 = c.max_abs = INFINITY;
    c.pass = !c.bad && c.rel_l2 <= kTolRelL2 && c.max_abs <= kTolMaxAbs;
    return c;
}

static std::vector<uint16_t> fetch(const void *d, size_t n)
{
    std::vector<uint16_t> h(n);
    CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    return h;
}

/* Poison, run once, wait, return the output. A nonzero return or a launch
 * error is reported as failure. */
static int run_once(gemm_fn fn, const char *who, void *const *t, const int64_t *sz, size_t nc, cudaStream_t s,
                    std::vector<uint16_t> *out)
{
    CK(cudaMemsetAsync(t[2], 0xFF, nc * 2, s));
    const int rc = fn(t, sz, s);
    if (rc != 0) {
        fprintf(stderr, "%s returned %d (%s)\n", who, rc,
                rc < 1000 ? cudaGetErrorString((cudaError_t)rc) : "cuBLAS status + 1000");
        return rc;
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    *out = fetch(t[2], nc);
    return 0;
}

static double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median milliseconds of one call, L2 flushed before each run. Returns also
 * min and the relative spread (max-min)/median via out params. */
static double time_ms(gemm_fn fn, void *const *t, const int64_t *sz, cudaStream_t s, void *flush, int min_runs,
                      double *tmin, double *spread, int *nruns)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    /* warm-up: module load, cuBLAS heuristics, clocks up; also a first estimate */
    float est = 0;
    for (int i = 0; i < 5; i++) {
        CK(cudaMemsetAsync(flush, i, kFlushBytes, s));
        CK(cudaEventRecord(e0, s));
        if (fn(t, sz, s) != 0)
            return -1;
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&est, e0, e1));
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    /* about 0.25 s of timed work (kernel + flush ~0.1 ms), 20..200 runs */
    int runs = (int)(250.0 / (est + 0.12));
    runs = std::max(min_runs, std::min(200, runs));
    std::vector<cudaEvent_t> a(runs), b(runs);
    for (int i = 0; i < runs; i++) {
        CK(cudaEventCreate(&a[i]));
        CK(cudaEventCreate(&b[i]));
    }
    for (int i = 0; i < runs; i++) {
        CK(cudaMemsetAsync(flush, i & 0xff, kFlushBytes, s));
        CK(cudaEventRecord(a[i], s));
        if (fn(t, sz, s) != 0)
            return -1;
        CK(cudaEventRecord(b[i], s));
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    std::vector<float> ms(runs);
    for (int i = 0; i < runs; i++) {
        CK(cudaEventElapsedTime(&ms[i], a[i], b[i]));
        CK(cudaEventDestroy(a[i]));
        CK(cudaEventDestroy(b[i]));
    }
    const double med = median(ms);
    *tmin = *std::min_element(ms.begin(), ms.end());
    *spread = (*std::max_element(ms.begin(), ms.end()) - *tmin) / med;
    *nruns = runs;
    return med;
}

/* float64 product of the exact bf16 inputs, for the small-size check of the
 * reference itself. */
static std::vector<double> cpu_gemm(const std::vector<uint16_t> &A, const std::vector<uint16_t> &B, int64_t M,
                                    int64_t N, int64_t K)
{
    std::vector<double> C((size_t)(M * N), 0.0), brow((size_t)N);
    for (int64_t i = 0; i < M; i++) {
        double *c = &C[(size_t)(i * N)];
        for (int64_t k = 0; k < K; k++) {
            const double a = bf2d(A[(size_t)(i * K + k)]);
            const uint16_t *b = &B[(size_t)(k * N)];
            for (int64_t j = 0; j < N; j++)
                c[j] += a * bf2d(b[j]);
        }
    }
    return C;
}

static std::vector<double> to_double(const std::vector<uint16_t> &v)
{
    std::vector<double> d(v.size());
    for (size_t i = 0; i < v.size(); i++)
        d[i] = bf2d(v[i]);
    return d;
}

/* One configuration's outcome: the candidate's and the baseline's checks
 * and times, and the candidate's check after timing. */
struct Outcome {
    Cmp cc, cb;
    bool ran, post_ok;
    double tc, tb, tcmin, spc, tbmin, spb;
    int rc_, rb_;
};

/* The reference into ref, and on small sizes the reference against
 * float64. Returns 0, or 2 (its RESULT line printed). */
static int check_reference(void *const *t, const int64_t *sz, size_t nc, cudaStream_t s,
                           const std::vector<uint16_t> &hA, const std::vector<uint16_t> &hB, long long M, long long N,
                           long long K, std::vector<double> &ref)
{
    std::vector<uint16_t> out;
    if (run_once(avo_reference, "avo_reference", t, sz, nc, s, &out) != 0) {
        printf("RESULT\t%s\t%s\treference_error\t-\t-\t-\t-\t-\t-\t-\n", g_label, g_config);
        return 2;
    }
    ref = to_double(out);
    if ((double)M * N * K <= kCpuCheckMacs) {
        const Cmp r = compare(out, cpu_gemm(hA, hB, M, N, K));
        printf("# %s %s reference vs float64 CPU: rel_l2 %.3g max_abs %.3g %s\n", g_label, g_config, r.rel_l2,
               r.max_abs, r.pass ? "ok" : "FAIL");
        if (!r.pass) {
            printf("RESULT\t%s\t%s\treference_wrong\t-\t-\t-\t-\t-\t-\t-\n", g_label, g_config);
            return 2;
        }
    }
    return 0;
}

/* Candidate and baseline checked against ref, timed when the configuration
 * is, then the candidate checked again (nothing cached or stale). */
static void check_candidate(void *const *t, const int64_t *sz, size_t nc, cudaStream_t s, void *flush, int min_runs,
                            bool timed, long long N, const std::vector<double> &ref, Outcome &o)
{
    std::vector<uint16_t> out;
    o.cc = {INFINITY, INFINITY, 0, 0, false};
    o.cb = o.cc;
    o.ran = run_once(gemm_bf16, "gemm_bf16", t, sz, nc, s, &out) == 0;
    if (o.ran)
        o.cc = compare(out, ref);
    if (o.ran && !o.cc.pass) {
        const long long w = o.cc.worst;
        fprintf(stderr, "%s %s: candidate C[%lld] (row %lld col %lld) = %g, reference %g\n", g_label, g_config, w,
                w / N, w % N, bf2d(out[(size_t)w]), ref[(size_t)w]);
    }
    if (run_once(avo_baseline, "avo_baseline", t, sz, nc, s, &out) == 0)
        o.cb = compare(out, ref);

    o.tc = o.tb = o.tcmin = o.spc = o.tbmin = o.spb = NAN;
    o.rc_ = o.rb_ = 0;
    if (timed && o.cc.pass)
        o.tc = time_ms(gemm_bf16, t, sz, s, flush, min_runs, &o.tcmin, &o.spc, &o.rc_);
    if (timed && o.cb.pass)
        o.tb = time_ms(avo_baseline, t, sz, s, flush, min_runs, &o.tbmin, &o.spb, &o.rb_);

    /* after timing: same answer again (nothing cached or stale) */
    o.post_ok = true;
    if (o.cc.pass) {
        Cmp again = o.cc;
        if (run_once(gemm_bf16, "gemm_bf16", t, sz, nc, s, &out) == 0)
            again = compare(out, ref);
        else
            again.pass = false;
        o.post_ok = again.pass;
    }
}

/* The configuration's "#" summary line and its RESULT line. */
static void print_outcome(const char *status, const Outcome &o, bool timed, long long M, long long N, long long K)
{
    const double flop = 2.0 * (double)M * N * K;
    const double tf_c = flop / (o.tc * 1e-3) / 1e12, tf_b = flop / (o.tb * 1e-3) / 1e12;
    printf("# %s %s %s: candidate rel_l2 %.3g max_abs %.3g nonfinite %lld; baseline rel_l2 %.3g max_abs %.3g "
           "%s",
           g_label, g_config, status, o.cc.rel_l2, o.cc.max_abs, o.cc.bad, o.cb.rel_l2, o.cb.max_abs,
           o.cb.pass ? "ok" : "BASELINE_WRONG");
    if (timed)
        printf("; candidate median %.4f ms min %.4f spread %.1f%% n=%d; cuBLAS median %.4f ms min %.4f "
               "spread %.1f%% n=%d",
               o.tc, o.tcmin, 100 * o.spc, o.rc_, o.tb, o.tbmin, 100 * o.spb, o.rb_);
    printf("\n");
    char tfc[32] = "-", tfb[32] = "-", ratio[32] = "-";
    if (timed && o.tc > 0)
        snprintf(tfc, sizeof tfc, "%.1f", tf_c);
    if (timed && o.tb > 0)
        snprintf(tfb, sizeof tfb, "%.1f", tf_b);
    if (timed && o.tc > 0 && o.tb > 0)
        snprintf(ratio, sizeof ratio, "%.3f", tf_c / tf_b);
    /* RESULT label config status rel_l2 max_abs TFLOPS TFLOPS_cuBLAS ratio cuBLAS_rel_l2 cuBLAS_check */
    printf("RESULT\t%s\t%s\t%s\t%.2e\t%.3g\t%s\t%s\t%s\t%.2e\t%s\n", g_label, g_config, status, o.cc.rel_l2,
           o.cc.max_abs, tfc, tfb, ratio, o.cb.rel_l2, o.cb.pass ? "ok" : "WRONG");
    fflush(stdout);
}

/* Configuration number ci (spec: MxNxK or cMxNxK), steps 1-5 of the top.
 * Returns 0 when it passed, 1 when not, or the exit status (2, 64) that
 * ends the run. */
static int check_config(size_t ci, const char *spec, cudaStream_t s, void *flush, int min_runs)
{
    const bool timed = spec[0] != 'c';
    long long M, N, K;
    if (sscanf(timed ? spec : spec + 1, "%lldx%lldx%lld", &M, &N, &K) != 3 || M <= 0 || N <= 0 || K <= 0) {
        fprintf(stderr, "bad config '%s'\n", spec);
        return 64;
    }
    snprintf(g_config, sizeof g_config, "%lldx%lldx%lld", M, N, K);
    const int64_t sz[3] = {M, N, K};
    const size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);

    void *dA, *dB, *dC;
    CK(cudaMalloc(&dA, na * 2));
    CK(cudaMalloc(&dB, nb * 2));
    CK(cudaMalloc(&dC, nc * 2));
    fill_kernel<<<1024, 256, 0, s>>>((__nv_bfloat16 *)dA, na, 1000 + 2 * (uint64_t)ci);
    fill_kernel<<<1024, 256, 0, s>>>((__nv_bfloat16 *)dB, nb, 1001 + 2 * (uint64_t)ci);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    const std::vector<uint16_t> hA = fetch(dA, na), hB = fetch(dB, nb);
    void *t[3] = {dA, dB, dC};

    std::vector<double> ref;
    if (check_reference(t, sz, nc, s, hA, hB, M, N, K, ref) != 0)
        return 2;
    Outcome o;
    check_candidate(t, sz, nc, s, flush, min_runs, timed, N, ref, o);
    /* the inputs intact */
    const bool inputs_ok = fetch(dA, na) == hA && fetch(dB, nb) == hB;

    const char *status = !o.ran                  ? "ERROR"
                         : !o.cc.pass            ? "WRONG"
                         : timed && !(o.tc > 0)  ? "ERROR_IN_TIMING"
                         : !o.post_ok            ? "WRONG_AFTER_TIMING"
                         : !inputs_ok            ? "INPUT_MODIFIED"
                                                 : "ok";
    print_outcome(status, o, timed, M, N, K);

    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
    return strcmp(status, "ok") != 0;
}

int main(int argc, char **argv)
{
    int min_runs = 20;
    std::vector<const char *> configs;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--label") && i + 1 < argc)
            g_label = argv[++i];
        else if (!strcmp(argv[i], "--min-runs") && i + 1 < argc)
            min_runs = std::max(1, atoi(argv[++i]));
        else
            configs.push_back(argv[i]);
    }
    if (configs.empty()) {
        fprintf(stderr, "usage: %s [--label NAME] [--min-runs N] MxNxK|cMxNxK...\n", argv[0]);
        return 64;
    }

    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("# %s: device %s, sm_%d%d, %d SMs, L2 %d MB, smem/block optin %zu KB\n", g_label, prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, prop.sharedMemPerBlockOptin >> 10);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *flush = NULL;
    CK(cudaMalloc(&flush, kFlushBytes));

    int failures = 0;
    for (size_t ci = 0; ci < configs.size(); ci++) {
        const int rc = check_config(ci, configs[ci], s, flush, min_runs);
        if (rc > 1)
            return rc;
        failures += rc;
    }
    CK(cudaFree(flush));
    CK(cudaStreamDestroy(s));
    return failures ? 1 : 0;
}
