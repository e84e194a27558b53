/* Hopper seed for gemm_bf16: C = A (M x K) * B (K x N), all row-major bf16,
 * fp32 accumulation, C rounded to bf16 once. Written for avo; correct for
 * every M, N, K >= 0 (sizes the tensor-memory path cannot address take a
 * plain fallback kernel, see gemm_bf16 at the end).
 *
 * Design (the sm_90a path: the only one that approaches the tensor cores'
 * peak on Hopper; seed.cu is the Ampere-style mma.sync alternative):
 *   - one block computes a BM x BN tile of C with 1 + CONSUMERS warpgroups:
 *     warpgroup 0 is the producer, one thread of which issues TMA
 *     (cp.async.bulk.tensor) loads of 64-wide K slabs of A and B into a
 *     STAGES-deep ring of shared-memory buffers; each copy completes on the
 *     stage's "full" mbarrier by byte count, so no thread waits for a load
 *     it does not consume;
 *   - each consumer warpgroup owns BM / CONSUMERS rows of the tile and runs
 *     wgmma (m64 x BN x k16, both operands read straight from shared
 *     memory, accumulators in registers), then signals the stage's "empty"
 *     mbarrier once the tensor cores have finished reading it;
 *   - setmaxnreg moves registers from the producer (which needs few) to the
 *     consumers, whose accumulators alone take BM / CONSUMERS / 64 * BN / 2
 *     registers per thread;
 *   - A tiles are K-major (A's rows are K-contiguous) and B tiles N-major
 *     (B's rows are N-contiguous), both in the 128-byte swizzled layout TMA
 *     writes and wgmma reads without bank conflicts; wgmma's transpose bit
 *     for B means no one ever transposes B in memory;
 *   - TMA fills out-of-range rows and columns with zeros, so partial tiles
 *     in M, N and K need no special code in the main loop; only the
 *     epilogue's stores are bounds-checked.
 * Not done (room for the agent): clusters with TMA multicast, a persistent
 * grid whose epilogue overlaps the next tile's loads, a TMA store epilogue
 * through shared memory, split-K for small M x N.
 *
 * Knobs (the tune operator prepends "#define NAME value"; see problem.json):
 *   BM         block rows (64 per m64 wgmma per consumer warpgroup)
 *   BN         block columns = wgmma N (64, 128, 192 or 256)
 *   CONSUMERS  consumer warpgroups (1 or 2), each owns BM / CONSUMERS rows
 *   STAGES     depth of the TMA ring (each stage (BM + BN) * 128 bytes)
 *   GROUPM     block raster: GROUPM block-rows walked column by column so
 *              blocks running at the same time share A and B in L2
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUPM
#define GROUPM 8
#endif

namespace {

typedef __nv_bfloat16 bf16;

constexpr int kBK = 64;                     /* one 128-byte swizzle row of bf16 */
constexpr int kWGM = BM / CONSUMERS;        /* rows per consumer warpgroup */
constexpr int kMI = kWGM / 64;              /* m64 wgmmas per consumer per k16 */
constexpr int kThreads = 128 * (1 + CONSUMERS);
constexpr int kStageA = BM * kBK * 2;       /* bytes */
constexpr int kStageB = kBK * BN * 2;
constexpr int kStageBytes = kStageA + kStageB;
constexpr int kSmemBytes = STAGES * kStageBytes + 1024; /* + slack to align to 1024 */
/* Register split across warpgroups (setmaxnreg wants multiples of 8 in
 * [24, 256] and the total must fit the 64K-register file). */
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegsRaw = (65536 / 128 - kProducerRegs) / CONSUMERS / 8 * 8;
constexpr int kConsumerRegs = kConsumerRegsRaw > 240 ? 240 : kConsumerRegsRaw;

static_assert(CONSUMERS == 1 || CONSUMERS == 2, "1 or 2 consumer warpgroups");
static_assert(kWGM % 64 == 0 && kMI >= 1, "each consumer owns a multiple of 64 rows");
static_assert(BM <= 256, "TMA box rows are at most 256");
static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN is a wgmma N this file instantiates");
static_assert(kMI * BN / 2 <= 128, "accumulators beyond 128 registers per thread would spill");
static_assert(STAGES >= 2, "the ring needs two stages");
/* + 1 KB of static shared memory (the barriers, aligned like the ring) */
static_assert(kSmemBytes + 1024 <= 227 * 1024, "shared memory per block is 227 KB on sm_90");

