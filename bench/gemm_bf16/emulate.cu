/* Host-only emulation of the seed's data movement, for one knob setting
 * (compiled with the same -D flags as the seed; needs no GPU).
 *
 * Includes kernels/gemm_bf16/seed.cu for its constants and its shared-memory
 * layout function (tile_off), then replays, block by block, what the kernel
 * does: the raster (every tile exactly once), the slab loads (every shared
 * chunk written exactly once, inside its stage), ldmatrix / ldmatrix.trans
 * and mma.m16n8k16 with the fragment layouts of the PTX ISA, and the
 * epilogue (every C element written exactly once). The result is compared
 * with a float64 product. It also counts shared-memory bank conflicts of the
 * ldmatrix phases and of the cp.async writes.
 *
 * It checks the index arithmetic, not the PTX itself, nor the cp.async
 * pipeline and barriers: those need the GPU (check.cu). */
#include "seed.cu"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float y;
    memcpy(&y, &u, 4);
    return y;
}

static uint64_t g_rng = 88172645463325252ull;
static float rnd()
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    float v = (float)(g_rng >> 40) / 8388608.0f - 1.0f;
    return bf16_round(v == 0.0f ? 0.5f : v);
}

static int g_worst_ldsm = 0, g_worst_store = 0;

/* bank-conflict degree of one phase: addresses in bytes, 16 bytes each */
static int conflict_degree(const int *byte_addr, int n)
{
    int bank[32] = {0}, worst = 0;
    for (int i = 0; i < n; i++) {
        /* same 16-byte chunk read twice = broadcast, not a conflict */
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= byte_addr[j] / 16 == byte_addr[i] / 16;
        if (dup)
            continue;
        for (int w = 0; w < 4; w++) {
            const int b = (byte_addr[i] / 4 + w) % 32;
            if (++bank[b] > worst)
                worst = bank[b];
        }
    }
    return worst;
}

/* One emulated product: the operands, the result (with how often each
 * element was written), and one block's shared-memory slabs (with how often
 * each element was written in this k-step) and accumulators. */
struct emu_state {
    int M, N, K;
    bool aligned_path;
    int warps;
    std::vector<float> A, B, C;
    std::vector<int> written;
    std::vector<float> sA, sB;
    std::vector<int> ownA, ownB;
    /* per block: acc[warp][lane][i][j][4] */
    std::vector<float> acc;
};

/* The raster: the tile block pid computes. */
static void raster(int pid, int grid_m, int grid_n, int &pid_m, int &pid_n)
{
    if (GROUPM > 1) {
        const int per_group = GROUPM * grid_n;
        const int first_m = (pid / per_group) * GROUPM;
        const int rows = std::min(grid_m - first_m, GROUPM);
        pid_m = first_m + (pid % per_group) % rows;
        pid_n = (pid % per_group) / rows;
    } else {
        pid_m = pid / grid_n;
        pid_n = pid % grid_n;
    }
}

/* One 16-byte chunk idx of the A (isA) or B slab, as in load_slab: its
 * shared address appended to addrs, its 8 elements written (zero outside
 * the matrix). Returns 1 when it lands outside the stage or on an element
 * already written. */
