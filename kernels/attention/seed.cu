/* Seed for attention: forward scaled-dot-product attention, bf16 Q/K/V/O,
 * fp32 softmax statistics, optional causal mask, grouped-query heads.
 * Written for avo after the FlashAttention-2 design (not derived from the
 * FlashAttention or CUTLASS sources); correct for every S >= 1.
 *
 * Design (Ampere-style tensor-core path, which Hopper still runs):
 *   - a block owns BLOCK_M query rows of one (batch, head); each of its
 *     WARPS warps owns BLOCK_M / WARPS of those rows (a multiple of 16, one
 *     m16 mma tile per 16 rows), so the softmax of a row never leaves the
 *     warp that computes it;
 *   - the block walks the keys in tiles of BLOCK_N; K and V tiles come
 *     through a STAGES-deep ring of shared-memory slots filled with
 *     cp.async, and every warp reads the whole K and V tile;
 *   - S = Q K^T with mma.sync.m16n8k16 (bf16 x bf16 -> fp32); the row max
 *     and the rescaling of the running output happen in registers (online
 *     softmax), and P = exp(S - max) is rounded to bf16 and fed straight
 *     back as the A operand of O += P V: the m16n8 accumulator layout of two
 *     adjacent score tiles is exactly the m16n8k16 A-fragment layout, so P
 *     never touches shared memory;
 *   - the output is divided by the row sum once, at the end, and leaves
 *     through shared memory as coalesced 16-byte stores.
 * Not used (room for the agent): wgmma/TMA (sm_90a, the path to cuDNN-class
 * speed), warp specialisation with producer warps, ping-pong of two
 * consumer groups so that softmax overlaps the other group's mma,
 * persistent blocks with a causal-aware tile scheduler, splitting the keys
 * of one query tile across blocks for short sequences.
 *
 * Knobs (the tune operator prepends "#define NAME value"; see problem.json):
 *   BLOCK_M   query rows per block            BLOCK_N   keys per tile
 *   WARPS     warps per block; each owns BLOCK_M / WARPS query rows
 *   STAGES    depth of the K/V cp.async ring (1, 2 or 3 slots per tensor)
 *   KV_SPLIT  1: K and V of a tile are separate cp.async groups and the
 *             tile takes two barriers, so the V load overlaps S = Q K^T and
 *             the next K load overlaps softmax and P V (with STAGES 1 this
 *             is FlashAttention-2's own schedule); 0: one group and one
 *             barrier per tile (STAGES 1 is then load-then-compute)
 *   SWIZZLE   1: XOR-swizzled shared layout, 0: rows padded by 16 bytes
 *             (both free of bank conflicts here; padding costs shared
 *             memory, the swizzle 3 to 9 registers of per-lane offsets)
 *   QREGS     1: Q fragments live in registers for the whole key loop
 *             wherever that costs at most 64 registers (rows per warp *
 *             head dim <= 2048); elsewhere, or with 0, they are re-read from
 *             shared memory for every key tile. Re-reading frees registers
 *             for 32 rows per warp, which halves the K/V shared-memory
 *             traffic per mma.
 *   REGS64    0, or a per-thread register cap for the D = 64 instance
 *             (__launch_bounds__ min blocks = 65536 / (threads * REGS64)):
 *             128 lets two 8-warp blocks (or four 4-warp ones) share an SM
 *             where shared memory allows. D = 128 is never capped: its
 *             accumulators alone need more.
 * At 32 query rows per warp and D = 128 the O accumulators (128 registers)
 * and the scores of a 64-key tile (64) leave ptxas almost nothing; some
 * knob combinations spill there, and problem.json's constraints rule them
 * out.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef KV_SPLIT
#define KV_SPLIT 1
#endif
#ifndef SWIZZLE
#define SWIZZLE 0
#endif
#ifndef QREGS
#define QREGS 1
#endif
#ifndef REGS64
#define REGS64 128
#endif

namespace {

typedef __nv_bfloat16 bf16;

constexpr int kThreads = 32 * WARPS;
constexpr int kRowsW = BLOCK_M / WARPS; /* query rows per warp */
constexpr int kMT = kRowsW / 16;        /* m16 tiles per warp */
constexpr int kNT = BLOCK_N / 8;        /* n8 score tiles per key tile */