/* ---- PTX wrappers ------------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

/* Spin until the phase with the given parity has completed. A fresh
 * barrier is in phase 0, so waiting for parity 1 returns at once: that is
 * how the producer's first pass over the ring finds every stage empty. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(smem_u32(bar)),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
                 "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
}

/* wgmma shared-memory matrix descriptor: start address, leading and stride
 * byte offsets (all >> 4), layout 1 = 128-byte swizzle. */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* D (64 x N, fp32, registers) += A (64 x 16, K-major) * B (16 x N, N-major:
 * imm-trans-b = 1). Generated once for each N this file allows; the
 * accumulator layout is the PTX ISA's: thread t of the warpgroup holds
 * rows 16*(t/32) + (t%32)/4 (+8) and columns 8*j + 2*(t%4) (+1). */
template <int N> __device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], uint64_t da, uint64_t db)
{
    if constexpr (N == 64) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7,"
            "%8, %9, %10, %11, %12, %13, %14, %15,"
            "%16, %17, %18, %19, %20, %21, %22, %23,"
            "%24, %25, %26, %27, %28, %29, %30, %31"
            "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
              "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
              "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
              "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
              "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
            : "l"(da), "l"(db));
    } else if constexpr (N == 128) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7,"
            "%8, %9, %10, %11, %12, %13, %14, %15,"
            "%16, %17, %18, %19, %20, %21, %22, %23,"
            "%24, %25, %26, %27, %28, %29, %30, %31,"
            "%32, %33, %34, %35, %36, %37, %38, %39,"
            "%40, %41, %42, %43, %44, %45, %46, %47,"
            "%48, %49, %50, %51, %52, %53, %54, %55,"
            "%56, %57, %58, %59, %60, %61, %62, %63"
            "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
              "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
              "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
              "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
              "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
              "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
              "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
              "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
              "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
            : "l"(da), "l"(db));
    } else if constexpr (N == 192) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7,"
            "%8, %9, %10, %11, %12, %13, %14, %15,"
            "%16, %17, %18, %19, %20, %21, %22, %23,"
            "%24, %25, %26, %27, %28, %29, %30, %31,"
            "%32, %33, %34, %35, %36, %37, %38, %39,"
            "%40, %41, %42, %43, %44, %45, %46, %47,"
            "%48, %49, %50, %51, %52, %53, %54, %55,"
            "%56, %57, %58, %59, %60, %61, %62, %63,"
            "%64, %65, %66, %67, %68, %69, %70, %71,"
            "%72, %73, %74, %75, %76, %77, %78, %79,"
            "%80, %81, %82, %83, %84, %85, %86, %87,"
            "%88, %89, %90, %91, %92, %93, %94, %95"
            "}, %96, %97, p, 1, 1, 0, 1;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
              "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
              "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
              "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
              "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
              "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
              "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
              "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
              "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
              "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),
              "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
              "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
              "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
              "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
              "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
              "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
              "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
            : "l"(da), "l"(db));
    } else if constexpr (N == 256) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7,"
            "%8, %9, %10, %11, %12, %13, %14, %15,"
            "%16, %17, %18, %19, %20, %21, %22, %23,"
            "%24, %25, %26, %27, %28, %29, %30, %31,"
            "%32, %33, %34, %35, %36, %37, %38, %39,"
            "%40, %41, %42, %43, %44, %45, %46, %47,"
            "%48, %49, %50, %51, %52, %53, %54, %55,"
            "%56, %57, %58, %59, %60, %61, %62, %63,"
            "%64, %65, %66, %67, %68, %69, %70, %71,"
            "%72, %73, %74, %75, %76, %77, %78, %79,"
            "%80, %81, %82, %83, %84, %85, %86, %87,"
            "%88, %89, %90, %91, %92, %93, %94, %95,"
            "%96, %97, %98, %99, %100, %101, %102, %103,"
            "%104, %105, %106, %107, %108, %109, %110, %111,"
            "%112, %113, %114, %115, %116, %117, %118, %119,"
            "%120, %121, %122, %123, %124, %125, %126, %127"
            "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
              "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
              "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
              "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
              "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
              "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
              "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
              "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
              "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
              "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),
              "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
              "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
              "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
              "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
              "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
              "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
              "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
              "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
              "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
              "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
              "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
              "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
              "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
              "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
              "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
            : "l"(da), "l"(db));
    }
}

