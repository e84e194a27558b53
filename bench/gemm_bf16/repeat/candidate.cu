#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 64
#define STAGES 4
#define SWIZZLE 1
#define GROUPM 8
#define MINB 1
/* Seed for gemm_bf16: C = A (M x K) * B (K x N), all row-major bf16, fp32
 * accumulation, C rounded to bf16 once. Written for avo (not derived from
 * CUTLASS or any other library); correct for every M, N, K >= 0.
 *
 * Design (Ampere-style tensor-core path, which Hopper still runs):
 *   - a block computes a BM x BN tile of C; its (BM/WM) x (BN/WN) warps each
 *     own a WM x WN sub-tile held in fp32 registers;
 *   - the K loop walks BK-wide slabs of A and B through a STAGES-deep ring of
 *     shared-memory buffers filled with cp.async (global -> shared without
 *     passing through registers, so the loads of slab k+STAGES-1 are in
 *     flight while the tensor cores work on slab k);
 *   - warps read their fragments with ldmatrix and multiply with
 *     mma.sync.m16n8k16 (bf16 x bf16 -> fp32).
 * Not used (room for the agent): wgmma/TMA (sm_90a HGMMA path, the only way
 * to approach the ~990 TFLOPS datasheet peak), warp specialisation,
 * split-K, a shared-memory-staged coalesced epilogue, persistent blocks.
 *
 * Knobs (the tune operator prepends "#define NAME value"; see problem.json):
 *   BM, BN   block tile            WM, WN   warp tile (WM % 16, WN % 16)
 *   BK       K slab per stage      STAGES   cp.async ring depth (>= 2)
 *   SWIZZLE  1: XOR-swizzled shared layout, 0: rows padded by 16 bytes
 *   GROUPM   block raster: GROUPM block-rows are walked column by column
 *            so concurrently running blocks share A and B slabs in L2
 *   MINB     min resident blocks per SM promised to the compiler
 *            (__launch_bounds__), which caps registers at 64K/(MINB*threads)
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef SWIZZLE
#define SWIZZLE 0
#endif
#ifndef GROUPM
#define GROUPM 1
#endif
#ifndef MINB
#define MINB 1
#endif

namespace {

typedef __nv_bfloat16 bf16;

constexpr int kWarpsM = BM / WM;
constexpr int kWarpsN = BN / WN;
constexpr int kThreads = kWarpsM * kWarpsN * 32;
constexpr int kMI = WM / 16; /* m16 tiles per warp */
constexpr int kNI = WN / 8;  /* n8 tiles per warp */

static_assert(BM % WM == 0 && BN % WN == 0, "warp tile must divide block tile");
static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16");
static_assert(BK % 16 == 0, "BK must be a multiple of the mma K (16)");
static_assert(STAGES >= 2, "the cp.async ring needs at least two stages");
static_assert(kThreads >= 32 && kThreads <= 1024, "threads per block out of range");

/* Shared layout. Each row of a tile is cut into 16-byte chunks (8 bf16), the
 * unit of both cp.async and of one ldmatrix row address. ldmatrix serves a
 * quarter-warp (8 addresses, 8 rows at the same chunk column) per shared
 * memory wavefront; with a plain row-major layout and a row pitch that is a
 * multiple of 128 bytes all 8 rows hit the same 4 banks: an 8-way conflict.
 *   SWIZZLE 1: the chunk index within each 128-byte line is XORed with the
 *     row number (in units of 128-byte lines when rows are shorter than
 *     128 bytes), so 8 consecutive rows at one logical chunk land in 8
 *     different physical chunks = all 32 banks, at no memory cost. The
 *     cp.async writes (8 consecutive chunks of one 128-byte span per
 *     quarter warp) stay conflict-free as well.
 *   SWIZZLE 0: each row is padded by one chunk; the pitch becomes an odd
 *     number of chunks, which also spreads 8 rows over 8 chunk positions,
 *     but costs BK/8 (or BN/8) extra chunks of shared memory per stage and
 *     leaves 2-way conflicts on some cp.async writes. */