static int load_chunk(emu_state &s, bool isA, int idx, int m0, int n0, int k0, int *addrs, int &na)
{
    int r, c, off;
    if (isA) {
        r = idx / kCprA, c = idx % kCprA;
        off = tile_off<kCprA>(r, c);
    } else {
        r = idx / kCprB, c = idx % kCprB;
        off = tile_off<kCprB>(r, c);
    }
    const int stage = isA ? kStageA : kStageB;
    if (off < 0 || off + 8 > stage || off % 8) {
        printf("load: chunk (%d,%d) at %d outside stage of %d\n", r, c, off, stage);
        return 1;
    }
    addrs[na++] = off * 2;
    for (int e = 0; e < 8; e++) {
        float v = 0.0f;
        if (isA) {
            const int gm = m0 + r, gk = k0 + c * 8;
            const bool ok = s.aligned_path ? (gm < s.M && gk < s.K) : (gm < s.M && gk + e < s.K);
            if (ok)
                v = s.A[(size_t)gm * s.K + gk + e];
            if (++s.ownA[off + e] > 1) {
                printf("load: A element %d written twice\n", off + e);
                return 1;
            }
            s.sA[off + e] = v;
        } else {
            const int gk = k0 + r, gn = n0 + c * 8;
            const bool ok = s.aligned_path ? (gk < s.K && gn < s.N) : (gk < s.K && gn + e < s.N);
            if (ok)
                v = s.B[(size_t)gk * s.N + gn + e];
            if (++s.ownB[off + e] > 1) {
                printf("load: B element %d written twice\n", off + e);
                return 1;
            }
            s.sB[off + e] = v;
        }
    }
    return 0;
}

/* The A and B slabs of k-step k0 of the block at (m0, n0): thread tid,
 * iteration it -> chunk idx, as in load_slab; the stores' bank conflicts
 * counted. Returns 1 on a load outside its place. */
static int load_slabs(emu_state &s, int m0, int n0, int k0)
{
    std::fill(s.sA.begin(), s.sA.end(), NAN);
    std::fill(s.sB.begin(), s.sB.end(), NAN);
    std::fill(s.ownA.begin(), s.ownA.end(), 0);
    std::fill(s.ownB.begin(), s.ownB.end(), 0);
    for (int pass = 0; pass < 2; pass++) {
        const bool isA = pass == 0;
        const int chunks = isA ? kChunksA : kChunksB, iters = isA ? kItersA : kItersB;
        for (int it = 0; it < iters; it++) {
            for (int w = 0; w < s.warps; w++) {
                int addrs[32], na = 0;
                for (int l = 0; l < 32; l++) {
                    const int idx = w * 32 + l + it * kThreads;
                    if (idx >= chunks)
                        continue;
                    if (load_chunk(s, isA, idx, m0, n0, k0, addrs, na))
                        return 1;
                }
                /* a 16-byte store per lane is served 8 lanes per wavefront */
                for (int p = 0; p + 8 <= na; p += 8)
                    g_worst_store = std::max(g_worst_store, conflict_degree(addrs + p, 8));
            }
        }
    }
    return 0;
}

/* The bank conflicts of one ldmatrix's four 8-lane phases (addr: the
 * element offsets its 32 lanes give). */
static void count_ldsm_conflicts(const int *addr)
{
    for (int q = 0; q < 4; q++) {
        int b[8];
        for (int j = 0; j < 8; j++)
            b[j] = addr[q * 8 + j] * 2;
        g_worst_ldsm = std::max(g_worst_ldsm, conflict_degree(b, 8));
    }
}

/* ldmatrix of warp row wm's A fragments for k16 step kk, its phases' bank
 * conflicts counted. */
static void ldmatrix_a(const emu_state &s, int wm, int kk, float af[32][kMI][4][2])
{
    for (int i = 0; i < kMI; i++) {
        int addr[32];
        for (int l = 0; l < 32; l++) {
            const int lrow = l % 16, lchunk = l / 16;
            addr[l] = tile_off<kCprA>(wm * WM + lrow + i * 16, kk * 2 + lchunk);
        }
        count_ldsm_conflicts(addr);
        /* ldmatrix: lane t gets, of matrix q, row t/4, columns 2(t%4), 2(t%4)+1 */
        for (int t = 0; t < 32; t++)
            for (int q = 0; q < 4; q++)
                for (int e = 0; e < 2; e++)
                    af[t][i][q][e] = s.sA[addr[q * 8 + t / 4] + 2 * (t % 4) + e];
    }
}

/* ldmatrix.trans of warp column wn's B fragments for k16 step kk, its
 * phases' bank conflicts counted. */
