/* The attention reference, old against new, on one GPU (driven by
 * bench/attention/ref_speed.sh, which builds the objects):
 *
 *   ref_speed --old OLD.so --new NEW.so --small SMALL.so [--plain PLAIN.so]
 *             [--runs N] NAME:B:H:HKV:S:D:CAUSAL...
 *
 * OLD and NEW are builds of kernels/attention/reference.cu (the version on
 * main before the cuBLAS products, and the working tree's); SMALL is NEW
 * built with tiny chunk budgets, so that small sizes take its chunked
 * paths; PLAIN (optional, for information) is NEW without pedantic mode.
 *
 * 1. Validation: on a few small, awkward sizes, OLD, NEW and SMALL against
 *    NEW's float64 twin (unchanged from OLD's), with the problem's
 *    tolerances (O rel_l2 5e-3 and max_abs 2e-2, LSE 1e-5 and 2e-4) and
 *    the harness's rule (rel_l2 = ||got - want|| / ||want||, max_abs).
 * 2. Per configuration: the same deterministic inputs (Q uniform in
 *    [-4, 4], K and V in [-1, 1], bf16) for every build; each is called
 *    once to warm up (its cuBLAS handle, its scratch), then N times (3)
 *    with its outputs poisoned (NaN) before each call: the median of the
 *    cudaEvent times around the calls, and the median wall time. NEW's O
 *    and LSE are compared with OLD's: O max_abs <= 2^-8 (one bf16 ulp of a
 *    value in [0.5, 1), |O| <= 1) and rel_l2 <= 5e-4, LSE rel_l2 <= 1e-6
 *    and max_abs <= 2e-5: a tenth of the problem's tolerances or less.
 *
 * Exit 0 when everything holds, 1 when a bound is broken, 2 on a usage or
 * CUDA error. Prints one table row per configuration. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <vector>

typedef int (*ref_fn)(void *const *, const int64_t *, cudaStream_t);

namespace {

const double kTolO[2] = {5e-3, 2e-2}, kTolL[2] = {1e-5, 2e-4};        /* rel_l2, max_abs */
const double kDiffO[2] = {5e-4, 1.0 / 256}, kDiffL[2] = {1e-6, 2e-5}; /* new vs old */

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "ref_speed: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);        \
            exit(2);                                                                                       \
        }                                                                                                  \
    } while (0)

struct Lib {
    const char *label, *path;
    ref_fn ref = nullptr, f64 = nullptr;
};

struct Size {
    char name[64];
    int64_t z[6]; /* B H HKV S D CAUSAL */
};

struct Diff {
    double rel_l2 = 0, max_abs = 0;
    bool nonfinite = false;
};

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__device__ uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Uniform in [-scale, scale), rounded to bf16; the same for every build. */
__global__ void fill(__nv_bfloat16 *p, int64_t n, uint64_t key, float scale)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double u = (double)(mix(key ^ mix((uint64_t)i)) >> 11) * 0x1.0p-53;
        p[i] = __float2bfloat16_rn((float)((2.0 * u - 1.0) * scale));
    }
}

__global__ void widen(const __nv_bfloat16 *s, double *d, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = (double)__bfloat162float(s[i]);
}

float bf16_to_f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The harness's rule: rel_l2 = ||got - want|| / ||want||, max_abs; a
 * non-finite value on either side fails. */
template <typename GetG, typename GetW>
Diff compare(int64_t n, GetG got, GetW want)
{
    Diff d;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double g = got(i), w = want(i);
        if (!std::isfinite(g) || !std::isfinite(w)) {
            d.nonfinite = true;
            d.rel_l2 = d.max_abs = INFINITY;
            return d;
        }
        num += (g - w) * (g - w);
        den += w * w;
        d.max_abs = std::max(d.max_abs, fabs(g - w));
    }
    d.rel_l2 = den > 0 ? sqrt(num) / sqrt(den) : sqrt(num);
    return d;
}

bool within(const Diff &d, const double *bound) { return !d.nonfinite && d.rel_l2 <= bound[0] && d.max_abs <= bound[1]; }

