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

static int emulate(int M, int N, int K, bool aligned_path)
{
    std::vector<float> A((size_t)M * K), B((size_t)K * N);
    for (auto &v : A)
        v = rnd();
    for (auto &v : B)
        v = rnd();
    std::vector<float> C((size_t)M * N, NAN);
    std::vector<int> written((size_t)M * N, 0);

    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;
    std::vector<int> tile_seen((size_t)grid_m * grid_n, 0);
    const int ktiles = (K + BK - 1) / BK;
    std::vector<float> sA(kStageA), sB(kStageB);
    std::vector<int> ownA(kStageA), ownB(kStageB);

    /* per block: acc[warp][lane][i][j][4] */
    const int warps = kThreads / 32;
    std::vector<float> acc((size_t)warps * 32 * kMI * kNI * 4);

    for (int pid = 0; pid < grid_m * grid_n; pid++) {
        int pid_m, pid_n;
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
        if (pid_m < 0 || pid_m >= grid_m || pid_n < 0 || pid_n >= grid_n || tile_seen[(size_t)pid_m * grid_n + pid_n]++) {
            printf("raster: block %d -> tile (%d,%d) out of range or repeated\n", pid, pid_m, pid_n);
            return 1;
        }
        const int m0 = pid_m * BM, n0 = pid_n * BN;
        std::fill(acc.begin(), acc.end(), 0.0f);

        for (int kt = 0; kt < ktiles; kt++) {
            const int k0 = kt * BK;
            std::fill(sA.begin(), sA.end(), NAN);
            std::fill(sB.begin(), sB.end(), NAN);
            std::fill(ownA.begin(), ownA.end(), 0);
            std::fill(ownB.begin(), ownB.end(), 0);
            /* loads: thread tid, iteration it -> chunk idx, as in load_slab */
            for (int pass = 0; pass < 2; pass++) {
                const bool isA = pass == 0;
                const int chunks = isA ? kChunksA : kChunksB, iters = isA ? kItersA : kItersB;
                for (int it = 0; it < iters; it++) {
                    for (int w = 0; w < warps; w++) {
                        int addrs[32], na = 0;
                        for (int l = 0; l < 32; l++) {
                            const int idx = w * 32 + l + it * kThreads;
                            if (idx >= chunks)
                                continue;
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
                                    const bool ok = aligned_path ? (gm < M && gk < K) : (gm < M && gk + e < K);
                                    if (ok)
                                        v = A[(size_t)gm * K + gk + e];
                                    if (++ownA[off + e] > 1) {
                                        printf("load: A element %d written twice\n", off + e);
                                        return 1;
                                    }
                                    sA[off + e] = v;
                                } else {
                                    const int gk = k0 + r, gn = n0 + c * 8;
                                    const bool ok = aligned_path ? (gk < K && gn < N) : (gk < K && gn + e < N);
                                    if (ok)
                                        v = B[(size_t)gk * N + gn + e];
                                    if (++ownB[off + e] > 1) {
                                        printf("load: B element %d written twice\n", off + e);
                                        return 1;
                                    }
                                    sB[off + e] = v;
                                }
                            }
                        }
                        /* a 16-byte store per lane is served 8 lanes per wavefront */
                        for (int p = 0; p + 8 <= na; p += 8)
                            g_worst_store = std::max(g_worst_store, conflict_degree(addrs + p, 8));
                    }
                }
            }
            /* compute */
            for (int warp = 0; warp < warps; warp++) {
                const int wm = warp / kWarpsN, wn = warp % kWarpsN;
                for (int kk = 0; kk < BK / 16; kk++) {
                    float af[32][kMI][4][2], bfr[32][kNI][2][2];
                    for (int i = 0; i < kMI; i++) {
                        int addr[32];
                        for (int l = 0; l < 32; l++) {
                            const int lrow = l % 16, lchunk = l / 16;
                            addr[l] = tile_off<kCprA>(wm * WM + lrow + i * 16, kk * 2 + lchunk);
                        }
                        for (int q = 0; q < 4; q++) {
                            int b[8];
                            for (int j = 0; j < 8; j++)
                                b[j] = addr[q * 8 + j] * 2;
                            g_worst_ldsm = std::max(g_worst_ldsm, conflict_degree(b, 8));
                        }
                        /* ldmatrix: lane t gets, of matrix q, row t/4, columns 2(t%4), 2(t%4)+1 */
                        for (int t = 0; t < 32; t++)
                            for (int q = 0; q < 4; q++)
                                for (int e = 0; e < 2; e++)
                                    af[t][i][q][e] = sA[addr[q * 8 + t / 4] + 2 * (t % 4) + e];
                    }
                    for (int j = 0; j < kNI; j += 2) {
                        int addr[32];
                        for (int l = 0; l < 32; l++) {
                            const int lrow = l % 16, lchunk = l / 16;
                            addr[l] = tile_off<kCprB>(kk * 16 + lrow, (wn * WN) / 8 + lchunk + j);
                        }
                        for (int q = 0; q < 4; q++) {
                            int b[8];
                            for (int x = 0; x < 8; x++)
                                b[x] = addr[q * 8 + x] * 2;
                            g_worst_ldsm = std::max(g_worst_ldsm, conflict_degree(b, 8));
                        }
                        /* .trans: lane t gets, of matrix q, stored rows 2(t%4)+e at column t/4 */
                        for (int t = 0; t < 32; t++)
                            for (int q = 0; q < 4; q++)
                                for (int e = 0; e < 2; e++)
                                    bfr[t][j + q / 2][q % 2][e] = sB[addr[q * 8 + 2 * (t % 4) + e] + t / 4];
                    }
                    /* mma.m16n8k16 .row.col with the PTX ISA fragment layouts */
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
                                    float s = 0;
                                    for (int k = 0; k < 16; k++)
                                        s += a[row][k] * bm[k][col];
                                    acc[((((size_t)warp * 32 + t) * kMI + i) * kNI + j) * 4 + q] += s;
                                }
                            }
                        }
                }
            }
        }
        /* epilogue */
        for (int warp = 0; warp < warps; warp++) {
            const int wm = warp / kWarpsN, wn = warp % kWarpsN;
            for (int t = 0; t < 32; t++) {
                const int g = t / 4, tq = t % 4;
                for (int i = 0; i < kMI; i++)
                    for (int h = 0; h < 2; h++) {
                        const int row = m0 + wm * WM + i * 16 + g + h * 8;
                        if (row >= M)
                            continue;
                        for (int j = 0; j < kNI; j++) {
                            const int col = n0 + wn * WN + j * 8 + 2 * tq;
                            for (int e = 0; e < 2; e++) {
                                if (col + e >= N)
                                    continue;
                                const size_t o = (size_t)row * N + col + e;
                                written[o]++;
                                C[o] = bf16_round(acc[((((size_t)warp * 32 + t) * kMI + i) * kNI + j) * 4 + 2 * h + e]);
                            }
                        }
                    }
            }
        }
    }
    double num = 0, den = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)A[(size_t)m * K + k] * B[(size_t)k * N + n];
            const size_t o = (size_t)m * N + n;
            if (written[o] != 1) {
                printf("C[%d][%d] written %d times\n", m, n, written[o]);
                return 1;
            }
            if (!std::isfinite(C[o])) {
                printf("C[%d][%d] = %g\n", m, n, C[o]);
                return 1;
            }
            num += (C[o] - s) * (C[o] - s);
            den += s * s;
        }
    const double rel = std::sqrt(num / den);
    printf("  %4dx%4dx%4d %-9s rel_l2 vs float64 %.2e %s\n", M, N, K, aligned_path ? "aligned" : "odd", rel,
           rel < 5e-3 ? "ok" : "WRONG");
    return rel < 5e-3 ? 0 : 1;
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