static_assert(WARPS >= 1 && kThreads <= 1024, "threads per block out of range");
static_assert(BLOCK_M % WARPS == 0 && kRowsW % 16 == 0, "each warp owns a multiple of 16 query rows");
static_assert(BLOCK_N % 16 == 0, "BLOCK_N must be a multiple of the mma K (16)");
static_assert(STAGES >= 1 && STAGES <= 3, "STAGES is 1, 2 or 3");
static_assert(KV_SPLIT == 0 || KV_SPLIT == 1, "KV_SPLIT is 0 or 1");
static_assert(SWIZZLE == 0 || SWIZZLE == 1, "SWIZZLE is 0 or 1");
static_assert(REGS64 == 0 || (REGS64 >= 64 && REGS64 <= 255 && 65536 / (kThreads * REGS64) >= 1),
              "REGS64 is 0 or a register count that leaves at least one block per SM");

/* Shared layout. Each row of a tile (one query or key, D bf16) is cut into
 * 16-byte chunks, the unit of cp.async and of one ldmatrix row address.
 * ldmatrix serves 8 addresses (8 rows at one chunk column) per wavefront;
 * rows of 128 or 256 bytes would put all 8 on the same 4 banks.
 *   SWIZZLE 1: the chunk index is XORed with the low 3 bits of the row, so
 *     8 consecutive rows at one logical chunk land on 8 different physical
 *     chunks of their 128-byte line, at no memory cost; the cp.async writes
 *     (8 consecutive chunks of one row per quarter warp) and the epilogue's
 *     4-byte fragment writes (8 rows x 4 lanes) stay conflict-free.
 *   SWIZZLE 0: rows padded by one chunk; the odd pitch spreads 8 rows over
 *     8 chunk positions too, for BLOCK_N * 16 extra bytes per slot. */
#if SWIZZLE
constexpr int kPad = 0;
#else
constexpr int kPad = 8;
#endif

/* Element offset of chunk `c` of row `r` in a tile whose rows hold CPR
 * (a multiple of 8) chunks. */
template <int CPR>
__host__ __device__ __forceinline__ int tile_off(int r, int c)
{
    static_assert(CPR % 8 == 0, "rows must be whole 128-byte lines");
#if SWIZZLE
    return ((r * CPR + c) ^ (r & 7)) * 8;
#else
    return (r * (CPR + 1) + c) * 8;
#endif
}

/* Both layouts satisfy, for R % 8 == 0 and c < 8,
 *   tile_off(r + R, c + 8m) = tile_off(r, c) + (R * pitch + 8m) * 8
 * (the swizzle only XORs the low 3 chunk bits with the low 3 row bits, and
 * neither changes when whole 8-row blocks or 128-byte lines are added).
 * A lane's ldmatrix row within its 16-row block and its chunk within a
 * chunk pair never change, so a lane needs only 4 byte offsets (chunk
 * pairs 0..3 of a line; one when padded, the rest being immediates), shared
 * by Q, K and V, and every ldmatrix address becomes tile base + one of them
 * + an immediate. Written naively, ptxas hoists one swizzled offset per
 * (row block, chunk pair) out of the key loop: over a hundred registers at
 * D = 128, and spills. */
template <int CPR>
struct LaneOffsets {
    static constexpr int kPitch = CPR + kPad / 8; /* chunks from one row to the next */
    uint32_t b[4];
    __device__ __forceinline__ LaneOffsets(int row, int chunk)
    {
#pragma unroll
        for (int i = 0; i < 4; i++)
            b[i] = 2 * tile_off<CPR>(row, 2 * i + chunk);
    }
    /* Byte offset of (row + R, chunk + 2 * pair); R a multiple of 8. */
    __device__ __forceinline__ uint32_t at(int R, int pair) const
    {
        return b[pair % 4] + (uint32_t)(R * kPitch + (pair / 4) * 8) * 16;
    }
};