template <int R> __device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R> __device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

/* ---- the kernel --------------------------------------------------------- */

__global__ void __launch_bounds__(kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     bf16 *__restrict__ C, int M, int N, int K)
{
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    /* 128-byte swizzle atoms are 1024-byte blocks: the ring must start on one. */
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    /* Grouped raster: consecutive blocks walk GROUPM block-rows down one
     * block-column before moving right, so the A rows and B columns of the
     * blocks resident together overlap and are read from L2. */
    const int bid = blockIdx.x;
    const int per_group = GROUPM * tiles_n;
    const int first_m = (bid / per_group) * GROUPM;
    const int rows_in_group = min(tiles_m - first_m, GROUPM);
    const int tm = first_m + (bid % per_group) % rows_in_group;
    const int tn = (bid % per_group) / rows_in_group;
    const int m0 = tm * BM, n0 = tn * BN;
    const int ktiles = (K + kBK - 1) / kBK;

    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CONSUMERS * 4); /* one arrive per consumer warp */
        }
        /* make the initialised barriers visible to the async (TMA) proxy */
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == 0) {
            for (int kt = 0; kt < ktiles; kt++) {
                const int s = kt % STAGES;
                mbar_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);
                uint8_t *a_s = smem + s * kStageBytes;
                uint8_t *b_s = a_s + kStageA;
                /* the full box counts even where TMA zero-fills past the edges */
                mbar_expect_tx(&full[s], kStageBytes);
                tma_load_2d(a_s, &map_a, &full[s], kt * kBK, m0);
#pragma unroll
                for (int b = 0; b < BN / 64; b++)
                    tma_load_2d(b_s + b * (kBK * 128), &map_b, &full[s], n0 + b * 64, kt * kBK);
            }
        }
        return;
    }

    setmaxnreg_inc<kConsumerRegs>();
    const int c = wg - 1;
    float acc[kMI][BN / 2];
#pragma unroll
    for (int i = 0; i < kMI; i++)
#pragma unroll
        for (int j = 0; j < BN / 2; j++)
            acc[i][j] = 0.0f;

    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const uint32_t ring = smem_u32(smem);
    for (int kt = 0; kt < ktiles; kt++) {
        const int s = kt % STAGES;
        mbar_wait(&full[s], (kt / STAGES) & 1);
        const uint32_t a_s = ring + s * kStageBytes + c * kWGM * 128;
        const uint32_t b_s = ring + s * kStageBytes + kStageA;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; kk++) {
            /* B, N-major: 16 K-rows of 128 bytes = 2048 bytes per k16 step;
             * the 64-column boxes are kBK * 128 bytes apart (leading byte
             * offset), 8-row swizzle atoms 1024 bytes apart (stride). */
            const uint64_t db = smem_desc(b_s + kk * 2048, kBK * 128, 1024);
#pragma unroll
            for (int i = 0; i < kMI; i++) {
                /* A, K-major: 64 rows of 128 bytes per m64; the k16 step
                 * moves 32 bytes along the (swizzled) row. */
                const uint64_t da = smem_desc(a_s + i * 64 * 128 + kk * 32, 16, 1024);
                wgmma_bf16<BN>(acc[i], da, db);
            }
        }
        wgmma_commit();
        /* Keep this k-tile's wgmmas in flight; the previous one's are done
         * now, so its stage can be refilled. */
        wgmma_wait<1>();
        if (kt > 0 && lane == 0)
            mbar_arrive(&empty[(kt - 1) % STAGES]);
    }
    wgmma_wait<0>();

    /* Epilogue straight from the accumulators, rounded to bf16 once. */
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kMI; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = m0 + c * kWGM + i * 64 + warp * 16 + g + h * 8;
            if (row >= M)
                continue;
            bf16 *c_row = C + (size_t)row * N;
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                const int col = n0 + j * 8 + 2 * t;
                /* N % 8 == 0 on this path and col is even: col < N implies col + 1 < N */
                if (col < N)
                    *reinterpret_cast<__nv_bfloat162 *>(c_row + col) =
                        __floats2bfloat162_rn(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);
            }
        }
    }
}

