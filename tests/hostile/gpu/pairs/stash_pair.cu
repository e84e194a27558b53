/* Hostile (GPU), a colluding pair: one source, two roles. Built with
 * "#define AGAINST 1" in front it is the against (the island's best, say,
 * written by the same optimiser); as it is, the candidate. Not a case of
 * test_hostile_gpu.sh (a subfolder): tests/gpu/test_collusion_gpu.sh
 * evaluates the candidate paired against the other role.
 *
 * The attack (docs/evaluation.md, "Residual risks", a colluding pair): the
 * two runners of a paired evaluation are separate processes, but until the
 * twenty-first session they shared places no check reads: the slack of the
 * checker's shared device tensors (their allocation is sized for the largest
 * configuration and rounded up to the VMM granularity; on config 1024 of
 * gemm_bf16_small three quarters of A, B and C are slack), the page-locked
 * host region (mapped by both runners though on a GPU neither needs it),
 * and the evaluation's /tmp, /dev/shm, System V IPC and working directory.
 * An against that leaves its outputs there keyed by its inputs lets the
 * candidate running right after it in a pair copy them: every check
 * passes, and the candidate wins half its pairs for free.
 *
 * This pair does not bother with the outputs: it asks only whether a byte
 * can travel. At load (before the system-call filter) each role opens every
 * channel it can: /dev/shm/avo-hostile-stash, $TMPDIR/avo-hostile-stash,
 * ./avo-hostile-stash, a System V segment (key 0x41564f53), every shared
 * memfd mapping in /proc/self/maps; at every call it writes its own record
 * (role, call number) into each, and into the slack right after each
 * device tensor (where cudaPointerGetAttributes says the address is still
 * device memory). The candidate reads every channel before writing: a
 * record of the against's is a channel open between the two, and it says
 * so on stderr, once per channel: "avo-hostile: stash found in NAME".
 * Its first call says which channels it could open at all
 * ("avo-hostile: channels: ..."), the probe's own control: a channel it
 * cannot even open in its own process proves nothing about the pair.
 *
 * Both roles compute the product honestly (the twin's tiled kernel).
 * Defended: ok, and no "stash found" line: the checker clears every shared
 * device tensor's slack before every call, a CUDA runner with shared device
 * tensors maps a small host area of its own instead of the region, and
 * CUDA runners get private /tmp, /var/tmp, /dev/shm and IPC namespaces as
 * CPU runners do. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef AGAINST
#define ROLE 0x41474e53544f4e41ull /* "ANOTSNGA": the against's record */
#else
#define ROLE 0x45544144494e4143ull /* "CANIDATE": the candidate's */
#endif
#define AGAINST_ROLE 0x41474e53544f4e41ull

struct record {
    uint64_t role, call, pid, check;
};

enum { CH_SHM, CH_TMP, CH_CWD, CH_SYSV, CH_MEMFD0, MAX_CH = CH_MEMFD0 + 8 };
static const char *const ch_fixed[] = {"/dev/shm", "TMPDIR", "working directory", "System V shm"};
static char g_name[MAX_CH][96];
static record *g_ch[MAX_CH];
static int g_nch = CH_MEMFD0;
static uint64_t g_call;
static int g_said[MAX_CH + 3];

static record *map_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return NULL;
    fchmod(fd, 0666);
    void *p = ftruncate(fd, 4096) == 0 ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    return p == MAP_FAILED ? NULL : (record *)p;
}

/* Every shared writable memfd mapping: the last record's room of each. */
static void map_memfds(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f) && g_nch < MAX_CH) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || strncmp(perms, "rw-s", 4) != 0 ||
            !strstr(line, "/memfd:") || hi - lo < sizeof(record))
            continue;
        const char *name = strstr(line, "/memfd:") + 7;
        snprintf(g_name[g_nch], sizeof g_name[g_nch], "memfd %.*s", (int)strcspn(name, " \n"), name);
        g_ch[g_nch++] = (record *)(hi - sizeof(record));
    }
    if (f)
        fclose(f);
}

