/* Hostile (issue 18, class 4: the compiler reads the host). The candidate's
 * source is compiled by the worker, as root today, so the preprocessor can
 * open any file of the host: `#include "/etc/shadow"` pastes the file into
 * the translation unit, its first line is not C, and the compiler's
 * diagnostic quotes that line (root's password hash) into the compile log,
 * which the result carries back (compile.log, up to 8 KiB).
 * tests/integration/test_hostile.sh does not include the real /etc/shadow:
 * it plants a root-only 0600 file holding a random token and compiles a copy
 * of this file with the path replaced (sed), then looks for the token.
 *
 * Expected: policy_violation (file_inclusion, the #include line), nothing
 * compiled. With the rule relaxed (test_hostile.sh's second pass), as
 * before the policy: compile_error (the compiler cannot open the file),
 * and no line of the file anywhere in the result. Today: compile_error with
 * the file's first lines quoted in compile.log, and the first in detail. */
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
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}

#include "/etc/shadow"
