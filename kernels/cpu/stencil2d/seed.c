/* Seed for cpu/stencil2d: one 5-point Jacobi step, fixed boundary, float32
 * [H, W] row-major. Correct for any sizes >= 1 and every allowed knob
 * combination; the tune operator prepends "#define NAME value" lines. The
 * defaults are deliberately mediocre: tiles 4096 rows by 16 columns walked
 * column by column (ORDER 0), so every step strides a whole row. */
#include <stdint.h>

#ifndef ORDER
#define ORDER 0 /* 0: j outer, i inner inside a tile; 1: i outer, j inner */
#endif
#ifndef TI
#define TI 4096 /* tile height (rows) */
#endif
#ifndef TJ
#define TJ 16 /* tile width (columns) */
#endif
#ifndef UNROLL
#define UNROLL 1 /* inner j-loop unroll (ORDER 1) */
#endif

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static inline float point(const float *restrict U, int64_t k, int64_t W)
{
    return 0.25f * ((U[k - W] + U[k + W]) + (U[k - 1] + U[k + 1]));
}

int stencil2d(void *const *tensors, const int64_t *sizes)
{
    const float *restrict U = tensors[0];
    float *restrict V = tensors[1];
    const int64_t H = sizes[0], W = sizes[1];

    /* Fixed boundary: rows 0 and H-1, columns 0 and W-1 are copied. */
    for (int64_t j = 0; j < W; j++) {
        V[j] = U[j];
        V[(H - 1) * W + j] = U[(H - 1) * W + j];
    }
    for (int64_t i = 1; i < H - 1; i++) {
        V[i * W] = U[i * W];
        V[i * W + W - 1] = U[i * W + W - 1];
    }
    for (int64_t i0 = 1; i0 < H - 1; i0 += TI) {
        const int64_t i1 = MIN(i0 + TI, H - 1);
        for (int64_t j0 = 1; j0 < W - 1; j0 += TJ) {
            const int64_t j1 = MIN(j0 + TJ, W - 1);
#if ORDER == 0
            for (int64_t j = j0; j < j1; j++)
                for (int64_t i = i0; i < i1; i++)
                    V[i * W + j] = point(U, i * W + j, W);
#else
            for (int64_t i = i0; i < i1; i++) {
                int64_t j = j0;
                for (; j + UNROLL <= j1; j += UNROLL)
                    for (int u = 0; u < UNROLL; u++)
                        V[i * W + j + u] = point(U, i * W + j + u, W);
                for (; j < j1; j++)
                    V[i * W + j] = point(U, i * W + j, W);
            }
#endif
        }
    }
    return 0;
}
