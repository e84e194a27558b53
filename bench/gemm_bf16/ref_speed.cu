/* The gemm_bf16 reference, its tiled path against its cuBLAS product, on
 * one GPU (driven by bench/gemm_bf16/ref_speed.sh, which builds the
 * objects):
 *
 *   ref_speed --tiled TILED.so --new NEW.so [--plain PLAIN.so] [--runs N] NAME:M:N:K...
 *
 * TILED is kernels/gemm_bf16/reference.cu built with AVO_REF_TILED (the
 * 16 x 16 shared-memory kernel that was the whole reference until
 * 2026-12-06), NEW the same file as the checker builds it (cuBLAS fp32,
 * pedantic); PLAIN (optional, for information) NEW without pedantic mode.
 *
 * 1. Validation: on small, awkward sizes (K = 0 and 1 included), every
 *    build against NEW's float64 twin with the problem's tolerances
 *    (rel_l2 5e-3, max_abs 2) and the harness's rule (rel_l2 =
 *    ||got - want|| / ||want||).
 * 2. Per configuration: the same deterministic inputs (uniform in [-1, 1),
 *    bf16) for every build; each is called once to warm up (its handle,
 *    its scratch), then N times (3) with C poisoned (NaN) before each
 *    call: the median of the cudaEvent times around the calls. NEW's C is
 *    compared with TILED's: elements that differ, the largest difference
 *    and rel_l2, held to rel_l2 <= 5e-4 and max_abs <= 2 (a tenth of the
 *    problem's rel_l2; two bf16 ulps at the largest expected |C|, as the
 *    problem's max_abs).
 *
 * Exit 0 when everything holds, 1 when a bound is broken, 2 on a usage or
 * CUDA error. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <vector>

typedef int (*ref_fn)(void *const *, const int64_t *, cudaStream_t);

namespace {

const double kTol[2] = {5e-3, 2.0};  /* rel_l2, max_abs: the problem's */
const double kDiff[2] = {5e-4, 2.0}; /* NEW against TILED */

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

void open_lib(Lib *l)
{
    void *h = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "ref_speed: %s: %s\n", l->path, dlerror());
        exit(2);
    }
    l->ref = (ref_fn)dlsym(h, "avo_reference");
    l->f64 = (ref_fn)dlsym(h, "avo_reference_f64");
    if (!l->ref || !l->f64) {
        fprintf(stderr, "ref_speed: %s lacks avo_reference or avo_reference_f64\n", l->path);
        exit(2);
    }
}

/* Deterministic uniform [-1, 1): the same for every build. */
void fill(std::vector<float> &v, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float &x : v) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x = __bfloat162float(__float2bfloat16((float)((s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f));
    }
}

struct Diff {
    double rel_l2, max_abs;
    long long differ;
};

Diff compare(const std::vector<float> &got, const std::vector<double> &want)
{
    Diff d = {0, 0, 0};
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double e = (double)got[i] - want[i];
        num += e * e;
        den += want[i] * want[i];
        if (!(std::fabs(e) <= d.max_abs))
            d.max_abs = std::isnan(e) ? INFINITY : std::fabs(e);
        d.differ += e != 0;
    }
    d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    return d;
}

std::vector<float> to_host(const __nv_bfloat16 *dev, size_t n)
{
    std::vector<__nv_bfloat16> h(n);
    CK(cudaMemcpy(h.data(), dev, n * sizeof *dev, cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++)
        f[i] = __bfloat162float(h[i]);
    return f;
}

struct Problem {
    int64_t M, N, K;
    __nv_bfloat16 *A = nullptr, *B = nullptr, *C = nullptr;
    std::vector<float> a, b;
};

void setup(Problem *p, uint64_t seed)
{
    p->a.resize((size_t)(p->M * p->K));
    p->b.resize((size_t)(p->K * p->N));
    fill(p->a, seed);
    fill(p->b, seed + 1);
    std::vector<__nv_bfloat16> ha(p->a.size()), hb(p->b.size());
    for (size_t i = 0; i < ha.size(); i++)
        ha[i] = __float2bfloat16(p->a[i]);
    for (size_t i = 0; i < hb.size(); i++)
        hb[i] = __float2bfloat16(p->b[i]);
    CK(cudaMalloc(&p->A, std::max<size_t>(1, ha.size()) * sizeof(__nv_bfloat16)));
    CK(cudaMalloc(&p->B, std::max<size_t>(1, hb.size()) * sizeof(__nv_bfloat16)));
    CK(cudaMalloc(&p->C, std::max<int64_t>(1, p->M * p->N) * sizeof(__nv_bfloat16)));
    CK(cudaMemcpy(p->A, ha.data(), ha.size() * sizeof ha[0], cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p->B, hb.data(), hb.size() * sizeof hb[0], cudaMemcpyHostToDevice));
}

void release(Problem *p)
{
    cudaFree(p->A);
    cudaFree(p->B);
    cudaFree(p->C);
}

/* One call of lib on p, C poisoned first; its cudaEvent time in ms. */
float call(const Lib &l, Problem *p, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1)
{
    CK(cudaMemsetAsync(p->C, 0xff, (size_t)(p->M * p->N) * sizeof(__nv_bfloat16), st)); /* NaN */
    void *t[3] = {p->A, p->B, p->C};
    const int64_t sizes[3] = {p->M, p->N, p->K};
    CK(cudaEventRecord(e0, st));
    const int rc = l.ref(t, sizes, st);
    CK(cudaEventRecord(e1, st));
    CK(cudaStreamSynchronize(st));
    if (rc) {
        fprintf(stderr, "ref_speed: %s returned %d on %lldx%lldx%lld\n", l.label, rc, (long long)p->M,
                (long long)p->N, (long long)p->K);
        exit(2);
    }
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
}

/* The float64 twin's C for p (exact products, summed in double). */
std::vector<double> twin(const Lib &l, const Problem &p, cudaStream_t st)
{
    const size_t na = p.a.size(), nb = p.b.size(), nc = (size_t)(p.M * p.N);
    std::vector<double> ha(p.a.begin(), p.a.end()), hb(p.b.begin(), p.b.end()), hc(nc);
    double *A, *B, *C;
    CK(cudaMalloc(&A, std::max<size_t>(1, na) * 8));
    CK(cudaMalloc(&B, std::max<size_t>(1, nb) * 8));
    CK(cudaMalloc(&C, std::max<size_t>(1, nc) * 8));
    CK(cudaMemcpy(A, ha.data(), na * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), nb * 8, cudaMemcpyHostToDevice));
    CK(cudaMemset(C, 0, std::max<size_t>(1, nc) * 8)); /* K = 0: the twin writes every element anyway */
    void *t[3] = {A, B, C};
    const int64_t sizes[3] = {p.M, p.N, p.K};
    if (l.f64(t, sizes, st) != 0) {
        fprintf(stderr, "ref_speed: the float64 twin failed\n");
        exit(2);
    }
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(hc.data(), C, nc * 8, cudaMemcpyDeviceToHost));
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    return hc;
}