/* Fallback for what TMA cannot address (a row pitch that is not a multiple
 * of 16 bytes, or misaligned pointers): a plain shared-memory tiled kernel,
 * fp32 accumulation. Correct, not fast; no timed configuration uses it. */
constexpr int kFT = 16;
__global__ void gemm_fallback_kernel(const bf16 *__restrict__ A, const bf16 *__restrict__ B, bf16 *__restrict__ C,
                                     int M, int N, int K)
{
    __shared__ float sa[kFT][kFT + 1], sb[kFT][kFT + 1];
    const int row = blockIdx.y * kFT + threadIdx.y, col = blockIdx.x * kFT + threadIdx.x;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kFT) {
        const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        sa[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? __bfloat162float(A[(size_t)row * K + ka]) : 0.0f;
        sb[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? __bfloat162float(B[(size_t)kb * N + col]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kFT; k++)
            sum += sa[threadIdx.y][k] * sb[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = __float2bfloat16_rn(sum);
}

/* ---- host side ---------------------------------------------------------- */

/* cuTensorMapEncodeTiled is a driver API call: fetched through the runtime
 * so that the candidate needs no -lcuda. */
PFN_cuTensorMapEncodeTiled_v12000 encode_fn()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
    }
    return fn;
}

/* A 2-D bf16 tensor map over a row-major rows x cols matrix, box of
 * box_rows x 64 columns (128 bytes, the swizzle width). */
int make_map(CUtensorMap *map, const void *base, int rows, int cols, int box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
    if (!fn)
        return (int)cudaErrorNotSupported;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    const cuuint32_t elem[2] = {1, 1};
    CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides, box, elem,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : 2000 + (int)r;
}

int launch_sm90(const bf16 *A, const bf16 *B, bf16 *C, int M, int N, int K, cudaStream_t stream)
{
    /* Tensor maps depend only on pointers and shapes: encoded again only
     * when those change (the harness calls with the same buffers many
     * times, and host work before the launch is inside its timed region). */
    static CUtensorMap map_a, map_b;
    static const void *last_a = nullptr, *last_b = nullptr;
    static int last_m = -1, last_n = -1, last_k = -1;
    static bool configured = false;
    if (!configured) {
        cudaError_t e = cudaFuncSetAttribute(gemm_sm90_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e != cudaSuccess)
            return (int)e;
        configured = true;
    }
    if (A != last_a || B != last_b || M != last_m || N != last_n || K != last_k) {
        last_a = nullptr; /* invalid until both maps are made */
        int r = make_map(&map_a, A, M, K, BM);
        if (r == 0)
            r = make_map(&map_b, B, K, N, kBK);
        if (r != 0)
            return r;
        last_a = A, last_b = B, last_m = M, last_n = N, last_k = K;
    }
    const long long blocks = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    if (blocks > 0x7fffffffLL)
        return (int)cudaErrorInvalidValue;
    gemm_sm90_kernel<<<(unsigned)blocks, kThreads, kSmemBytes, stream>>>(map_a, map_b, C, M, N, K);
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
    /* TMA: global row pitches multiples of 16 bytes, base addresses 16-byte
     * aligned; K == 0 leaves nothing to load (C = 0 from the fallback). */
    const bool tma_ok = K > 0 && K % 8 == 0 && N % 8 == 0 &&
                        (((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) & 15) == 0;
    if (tma_ok)
        return launch_sm90(A, B, C, (int)M, (int)N, (int)K, stream);
    const dim3 block(kFT, kFT), grid((unsigned)((N + kFT - 1) / kFT), (unsigned)((M + kFT - 1) / kFT));
    if (grid.y > 65535)
        return (int)cudaErrorInvalidValue;
    gemm_fallback_kernel<<<grid, block, 0, stream>>>(A, B, C, (int)M, (int)N, (int)K);
    return (int)cudaGetLastError();
}
