/* Hostile: writes 100 MB to stdout and 100 MB to stderr (on its first call),
 * then computes correctly with a deliberately slow kernel. The worker must
 * keep only a capped tail of each stream and survive; the outcome may be ok
 * (output is not a cheat), but the score stays below the seed's.
 * The stream ends with a recognisable line so a test can check that what
 * was kept is the tail. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define FLOOD (100u << 20)

static void flood(int fd)
{
    static char line[4096];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    for (size_t sent = 0; sent < FLOOD;) {
        ssize_t n = write(fd, line, sizeof line);
        if (n <= 0)
            return; /* a closed pipe: nobody is listening any more */
        sent += (size_t)n;
    }
    static const char end[] = "avo-hostile-flood-end\n";
    (void)!write(fd, end, sizeof end - 1);
}

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
    static int flooded;
    if (!flooded) {
        flooded = 1;
        flood(1);
        flood(2);
    }
    slow_gemm(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
