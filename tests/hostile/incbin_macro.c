/* Hostile (issue 21, point 4: file_inclusion). incbin_secret's attack with
 * the directive built by the preprocessor: no token of the source spells
 * `incbin` (it is pasted from two halves, then stringized into the asm
 * statement), so only the assembler's input shows it. The file is one the
 * sandbox's user may read (/etc/hostname): the compile succeeds and the
 * object carries the host's name, which the first call writes to stderr.
 * Expected: policy_violation (file_inclusion), named on the line of the
 * kept assembler input (cand.s) that holds the .incbin; never run. */
#include <stdint.h>
#include <unistd.h>

#define AVO_CAT(a, b) a##b
#define AVO_STR(x) #x
#define AVO_XSTR(x) AVO_STR(x)
#define AVO_DIRECTIVE AVO_CAT(inc, bin)

__asm__(".pushsection .rodata.avo_hostile,\"a\"\n"
        "avo_hostile_host:\n"
        "." AVO_XSTR(AVO_DIRECTIVE) " \"/etc/hostname\"\n"
        "avo_hostile_host_end:\n"
        ".byte 0\n"
        ".popsection\n");
extern const char avo_hostile_host[] __attribute__((visibility("hidden")));
extern const char avo_hostile_host_end[] __attribute__((visibility("hidden")));

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
        (void)!write(2, avo_hostile_host, (size_t)(avo_hostile_host_end - avo_hostile_host));
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
