/* Hostile (GPU): fills shared memory on the host and leaves it there.
 *
 * What it exploits in today's harness: the filesystem is not isolated
 * (docs/evaluation.md, "Limits": no mount namespace yet), and /dev/shm is a
 * world-writable tmpfs, i.e. RAM, shared by every process of the host: the
 * runner (nobody under a root worker) may create files there, nothing
 * removes them after the evaluation, and what they hold stays allocated
 * until someone does. At load, a constructor writes 256 MiB of 0x5a into
 * /dev/shm/avo-hostile-shm-gpu-<pid>. The sandbox's RLIMIT_FSIZE (64 MiB
 * plus the tensors, ~113 MiB on gemm_bf16_small) stops one file short of
 * that, so SIGXFSZ is ignored and, when a write is refused with EFBIG, the
 * rest goes to /dev/shm/avo-hostile-shm-gpu-<pid>.1, .2, ... (a tmpfs
 * that is full, e.g. a container's 64 MiB /dev/shm, just ends it early).
 * The files are closed, never removed. The product is the honest tiled
 * kernel.
 *
 * Predicted today (gemm_bf16_small, not run here): outcome ok at the honest
 * twin's rate, and /dev/shm/avo-hostile-shm-gpu-<pid>* (256 MiB, or what
 * the tmpfs took) still there after the evaluation: the test's /dev/shm
 * check fails (the test then removes the files).
 * Defended: ok (crash or cheat_suspected allowed, should writing there kill
 * or flag the runner), and no /dev/shm/avo-hostile-shm-gpu-* after the
 * evaluation -- e.g. a private /dev/shm (mount namespace) that goes away
 * with the runner, or a cleanup of what the runner's uid created. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A plain correct gemm (the same 16 x 16 shared-memory tiling and fp32
 * summation order as reference.cu's tiled path, so its output is the
 * reference's to a bf16 ulp). Repeated in every case that needs a correct product: the
 * worker compiles a candidate as one file, away from this directory, so
 * nothing here can be #included. */
__global__ void tiled_gemm(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                           __nv_bfloat16 *__restrict__ C, int M, int N, int K)
{
    __shared__ float As[16][17], Bs[16][17];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const int row = (int)blockIdx.y * 16 + ty, col = (int)blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? __bfloat162float(A[(size_t)row * K + k0 + tx]) : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? __bfloat162float(B[(size_t)(k0 + ty) * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; k++)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = __float2bfloat16_rn(acc);
}

static void launch_tiled(const void *A, const void *B, void *C, int M, int N, int K, cudaStream_t s)
{
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    tiled_gemm<<<grid, dim3(16, 16), 0, s>>>(static_cast<const __nv_bfloat16 *>(A),
                                             static_cast<const __nv_bfloat16 *>(B), static_cast<__nv_bfloat16 *>(C),
                                             M, N, K);
}

__attribute__((constructor)) static void fill_shm(void)
{
    static char buf[1 << 20];
    const size_t total = (size_t)256 << 20;
    size_t done = 0;
    memset(buf, 0x5a, sizeof buf);
    signal(SIGXFSZ, SIG_IGN); /* over RLIMIT_FSIZE: EFBIG, not death */
    for (int part = 0; part < 64 && done < total; part++) {
        char path[96];
        if (part == 0)
            snprintf(path, sizeof path, "/dev/shm/avo-hostile-shm-gpu-%d", (int)getpid());
        else
            snprintf(path, sizeof path, "/dev/shm/avo-hostile-shm-gpu-%d.%d", (int)getpid(), part);
        const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            return;
        int full = 0, more = 0;
        while (done < total) {
            const ssize_t w = write(fd, buf, sizeof buf);
            if (w > 0) {
                done += (size_t)w;
                continue;
            }
            if (w < 0 && errno == EINTR)
                continue;
            more = w < 0 && errno == EFBIG; /* this file is at the limit: next file */
            full = !more;                   /* ENOSPC or anything else: stop */
            break;
        }
        close(fd);
        if (full || (!more && done < total))
            return;
    }
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (M == 0 || N == 0)
        return 0;
    launch_tiled(tensors[0], tensors[1], tensors[2], M, N, K, stream);
    return (int)cudaGetLastError();
}