static void ldmatrix_b(const emu_state &s, int wn, int kk, float bfr[32][kNI][2][2])
{
    for (int j = 0; j < kNI; j += 2) {
        int addr[32];
        for (int l = 0; l < 32; l++) {
            const int lrow = l % 16, lchunk = l / 16;
            addr[l] = tile_off<kCprB>(kk * 16 + lrow, (wn * WN) / 8 + lchunk + j);
        }
        count_ldsm_conflicts(addr);
        /* .trans: lane t gets, of matrix q, stored rows 2(t%4)+e at column t/4 */
        for (int t = 0; t < 32; t++)
            for (int q = 0; q < 4; q++)
                for (int e = 0; e < 2; e++)
                    bfr[t][j + q / 2][q % 2][e] = s.sB[addr[q * 8 + 2 * (t % 4) + e] + t / 4];
    }
}

/* mma.m16n8k16 .row.col of warp's fragments with the PTX ISA fragment
 * layouts, into its accumulators. */
static void mma_warp(emu_state &s, int warp, float af[32][kMI][4][2], float bfr[32][kNI][2][2])
{
    for (int i = 0; i < kMI; i++)
        for (int j = 0; j < kNI; j++) {
            float a[16][16], bm[16][8];
            for (int t = 0; t < 32; t++) {
                const int g = t / 4, tq = t % 4;
                for (int e = 0; e < 2; e++) {
                    a[g][2 * tq + e] = af[t][i][0][e];
                    a[g + 8][2 * tq + e] = af[t][i][1][e];
                    a[g][2 * tq + 8 + e] = af[t][i][2][e];
                    a[g + 8][2 * tq + 8 + e] = af[t][i][3][e];
                    bm[2 * tq + e][g] = bfr[t][j][0][e];
                    bm[2 * tq + 8 + e][g] = bfr[t][j][1][e];
                }
            }
            for (int t = 0; t < 32; t++) {
                const int g = t / 4, tq = t % 4;
                for (int q = 0; q < 4; q++) {
                    const int row = g + (q / 2) * 8, col = 2 * tq + q % 2;
                    float sum = 0;
                    for (int k = 0; k < 16; k++)
                        sum += a[row][k] * bm[k][col];
                    s.acc[((((size_t)warp * 32 + t) * kMI + i) * kNI + j) * 4 + q] += sum;
                }
            }
        }
}

/* compute: every warp's k16 steps over the slabs in shared memory */
static void compute_slab(emu_state &s)
{
    for (int warp = 0; warp < s.warps; warp++) {
        const int wm = warp / kWarpsN, wn = warp % kWarpsN;
        for (int kk = 0; kk < BK / 16; kk++) {
            float af[32][kMI][4][2], bfr[32][kNI][2][2];
            ldmatrix_a(s, wm, kk, af);
            ldmatrix_b(s, wn, kk, bfr);
            mma_warp(s, warp, af, bfr);
        }
    }
}

/* epilogue: the block's accumulators at (m0, n0) rounded into C, each
 * write counted */
static void epilogue(emu_state &s, int m0, int n0)
{
    for (int warp = 0; warp < s.warps; warp++) {
        const int wm = warp / kWarpsN, wn = warp % kWarpsN;
        for (int t = 0; t < 32; t++) {
            const int g = t / 4, tq = t % 4;
            for (int i = 0; i < kMI; i++)
                for (int h = 0; h < 2; h++) {
                    const int row = m0 + wm * WM + i * 16 + g + h * 8;
                    if (row >= s.M)
                        continue;
                    for (int j = 0; j < kNI; j++) {
                        const int col = n0 + wn * WN + j * 8 + 2 * tq;
                        for (int e = 0; e < 2; e++) {
                            if (col + e >= s.N)
                                continue;
                            const size_t o = (size_t)row * s.N + col + e;
                            s.written[o]++;
                            s.C[o] = bf16_round(
                                s.acc[((((size_t)warp * 32 + t) * kMI + i) * kNI + j) * 4 + 2 * h + e]);
                        }
                    }
                }
        }
    }
}

/* C against a float64 product: every element written once, finite, and
 * the relative L2 error small. Returns 1 when not. */
