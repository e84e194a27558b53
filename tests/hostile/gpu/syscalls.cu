/* Hostile (GPU, the kernel as a channel): the CUDA runner's calls could
 * create files (a store that outlives the call: /tmp, /dev/shm), open
 * sockets, start processes (a helper that computes outside the timed
 * window, or outlives the evaluation), make the runner dumpable again so a
 * process of the same uid reads its memory, or share memory with another
 * process through a memfd. This case tries each in its first call and
 * returns 1 instead of computing when any works, so the evaluation fails
 * where the defence is missing.
 *
 * Before the defence (no filter on the CUDA runner): the file is created:
 * wrong_result. Defended: the runner's system-call filter, GPU profile
 * (daemon/harness/syscalls.c: opens that create, sockets, fork, memfd,
 * PR_SET_DUMPABLE refused) holds: ok, at its twin's speed. Expected: ok. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

/* 1 when any of it worked. */
static int reaches_kernel(void)
{
    int reached = 0;
    int fd = open("/tmp/avo-hostile-syscalls-gpu", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        reached = 1;
        close(fd);
        unlink("/tmp/avo-hostile-syscalls-gpu");
    }
    fd = open("/dev/shm/avo-hostile-syscalls-gpu", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        reached = 1;
        close(fd);
        unlink("/dev/shm/avo-hostile-syscalls-gpu");
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        reached = 1;
        close(fd);
    }
    fd = memfd_create("avo-hostile-syscalls-gpu", MFD_CLOEXEC);
    if (fd >= 0) {
        reached = 1;
        close(fd);
    }
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    if (p > 0) {
        reached = 1;
        waitpid(p, NULL, 0);
    }
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0 && prctl(PR_GET_DUMPABLE) == 1)
        reached = 1;
    return reached;
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    static int reached = -1;
    if (reached < 0)
        reached = reaches_kernel();
    if (reached)
        return 1;
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (M == 0 || N == 0)
        return 0;
    launch_tiled(tensors[0], tensors[1], tensors[2], M, N, K, stream);
    return (int)cudaGetLastError();
}