int validate(const std::vector<Lib> &libs, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1)
{
    static const int64_t small[][3] = {{67, 45, 129}, {1, 1, 1}, {5, 7, 0}, {33, 1, 300}, {1, 77, 4096}, {256, 256, 2048}};
    int bad = 0;
    for (const auto &s : small) {
        Problem p;
        p.M = s[0];
        p.N = s[1];
        p.K = s[2];
        setup(&p, 7);
        const std::vector<double> want = twin(libs[1], p, st);
        for (const Lib &l : libs) {
            call(l, &p, st, e0, e1);
            const Diff d = compare(to_host(p.C, want.size()), want);
            const int ok = d.rel_l2 <= kTol[0] && d.max_abs <= kTol[1];
            bad |= !ok;
            printf("validate %lldx%lldx%lld %-6s vs float64: rel_l2 %.3g max_abs %.3g %s\n", (long long)p.M,
                   (long long)p.N, (long long)p.K, l.label, d.rel_l2, d.max_abs, ok ? "ok" : "OUT OF TOLERANCE");
        }
        release(&p);
    }
    return bad;
}

} /* namespace */

int main(int argc, char **argv)
{
    std::vector<Lib> libs(2);
    libs[0].label = "tiled";
    libs[1].label = "new";
    int runs = 3;
    std::vector<const char *> cfgs;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(argv[i], "--tiled") && v)
            libs[0].path = argv[++i];
        else if (!strcmp(argv[i], "--new") && v)
            libs[1].path = argv[++i];
        else if (!strcmp(argv[i], "--plain") && v)
            libs.push_back({"plain", argv[++i]});
        else if (!strcmp(argv[i], "--runs") && v)
            runs = atoi(argv[++i]);
        else if (argv[i][0] != '-')
            cfgs.push_back(argv[i]);
        else {
            fprintf(stderr, "ref_speed: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!libs[0].path || !libs[1].path || runs < 1) {
        fprintf(stderr, "usage: ref_speed --tiled TILED.so --new NEW.so [--plain PLAIN.so] [--runs N] NAME:M:N:K...\n");
        return 2;
    }
    for (Lib &l : libs)
        open_lib(&l);
    cudaStream_t st;
    cudaEvent_t e0, e1;
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int bad = validate(libs, st, e0, e1);
    printf("%-16s %12s %12s %12s %8s %12s %10s %10s\n", "config", "tiled ms", "new ms", "plain ms", "speedup",
           "differ", "max_abs", "rel_l2");
    for (const char *c : cfgs) {
        char name[64];
        long long M, N, K;
        if (sscanf(c, "%63[^:]:%lld:%lld:%lld", name, &M, &N, &K) != 4 || M < 1 || N < 1 || K < 0) {
            fprintf(stderr, "ref_speed: bad configuration '%s' (NAME:M:N:K)\n", c);
            return 2;
        }
        Problem p;
        p.M = M;
        p.N = N;
        p.K = K;
        setup(&p, 11);
        std::vector<float> med(libs.size(), NAN);
        std::vector<std::vector<float>> out(2);
        for (size_t k = 0; k < libs.size(); k++) {
            call(libs[k], &p, st, e0, e1);
            std::vector<float> t;
            for (int r = 0; r < runs; r++)
                t.push_back(call(libs[k], &p, st, e0, e1));
            std::sort(t.begin(), t.end());
            med[k] = t[t.size() / 2];
            if (k < 2)
                out[k] = to_host(p.C, (size_t)(M * N));
        }
        const std::vector<double> tiled(out[0].begin(), out[0].end());
        const Diff d = compare(out[1], tiled);
        const int ok = d.rel_l2 <= kDiff[0] && d.max_abs <= kDiff[1];
        bad |= !ok;
        printf("%-16s %12.3f %12.3f %12.3f %7.1fx %12lld %10.3g %10.3g %s\n", name, med[0], med[1],
               libs.size() > 2 ? med[2] : NAN, med[0] / med[1], d.differ, d.max_abs, d.rel_l2,
               ok ? "ok" : "BOUND BROKEN");
        release(&p);
    }
    return bad ? 1 : 0;
}
