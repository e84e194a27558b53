/* Trusted reference for attention: the textbook definition, computed in
 * three plain steps with fp32 arithmetic and nothing fused:
 *   1. S = scale * Q K^T: fp32 scores for a chunk of query rows and every
 *      key they may see (each an fp32 dot product of the exact bf16 values,
 *      widened to fp32 first, summed in cuBLAS's order, times scale);
 *   2. per row: m = max over the allowed keys, l = sum exp(s - m),
 *      P = exp(s - m) / l (0 for keys the causal mask forbids),
 *      LSE = m + log(l) (accurate expf/logf: no --use_fast_math);
 *   3. O = P V in fp32 (P not rounded), rounded to bf16 once.
 * No online softmax, no bf16 P, no TF32 or other reduced-precision
 * tensor-core arithmetic: both products are cublasGemmStridedBatchedEx on
 * fp32 operands with CUBLAS_COMPUTE_32F_PEDANTIC, on a handle in
 * CUBLAS_PEDANTIC_MATH (fp32 whatever NVIDIA_TF32_OVERRIDE or cuBLAS's
 * emulation settings say). It is what candidates are checked against, so
 * it stays obviously correct; cuBLAS only makes the two products fast.
 * Until 2026-12-04 they were a hand-written 64 x 64-tile SIMT GEMM, about
 * half of an attention evaluation's wall time (~10 s of ~20 s on an H200);
 * bench/attention/ref_speed.sh times that version and this one on every
 * configuration and bounds their difference. The worker links a cuda
 * problem's reference (never a candidate) with -lcublas; it runs in the
 * checker process only.
 *
 * Heads: query head h of batch b reads key/value head h / G of batch b,
 * G = H / HKV. With t = b * HKV + h / G (a key/value head) and g = h % G the
 * query head is t * G + g, so for one g a strided batch covers the
 * key/value heads t0 .. t0 + nb - 1: Q's (and O's, LSE's) stride G * S * D
 * (G * S), K's and V's S * D. Query rows go in chunks of `rows`, at most
 * AVO_REF_CAUSAL_ROWS (512) under the causal mask: keys past the limit of a
 * chunk's last row are allowed to none of its rows, neither computed nor
 * read (the row softmax writes P = 0 for each row's masked keys below that
 * limit), so a causal product costs a little over half a full one.
 *
 * Scratch: one device allocation kept across calls (the checker runs the
 * reference a few times per evaluation in one process), grown when a call
 * needs more, never freed (the process ends with its evaluation). It holds
 * the scores of one batch, nb * rows * S floats <= AVO_REF_CHUNK_ELEMS
 * (2^28: 1 GiB), and K and V of its nb heads and its Q rows widened to fp32
 * (O's fp32 product then takes Q's place), each <= AVO_REF_OPERAND_ELEMS
 * (2^26: 256 MiB) or one head's S * D floats where that is larger: 1.75 GiB
 * at most for every shipped configuration, beside the tensors. The GPU test
 * makes both budgets tiny so that small sizes take every path. The cuBLAS
 * handle is created on the first call and kept (set to the caller's stream
 * on every call). A CUDA failure returns its cudaError_t, a cuBLAS failure
 * 10000 + its cublasStatus_t.
 *
 * avo_reference_rows computes only the query rows the checker lists (a
 * timed call's row-subset check, problem.json's check.rows): one block a
 * row, the same three fp32 steps (rows_kernel, below); the harness checks
 * it against the float64 twin on a random half of the "validate" rows.
 *
 * avo_reference_f64 is the float64 twin the harness validates it against
 * on the "validate" sizes: one thread per query row, three passes. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <mutex>

namespace {

typedef __nv_bfloat16 bf16;

constexpr int kThreads = 256;
constexpr int kCublasError = 10000;

#ifndef AVO_REF_CHUNK_ELEMS
#define AVO_REF_CHUNK_ELEMS (1LL << 28)
#endif
#ifndef AVO_REF_OPERAND_ELEMS
#define AVO_REF_OPERAND_ELEMS (AVO_REF_CHUNK_ELEMS / 4)
#endif
#ifndef AVO_REF_CAUSAL_ROWS
#define AVO_REF_CAUSAL_ROWS 512
#endif
/* bench/attention/ref_speed.sh builds a copy with AVO_REF_NOT_PEDANTIC
 * to show what pedantic mode costs; the checker's reference never has it. */
