/* Seed for cpu/sgemm: C = A (MxK) * B (KxN), row-major, float32.
 * Correct for any sizes; the tune operator turns the knobs below (it
 * prepends "#define NAME value" lines). The defaults are deliberately a
 * mediocre point of the space: i-j-k order with a scalar dot product. */
#include <stdint.h>

#ifndef ORDER
#define ORDER 0 /* 0: i-j-k (dot products), 1: i-k-j (row updates) */
#endif
#ifndef BM
#define BM 256
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 256
#endif
#ifndef UNROLL
#define UNROLL 1 /* k-loop unroll: independent partial sums */
#endif

#define MIN(a, b) ((a) < (b) ? (a) : (b))

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const float *restrict A = tensors[0];
    const float *restrict B = tensors[1];
    float *restrict C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];

    for (int64_t i = 0; i < M * N; i++)
        C[i] = 0.0f;
    for (int64_t i0 = 0; i0 < M; i0 += BM) {
        const int64_t i1 = MIN(i0 + BM, M);
        for (int64_t k0 = 0; k0 < K; k0 += BK) {
            const int64_t k1 = MIN(k0 + BK, K);
            for (int64_t j0 = 0; j0 < N; j0 += BN) {
                const int64_t j1 = MIN(j0 + BN, N);
#if ORDER == 0
                for (int64_t i = i0; i < i1; i++) {
                    for (int64_t j = j0; j < j1; j++) {
                        float part[UNROLL] = {0};
                        int64_t k = k0;
                        for (; k + UNROLL <= k1; k += UNROLL)
                            for (int u = 0; u < UNROLL; u++)
                                part[u] += A[i * K + k + u] * B[(k + u) * N + j];
                        for (; k < k1; k++)
                            part[0] += A[i * K + k] * B[k * N + j];
                        float sum = 0.0f;
                        for (int u = 0; u < UNROLL; u++)
                            sum += part[u];
                        C[i * N + j] += sum;
                    }
                }
#else
                for (int64_t i = i0; i < i1; i++) {
                    float *restrict c = &C[i * N];
                    int64_t k = k0;
                    for (; k + UNROLL <= k1; k += UNROLL) {
                        float a[UNROLL];
                        for (int u = 0; u < UNROLL; u++)
                            a[u] = A[i * K + k + u];
                        for (int64_t j = j0; j < j1; j++) {
                            float s = c[j];
                            for (int u = 0; u < UNROLL; u++)
                                s += a[u] * B[(k + u) * N + j];
                            c[j] = s;
                        }
                    }
                    for (; k < k1; k++) {
                        const float a = A[i * K + k];
                        for (int64_t j = j0; j < j1; j++)
                            c[j] += a * B[k * N + j];
                    }
                }
#endif
            }
        }
    }
    return 0;
}
