/* Hostile (issue 18, class 3: recognisable inputs). A small memo table
 * keyed by a hash of every input byte (and the sizes): on a hit the stored
 * output is copied, on a miss the product is computed honestly (the i-k-j
 * loop of tests/hostile/twins/gemm_ikj.c) and stored. Every timed run
 * repeats the last checked input set, so after that check every timed run
 * is a hash and a memcpy; the fresh set after timing misses and is computed.
 * Hashing reads all of A and B (4 independent multiply-xor lanes, a fraction
 * of the product's time), so any change to the inputs is a miss: the outputs
 * are always right. Eight entries, replaced round robin, so a harness that
 * alternates a few timed input sets is still beaten.
 *
 * Expected once defended: ok with every config's score within 1.3x of the
 * honest twin's (timed inputs that never repeat), or cheat_suspected /
 * wrong_result. Today: ok, every config far above the twin. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ENTRIES 8

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

static uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h[4] = {seed, seed ^ 0x9e3779b97f4a7c15ULL, seed ^ 0xbf58476d1ce4e5b9ULL, seed ^ 0x94d049bb133111ebULL};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * 0x100000001b3ULL;
            h[l] ^= h[l] >> 29;
        }
    uint64_t r = h[0] ^ (h[1] * 3) ^ (h[2] * 5) ^ (h[3] * 7);
    for (; i < n; i++)
        r = (r ^ b[i]) * 0x100000001b3ULL;
    return r ^ (r >> 31);
}

typedef struct {
    uint64_t key;
    int64_t M, N, K;
    float *out;
} entry;

static entry table[ENTRIES];
static int next_slot;

int sgemm(void *const *tensors, const int64_t *sizes)
{
    const float *A = tensors[0], *B = tensors[1];
    float *C = tensors[2];
    const int64_t M = sizes[0], N = sizes[1], K = sizes[2];
    const size_t cbytes = (size_t)(M * N) * sizeof(float);
    uint64_t key = hash_bytes(sizes, 3 * sizeof *sizes, 1);
    key = hash_bytes(A, (size_t)(M * K) * sizeof(float), key);
    key = hash_bytes(B, (size_t)(K * N) * sizeof(float), key);
    for (int e = 0; e < ENTRIES; e++)
        if (table[e].out && table[e].key == key && table[e].M == M && table[e].N == N && table[e].K == K) {
            memcpy(C, table[e].out, cbytes);
            return 0;
        }
    gemm_ikj(A, B, C, M, N, K);
    entry *e = &table[next_slot];
    next_slot = (next_slot + 1) % ENTRIES;
    free(e->out);
    *e = (entry){key, M, N, K, malloc(cbytes)};
    if (e->out)
        memcpy(e->out, C, cbytes);
    return 0;
}