#ifdef AVO_REF_NOT_PEDANTIC
constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
constexpr cublasMath_t kMath = CUBLAS_DEFAULT_MATH;
#else
constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F_PEDANTIC;
constexpr cublasMath_t kMath = CUBLAS_PEDANTIC_MATH;
#endif

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* dst[z * dz + e] = src[z * sz + e] for e < n, z = blockIdx.y: bf16 widened
 * to fp32 (exact), or fp32 rounded to bf16 once (to nearest even). */
template <typename TS, typename TD>
__global__ void __launch_bounds__(kThreads) convert(const TS *__restrict__ src, int64_t sz, TD *__restrict__ dst,
                                                    int64_t dz, int64_t n)
{
    src += blockIdx.y * sz;
    dst += blockIdx.y * dz;
    for (int64_t e = (int64_t)blockIdx.x * kThreads + threadIdx.x; e < n; e += (int64_t)gridDim.x * kThreads)
        store(&dst[e], to_f(src[e]));
}

template <typename TS, typename TD>
void launch_convert(const TS *src, int64_t sz, TD *dst, int64_t dz, int64_t n, int64_t nz, cudaStream_t stream)
{
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    dim3 grid((unsigned)(blocks < 4096 ? blocks : 4096), (unsigned)nz);
    convert<TS, TD><<<grid, kThreads, 0, stream>>>(src, sz, dst, dz, n);
}

__device__ float block_reduce(float v, bool is_max, float *red)
{
    for (int o = 16; o > 0; o /= 2) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = v;
    __syncthreads();
    v = red[0];
    for (int w = 1; w < kThreads / 32; w++)
        v = is_max ? fmaxf(v, red[w]) : v + red[w];
    __syncthreads();
    return v;
}

/* One block per query row of the chunk (rows ld apart) of head blockIdx.y
 * (its scores sz, its LSE lz further on): the row's first nkeys scores ->
 * P in place, and its LSE. */
__global__ void __launch_bounds__(kThreads) softmax_rows(float *__restrict__ S, int64_t ld, int64_t sz,
                                                         float *__restrict__ lse, int64_t lz, int64_t row0,
                                                         int64_t nkeys, int causal)
{
    __shared__ float red[kThreads / 32];
    const int64_t i = row0 + blockIdx.x;
    float *s = S + blockIdx.y * sz + (int64_t)blockIdx.x * ld;
    lse += blockIdx.y * lz;
    const int64_t allowed = causal ? i + 1 : nkeys;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < allowed; j += kThreads)
        m = fmaxf(m, s[j]);
    m = block_reduce(m, true, red);
    float l = 0.0f;
    for (int64_t j = threadIdx.x; j < allowed; j += kThreads)
        l += expf(s[j] - m);
    l = block_reduce(l, false, red);
    for (int64_t j = threadIdx.x; j < nkeys; j += kThreads)
        s[j] = j < allowed ? expf(s[j] - m) / l : 0.0f;
    if (threadIdx.x == 0)
        lse[i] = m + logf(l);
}

/* S * 64 fits an int: cuBLAS's int dimensions and leading dimensions with
 * room, the float64 twin's indices. */
int check_sizes(const int64_t *z)
{
    const int64_t B = z[0], H = z[1], HKV = z[2], S = z[3], D = z[4], causal = z[5];
    if (B < 1 || H < 1 || HKV < 1 || S < 1 || D < 1 || H % HKV || (causal != 0 && causal != 1))
        return (int)cudaErrorInvalidValue;
    if (S > 0x7fffffff / 64 || D > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    return 0;
}

__global__ void reference_f64_kernel(const double *__restrict__ Q, const double *__restrict__ K,
                                     const double *__restrict__ V, double *__restrict__ O,
                                     double *__restrict__ L, int64_t B, int64_t H, int64_t HKV, int64_t S,
                                     int64_t D, int64_t causal)
{
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= B * H * S)
        return;
    const int64_t i = row % S, h = (row / S) % H, b = row / (S * H);
    const int64_t kvh = b * HKV + h / (H / HKV);
    const double *q = Q + row * D, *k = K + kvh * S * D, *v = V + kvh * S * D;
    double *o = O + row * D;
    const double scale = 1.0 / sqrt((double)D);
    const int64_t allowed = causal ? i + 1 : S;
    double m = -INFINITY;
    for (int64_t j = 0; j < allowed; j++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++)
            s += q[d] * k[j * D + d];
        m = fmax(m, s * scale);
    }
    double l = 0.0;
    for (int64_t j = 0; j < allowed; j++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++)
            s += q[d] * k[j * D + d];
        l += exp(s * scale - m);
    }
    for (int64_t d = 0; d < D; d++)
        o[d] = 0.0;
    for (int64_t j = 0; j < allowed; j++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++)
            s += q[d] * k[j * D + d];
        const double p = exp(s * scale - m) / l;
        for (int64_t d = 0; d < D; d++)
            o[d] += p * v[j * D + d];
    }
    L[row] = m + log(l);
}