#if SWIZZLE
constexpr int kPad = 0;
#else
constexpr int kPad = 8;
#endif
constexpr int kLdA = BK + kPad;            /* elements per A row in shared */
constexpr int kLdB = BN + kPad;            /* elements per B row in shared */
constexpr int kStageA = BM * kLdA;         /* elements per A stage */
constexpr int kStageB = BK * kLdB;         /* elements per B stage */
constexpr int kSmemBytes = STAGES * (kStageA + kStageB) * 2;

/* Element offset of chunk `c` of row `r` in a tile whose rows hold CPR
 * logical chunks. */
template <int CPR>
__host__ __device__ __forceinline__ int tile_off(int r, int c)
{
#if SWIZZLE
    constexpr int kRowsPerLine = CPR >= 8 ? 1 : 8 / CPR;
    const int lin = r * CPR + c;
    return (lin ^ ((r / kRowsPerLine) & 7)) * 8;
#else
    return (r * (CPR + 1) + c) * 8;
#endif
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte global->shared copy; src_bytes 0 zero-fills the chunk (the source
 * is then not read, but must still be a valid address). .cg: cache in L2
 * only; the tile is reused from shared memory, not from L1. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ldmatrix: one instruction gives each lane exactly the register layout the
 * mma operand wants (4 8x8 b16 matrices), instead of 8 scalar shared loads
 * and shuffles per fragment. The .trans form transposes on the way, which
 * turns B's row-major [k][n] storage into the "col" operand mma needs. */
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                              uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr int kCprA = BK / 8;                  /* chunks per A row */
constexpr int kCprB = BN / 8;                  /* chunks per B row */
constexpr int kChunksA = BM * kCprA;
constexpr int kChunksB = BK * kCprB;
constexpr int kItersA = (kChunksA + kThreads - 1) / kThreads;
constexpr int kItersB = (kChunksB + kThreads - 1) / kThreads;

/* Loads K-slab `kt` into ring slot `slot`.
 * ALIGNED (K % 8 == 0, N % 8 == 0, 16-byte aligned bases): every 16-byte
 * chunk is either fully inside the matrix or fully outside, so one cp.async
 * with src_bytes 16 or 0 (zero fill) covers the edges.
 * Otherwise a row may start at any 2-byte boundary: load element by element
 * through registers (slow, correct, used only for odd shapes). The stores
 * land before the __syncthreads that precedes this slot's use. */
template <bool ALIGNED>
__device__ __forceinline__ void load_slab(bf16 *sA, bf16 *sB, const bf16 *__restrict__ A,
                                          const bf16 *__restrict__ B, int M, int N, int K, int m0, int n0,
                                          int kt, int slot)
{
    const int k0 = kt * BK;
    bf16 *a_dst = sA + slot * kStageA;
    bf16 *b_dst = sB + slot * kStageB;
#pragma unroll
    for (int it = 0; it < kItersA; it++) {
        const int idx = (int)threadIdx.x + it * kThreads;
        if (kChunksA % kThreads == 0 || idx < kChunksA) {
            const int r = idx / kCprA, c = idx % kCprA;
            const int gm = m0 + r, gk = k0 + c * 8;
            const int off = tile_off<kCprA>(r, c);
            if (ALIGNED) {
                const bool ok = gm < M && gk < K;
                const bf16 *src = ok ? A + (size_t)gm * K + gk : A;
                cp_async16(smem_addr(a_dst + off), src, ok ? 16 : 0);
            } else {
                alignas(16) bf16 v[8];
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[j] = (gm < M && gk + j < K) ? A[(size_t)gm * K + gk + j] : __float2bfloat16_rn(0.0f);
                *reinterpret_cast<uint4 *>(a_dst + off) = *reinterpret_cast<const uint4 *>(v);
            }
        }
    }
#pragma unroll
    for (int it = 0; it < kItersB; it++) {
        const int idx = (int)threadIdx.x + it * kThreads;
        if (kChunksB % kThreads == 0 || idx < kChunksB) {
            const int r = idx / kCprB, c = idx % kCprB;
            const int gk = k0 + r, gn = n0 + c * 8;
            const int off = tile_off<kCprB>(r, c);
            if (ALIGNED) {
                const bool ok = gk < K && gn < N;
                const bf16 *src = ok ? B + (size_t)gk * N + gn : B;
                cp_async16(smem_addr(b_dst + off), src, ok ? 16 : 0);
            } else {
                alignas(16) bf16 v[8];
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[j] = (gk < K && gn + j < N) ? B[(size_t)gk * N + gn + j] : __float2bfloat16_rn(0.0f);
                *reinterpret_cast<uint4 *>(b_dst + off) = *reinterpret_cast<const uint4 *>(v);
            }
        }
    }
}

template <bool ALIGNED>
__global__ void __launch_bounds__(kThreads, MINB)
    gemm_bf16_kernel(const bf16 *__restrict__ A, const bf16 *__restrict__ B, bf16 *__restrict__ C, int M, int N,
                     int K)
{
    extern __shared__ uint4 smem_raw[]; /* uint4: 16-byte alignment for cp.async/ldmatrix */
    bf16 *sA = reinterpret_cast<bf16 *>(smem_raw);
    bf16 *sB = sA + STAGES * kStageA;

    /* Block raster. Row-major order walks a whole block-row of C (all of B)
     * before moving on; grouping GROUPM block-rows and walking them column
     * by column keeps the blocks that run at the same time on a compact
     * GROUPM x (#SM / GROUPM) patch of C, so their A and B slabs are shared
     * in L2 instead of re-read from HBM. */
    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;
    const int pid = (int)blockIdx.x;
    int pid_m, pid_n;
    if (GROUPM > 1) {
        const int per_group = GROUPM * grid_n;
        const int first_m = (pid / per_group) * GROUPM;
        const int rows = min(grid_m - first_m, GROUPM);
        pid_m = first_m + (pid % per_group) % rows;
        pid_n = (pid % per_group) / rows;
    } else {
        pid_m = pid / grid_n;
        pid_n = pid % grid_n;
    }
    const int m0 = pid_m * BM, n0 = pid_n * BN;

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN;

    float acc[kMI][kNI][4];
#pragma unroll
    for (int i = 0; i < kMI; i++)
#pragma unroll
        for (int j = 0; j < kNI; j++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                acc[i][j][q] = 0.0f;

    const int ktiles = (K + BK - 1) / BK;

    /* Prologue: STAGES-1 slabs in flight. One commit group per slab, even
     * when empty, so that wait_group<STAGES-2> below always means "slab kt
     * has landed". */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load_slab<ALIGNED>(sA, sB, A, B, M, N, K, m0, n0, s, s);
        cp_async_commit();
    }

    /* Per-lane ldmatrix coordinates. For x4 on A, lanes 0-15 address rows
     * 0-15 of the 16x16 fragment at k-chunk 0, lanes 16-31 the same rows at
     * k-chunk 1: matrices (rows 0-7,k0-7) (8-15,k0-7) (0-7,k8-15) (8-15,k8-15)
     * = mma's a0..a3. For x4.trans on B, lanes 0-15 address k rows 0-15 at
     * n-chunk 0 and lanes 16-31 at n-chunk 1: b0,b1 of two adjacent n8 tiles. */
    const int lrow = lane % 16, lchunk = lane / 16;
    const int a_row = wm * WM + lrow;
    const int b_chunk = (wn * WN) / 8 + lchunk;

    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<STAGES - 2>();
        /* One barrier per slab: it publishes slab kt to every warp and also
         * proves every warp has finished slab kt-1, whose slot the load
         * below overwrites. */
        __syncthreads();
        {
            const int next = kt + STAGES - 1;
            if (next < ktiles)
                load_slab<ALIGNED>(sA, sB, A, B, M, N, K, m0, n0, next, next % STAGES);
            cp_async_commit();
        }

        const bf16 *a_s = sA + (kt % STAGES) * kStageA;
        const bf16 *b_s = sB + (kt % STAGES) * kStageB;
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t af[kMI][4];
            uint32_t bfr[kNI][2];
#pragma unroll
            for (int i = 0; i < kMI; i++)
                ldsm_x4(smem_addr(a_s + tile_off<kCprA>(a_row + i * 16, kk * 2 + lchunk)), af[i][0], af[i][1],
                        af[i][2], af[i][3]);
#pragma unroll
            for (int j = 0; j < kNI; j += 2)
                ldsm_x4_trans(smem_addr(b_s + tile_off<kCprB>(kk * 16 + lrow, b_chunk + j)), bfr[j][0],
                              bfr[j][1], bfr[j + 1][0], bfr[j + 1][1]);
#pragma unroll
            for (int i = 0; i < kMI; i++)
#pragma unroll
                for (int j = 0; j < kNI; j++)
                    mma_bf16(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
        }
    }
    cp_async_wait<0>(); /* no copy may outlive the block (they are all empty here) */

    /* Epilogue straight from the accumulators: lane holds C[g][2t..2t+1] and
     * C[g+8][2t..2t+1] of each m16n8 tile (g = lane/4, t = lane%4). Rounded
     * to bf16 once, here. */
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kMI; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = m0 + wm * WM + i * 16 + g + h * 8;
            if (row >= M)
                continue;
            bf16 *c_row = C + (size_t)row * N;
#pragma unroll
            for (int j = 0; j < kNI; j++) {
                const int col = n0 + wn * WN + j * 8 + 2 * t;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (ALIGNED) {
                    /* N % 8 == 0 and col even: col < N implies col + 1 < N. */
                    if (col < N)
                        *reinterpret_cast<__nv_bfloat162 *>(c_row + col) = __floats2bfloat162_rn(v0, v1);
                } else {
                    if (col < N)
                        c_row[col] = __float2bfloat16_rn(v0);
                    if (col + 1 < N)
                        c_row[col + 1] = __float2bfloat16_rn(v1);
                }
            }
        }
    }
}