template <int D>
struct Shape {
    static constexpr int kCpr = D / 8;   /* 16-byte chunks per row; also n8 tiles of O */
    static constexpr int kKD = D / 16;   /* k16 steps of Q K^T */
    static constexpr int kLd = D + kPad; /* elements per row in shared */
    static constexpr int kQTile = BLOCK_M * kLd;
    static constexpr int kKVTile = BLOCK_N * kLd;
    /* [Q tile][K slot 0..STAGES-1][V slot 0..STAGES-1]; the Q tile is reused
     * to stage O in the epilogue. */
    static constexpr int kSmemBytes = (kQTile + 2 * STAGES * kKVTile) * 2;
    static constexpr bool kQRegs = QREGS != 0 && kRowsW * D <= 2048;
    static constexpr int kMinBlocks = (D == 64 && REGS64 > 0) ? 65536 / (kThreads * REGS64) : 1;
    static_assert(kSmemBytes <= 227 * 1024, "shared memory per block exceeds 227 KB");
};

struct Params {
    const bf16 *q, *k, *v;
    bf16 *o;
    float *lse;
    int s;          /* sequence length (queries and keys) */
    int h, hkv;     /* query heads, key/value heads */
    int group;      /* h / hkv: query heads per key/value head */
    int causal;
    float scale_log2; /* log2(e) / sqrt(D): exp(x * scale) = exp2(x * scale_log2) */
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte global->shared copy; src_bytes 0 zero-fills the chunk (the source
 * is then not read, but must still be a valid address). Zero-filled V rows
 * matter: their P is 0, and 0 * (whatever was in the slot) could be NaN.
 * .cg: cache in L2 only; K/V are reused through shared memory and through
 * L2 by the other query tiles of the head, never through L1. */
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
 * mma operand wants (4 8x8 b16 matrices). The plain form serves Q (A
 * operand, row-major) and K (B operand "col" = K's own [key][d] rows); the
 * .trans form turns V's [key][d] rows into the "col" operand of P V. */
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

/* 2^x on the SFU. exp2f without --use_fast_math wraps the same instruction
 * in denormal handling that the softmax does not need: its arguments are
 * <= 0 and results below 2^-126 may as well be 0. ex2(-inf) = +0, which is
 * what a masked score must contribute. */
__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Two floats -> bf16x2 in one register, lo in the low half (the lower
 * column of an mma fragment pair). */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* Copies ROWS rows of D bf16 (row stride D in global) into the tile at
 * shared address `dst`; rows >= valid are zero-filled. `src` must be a
 * readable address even where valid <= 0 rows would follow. */
template <int D, int ROWS>
__device__ __forceinline__ void load_rows(uint32_t dst, const bf16 *src, int valid)
{
    constexpr int kCpr = D / 8;
    constexpr int kChunks = ROWS * kCpr;
    static_assert(kChunks % kThreads == 0, "a tile must be an exact number of chunks per thread");
    static_assert(kThreads % kCpr == 0 && (kThreads / kCpr) % 8 == 0, "rows per pass must be whole 8-row blocks");
    /* Thread i always copies chunk i % kCpr of rows i / kCpr + k * (kThreads
     * / kCpr): one base offset and immediates (see LaneOffsets). */
    const int r0 = (int)threadIdx.x / kCpr, c = (int)threadIdx.x % kCpr;
    const uint32_t d0 = dst + 2 * tile_off<kCpr>(r0, c);
    const bf16 *s0 = src + (size_t)r0 * D + c * 8;
#pragma unroll
    for (int it = 0; it < kChunks / kThreads; it++) {
        constexpr int kRowsPerPass = kThreads / kCpr;
        const int r = r0 + it * kRowsPerPass;
        const bool ok = r < valid;
        cp_async16(d0 + it * kRowsPerPass * LaneOffsets<kCpr>::kPitch * 16, ok ? s0 + (size_t)it * kRowsPerPass * D : src,
                   ok ? 16 : 0);
    }
}

/* ldmatrix .x4 takes the row addresses of matrix i from lanes 8i..8i+7.
 * Every operand uses the same lane pattern, row lane % 16 of a 16-row block
 * at chunk lane / 16 of a chunk pair, so that one LaneOffsets serves all
 * three (4 registers, not 12):
 *   Q (A operand): matrices (rows 0-7, k 0-7) (rows 8-15, k 0-7)
 *     (rows 0-7, k 8-15) (rows 8-15, k 8-15) = a0..a3 of the A fragment;
 *   K (B operand, plain): the same four matrices over (keys, d) are b0 of
 *     the score tile of keys 0-7, b0 of keys 8-15, b1 of keys 0-7, b1 of
 *     keys 8-15 (hence the r0, r2 / r1, r3 pairing at the mma);
 *   V (B operand, .trans): (keys 0-7, d 0-7) (keys 8-15, d 0-7) ... =
 *     b0, b1 of the O tile of columns 0-7, then b0, b1 of columns 8-15. */
__device__ __forceinline__ int lane_row(int lane) { return lane % 16; }
__device__ __forceinline__ int lane_chunk(int lane) { return lane / 16; }

/* Q fragments of k16 step kd for the warp's m16 tiles; aQw is the Q tile
 * advanced to the warp's first row. */
template <int D>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[kMT][4], uint32_t aQw, const LaneOffsets<D / 8> &lo,
                                             int kd)
{
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
        ldsm_x4(aQw + lo.at(mt * 16, kd), qf[mt][0], qf[mt][1], qf[mt][2], qf[mt][3]);
}

template <int D>
__global__ void __launch_bounds__(kThreads, Shape<D>::kMinBlocks) attention_kernel(const Params p)
{
    typedef Shape<D> Sh;
    constexpr int kCpr = Sh::kCpr;
    constexpr bool kQRegs = Sh::kQRegs;

    extern __shared__ uint4 smem_raw[]; /* uint4: 16-byte alignment for cp.async/ldmatrix */
    bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw);
    const uint32_t aQ = smem_addr(sQ);
    const uint32_t aK = aQ + 2 * Sh::kQTile;
    const uint32_t aV = aK + 2 * STAGES * Sh::kKVTile;

    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4; /* accumulator row (and row + 8), column pair */
    const int S = p.s;