/* avo_reference_rows: one block per listed query row (row = (b * H + h) *
 * S + i), the same three steps in fp32 as the batched path: scores (a warp
 * per key, lanes across D, times scale) into the row's scratch, the row
 * softmax and LSE, then O = P V with threads across D (and across keys
 * where D is under the block's width, their partial sums added in shared
 * memory), rounded to bf16 once. Only the listed rows of O and LSE are
 * written. */
__global__ void __launch_bounds__(kThreads) rows_kernel(const bf16 *__restrict__ Q, const bf16 *__restrict__ K,
                                                        const bf16 *__restrict__ V, bf16 *__restrict__ O,
                                                        float *__restrict__ LSE, const int64_t *__restrict__ rows,
                                                        int64_t H, int64_t HKV, int64_t S, int64_t D, int causal,
                                                        float scale, float *__restrict__ scratch, int64_t ld)
{
    extern __shared__ float qs[];
    __shared__ float red[kThreads / 32];
    __shared__ float part[kThreads];
    const int64_t row = rows[blockIdx.x];
    const int64_t i = row % S, h = (row / S) % H, b = row / (S * H);
    const int64_t kvh = b * HKV + h / (H / HKV);
    const bf16 *q = Q + row * D, *k = K + kvh * S * D, *v = V + kvh * S * D;
    float *s = scratch + (int64_t)blockIdx.x * ld;
    const int64_t allowed = causal ? i + 1 : S;
    for (int64_t d = threadIdx.x; d < D; d += kThreads)
        qs[d] = to_f(q[d]);
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t j = warp; j < allowed; j += kThreads / 32) {
        float acc = 0.0f;
        for (int64_t d = lane; d < D; d += 32)
            acc += qs[d] * to_f(k[j * D + d]);
        for (int o = 16; o > 0; o /= 2)
            acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0)
            s[j] = scale * acc;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < allowed; j += kThreads)
        m = fmaxf(m, s[j]);
    m = block_reduce(m, true, red);
    float l = 0.0f;
    for (int64_t j = threadIdx.x; j < allowed; j += kThreads)
        l += expf(s[j] - m);
    l = block_reduce(l, false, red);
    for (int64_t j = threadIdx.x; j < allowed; j += kThreads)
        s[j] = expf(s[j] - m) / l;
    __syncthreads();
    if (D <= kThreads) {
        const int64_t parts = kThreads / D, p = threadIdx.x / D, d = threadIdx.x % D;
        float acc = 0.0f;
        if (p < parts)
            for (int64_t j = p; j < allowed; j += parts)
                acc += s[j] * to_f(v[j * D + d]);
        part[threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.x < D) {
            float o = 0.0f;
            for (int64_t x = 0; x < parts; x++)
                o += part[x * D + threadIdx.x];
            store(&O[row * D + threadIdx.x], o);
        }
    } else {
        for (int64_t d = threadIdx.x; d < D; d += kThreads) {
            float acc = 0.0f;
            for (int64_t j = 0; j < allowed; j++)
                acc += s[j] * to_f(v[j * D + d]);
            store(&O[row * D + d], acc);
        }
    }
    if (threadIdx.x == 0)
        LSE[row] = m + logf(l);
}

/* Q's row in shared memory: D up to this many floats (32 KiB, beside the
 * block's own 1 KiB, under the 48 KiB that needs no opt-in). */
constexpr int64_t kRowsMaxD = 8192;

/* The state kept across calls (see the top). The checker calls the
 * reference from one thread; the lock keeps a second caller from sharing
 * the scratch mid-call all the same. */