template <bool ALIGNED>
int launch(const bf16 *A, const bf16 *B, bf16 *C, int M, int N, int K, cudaStream_t stream)
{
    /* More than 48 KB of dynamic shared memory must be opted into, once per
     * kernel; the carveout preference asks for the largest L1/shared split so
     * that MINB blocks can be resident together. */
    static bool configured = false;
    if (!configured) {
        cudaError_t e = cudaFuncSetAttribute(gemm_bf16_kernel<ALIGNED>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(gemm_bf16_kernel<ALIGNED>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess)
            return (int)e;
        configured = true;
    }
    const long long blocks = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    if (blocks > 0x7fffffffLL)
        return (int)cudaErrorInvalidValue;
    gemm_bf16_kernel<ALIGNED><<<(unsigned)blocks, kThreads, kSmemBytes, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}

} /* namespace */

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const bf16 *A = static_cast<const bf16 *>(tensors[0]);
    const bf16 *B = static_cast<const bf16 *>(tensors[1]);
    bf16 *C = static_cast<bf16 *>(tensors[2]);
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    if (M < 0 || N < 0 || K < 0 || M > 0x7fffffff || N > 0x7fffffff || K > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    if (M == 0 || N == 0)
        return 0;
    const bool aligned = K % 8 == 0 && N % 8 == 0 &&
                         (((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) & 15) == 0;
    if (aligned)
        return launch<true>(A, B, C, (int)M, (int)N, (int)K, stream);
    return launch<false>(A, B, C, (int)M, (int)N, (int)K, stream);
}