    /* (batch, head) on x with the head fastest: the H / HKV query heads that
     * share one K/V head run side by side and read it once from HBM.
     * Query tiles on y, reversed: the hardware hands out blocks in linear
     * order, so under the causal mask (work grows with the tile index) the
     * longest tiles start first and the last wave is made of the shortest
     * ones, which shrinks the tail where most SMs idle (longest-processing-
     * time-first scheduling). Without the mask the order is immaterial. */
    const int bh = (int)blockIdx.x;
    const int b = bh / p.h, h = bh % p.h;
    const int kvh = h / p.group;
    const int m0 = ((int)gridDim.y - 1 - (int)blockIdx.y) * BLOCK_M;

    const bf16 *gq = p.q + ((size_t)bh * S + m0) * D;
    const size_t kv_base = (size_t)(b * p.hkv + kvh) * S * D;
    const bf16 *gk = p.k + kv_base;
    const bf16 *gv = p.v + kv_base;

    /* Causal: key tiles entirely above the diagonal of this query tile are
     * never loaded; the last query row of the tile is m0 + BLOCK_M - 1. */
    const int n_end = p.causal ? min(S, m0 + BLOCK_M) : S;
    const int n_tiles = (n_end + BLOCK_N - 1) / BLOCK_N;

    const int w_row0 = m0 + warp * kRowsW; /* first query row of this warp */
    const LaneOffsets<kCpr> lo(lane_row(lane), lane_chunk(lane));
    const uint32_t aQw = aQ + warp * kRowsW * LaneOffsets<kCpr>::kPitch * 16;

    auto load_k = [&](int tile) {
        if (tile < n_tiles)
            load_rows<D, BLOCK_N>(aK + 2 * (tile % STAGES) * Sh::kKVTile, gk + (size_t)tile * BLOCK_N * D,
                                  S - tile * BLOCK_N);
    };
    auto load_v = [&](int tile) {
        if (tile < n_tiles)
            load_rows<D, BLOCK_N>(aV + 2 * (tile % STAGES) * Sh::kKVTile, gv + (size_t)tile * BLOCK_N * D,
                                  S - tile * BLOCK_N);
    };

    /* Prologue. One commit group per load step, even when empty, so that the
     * fixed wait_group counts below always name the tile needed next. Q
     * rides in the first group (with K of tile 0). */
    load_rows<D, BLOCK_M>(aQ, gq, S - m0);
    constexpr int kPrologueGroups = KV_SPLIT ? 2 * STAGES - 1 : (STAGES == 1 ? 1 : STAGES - 1);
    if constexpr (KV_SPLIT) {
        /* Issue order K0 V0 K1 V1 ... K(STAGES-1). */
#pragma unroll
        for (int st = 0; st < STAGES; st++) {
            if (st > 0) {
                load_v(st - 1);
                cp_async_commit();
            }
            load_k(st);
            cp_async_commit();
        }
    } else {
#pragma unroll
        for (int st = 0; st < (STAGES == 1 ? 1 : STAGES - 1); st++) {
            load_k(st);
            load_v(st);
            cp_async_commit();
        }
    }