std::mutex g_lock;
cublasHandle_t g_handle = nullptr;
float *g_scratch = nullptr;
size_t g_scratch_elems = 0;

int cublas_rc(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS ? 0 : kCublasError + (int)st; }

int ensure_scratch(size_t elems)
{
    if (elems <= g_scratch_elems)
        return 0;
    /* Earlier calls ended with their stream synchronized: nothing uses it. */
    if (g_scratch)
        cudaFree(g_scratch);
    g_scratch = nullptr;
    g_scratch_elems = 0;
    const cudaError_t e = cudaMalloc(&g_scratch, elems * sizeof(float));
    if (e != cudaSuccess) {
        g_scratch = nullptr;
        cudaGetLastError(); /* not sticky: the next call may fit */
        return (int)e;
    }
    g_scratch_elems = elems;
    return 0;
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* C (m x n, column-major, ldc) = alpha op(A) op(B), strided over nb heads,
 * fp32 throughout (see the top for why pedantic). */
int gemm(cublasOperation_t ta, int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t lda,
         int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C, int64_t ldc, int64_t sc, int64_t nb)
{
    const float beta = 0.0f;
    return cublas_rc(cublasGemmStridedBatchedEx(g_handle, ta, CUBLAS_OP_N, (int)m, (int)n, (int)k, &alpha, A,
                                                CUDA_R_32F, (int)lda, sa, B, CUDA_R_32F, (int)ldb, sb, &beta, C,
                                                CUDA_R_32F, (int)ldc, sc, (int)nb, kCompute, CUBLAS_GEMM_DEFAULT));
}

} /* namespace */

extern "C" int avo_reference(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    int rc = check_sizes(sizes);
    if (rc)
        return rc;
    const int64_t B = sizes[0], H = sizes[1], HKV = sizes[2], S = sizes[3], D = sizes[4], causal = sizes[5];
    const int64_t G = H / HKV, kvheads = B * HKV;
    const bf16 *Q = static_cast<const bf16 *>(tensors[0]), *K = static_cast<const bf16 *>(tensors[1]),
               *V = static_cast<const bf16 *>(tensors[2]);
    bf16 *O = static_cast<bf16 *>(tensors[3]);
    float *LSE = static_cast<float *>(tensors[4]);
    std::lock_guard<std::mutex> hold(g_lock);
    if (!g_handle) {
        if ((rc = cublas_rc(cublasCreate(&g_handle)))) {
            g_handle = nullptr;
            return rc;
        }
        if ((rc = cublas_rc(cublasSetMathMode(g_handle, kMath))))
            return rc;
    }
    if ((rc = cublas_rc(cublasSetStream(g_handle, stream))))
        return rc;

    /* Chunk sizes (see the top): a score row is ld floats (a multiple of 4,
     * so that every row starts 16-byte aligned). */
    const int64_t chunk = (int64_t)(AVO_REF_CHUNK_ELEMS), operand = (int64_t)(AVO_REF_OPERAND_ELEMS);
    const int64_t ldmax = round_up(S, 4);
    int64_t rows = chunk / ldmax < S ? chunk / ldmax : S;
    rows = causal && rows > AVO_REF_CAUSAL_ROWS ? AVO_REF_CAUSAL_ROWS : rows;
    rows = rows < 1 ? 1 : rows;
    int64_t per = chunk / (rows * ldmax);
    per = per < operand / (S * D) ? per : operand / (S * D);
    per = per > kvheads ? kvheads : per > 65535 ? 65535 : per;
    per = per < 1 ? 1 : per;
    const int64_t n_scores = round_up(per * rows * ldmax, 64), n_kv = round_up(per * S * D, 64);
    if ((rc = ensure_scratch((size_t)(n_scores + 2 * n_kv + per * rows * D))))
        return rc;
    float *Sc = g_scratch, *Kf = Sc + n_scores, *Vf = Kf + n_kv, *QO = Vf + n_kv;

    const float scale = 1.0f / sqrtf((float)D);
    cudaError_t e = cudaSuccess;
    for (int64_t t0 = 0; t0 < kvheads && !rc; t0 += per) {
        const int64_t nb = kvheads - t0 < per ? kvheads - t0 : per;
        launch_convert(K + t0 * S * D, 0, Kf, 0, nb * S * D, 1, stream);
        launch_convert(V + t0 * S * D, 0, Vf, 0, nb * S * D, 1, stream);
        for (int64_t g = 0; g < G && !rc; g++)
            for (int64_t r0 = 0; r0 < S && !rc; r0 += rows) {
                const int64_t n = S - r0 < rows ? S - r0 : rows, keys = causal ? r0 + n : S;
                const int64_t ld = round_up(keys, 4), head0 = t0 * G + g;
                /* Rows r0 .. r0 + n - 1 of query heads head0 + G * z, z < nb. */
                launch_convert(Q + (head0 * S + r0) * D, G * S * D, QO, n * D, n * D, nb, stream);
                /* Column-major, scores^T (keys x n, ld) = K (keys x D) Q^T:
                 * row x of the chunk's scores is Sc[x * ld + j]. */
                rc = gemm(CUBLAS_OP_T, keys, n, D, scale, Kf, D, S * D, QO, D, n * D, Sc, ld, n * ld, nb);
                if (rc)
                    break;
                softmax_rows<<<dim3((unsigned)n, (unsigned)nb), kThreads, 0, stream>>>(
                    Sc, ld, n * ld, LSE + head0 * S, G * S, r0, keys, (int)causal);
                /* O^T (D x n) = V^T (D x keys) P^T (keys x n), into QO. */
                rc = gemm(CUBLAS_OP_N, D, n, keys, 1.0f, Vf, D, S * D, Sc, ld, n * ld, QO, D, n * D, nb);
                if (rc)
                    break;
                launch_convert(QO, n * D, O + (head0 * S + r0) * D, G * S * D, n * D, nb, stream);
                if ((e = cudaGetLastError()) != cudaSuccess)
                    rc = (int)e;
            }
    }
    /* A fault in a kernel is reported here rather than by a later call,
     * and the scratch is free again for the next one. */
    e = cudaStreamSynchronize(stream);
    return rc ? rc : (int)e;
}

