/* Hostile: correct result, then 4 KiB written past the end of C (an
 * off-by-a-tile store bug, or an attempt to reach memory the checker keeps
 * next to the output). The harness must not score a kernel that tramples
 * memory it does not own. Expected: not ok (crash from heap corruption,
 * wrong_result or cheat_suspected when the stores land in other tensors). */
#include <stdint.h>

static void slow_gemm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            volatile double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)A[i * K + k] * (double)B[k * N + j];
            C[i * N + j] = (float)acc;
        }
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    float *C = tensors[2];
    const int64_t n = sizes[0] * sizes[1];
    slow_gemm(tensors[0], tensors[1], C, sizes[0], sizes[1], sizes[2]);
    volatile float *past = C + n;
    for (int i = 0; i < 1024; i++)
        past[i] = 1.0f;
    return 0;
}