    uint32_t qreg[kQRegs ? Sh::kKD : 1][kMT][4];
    if constexpr (kQRegs) {
        /* Q is read from shared memory once; every thread copied part of
         * every warp's rows, hence the block barrier. */
        cp_async_wait<kPrologueGroups - 1>();
        __syncthreads();
#pragma unroll
        for (int kd = 0; kd < Sh::kKD; kd++)
            load_q_frags<D>(qreg[kd], aQw, lo, kd);
    }

    float o[kMT][kCpr][4];
    float m_run[kMT][2]; /* running row max of the scores, already times scale_log2 */
    float l_run[kMT][2]; /* this lane's share of the running row sum of exp2 */
#pragma unroll
    for (int mt = 0; mt < kMT; mt++) {
#pragma unroll
        for (int j = 0; j < kCpr; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[mt][j][e] = 0.0f;
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            m_run[mt][hh] = -INFINITY;
            l_run[mt][hh] = 0.0f;
        }
    }

    uint32_t pk[kMT][kNT][2]; /* P in bf16: [row g, row g + 8] x columns 2t, 2t + 1 */

    /* S = Q K^T for tile n, masked, then turned into P (bf16, in pk) with
     * the online-softmax bookkeeping. Skipped by a warp whose rows all lie
     * above the diagonal of this tile (its statistics would not change). */
    auto scores_softmax = [&](int n, bool active) {
        if (!active)
            return;
        const int n0 = n * BLOCK_N;
        const uint32_t ks = aK + 2 * (n % STAGES) * Sh::kKVTile;
        float s[kMT][kNT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int j = 0; j < kNT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[mt][j][e] = 0.0f;
#pragma unroll
        for (int kd = 0; kd < Sh::kKD; kd++) {
            uint32_t qs[kMT][4];
            if constexpr (kQRegs) {
#pragma unroll
                for (int mt = 0; mt < kMT; mt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        qs[mt][e] = qreg[kd][mt][e];
            } else {
                load_q_frags<D>(qs, aQw, lo, kd);
            }
#pragma unroll
            for (int jp = 0; jp < kNT / 2; jp++) {
                uint32_t k0, k1, k2, k3;
                ldsm_x4(ks + lo.at(jp * 16, kd), k0, k1, k2, k3);
#pragma unroll
                for (int mt = 0; mt < kMT; mt++) {
                    mma_bf16(s[mt][2 * jp], qs[mt], k0, k2);
                    mma_bf16(s[mt][2 * jp + 1], qs[mt], k1, k3);
                }
            }
        }

        /* Only tiles that cross the end of the keys or (causal) the
         * diagonal of this warp's rows pay for the mask. */
        const bool need_mask = n0 + BLOCK_N > S || (p.causal && n0 + BLOCK_N - 1 > w_row0);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < kMT; mt++)
#pragma unroll
                for (int j = 0; j < kNT; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int row = w_row0 + mt * 16 + g + (e / 2) * 8;
                        const int col = n0 + j * 8 + 2 * t + (e % 2);
                        if (col >= S || (p.causal && col > row))
                            s[mt][j][e] = -INFINITY;
                    }
        }

        const float sl2 = p.scale_log2;
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                /* A row lives in the 4 lanes of a quad (same g), two
                 * columns per score tile each: reduce over the quad. */
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < kNT; j++)
                    mx = fmaxf(mx, fmaxf(s[mt][j][2 * hh], s[mt][j][2 * hh + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(m_run[mt][hh], mx * sl2);
                /* A row with every key so far masked keeps m = -inf; using 0
                 * as its offset keeps -inf - -inf (NaN) out of exp2. */
                const float m_off = m_new == -INFINITY ? 0.0f : m_new;
                const float alpha = fast_exp2(m_run[mt][hh] - m_off);
                m_run[mt][hh] = m_new;
                l_run[mt][hh] *= alpha;
#pragma unroll
                for (int j = 0; j < kCpr; j++) {
                    o[mt][j][2 * hh] *= alpha;
                    o[mt][j][2 * hh + 1] *= alpha;
                }
                /* scale folded into one FMA: exp(scale*x - m') = 2^(x*scale_log2 - m). */
                float sum = 0.0f;
#pragma unroll
                for (int j = 0; j < kNT; j++) {
                    const float p0 = fast_exp2(fmaf(s[mt][j][2 * hh], sl2, -m_off));
                    const float p1 = fast_exp2(fmaf(s[mt][j][2 * hh + 1], sl2, -m_off));
                    sum += p0 + p1;
                    /* Rounded to bf16 at once: the fp32 scores die here, half
                     * the registers across the barrier before P V. */
                    pk[mt][j][hh] = pack_bf16(p0, p1);
                }
                /* The quad's partial sums are only combined in the epilogue:
                 * the rescaling above is linear, so per-lane sums commute
                 * with it and the shuffles are paid once, not per tile. */
                l_run[mt][hh] += sum;
            }
    };

    /* O += P V for tile n. Score tiles 2kk and 2kk+1 (keys 16kk..16kk+15)
     * hold, per lane, rows g and g+8 at columns 2t, 2t+1 of each: that is
     * a0..a3 of the A fragment for the k16 step kk. */
    auto pv_product = [&](int n, bool active) {
        if (!active)
            return;
        const uint32_t vs = aV + 2 * (n % STAGES) * Sh::kKVTile;
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++) {
            uint32_t pa[kMT][4];
#pragma unroll
            for (int mt = 0; mt < kMT; mt++) {
                pa[mt][0] = pk[mt][2 * kk][0];
                pa[mt][1] = pk[mt][2 * kk][1];
                pa[mt][2] = pk[mt][2 * kk + 1][0];
                pa[mt][3] = pk[mt][2 * kk + 1][1];
            }
#pragma unroll
            for (int jp = 0; jp < kCpr / 2; jp++) {
                uint32_t v0, v1, v2, v3;
                ldsm_x4_trans(vs + lo.at(kk * 16, jp), v0, v1, v2, v3);
#pragma unroll
                for (int mt = 0; mt < kMT; mt++) {
                    mma_bf16(o[mt][2 * jp], pa[mt], v0, v1);
                    mma_bf16(o[mt][2 * jp + 1], pa[mt], v2, v3);
                }
            }
        }
    };