/* The listed rows only (docs/problems.md, "Row-subset checks"): rows, a
 * device array of nrows distinct indices over B x H x S, each row one query
 * row of one head; the checker lists them in ascending order, so blocks of
 * one head run together and its K and V stay in L2. Rows go in batches
 * whose scores fit the scratch. */
extern "C" int avo_reference_rows(void *const *tensors, const int64_t *sizes, const int64_t *rows, int64_t nrows,
                                  cudaStream_t stream)
{
    int rc = check_sizes(sizes);
    if (rc)
        return rc;
    const int64_t H = sizes[1], HKV = sizes[2], S = sizes[3], D = sizes[4], causal = sizes[5];
    if (nrows < 0 || D > kRowsMaxD)
        return (int)cudaErrorInvalidValue;
    std::lock_guard<std::mutex> hold(g_lock);
    const int64_t ld = round_up(S, 4);
    int64_t per = (int64_t)(AVO_REF_CHUNK_ELEMS) / ld;
    per = per < 1 ? 1 : per > 65535 ? 65535 : per;
    per = per > nrows ? nrows : per;
    if (nrows && (rc = ensure_scratch((size_t)(per * ld))))
        return rc;
    const float scale = 1.0f / sqrtf((float)D);
    for (int64_t r0 = 0; r0 < nrows; r0 += per) {
        const int64_t n = nrows - r0 < per ? nrows - r0 : per;
        rows_kernel<<<(unsigned)n, kThreads, (size_t)D * sizeof(float), stream>>>(
            static_cast<const bf16 *>(tensors[0]), static_cast<const bf16 *>(tensors[1]),
            static_cast<const bf16 *>(tensors[2]), static_cast<bf16 *>(tensors[3]), static_cast<float *>(tensors[4]),
            rows + r0, H, HKV, S, D, (int)causal, scale, g_scratch, ld);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return (int)e;
    }
    return (int)cudaStreamSynchronize(stream);
}

extern "C" int avo_reference_f64(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    int rc = check_sizes(sizes);
    if (rc)
        return rc;
    const int64_t rows = sizes[0] * sizes[1] * sizes[3];
    reference_f64_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(
        static_cast<const double *>(tensors[0]), static_cast<const double *>(tensors[1]),
        static_cast<const double *>(tensors[2]), static_cast<double *>(tensors[3]),
        static_cast<double *>(tensors[4]), sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5]);
    return (int)cudaGetLastError();
}
