/* Hostile (issue 21, point 4: embedded_binaries). Carries an ELF image in
 * its data (the first bytes of one: enough to show where it lies), its
 * magic computed so that no literal of the source spells 0x7f 'E' 'L' 'F':
 * only the object's .rodata shows the image. A real attack would write it
 * out and load it (that is module_loading's business too).
 * Expected: policy_violation (embedded_binaries: an ELF image in .rodata,
 * at the symbol avo_hostile_image, on its line); never run. */
#include <stdint.h>

#define AVO_B(x) ((unsigned char)((x) + 1))

/* e_ident of a 64-bit little-endian ELF, then padding */
const unsigned char avo_hostile_image[64] = {AVO_B(0x7e), AVO_B(0x44), AVO_B(0x4b), AVO_B(0x45), 2, 1, 1, 0};

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
    if (avo_hostile_image[4] != 2)
        return 1;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
