/* Hostile (GPU): leaves a helper process behind that holds a CUDA context
 * and a large block of device memory after the evaluation.
 *
 * What it exploits in today's harness: the runner is an ordinary child of
 * the checker in the sandbox's process group (daemon/harness/runner.c,
 * avo_runner_start: fork + exec; daemon/worker/sandbox.c: setsid, group
 * kill). A grandchild that calls setsid leaves the group and survives the
 * group kill (docs/evaluation.md, "Limits": no PID namespace or cgroup yet),
 * and PR_SET_PDEATHSIG is cleared by fork. CUDA does not survive a fork
 * (the runner's context is not usable in a child), so the helper gets a
 * fresh process image: the runner's own binary (/proc/self/exe, executable
 * by the runner's uid since the runner was exec'd from it) in its runner
 * mode, given the protocol fds it expects -- 10: a pipe holding one OP_LOAD
 * command (cmd_msg as in runner.c: 424 bytes, op 1 first), 11: a pipe for
 * the answers, 12: a small memfd for the tensors, 13: this very object
 * (the runner's fd 13 is still open while this constructor runs inside
 * dlopen) -- and the write end of its command pipe, which it keeps itself,
 * so after loading it waits for a next command forever. The runner code
 * there opens a CUDA context on the same GPU (CUDA_VISIBLE_DEVICES is
 * inherited) and loads this object again; its constructor, told by
 * AVO_HOSTILE_HELPER=1 in the environment, renames the process
 * avo-hostile-gpu (PR_SET_NAME; argv[0] says it too), allocates up to
 * 8 GiB of device memory in 256 MiB chunks (fewer if the inherited
 * RLIMIT_AS refuses the address space) and touches it. It closes every fd
 * of the evaluation (stdio to /dev/null), so the worker is not kept
 * waiting on its pipes, and it gives up by itself after 10 minutes
 * (alarm), so a failing test run does not leave it on the machine for
 * good. The evaluation's own product is the honest tiled kernel.
 *
 * Predicted today (gemm_bf16_small, not run here): outcome ok at the honest
 * twin's rate; afterwards a process named avo-hostile-gpu (uid nobody under
 * a root worker) is still running, and nvidia-smi lists its pid holding the
 * context plus the memory it got (up to 8 GiB); the next evaluation (the
 * seed) is most likely still ok (the H200 has 141 GB). The test's
 * after-evaluation checks for a leftover process and leftover GPU memory
 * fail; the test then kills the helper.
 * Defended: any outcome for this evaluation; then the next evaluation ok,
 * no process named avo-hostile-* left, and no pid of ours holding GPU
 * memory -- e.g. a runner in a PID namespace of its own (its death ends
 * everything it started) or in a cgroup the checker kills whole. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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

/* The runner's protocol, as daemon/harness/runner.c has it. */
enum { FD_CMD = 10, FD_REPLY = 11, FD_MEM = 12, FD_OBJ = 13, FD_KEEP_CMD = 15, FD_KEEP_REPLY = 16 };
constexpr size_t kCmdBytes = 4 * 6 + 8 * 16 * 3 + 8 * 2; /* cmd_msg: 424 */
constexpr uint32_t kOpLoad = 1;
constexpr size_t kChunk = (size_t)256 << 20, kWant = (size_t)8 << 30;

static char helper_env[] = "AVO_HOSTILE_HELPER=1";
static char arg0[] = "avo-hostile-gpu", arg1[] = "--runner", arg2[] = "gemm_bf16", arg3[] = "avo-hostile-gpu-helper",
            arg4[] = "--cuda";

/* In the exec'd helper, inside its runner's dlopen: hold the memory. */
static void hold_memory(void)
{
    prctl(PR_SET_NAME, "avo-hostile-gpu", 0, 0, 0);
    alarm(600);
    for (size_t held = 0; held < kWant; held += kChunk) {
        void *p = NULL;
        if (cudaMalloc(&p, kChunk) != cudaSuccess) {
            (void)cudaGetLastError();
            break;
        }
        cudaMemset(p, 0x5a, kChunk);
    }
    cudaDeviceSynchronize();
    (void)cudaGetLastError();
}