static int check_result(const emu_state &s)
{
    const int M = s.M, N = s.N, K = s.K;
    double num = 0, den = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double sum = 0;
            for (int k = 0; k < K; k++)
                sum += (double)s.A[(size_t)m * K + k] * s.B[(size_t)k * N + n];
            const size_t o = (size_t)m * N + n;
            if (s.written[o] != 1) {
                printf("C[%d][%d] written %d times\n", m, n, s.written[o]);
                return 1;
            }
            if (!std::isfinite(s.C[o])) {
                printf("C[%d][%d] = %g\n", m, n, s.C[o]);
                return 1;
            }
            num += (s.C[o] - sum) * (s.C[o] - sum);
            den += sum * sum;
        }
    const double rel = std::sqrt(num / den);
    printf("  %4dx%4dx%4d %-9s rel_l2 vs float64 %.2e %s\n", M, N, K, s.aligned_path ? "aligned" : "odd", rel,
           rel < 5e-3 ? "ok" : "WRONG");
    return rel < 5e-3 ? 0 : 1;
}

static int emulate(int M, int N, int K, bool aligned_path)
{
    emu_state s;
    s.M = M, s.N = N, s.K = K;
    s.aligned_path = aligned_path;
    s.A.resize((size_t)M * K);
    s.B.resize((size_t)K * N);
    for (auto &v : s.A)
        v = rnd();
    for (auto &v : s.B)
        v = rnd();
    s.C.assign((size_t)M * N, NAN);
    s.written.assign((size_t)M * N, 0);

    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;
    std::vector<int> tile_seen((size_t)grid_m * grid_n, 0);
    const int ktiles = (K + BK - 1) / BK;
    s.sA.resize(kStageA), s.sB.resize(kStageB);
    s.ownA.resize(kStageA), s.ownB.resize(kStageB);
    s.warps = kThreads / 32;
    s.acc.resize((size_t)s.warps * 32 * kMI * kNI * 4);

    for (int pid = 0; pid < grid_m * grid_n; pid++) {
        int pid_m, pid_n;
        raster(pid, grid_m, grid_n, pid_m, pid_n);
        if (pid_m < 0 || pid_m >= grid_m || pid_n < 0 || pid_n >= grid_n || tile_seen[(size_t)pid_m * grid_n + pid_n]++) {
            printf("raster: block %d -> tile (%d,%d) out of range or repeated\n", pid, pid_m, pid_n);
            return 1;
        }
        const int m0 = pid_m * BM, n0 = pid_n * BN;
        std::fill(s.acc.begin(), s.acc.end(), 0.0f);
        for (int kt = 0; kt < ktiles; kt++) {
            if (load_slabs(s, m0, n0, kt * BK))
                return 1;
            compute_slab(s);
        }
        epilogue(s, m0, n0);
    }
    return check_result(s);
}

int main()
{
    printf("emulate BM=%d BN=%d BK=%d WM=%d WN=%d STAGES=%d SWIZZLE=%d GROUPM=%d: %d threads, %d B shared\n", BM, BN,
           BK, WM, WN, STAGES, SWIZZLE, GROUPM, kThreads, kSmemBytes);
    int bad = 0;
    bad |= emulate(BM * 2 + 24, BN * 3 - 8, BK * 3 + 16, true); /* partial tiles in M, N and K */
    bad |= emulate(BM * 3, BN, BK * 2, true);                   /* exact tiles, raster groups */
    bad |= emulate(37, 45, 29, false);                          /* odd sizes: fallback loads */
    printf("  worst bank-conflict degree: ldmatrix %d-way, cp.async stores %d-way (1 = none)\n", g_worst_ldsm,
           g_worst_store);
    if (kSmemBytes > 227 * 1024) {
        printf("  shared memory %d B > 227 KB\n", kSmemBytes);
        bad = 1;
    }
    printf("%s\n", bad ? "EMULATION FAILED" : "emulation ok");
    return bad;
}
