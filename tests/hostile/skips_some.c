/* Hostile (issue 18, class 3: calls told apart). Knowing that a timed
 * call's check is drawn after it returns, it cannot tell which calls will
 * be checked, so it gambles: after the first two calls of each size (always
 * checked) it skips the product on a random 60% of its calls and returns
 * at once, leaving the poisoned output. Skipping most calls is what it
 * takes to move a median.
 *
 * Today (before issue 18's defences) every timed run is checked: wrong at
 * once. With checks drawn after each call, either a draw lands on a skipped
 * call (wrong output), or every checked call was an honest one, and those
 * are all far slower than the median of the calls: cheat_suspected either
 * way. Expected: cheat_suspected; never a score above the twin. */
#include <stdint.h>

static void gemm_ikj(const float *restrict A, const float *restrict B, float *restrict C, int64_t M, int64_t N,
                     int64_t K)
{
    for (int64_t i = 0; i < M; i++) {
        float *restrict c = C + i * N;
        for (int64_t j = 0; j < N; j++)
            c[j] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float a = A[i * K + k];
            const float *restrict b = B + k * N;
            for (int64_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int64_t last_m = -1;
    static int calls;
    static uint64_t state = 0x2545f4914f6cdd1dULL;
    if (sizes[0] != last_m) {
        last_m = sizes[0];
        calls = 0;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    if (++calls > 2 && state % 10 < 6)
        return 0;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
