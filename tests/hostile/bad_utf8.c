/* Hostile (issue 18, class 6: evidence). The result carries the last 4 KiB
 * of the harness's stdout and stderr (sandbox.stdout_tail, stderr_tail),
 * which the candidate shares, and JSON strings must be UTF-8. At its first
 * call the candidate writes ill-formed UTF-8 to both: bytes that never occur
 * (0xFF, 0xFE), an overlong '/', a UTF-16 surrogate, a code point above
 * U+10FFFF, a lone continuation byte and a sequence cut short; to stdout it
 * then also writes 2000 well-formed 3-byte characters (U+20AC), so that the
 * 4 KiB tail (4096 = 3 * 1365 + 1) begins in the middle of a character even
 * though that part of the stream is valid. The call itself is honest (the
 * i-k-j loop of tests/hostile/twins/gemm_ikj.c).
 *
 * Expected (today too, if the tails are made valid): ok, and .sandbox an
 * object whose stdout_tail and stderr_tail are strings. Today: ok, but
 * .sandbox is missing (jansson refuses the ill-formed strings and the whole
 * object is dropped). */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

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

static const char bad[] = "bad utf-8: \xff\xfe | overlong \xc0\xaf | surrogate \xed\xa0\x80 | above max "
                          "\xf4\x90\x80\x80 | lone \x80 | cut \xe2\x82\n";

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static int written;
    if (!written) {
        written = 1;
        static char euros[3 * 2000];
        for (int i = 0; i < 2000; i++)
            memcpy(euros + 3 * i, "\xe2\x82\xac", 3);
        (void)!write(2, bad, sizeof bad - 1);
        (void)!write(1, bad, sizeof bad - 1);
        (void)!write(1, euros, sizeof euros);
    }
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