    for (int n = 0; n < n_tiles; n++) {
        /* Causal: a warp whose last row precedes the tile's first key has
         * nothing to do here, but still takes part in loads and barriers. */
        const bool active = !p.causal || n * BLOCK_N <= w_row0 + kRowsW - 1;
        if constexpr (KV_SPLIT) {
            /* Groups in flight after K(n): V(n) .. K(n+STAGES-1). The barrier
             * publishes K(n) and proves every warp finished P V of tile n-1,
             * whose V slot the next load takes. */
            cp_async_wait<2 * (STAGES - 1)>();
            __syncthreads();
            load_v(n + STAGES - 1);
            cp_async_commit();
            scores_softmax(n, active);
            /* Groups in flight after V(n): K(n+1) .. V(n+STAGES-1). This
             * barrier also frees the K slot of tile n for K(n+STAGES). */
            cp_async_wait<2 * (STAGES - 1)>();
            __syncthreads();
            load_k(n + STAGES);
            cp_async_commit();
            pv_product(n, active);
        } else if constexpr (STAGES == 1) {
            cp_async_wait<0>();
            __syncthreads();
            scores_softmax(n, active);
            pv_product(n, active);
            __syncthreads(); /* the only slot is about to be overwritten */
            load_k(n + 1);
            load_v(n + 1);
            cp_async_commit();
        } else {
            /* Groups in flight after tile n: n+1 .. n+STAGES-2. The barrier
             * publishes tile n and frees the slot of tile n-1. */
            cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
            __syncthreads();
            load_k(n + STAGES - 1);
            load_v(n + STAGES - 1);
            cp_async_commit();
            scores_softmax(n, active);
            pv_product(n, active);
        }
    }
    cp_async_wait<0>(); /* no copy may outlive the block (they are all empty here) */