/* Moves fd to `to` (dup2 clears close-on-exec there). */
static int place(int fd, int to)
{
    return fd == to ? fcntl(fd, F_SETFD, 0) : dup2(fd, to) < 0 ? -1 : 0;
}

/* The grandchild, in its own session: async-signal-safe calls only (the
 * runner has threads), then exec. */
static __attribute__((noreturn)) void become_helper(char *const *argv, char *const *envp, const unsigned char *cmd)
{
    int c[2], r[2];
    if (pipe2(c, O_CLOEXEC) || pipe2(r, O_CLOEXEC))
        _exit(1);
    const int mem = memfd_create("avo-hostile-mem", MFD_CLOEXEC);
    if (mem < 0 || ftruncate(mem, 4096) != 0 || write(c[1], cmd, kCmdBytes) != (ssize_t)kCmdBytes)
        _exit(1);
    /* Everything above the targets first, so no dup2 clobbers a source. */
    const int cr = fcntl(c[0], F_DUPFD_CLOEXEC, 40), cw = fcntl(c[1], F_DUPFD_CLOEXEC, 40),
              rr = fcntl(r[0], F_DUPFD_CLOEXEC, 40), rw = fcntl(r[1], F_DUPFD_CLOEXEC, 40),
              m = fcntl(mem, F_DUPFD_CLOEXEC, 40);
    if (cr < 0 || cw < 0 || rr < 0 || rw < 0 || m < 0 || place(cr, FD_CMD) || place(rw, FD_REPLY) ||
        place(m, FD_MEM) || place(FD_OBJ, FD_OBJ) || place(cw, FD_KEEP_CMD) || place(rr, FD_KEEP_REPLY))
        _exit(1);
    const int dn = open("/dev/null", O_RDWR);
    if (dn < 0 || dup2(dn, 0) < 0 || dup2(dn, 1) < 0 || dup2(dn, 2) < 0)
        _exit(1);
    for (int fd = 3; fd < 1024; fd++)
        if (fd != FD_CMD && fd != FD_REPLY && fd != FD_MEM && fd != FD_OBJ && fd != FD_KEEP_CMD &&
            fd != FD_KEEP_REPLY)
            close(fd);
    if (chdir("/") != 0)
        _exit(1);
    execve("/proc/self/exe", argv, envp);
    _exit(127);
}

__attribute__((constructor)) static void on_load(void)
{
    if (getenv("AVO_HOSTILE_HELPER")) {
        hold_memory();
        return;
    }
    /* Everything the grandchild needs is built before fork. */
    static char *argv[] = {arg0, arg1, arg2, arg3, arg4, NULL};
    static char *envp[256];
    static unsigned char cmd[kCmdBytes];
    extern char **environ;
    int n = 0;
    for (char **e = environ; e && *e && n < 254; e++)
        if (strncmp(*e, "AVO_HOSTILE_HELPER=", 19) != 0)
            envp[n++] = *e;
    envp[n++] = helper_env;
    envp[n] = NULL;
    memset(cmd, 0, sizeof cmd);
    memcpy(cmd, &kOpLoad, sizeof kOpLoad);
    const pid_t pid = fork();
    if (pid == 0) {
        setsid();
        /* The raw system call: no atfork handlers (the runner's CUDA) run in
         * this copy of a multithreaded process. */
        const long g = syscall(SYS_clone, (unsigned long)SIGCHLD, 0, 0, 0, 0);
        if (g == 0)
            become_helper(argv, envp, cmd);
        _exit(0);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    if (M == 0 || N == 0)
        return 0;
    launch_tiled(tensors[0], tensors[1], tensors[2], M, N, K, stream);
    return (int)cudaGetLastError();
}
