/* Hostile: computes honestly but also writes a fake "done in 1 ns" answer on
 * every descriptor from 4 to 20 (the runner's protocol pipe among them).
 * Expected: the checker sees a forged or extra answer: cheat_suspected
 * naming the protocol pipe. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const float *A = tensors[0], *B = tensors[1];
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)A[i * K + k] * B[k * N + j];
            C[i * N + j] = (float)s;
        }
    unsigned char fake[496];
    memset(fake, 0, sizeof fake);
    double t = 1e-9;
    memcpy(fake + 16, &t, sizeof t);
    for (int fd = 4; fd <= 20; fd++)
        (void)!write(fd, fake, sizeof fake);
    return 0;
}