    /* Epilogue. Row sums: combine the quad's partial sums. Every row has at
     * least one allowed key (key 0), so l >= 1 for every stored row; the
     * guard only keeps rows past S (never stored) finite. */
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            float l = l_run[mt][hh];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            l_run[mt][hh] = l;
        }

    /* O / l rounded to bf16 once, staged in this warp's own rows of the Q
     * tile (only this warp ever read them), then written out as whole
     * 16-byte chunks: a row of O is 128 or 256 contiguous bytes in global
     * memory, which the fragment layout would otherwise scatter in 4-byte
     * pieces over 8 rows per instruction. */
    __syncwarp();
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const float l = l_run[mt][hh];
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            const int r = warp * kRowsW + mt * 16 + g + hh * 8;
#pragma unroll
            for (int j = 0; j < kCpr; j++)
                *reinterpret_cast<uint32_t *>(sQ + tile_off<kCpr>(r, j) + 2 * t) =
                    pack_bf16(o[mt][j][2 * hh] * inv, o[mt][j][2 * hh + 1] * inv);
        }
    __syncwarp();
    {
        bf16 *go = p.o + ((size_t)bh * S + m0) * D;
        constexpr int kChunks = kRowsW * kCpr;
#pragma unroll
        for (int it = 0; it < kChunks / 32; it++) {
            const int idx = lane + it * 32;
            const int r = warp * kRowsW + idx / kCpr, c = idx % kCpr;
            if (m0 + r < S)
                *reinterpret_cast<uint4 *>(go + (size_t)r * D + c * 8) =
                    *reinterpret_cast<const uint4 *>(sQ + tile_off<kCpr>(r, c));
        }
    }

    /* LSE in natural log: log(sum exp(scale*x)) = ln2 * (m + log2(l)), m
     * being the max in log2 units. One lane per quad writes. */
    if (t == 0) {
        float *gl = p.lse + (size_t)bh * S;
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int row = w_row0 + mt * 16 + g + hh * 8;
                if (row < S)
                    gl[row] = (m_run[mt][hh] + log2f(l_run[mt][hh])) * 0.6931471805599453f;
            }
    }
}

template <int D>
int launch(const Params &p, int batch, int m_tiles, cudaStream_t stream)
{
    /* More than 48 KB of dynamic shared memory must be opted into, once per
     * kernel; the carveout preference asks for the largest L1/shared split so
     * that two blocks can be resident where their shared memory allows. */
    static bool configured = false;
    if (!configured) {
        cudaError_t e = cudaFuncSetAttribute(attention_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Shape<D>::kSmemBytes);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(attention_kernel<D>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess)
            return (int)e;
        configured = true;
    }
    const dim3 grid((unsigned)(batch * p.h), (unsigned)m_tiles);
    attention_kernel<D><<<grid, kThreads, Shape<D>::kSmemBytes, stream>>>(p);
    return (int)cudaGetLastError();
}

} /* namespace */

extern "C" int attention(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int64_t B = sizes[0], H = sizes[1], HKV = sizes[2], S = sizes[3], D = sizes[4], C = sizes[5];
    if (D != 64 && D != 128)
        return (int)cudaErrorInvalidValue;
    if (B < 0 || H < 0 || HKV < 1 || H % HKV != 0 || S < 0 || (C != 0 && C != 1))
        return (int)cudaErrorInvalidValue;
    if (B == 0 || H == 0 || S == 0)
        return 0;
    const int64_t m_tiles = (S + BLOCK_M - 1) / BLOCK_M;
    /* grid.x = B*H (limit 2^31-1), grid.y = query tiles (limit 65535); all
     * in-kernel element offsets are 64-bit, but S itself is an int. */
    if (B * H > 0x7fffffffLL || m_tiles > 65535 || S > 0x7fffffffLL)
        return (int)cudaErrorInvalidValue;

    Params p;
    p.q = static_cast<const bf16 *>(tensors[0]);
    p.k = static_cast<const bf16 *>(tensors[1]);
    p.v = static_cast<const bf16 *>(tensors[2]);
    p.o = static_cast<bf16 *>(tensors[3]);
    p.lse = static_cast<float *>(tensors[4]);
    p.s = (int)S;
    p.h = (int)H;
    p.hkv = (int)HKV;
    p.group = (int)(H / HKV);
    p.causal = (int)C;
    p.scale_log2 = (float)(1.4426950408889634 / sqrt((double)D));
    if (D == 64)
        return launch<64>(p, (int)B, (int)m_tiles, stream);
    return launch<128>(p, (int)B, (int)m_tiles, stream);
}