struct Tensors {
    int64_t nq, nkv, nl;
    __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr;
    explicit Tensors(const int64_t *z)
    {
        nq = z[0] * z[1] * z[3] * z[4];
        nkv = z[0] * z[2] * z[3] * z[4];
        nl = z[0] * z[1] * z[3];
        CK(cudaMalloc(&q, nq * 2));
        CK(cudaMalloc(&k, nkv * 2));
        CK(cudaMalloc(&v, nkv * 2));
    }
    ~Tensors()
    {
        cudaFree(q);
        cudaFree(k);
        cudaFree(v);
    }
    void fill_inputs(uint64_t key)
    {
        fill<<<2048, 256>>>(q, nq, key * 3 + 1, 4.0f);
        fill<<<2048, 256>>>(k, nkv, key * 3 + 2, 1.0f);
        fill<<<2048, 256>>>(v, nkv, key * 3 + 3, 1.0f);
        CK(cudaDeviceSynchronize());
    }
};

/* One call of fn on fresh (NaN) outputs; the outputs come back to the
 * host. Returns the event time in ms, the wall time in *wall. */
float call(ref_fn fn, const int64_t *z, Tensors &t, void *o, float *l, cudaStream_t st, double *wall)
{
    CK(cudaMemsetAsync(o, 0xff, t.nq * 2, st));
    CK(cudaMemsetAsync(l, 0xff, t.nl * 4, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    void *ptrs[5] = {t.q, t.k, t.v, o, l};
    int64_t sizes[6];
    memcpy(sizes, z, sizeof sizes);
    const double w0 = now_s();
    CK(cudaEventRecord(a, st));
    const int rc = fn(ptrs, sizes, st);
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    *wall = now_s() - w0;
    if (rc) {
        fprintf(stderr, "ref_speed: the reference returned %d\n", rc);
        exit(2);
    }
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

struct Out {
    std::vector<uint16_t> o;
    std::vector<float> l;
};

void fetch(Out &h, const void *o, const float *l, const Tensors &t)
{
    h.o.resize(t.nq);
    h.l.resize(t.nl);
    CK(cudaMemcpy(h.o.data(), o, t.nq * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.l.data(), l, t.nl * 4, cudaMemcpyDeviceToHost));
}

bool parse_size(const char *arg, Size *s)
{
    const char *colon = strchr(arg, ':');
    if (!colon || colon - arg >= (int)sizeof s->name)
        return false;
    memcpy(s->name, arg, colon - arg);
    s->name[colon - arg] = 0;
    long long v[6];
    char tail;
    if (sscanf(colon + 1, "%lld:%lld:%lld:%lld:%lld:%lld%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        return false;
    for (int i = 0; i < 6; i++)
        s->z[i] = v[i];
    return s->z[0] > 0 && s->z[1] > 0 && s->z[2] > 0 && s->z[1] % s->z[2] == 0 && s->z[3] > 0 && s->z[4] > 0 &&
           (s->z[5] == 0 || s->z[5] == 1);
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Every build against the float64 twin on small sizes. */
bool validate(std::vector<Lib> &libs, ref_fn f64, cudaStream_t st)
{
    static const char *const sizes[] = {
        "validate:2:4:2:77:64:1",  /* problem.json's validate sizes */
        "noncausal:1:4:2:130:128:0", "gqa4:1:4:1:333:128:1", "tiny:1:2:2:1:128:1",
        "heads:4:4:2:5:64:1",      /* SMALL: batches of 3 key/value heads, an uneven last one */
        "rows:1:8:4:1024:128:1",   /* SMALL: many row chunks, causal */
    };
    bool ok = true;
    printf("# validation against avo_reference_f64 (problem tolerances: O rel_l2 %.0e max_abs %.0e, LSE rel_l2 "
           "%.0e max_abs %.0e)\n",
           kTolO[0], kTolO[1], kTolL[0], kTolL[1]);
    for (size_t v = 0; v < sizeof sizes / sizeof sizes[0]; v++) {
        const char *spec = sizes[v];
        Size s;
        parse_size(spec, &s);
        Tensors t(s.z);
        t.fill_inputs(0x5eed0000u + v);
        double *d[5];
        const int64_t n[5] = {t.nq, t.nkv, t.nkv, t.nq, t.nl};
        for (int i = 0; i < 5; i++)
            CK(cudaMalloc(&d[i], n[i] * 8));
        widen<<<256, 256>>>(t.q, d[0], t.nq);
        widen<<<256, 256>>>(t.k, d[1], t.nkv);
        widen<<<256, 256>>>(t.v, d[2], t.nkv);
        CK(cudaDeviceSynchronize());
        int64_t z[6];
        memcpy(z, s.z, sizeof z);
        void *dp[5] = {d[0], d[1], d[2], d[3], d[4]};
        if (f64(dp, z, st) != 0 || cudaStreamSynchronize(st) != cudaSuccess) {
            fprintf(stderr, "ref_speed: avo_reference_f64 failed on %s\n", s.name);
            exit(2);
        }
        std::vector<double> wo(t.nq), wl(t.nl);
        CK(cudaMemcpy(wo.data(), d[3], t.nq * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(wl.data(), d[4], t.nl * 8, cudaMemcpyDeviceToHost));
        void *o;
        float *l;
        CK(cudaMalloc(&o, t.nq * 2));
        CK(cudaMalloc(&l, t.nl * 4));
        for (Lib &lib : libs) {
            double wall;
            call(lib.ref, s.z, t, o, l, st, &wall);
            Out h;
            fetch(h, o, l, t);
            const Diff dO = compare(t.nq, [&](int64_t i) { return (double)bf16_to_f(h.o[i]); },
                                    [&](int64_t i) { return wo[i]; });
            const Diff dL = compare(t.nl, [&](int64_t i) { return (double)h.l[i]; }, [&](int64_t i) { return wl[i]; });
            const bool pass = within(dO, kTolO) && within(dL, kTolL);
            ok = ok && pass;
            printf("%-4s %-6s %-26s O rel_l2 %.3g max_abs %.3g  LSE rel_l2 %.3g max_abs %.3g\n",
                   pass ? "ok" : "FAIL", lib.label, spec, dO.rel_l2, dO.max_abs, dL.rel_l2, dL.max_abs);
        }
        cudaFree(o);
        cudaFree(l);
        for (int i = 0; i < 5; i++)
            cudaFree(d[i]);
    }
    return ok;
}

} /* namespace */

/* The command line: the builds' paths (old, new, small, plain), the
 * configurations and the number of timed calls. Returns 0, or 2 (said). */
static int parse_args(int argc, char **argv, const char **paths, std::vector<Size> &configs, int &runs)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int slot = !strcmp(a, "--old") ? 0 : !strcmp(a, "--new") ? 1 : !strcmp(a, "--small") ? 2 : !strcmp(a, "--plain") ? 3 : -1;
        if (slot >= 0 && i + 1 < argc) {
            paths[slot] = argv[++i];
        } else if (!strcmp(a, "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else {
            Size s;
            if (!parse_size(a, &s)) {
                fprintf(stderr, "ref_speed: bad argument '%s' (a configuration is NAME:B:H:HKV:S:D:CAUSAL)\n", a);
                return 2;
            }
            configs.push_back(s);
        }
    }
    if (!paths[0] || !paths[1] || !paths[2] || runs < 1 || configs.empty()) {
        fprintf(stderr, "usage: ref_speed --old OLD.so --new NEW.so --small SMALL.so [--plain PLAIN.so] [--runs N] "
                        "NAME:B:H:HKV:S:D:CAUSAL...\n");
        return 2;
    }
    return 0;
}

/* The builds named in paths, loaded into libs: old, new, small[, plain].
 * Returns 0, or 2 (said). */
static int load_libs(const char *const *paths, std::vector<Lib> &libs)
{
    static const char *const labels[4] = {"old", "new", "small", "plain"};
    for (int k = 0; k < 4; k++) {
        if (!paths[k])
            continue;
        Lib lib;
        lib.label = labels[k];
        lib.path = paths[k];
        void *h = dlopen(paths[k], RTLD_NOW | RTLD_LOCAL);
        if (!h || !(lib.ref = (ref_fn)dlsym(h, "avo_reference")) || !(lib.f64 = (ref_fn)dlsym(h, "avo_reference_f64"))) {
            fprintf(stderr, "ref_speed: cannot load %s: %s\n", paths[k], h ? "no avo_reference(_f64)" : dlerror());
            return 2;
        }
        libs.push_back(lib);
    }
    return 0;
}

/* The medians summed over the configurations (cudaEvent ms). */
struct Sums {
    double old_ms = 0, new_ms = 0, plain_ms = 0;
};

/* Configuration number c: every timed build called once to warm up, then
 * runs times (its median event and wall times), NEW's outputs against
 * OLD's, its table row. Returns whether the bounds hold. */
static bool run_config(const std::vector<Lib *> &timed, const Size &s, size_t c, cudaStream_t st, int runs, Sums &sums)
{
    Tensors t(s.z);
    t.fill_inputs(0xa77e0000u + c);
    std::vector<double> ms(timed.size()), wall(timed.size());
    std::vector<Out> outs(timed.size());
    for (size_t k = 0; k < timed.size(); k++) {
        void *o;
        float *l;
        CK(cudaMalloc(&o, t.nq * 2));
        CK(cudaMalloc(&l, t.nl * 4));
        double w;
        call(timed[k]->ref, s.z, t, o, l, st, &w); /* warm-up */
        std::vector<double> e, ws;
        for (int r = 0; r < runs; r++) {
            e.push_back(call(timed[k]->ref, s.z, t, o, l, st, &w));
            ws.push_back(w * 1e3);
        }
        ms[k] = median(e);
        wall[k] = median(ws);
        fetch(outs[k], o, l, t);
        cudaFree(o);
        cudaFree(l);
    }
    const Out &a = outs[0], &b = outs[1];
    const Diff dO = compare(t.nq, [&](int64_t i) { return (double)bf16_to_f(b.o[i]); },
                            [&](int64_t i) { return (double)bf16_to_f(a.o[i]); });
    const Diff dL = compare(t.nl, [&](int64_t i) { return (double)b.l[i]; }, [&](int64_t i) { return (double)a.l[i]; });
    const bool pass = within(dO, kDiffO) && within(dL, kDiffL);
    sums.old_ms += ms[0];
    sums.new_ms += ms[1];
    char plain[64] = "";
    if (timed.size() > 2) {
        const Diff pO = compare(t.nq, [&](int64_t i) { return (double)bf16_to_f(outs[2].o[i]); },
                                [&](int64_t i) { return (double)bf16_to_f(a.o[i]); });
        snprintf(plain, sizeof plain, " | %9.2f (O max_abs %.3g)", ms[2], pO.max_abs);
        sums.plain_ms += ms[2];
    }
    printf("%-4s %-22s %9.2f %9.2f %6.2fx %9.2f %9.2f | %10.3g %10.3g %10.3g %10.3g%s\n", pass ? "ok" : "FAIL",
           s.name, ms[0], ms[1], ms[0] / ms[1], wall[0], wall[1], dO.max_abs, dO.rel_l2, dL.max_abs, dL.rel_l2,
           plain);
    fflush(stdout);
    return pass;
}

int main(int argc, char **argv)
{
    std::vector<Lib> libs; /* old, new, small[, plain] */
    const char *paths[4] = {nullptr, nullptr, nullptr, nullptr};
    std::vector<Size> configs;
    int runs = 3;
    if (parse_args(argc, argv, paths, configs, runs) != 0 || load_libs(paths, libs) != 0)
        return 2;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs; old %s, new %s\n", prop.name, prop.multiProcessorCount, libs[0].path, libs[1].path);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    bool ok = validate(libs, libs[1].f64, st);

    /* Timing and old vs new on the configurations: OLD, NEW (and PLAIN). */
    std::vector<Lib *> timed = {&libs[0], &libs[1]};
    if (libs.size() > 3)
        timed.push_back(&libs[3]);
    printf("\n# per configuration: median of %d calls (cudaEvent ms, wall ms); new vs old: O max_abs <= %.3g, rel_l2 "
           "<= %.0e; LSE rel_l2 <= %.0e, max_abs <= %.0e\n",
           runs, kDiffO[1], kDiffO[0], kDiffL[0], kDiffL[1]);
    printf("%-4s %-22s %9s %9s %7s %9s %9s | %10s %10s %10s %10s%s\n", "", "config", "old_ms", "new_ms", "speedup",
           "old_wall", "new_wall", "O_max_abs", "O_rel_l2", "L_max_abs", "L_rel_l2", timed.size() > 2 ? " | plain_ms" : "");
    Sums sums;
    for (size_t c = 0; c < configs.size(); c++) {
        const bool pass = run_config(timed, configs[c], c, st, runs, sums);
        ok = ok && pass;
    }
    printf("\n# total over the configurations: old %.1f ms, new %.1f ms (%.2fx)", sums.old_ms, sums.new_ms,
           sums.old_ms / sums.new_ms);
    if (timed.size() > 2)
        printf(", new without pedantic mode %.1f ms", sums.plain_ms);
    printf("\n%s\n", ok ? "PASS" : "FAIL: a bound above is broken");
    return ok ? 0 : 1;
}
