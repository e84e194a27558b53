/* Hostile (issue 18, class 3: predictable inputs). The checker is the
 * runner's parent and runs as `avo-harness DIR CAND REF --seed N ...`; its
 * /proc/<pid>/cmdline is readable by anyone, the runner's uid included. The
 * inputs are a pure function of that seed (daemon/harness/tensors.c
 * avo_tensors_fill: one splitmix64 stream per (seed, config index, input
 * set, tensor), uniform in [-1, 1)), and the configs are called in the
 * spec's order. So at the first call of each size this candidate takes the
 * seed, regenerates the inputs of input sets 0..7 of that config exactly as
 * the checker does, and computes every set's product once (an untimed check
 * call). Every later call finds which set it was given (a fingerprint of a
 * few elements of each input) and copies the precomputed output: a timed
 * run is a memcpy. When the seed cannot be read, the regenerated set 0 does
 * not match the first call, or a call's inputs match no precomputed set, the
 * call computes honestly with the i-k-j loop of
 * tests/hostile/twins/gemm_ikj.c.
 *
 * Expected once defended: ok with every config's score within 1.3x of the
 * honest twin's (the timed inputs are not predictable from anything the
 * runner can see), or cheat_suspected / wrong_result. Today: ok, every
 * config far above the twin. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SETS 8       /* input sets precomputed per config */
#define FP 8         /* elements of each end of A and B in a fingerprint */
#define MAX_CONFIGS 16

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

/* tensors.c, verbatim in effect: splitmix64 and its [-1, 1) floats. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float unit(uint64_t *s)
{
    return (float)((double)(mix(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static void regenerate(float *dst, int64_t n, uint64_t seed, int config, int set, int tensor)
{
    uint64_t s = seed ^ ((uint64_t)(config + 1) << 48) ^ ((uint64_t)(set + 1) << 32) ^ (uint64_t)(tensor + 1);
    mix(&s);
    for (int64_t e = 0; e < n; e++)
        dst[e] = unit(&s) * 1.0f; /* the spec's scale: 1 */
}

typedef struct {
    int64_t M, N, K;
    float fp[SETS][4][FP];   /* head and tail of A, head and tail of B */
    float *out[SETS];
} config;

static config configs[MAX_CONFIGS];
static int nconfigs;
static int seed_state; /* 0 unknown, 1 read, -1 unusable */
static uint64_t seed;

static int read_seed(void)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1)
        if (strcmp(p, "--seed") == 0 && p + strlen(p) + 1 < buf + n) {
            char *end;
            seed = strtoull(p + strlen(p) + 1, &end, 10);
            return *end == 0 ? 1 : -1;
        }
    return -1;
}

static void fingerprint(const float *A, const float *B, int64_t na, int64_t nb, float fp[4][FP])
{
    memcpy(fp[0], A, sizeof fp[0]);
    memcpy(fp[1], A + na - FP, sizeof fp[1]);
    memcpy(fp[2], B, sizeof fp[2]);
    memcpy(fp[3], B + nb - FP, sizeof fp[3]);
}

/* All SETS sets of config index ci, products included. */
static int precompute(config *c, int ci)
{
    const int64_t na = c->M * c->K, nb = c->K * c->N, nc = c->M * c->N;
    float *A = malloc((size_t)na * sizeof *A), *B = malloc((size_t)nb * sizeof *B);
    int ok = A && B;
    for (int s = 0; ok && s < SETS; s++) {
        regenerate(A, na, seed, ci, s, 0);
        regenerate(B, nb, seed, ci, s, 1);
        fingerprint(A, B, na, nb, c->fp[s]);
        if (!(c->out[s] = malloc((size_t)nc * sizeof(float))))
            ok = 0;
        else
            gemm_ikj(A, B, c->out[s], c->M, c->N, c->K);
    }
    free(A);
    free(B);
    return ok;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const float *A = tensors[0], *B = tensors[1];
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    if (seed_state == 0)
        seed_state = read_seed() == 1 ? 1 : -1;
    if (seed_state == 1 && M > 0 && N > 0 && K >= FP) {
        config *c = NULL;
        for (int i = 0; i < nconfigs; i++)
            if (configs[i].M == M && configs[i].N == N && configs[i].K == K)
                c = &configs[i];
        if (!c && nconfigs < MAX_CONFIGS) {
            /* A new size: the spec's next config (they run in order). */
            c = &configs[nconfigs];
            *c = (config){.M = M, .N = N, .K = K};
            if (!precompute(c, nconfigs))
                seed_state = -1;
            nconfigs++;
        }
        float fp[4][FP];
        fingerprint(A, B, M * K, K * N, fp);
        for (int s = 0; c && seed_state == 1 && s < SETS; s++)
            if (c->out[s] && memcmp(fp, c->fp[s], sizeof fp) == 0) {
                memcpy(C, c->out[s], (size_t)(M * N) * sizeof *C);
                return 0;
            }
        /* The very first call is set 0 of config 0: no match means the
         * seed (or the derivation) is not what we think. */
        if (nconfigs == 1 && c == &configs[0])
            seed_state = -1;
    }
    gemm_ikj(A, B, C, M, N, K);
    return 0;
}
