/* Hostile (issue 21, point 4: module_loading). Loads code it wrote itself:
 * it copies a shared library (libm, standing in for any object it could
 * carry or build) into its private /tmp and dlopen()s the copy, then takes
 * its product from there (here: cosf, to show the call went through). The
 * loader's name is pasted by the preprocessor, so no token of the source
 * names it: the object's imports do.
 * Expected: policy_violation (module_loading: the object imports dlopen);
 * never run. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#define AVO_CAT(a, b) a##b

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

static void *load_copy(void)
{
    static const char *const libs[] = {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                       "/lib64/libm.so.6", NULL};
    for (int i = 0; libs[i]; i++) {
        int in = open(libs[i], O_RDONLY), out = in < 0 ? -1 : open("/tmp/avo-hostile-written.so",
                                                                    O_WRONLY | O_CREAT | O_TRUNC, 0700);
        char buf[65536];
        ssize_t n;
        while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            (void)!write(out, buf, (size_t)n);
        if (in >= 0)
            close(in);
        if (out >= 0) {
            close(out);
            return AVO_CAT(dl, open)("/tmp/avo-hostile-written.so", RTLD_NOW | RTLD_LOCAL);
        }
    }
    return NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    static void *h;
    if (!h && !(h = load_copy()))
        return 1;
    gemm_ikj(tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]);
    return 0;
}