__attribute__((constructor)) static void open_channels(void)
{
    char path[600];
    g_ch[CH_SHM] = map_file("/dev/shm/avo-hostile-stash");
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/avo-hostile-stash", tmp && *tmp ? tmp : "/tmp");
    g_ch[CH_TMP] = map_file(path);
    g_ch[CH_CWD] = map_file("avo-hostile-stash");
    int id = shmget((key_t)0x41564f53, 4096, IPC_CREAT | 0666);
    void *p = id >= 0 ? shmat(id, NULL, 0) : (void *)-1;
    g_ch[CH_SYSV] = p == (void *)-1 ? NULL : (record *)p;
    for (int i = 0; i < CH_MEMFD0; i++)
        snprintf(g_name[i], sizeof g_name[i], "%s", ch_fixed[i]);
    map_memfds();
}

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

static int is_device(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

static void found(int k, const char *name)
{
    if (!g_said[k]) {
        g_said[k] = 1;
        fprintf(stderr, "avo-hostile: stash found in %s\n", name);
    }
}

/* Host channels: the against's record read, then this role's written. */
static void host_channels(void)
{
    for (int k = 0; k < g_nch; k++) {
        volatile record *r = g_ch[k];
        if (!r)
            continue;
        if (ROLE != AGAINST_ROLE && r->role == AGAINST_ROLE && r->check == (r->call ^ r->role))
            found(k, g_name[k]);
        r->role = ROLE, r->call = g_call, r->pid = (uint64_t)getpid(), r->check = g_call ^ ROLE;
    }
}

/* Each shared tensor's allocation holds the largest config's: 2048 x 2048
 * bf16 on gemm_bf16_small (8 MiB, a whole number of VMM granules, so on
 * that config the next address is the next tensor's allocation). */
#define ALLOC_BYTES (2048ull * 2048 * 2)

/* Where this config's tensor t leaves slack in its allocation, or NULL. */
static char *slack_of(void *const *tensors, const size_t *bytes, int t)
{
    char *at = (char *)tensors[t] + ((bytes[t] + 255) & ~(size_t)255);
    return at + sizeof(record) <= (char *)tensors[t] + ALLOC_BYTES && is_device(at) ? at : NULL;
}

/* The slack right after each device tensor (bytes[t] long in this config). */
static void device_slack(void *const *tensors, const size_t *bytes, cudaStream_t s)
{
    const char *const names[3] = {"the device slack after A", "the device slack after B", "the device slack after C"};
    for (int t = 0; t < 3; t++) {
        char *at = slack_of(tensors, bytes, t);
        if (!at)
            continue;
        record got, mine = {ROLE, g_call, (uint64_t)getpid(), g_call ^ ROLE};
        if (cudaMemcpyAsync(&got, at, sizeof got, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
            cudaStreamSynchronize(s) != cudaSuccess)
            continue;
        if (ROLE != AGAINST_ROLE && got.role == AGAINST_ROLE && got.check == (got.call ^ got.role))
            found(MAX_CH + t, names[t]);
        cudaMemcpyAsync(at, &mine, sizeof mine, cudaMemcpyHostToDevice, s);
        cudaStreamSynchronize(s);
    }
}

/* The probe's control, once: which channels this process could open. */
static void say_channels(void *const *tensors, const size_t *bytes)
{
    char line[1200];
    size_t o = (size_t)snprintf(line, sizeof line, "avo-hostile: channels:");
    for (int k = 0; k < g_nch && o < sizeof line; k++)
        o += (size_t)snprintf(line + o, sizeof line - o, " %s=%s;", g_name[k], g_ch[k] ? "open" : "none");
    for (int t = 0; t < 3 && o < sizeof line; t++)
        o += (size_t)snprintf(line + o, sizeof line - o, " device slack after tensor %d=%s;", t,
                              slack_of(tensors, bytes, t) ? "mapped" : "none");
    fprintf(stderr, "%s\n", line);
}

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    const int M = (int)sizes[0], N = (int)sizes[1], K = (int)sizes[2];
    const size_t bytes[3] = {(size_t)M * K * 2, (size_t)K * N * 2, (size_t)M * N * 2};
    if (g_call == 0 && ROLE != AGAINST_ROLE)
        say_channels(tensors, bytes);
    g_call++;
    host_channels();
    device_slack(tensors, bytes, stream);
    if (M == 0 || N == 0)
        return 0;
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    tiled_gemm<<<grid, dim3(16, 16), 0, stream>>>(static_cast<const __nv_bfloat16 *>(tensors[0]),
                                                  static_cast<const __nv_bfloat16 *>(tensors[1]),
                                                  static_cast<__nv_bfloat16 *>(tensors[2]), M, N, K);
    return (int)cudaGetLastError();
}
