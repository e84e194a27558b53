/* The harness's CUDA side: device context, tensor mirrors, one timed launch (stubs without CUDA) (gpu.h). */
#include "gpu.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

#ifndef AVO_WITH_CUDA

int avo_gpu_available(void)
{
    return 0;
}

int avo_gpu_open(avo_gpu **out, char *err, size_t errlen)
{
    *out = NULL;
    snprintf(err, errlen, "this avo-harness was built without CUDA; use avo-harness-cuda");
    return -ENOTSUP;
}

void avo_gpu_close(avo_gpu *g)
{
    (void)g;
}

int avo_gpu_describe(avo_gpu *g, char *name, size_t namelen, int *cc_major, int *cc_minor, int *sms, int *l2_bytes,
                     unsigned *max_sm_mhz)
{
    (void)g, (void)name, (void)namelen, (void)cc_major, (void)cc_minor, (void)sms, (void)l2_bytes, (void)max_sm_mhz;
    return -ENOTSUP;
}

int avo_gpu_pin(avo_gpu *g, void *ptr, size_t bytes, char *note, size_t notelen)
{
    (void)g, (void)ptr, (void)bytes;
    snprintf(note, notelen, "pageable: no CUDA in this build");
    return -ENOTSUP;
}

void avo_gpu_unpin(avo_gpu *g, void *ptr)
{
    (void)g, (void)ptr;
}

int avo_gpu_share(avo_gpu *g, int n, const size_t *bytes, int *fds, size_t *mapped, char *err, size_t errlen)
{
    (void)g, (void)n, (void)bytes, (void)fds, (void)mapped;
    snprintf(err, errlen, "no CUDA in this build");
    return -ENOTSUP;
}

int avo_gpu_import(avo_gpu *g, int n, const int *fds, const size_t *mapped, char *err, size_t errlen)
{
    (void)g, (void)n, (void)fds, (void)mapped;
    snprintf(err, errlen, "no CUDA in this build");
    return -ENOTSUP;
}

int avo_gpu_clear_shared(avo_gpu *g, char *err, size_t errlen)
{
    (void)g;
    snprintf(err, errlen, "no CUDA in this build");
    return -ENOTSUP;
}

int avo_gpu_run(avo_gpu *g, avo_gpu_fn fn, void *const *host, const size_t *bytes, int n, const int64_t *sizes,
                unsigned flags, unsigned poison_mask, int *ret, avo_gpu_times *t, char *err, size_t errlen)
{
    (void)g, (void)fn, (void)host, (void)bytes, (void)n, (void)sizes, (void)flags, (void)poison_mask, (void)ret;
    memset(t, 0, sizeof *t);
    snprintf(err, errlen, "no CUDA in this build");
    return -ENOTSUP;
}

int avo_gpu_profile(avo_gpu *g, avo_gpu_fn fn, void *const *host, const size_t *bytes, int n, const int64_t *sizes,
                    char *out, size_t cap, char *err, size_t errlen)
{
    (void)g, (void)fn, (void)host, (void)bytes, (void)n, (void)sizes, (void)out, (void)cap;
    snprintf(err, errlen, "no CUDA in this build");
    return -ENOTSUP;
}

unsigned avo_gpu_sm_clock(avo_gpu *g)
{
    (void)g;
    return 0;
}

int avo_gpu_set_inputs(avo_gpu *g, const unsigned char key[32], int n, const int *dtypes, const float *scales,
                       uint32_t nonce0, uint32_t nonce1)
{
    (void)g, (void)key, (void)n, (void)dtypes, (void)scales, (void)nonce0, (void)nonce1;
    return -ENOTSUP;
}

int avo_gpu_fill_sample(avo_gpu *g, const unsigned char key[32], int dtype, float scale, uint32_t nonce0,
                        uint32_t nonce1, uint32_t nonce2, void *host, int64_t n, char *err, size_t errlen)
{
    (void)g, (void)key, (void)dtype, (void)scale, (void)nonce0, (void)nonce1, (void)nonce2, (void)host, (void)n;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

int avo_gpu_compare(avo_gpu *g, int i, int64_t n, int dtype, avo_gpu_cmp *out, char *err, size_t errlen)
{
    (void)g, (void)i, (void)n, (void)dtype, (void)out;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

int avo_gpu_equal(avo_gpu *g, int i, int64_t n, size_t elem_size, int64_t *first, char *err, size_t errlen)
{
    (void)g, (void)i, (void)n, (void)elem_size, (void)first;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

int avo_gpu_busy_probe(avo_gpu *g, double *seconds)
{
    (void)g;
    *seconds = 0;
    return -ENOTSUP;
}

int avo_gpu_run_rows(avo_gpu *g, avo_gpu_rows_fn fn, const int64_t *sizes, const int64_t *rows, int64_t nrows, int *ret,
                     char *err, size_t errlen)
{
    (void)g, (void)fn, (void)sizes, (void)rows, (void)nrows;
    *ret = 0;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

int avo_gpu_compare_rows(avo_gpu *g, int i, int64_t row_elems, int dtype, avo_gpu_cmp *out, char *err, size_t errlen)
{
    (void)g, (void)i, (void)row_elems, (void)dtype, (void)out;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

int avo_gpu_mem_alloc(avo_gpu *g, size_t bytes, void **out, char *err, size_t errlen)
{
    (void)g, (void)bytes;
    *out = NULL;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

void avo_gpu_mem_free(avo_gpu *g, void *p)
{
    (void)g, (void)p;
}

size_t avo_gpu_mem_total(avo_gpu *g)
{
    (void)g;
    return 0;
}

size_t avo_gpu_mem_available(avo_gpu *g)
{
    (void)g;
    return 0;
}

int avo_gpu_mem_copy(avo_gpu *g, void *dst, const void *src, size_t bytes, char *err, size_t errlen)
{
    (void)g, (void)dst, (void)src, (void)bytes;
    snprintf(err, errlen, "built without CUDA");
    return -ENOTSUP;
}

const void *avo_gpu_tensor_ptr(avo_gpu *g, int i)
{
    (void)g, (void)i;
    return NULL;
}

#else

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>
#include <jansson.h>

#include "avo_compare.h"
#include "avo_cupti.h"
#include "avo_fill.h"
#include "avo_gate.h"
#include "avo_nvml.h"

struct avo_gpu {
    int device;
    cudaStream_t stream;
    cudaStream_t fetch; /* the fetch's own, created before any candidate code: work the candidate
                            queues late on the call's stream cannot make the copies wait for it */
    cudaEvent_t before, start, stream_end, end;
    void *flush;
    size_t flush_bytes;
    avo_gate *gate; /* NULL when it could not be set up: calls run ungated */
    void *dev[AVO_PROBLEM_MAX_TENSORS];
    size_t cap[AVO_PROBLEM_MAX_TENSORS];
    int imported;                        /* runner: dev[0..imported) are the checker's tensors, mapped here */
    void *sdev[AVO_PROBLEM_MAX_TENSORS]; /* checker: the tensors it shares, as mapped here */
    int nshared;
    CUmemGenericAllocationHandle mh[AVO_PROBLEM_MAX_TENSORS]; /* of the shared or imported tensors */
    size_t msize[AVO_PROBLEM_MAX_TENSORS];
    int nvml; /* NVML index of this device, -1 if unknown */
    int nvml_open;
    avo_cupti *cupti; /* opened on the first counters pass */
    json_t *unsupported;
    int cupti_failed;
    char cupti_err[300];
    struct cudaDeviceProp prop;
    void *cmp_scratch;       /* avo_gpu_compare's and avo_gpu_equal's, allocated on first use */
    int64_t *rows;           /* avo_gpu_run_rows's row indices on the device, */
    int64_t nrows, rows_cap; /* how many, room for */
    struct {                 /* what AVO_GPU_GEN_INPUTS generates (avo_gpu_set_inputs) */
        int n, set;
        unsigned char key[32];
        int dtype[AVO_PROBLEM_MAX_TENSORS];
        float scale[AVO_PROBLEM_MAX_TENSORS];
        uint32_t nonce0, nonce1;
    } gen;
};

int avo_gpu_available(void)
{
    return 1;
}

/* A sticky error poisons the context for good: nothing more can run in this
 * process, the runner must exit and the worker checks the GPU with the
 * canary before claiming again. */
static int is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
        return 1;
    default:
        return 0;
    }
}

static int fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return is_sticky(e) ? AVO_GPU_ESTICKY : -EIO;
}

int avo_gpu_open(avo_gpu **out, char *err, size_t errlen)
{
    cudaError_t e;
    avo_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->nvml = -1;
    /* CUDA_VISIBLE_DEVICES (set by the worker) selects the GPU: device 0. */
    if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaGetDeviceProperties(&g->prop, 0)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&g->fetch, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&g->before)) != cudaSuccess || (e = cudaEventCreate(&g->start)) != cudaSuccess ||
        (e = cudaEventCreate(&g->stream_end)) != cudaSuccess || (e = cudaEventCreate(&g->end)) != cudaSuccess) {
        fail(e, "CUDA initialisation", err, errlen);
        free(g);
        return -ENODEV;
    }
    /* Four times L2, so nothing a kernel left in L2 survives the flush. */
    g->flush_bytes = (size_t)(g->prop.l2CacheSize > 0 ? g->prop.l2CacheSize : 64 << 20) * 4;
    if ((e = cudaMalloc(&g->flush, g->flush_bytes)) != cudaSuccess) {
        fail(e, "allocating the L2 flush buffer", err, errlen);
        avo_gpu_close(g);
        return -ENOMEM;
    }
    char gerr[160];
    if (avo_gate_open(&g->gate, gerr, sizeof gerr) < 0)
        g->gate = NULL;
    /* Match this CUDA device to its NVML index by UUID (NVML prints it as
     * GPU-8-4-4-4-12 hex), for clocks: CUDA_VISIBLE_DEVICES renumbers CUDA
     * devices but not NVML ones. */
    char want[64], nerr[128];
    const unsigned char *u = (const unsigned char *)g->prop.uuid.bytes;
    snprintf(want, sizeof want, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    int n = avo_nvml_open(nerr, sizeof nerr);
    g->nvml_open = n >= 0;
    for (int i = 0; i < n; i++) {
        avo_gpu_info info;
        if (avo_nvml_device(i, &info) == 0 && strcmp(info.uuid, want) == 0) {
            g->nvml = i;
            break;
        }
    }
    *out = g;
    return 0;
}

/* Unmap p (size bytes, NULL: not mapped) and drop the allocation handle h. */
static void release_mapping(CUmemGenericAllocationHandle h, void *p, size_t size)
{
    if (p) {
        cuMemUnmap((CUdeviceptr)(uintptr_t)p, size);
        cuMemAddressFree((CUdeviceptr)(uintptr_t)p, size);
    }
    cuMemRelease(h);
}

void avo_gpu_close(avo_gpu *g)
{
    if (!g)
        return;
    for (int i = 0; i < AVO_PROBLEM_MAX_TENSORS; i++) {
        if (i < g->imported)
            release_mapping(g->mh[i], g->dev[i], g->msize[i]);
        else if (g->dev[i])
            cudaFree(g->dev[i]);
        if (i < g->nshared)
            release_mapping(g->mh[i], g->sdev[i], g->msize[i]);
    }
    if (g->flush)
        cudaFree(g->flush);
    if (g->cmp_scratch)
        cudaFree(g->cmp_scratch);
    if (g->rows)
        cudaFree(g->rows);
    avo_gate_close(g->gate);
    if (g->before)
        cudaEventDestroy(g->before);
    if (g->start)
        cudaEventDestroy(g->start);
    if (g->stream_end)
        cudaEventDestroy(g->stream_end);
    if (g->end)
        cudaEventDestroy(g->end);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->fetch)
        cudaStreamDestroy(g->fetch);
    if (g->nvml_open)
        avo_nvml_close();
    avo_cupti_close(g->cupti);
    json_decref(g->unsupported);
    free(g);
}

int avo_gpu_describe(avo_gpu *g, char *name, size_t namelen, int *cc_major, int *cc_minor, int *sms, int *l2_bytes,
                     unsigned *max_sm_mhz)
{
    snprintf(name, namelen, "%s", g->prop.name);
    *cc_major = g->prop.major;
    *cc_minor = g->prop.minor;
    *sms = g->prop.multiProcessorCount;
    *l2_bytes = g->prop.l2CacheSize;
    unsigned cur = 0;
    *max_sm_mhz = 0;
    if (g->nvml >= 0)
        avo_nvml_sm_clock(g->nvml, &cur, max_sm_mhz);
    return 0;
}

int avo_gpu_pin(avo_gpu *g, void *ptr, size_t bytes, char *note, size_t notelen)
{
    (void)g;
    const char *off = getenv("AVO_HARNESS_PAGEABLE");
    if (off && *off && strcmp(off, "0") != 0) {
        snprintf(note, notelen, "pageable: AVO_HARNESS_PAGEABLE is set");
        return -EPERM;
    }
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it so the next call does not see it */
        snprintf(note, notelen, "pageable: page-locking host tensors: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
        return -EIO;
    }
    snprintf(note, notelen, "pinned");
    return 0;
}

void avo_gpu_unpin(avo_gpu *g, void *ptr)
{
    (void)g;
    if (ptr && cudaHostUnregister(ptr) != cudaSuccess)
        cudaGetLastError();
}

/* Every tensor device -> host on stream st, finished; the tensors in
 * first_mask (the outputs) first. */
static int copy_back(void *const *dev, cudaStream_t st, void *const *host, const size_t *bytes, int n,
                     unsigned first_mask, char *err, size_t errlen)
{
    cudaError_t e;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            if ((int)((first_mask >> i) & 1) != (pass == 0))
                continue;
            if ((e = cudaMemcpyAsync(host[i], dev[i], bytes[i], cudaMemcpyDeviceToHost, st)) != cudaSuccess)
                return fail(e, "copying a tensor back", err, errlen);
        }
    if ((e = cudaStreamSynchronize(st)) != cudaSuccess)
        return fail(e, "copying tensors back", err, errlen);
    return 0;
}

static int cu_fail(CUresult e, const char *what, char *err, size_t errlen)
{
    const char *name = NULL, *text = NULL;
    cuGetErrorName(e, &name);
    cuGetErrorString(e, &text);
    snprintf(err, errlen, "%s: %s (%s)", what, text ? text : "?", name ? name : "?");
    return e == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP : -EIO;
}

/* Map allocation h (size bytes) read-write for device 0 of this process. */
static CUresult map_handle(CUmemGenericAllocationHandle h, size_t size, void **out)
{
    CUdevice d;
    CUdeviceptr p = 0;
    CUresult e;
    if ((e = cuDeviceGet(&d, 0)) != CUDA_SUCCESS || (e = cuMemAddressReserve(&p, size, 0, 0, 0)) != CUDA_SUCCESS)
        return e;
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = d;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((e = cuMemMap(p, size, 0, h, 0)) != CUDA_SUCCESS) {
        cuMemAddressFree(p, size);
        return e;
    }
    if ((e = cuMemSetAccess(p, size, &a, 1)) != CUDA_SUCCESS) {
        cuMemUnmap(p, size);
        cuMemAddressFree(p, size);
        return e;
    }
    *out = (void *)(uintptr_t)p;
    return CUDA_SUCCESS;
}

int avo_gpu_share(avo_gpu *g, int n, const size_t *bytes, int *fds, size_t *mapped, char *err, size_t errlen)
{
    CUdevice d;
    CUresult e;
    int vmm = 0, posix = 0;
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    if (n > AVO_PROBLEM_MAX_TENSORS || g->nshared)
        return -EINVAL;
    /* The runtime's primary context current on this thread, for the
     * driver calls below. */
    cudaFree(0);
    if ((e = cuDeviceGet(&d, 0)) != CUDA_SUCCESS)
        return cu_fail(e, "cuDeviceGet", err, errlen);
    cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
    cuDeviceGetAttribute(&posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d);
    if (!vmm || !posix) {
        snprintf(err, errlen, "the GPU or driver lacks %s",
                 !vmm ? "virtual memory management" : "POSIX file descriptor memory handles");
        return -ENOTSUP;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    if ((e = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS || !gran)
        return cu_fail(e, "cuMemGetAllocationGranularity", err, errlen);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const size_t size = ((bytes[i] ? bytes[i] : 1) + gran - 1) / gran * gran;
        int fd = -1;
        if ((e = cuMemCreate(&g->mh[i], size, &prop, 0)) != CUDA_SUCCESS) {
            rc = cu_fail(e, "allocating a shared device tensor", err, errlen);
            break;
        }
        g->msize[i] = size;
        g->nshared = i + 1;
        if ((e = map_handle(g->mh[i], size, &g->sdev[i])) != CUDA_SUCCESS)
            rc = cu_fail(e, "mapping a shared device tensor", err, errlen);
        else if ((e = cuMemExportToShareableHandle(&fd, g->mh[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) !=
                 CUDA_SUCCESS)
            rc = cu_fail(e, "exporting a shared device tensor", err, errlen);
        else if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
            rc = -errno;
        fds[i] = fd;
        mapped[i] = size;
    }
    if (rc) {
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0)
                close(fds[i]), fds[i] = -1;
        for (int i = 0; i < g->nshared; i++) {
            release_mapping(g->mh[i], g->sdev[i], g->msize[i]);
            g->sdev[i] = NULL;
        }
        g->nshared = 0;
    }
    return rc;
}

int avo_gpu_clear_shared(avo_gpu *g, char *err, size_t errlen)
{
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < g->nshared && e == cudaSuccess; i++)
        e = cudaMemsetAsync(g->sdev[i], 0, g->msize[i], g->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream);
    return e == cudaSuccess ? 0 : fail(e, "clearing the shared device tensors", err, errlen);
}

int avo_gpu_import(avo_gpu *g, int n, const int *fds, const size_t *mapped, char *err, size_t errlen)
{
    CUresult e;
    if (n > AVO_PROBLEM_MAX_TENSORS || g->imported)
        return -EINVAL;
    cudaFree(0);
    for (int i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h;
        if ((e = cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fds[i],
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) != CUDA_SUCCESS)
            return cu_fail(e, "importing the checker's device tensor", err, errlen);
        void *p = NULL;
        if ((e = map_handle(h, mapped[i], &p)) != CUDA_SUCCESS) {
            cuMemRelease(h);
            return cu_fail(e, "mapping the checker's device tensor", err, errlen);
        }
        if (g->dev[i])
            cudaFree(g->dev[i]);
        g->dev[i] = p;
        g->cap[i] = g->msize[i] = mapped[i];
        g->mh[i] = h;
        g->imported = i + 1;
    }
    return 0;
}

unsigned avo_gpu_sm_clock(avo_gpu *g)
{
    unsigned cur = 0;
    if (g && g->nvml >= 0)
        avo_nvml_sm_clock(g->nvml, &cur, NULL);
    return cur;
}

int avo_gpu_busy_probe(avo_gpu *g, double *seconds)
{
    *seconds = 0;
    return g ? avo_gate_probe(g->stream, seconds) : -EINVAL;
}

static int ensure(avo_gpu *g, int i, size_t bytes, char *err, size_t errlen)
{
    if (g->cap[i] >= bytes && g->dev[i])
        return 0;
    if (i < g->imported) {
        snprintf(err, errlen, "tensor %d (%zu bytes) larger than the device tensor the checker shares (%zu)", i, bytes,
                 g->cap[i]);
        return -EINVAL;
    }
    if (g->dev[i])
        cudaFree(g->dev[i]);
    g->dev[i] = NULL;
    g->cap[i] = 0;
    cudaError_t e = cudaMalloc(&g->dev[i], bytes ? bytes : 1);
    if (e != cudaSuccess)
        return fail(e, "cudaMalloc for a tensor", err, errlen);
    g->cap[i] = bytes;
    return 0;
}

int avo_gpu_mem_alloc(avo_gpu *g, size_t bytes, void **out, char *err, size_t errlen)
{
    (void)g;
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        /* Out of memory is not sticky: clear it so later calls do not see it. */
        (void)cudaGetLastError();
        *out = NULL;
        return fail(e, "cudaMalloc for a resident reference", err, errlen);
    }
    return 0;
}

void avo_gpu_mem_free(avo_gpu *g, void *p)
{
    (void)g;
    if (p)
        cudaFree(p);
}

size_t avo_gpu_mem_total(avo_gpu *g)
{
    return g ? g->prop.totalGlobalMem : 0;
}

size_t avo_gpu_mem_available(avo_gpu *g)
{
    size_t free_b = 0, total = 0;
    (void)g;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return free_b;
}

int avo_gpu_mem_copy(avo_gpu *g, void *dst, const void *src, size_t bytes, char *err, size_t errlen)
{
    cudaError_t e;
    if ((e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g->stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(g->stream)) != cudaSuccess)
        return fail(e, "copying a resident reference", err, errlen);
    return 0;
}

const void *avo_gpu_tensor_ptr(avo_gpu *g, int i)
{
    return g && i >= 0 && i < AVO_PROBLEM_MAX_TENSORS ? g->dev[i] : NULL;
}

/* Tensor i as shared (the runner's) and as the checker's own, for a
 * comparison of n elements of es bytes. */
static int compare_args(avo_gpu *g, int i, int64_t n, size_t es, const void **a, const void **b, char *err,
                        size_t errlen)
{
    if (i < 0 || i >= g->nshared || !g->dev[i] || (size_t)n * es > g->msize[i] || (size_t)n * es > g->cap[i]) {
        snprintf(err, errlen, "comparing tensor %d on the device: not shared, or not run by the checker at that size",
                 i);
        return -EINVAL;
    }
    if (!g->cmp_scratch) {
        cudaError_t e = cudaMalloc(&g->cmp_scratch, avo_compare_scratch_bytes() + 64);
        if (e != cudaSuccess)
            return fail(e, "cudaMalloc for the comparison", err, errlen);
    }
    *a = g->sdev[i];
    *b = g->dev[i];
    return 0;
}

/* The sums of a comparison into out, with the raw bytes of got and want at
 * the element the host would report. */
static int compare_result(const avo_compare_sums *s, const void *got, const void *want, size_t es, avo_gpu_cmp *out,
                          char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->num = s->num;
    out->den = s->den;
    out->max_abs = s->max_abs;
    out->worst = s->worst;
    out->nonfinite = s->nonfinite;
    const int64_t at = s->nonfinite >= 0 ? s->nonfinite : s->worst;
    cudaError_t e;
    if (at >= 0 &&
        ((e = cudaMemcpy(out->got, (const unsigned char *)got + at * es, es, cudaMemcpyDeviceToHost)) != cudaSuccess ||
         (e = cudaMemcpy(out->want, (const unsigned char *)want + at * es, es, cudaMemcpyDeviceToHost)) != cudaSuccess))
        return fail(e, "reading the worst element", err, errlen);
    return 0;
}

int avo_gpu_compare(avo_gpu *g, int i, int64_t n, int dtype, avo_gpu_cmp *out, char *err, size_t errlen)
{
    const size_t es = avo_problem_dtype_size((avo_dtype)dtype);
    const void *got, *want;
    int rc = compare_args(g, i, n, es, &got, &want, err, errlen);
    if (rc)
        return rc;
    avo_compare_sums s;
    if ((rc = avo_compare_run(got, want, n, dtype, g->cmp_scratch, g->stream, &s))) {
        snprintf(err, errlen, "the comparison kernel failed (%s)", cudaGetErrorString(cudaGetLastError()));
        return rc;
    }
    return compare_result(&s, got, want, es, out, err, errlen);
}

int avo_gpu_run_rows(avo_gpu *g, avo_gpu_rows_fn fn, const int64_t *sizes, const int64_t *rows, int64_t nrows, int *ret,
                     char *err, size_t errlen)
{
    cudaError_t e;
    *ret = 0;
    g->nrows = 0;
    if (nrows > g->rows_cap) {
        if (g->rows)
            cudaFree(g->rows);
        g->rows = NULL;
        g->rows_cap = 0;
        if ((e = cudaMalloc((void **)&g->rows, (size_t)nrows * sizeof *rows)) != cudaSuccess)
            return fail(e, "cudaMalloc for the rows", err, errlen);
        g->rows_cap = nrows;
    }
    if (nrows && (e = cudaMemcpyAsync(g->rows, rows, (size_t)nrows * sizeof *rows, cudaMemcpyHostToDevice,
                                      g->stream)) != cudaSuccess)
        return fail(e, "copying the rows to the device", err, errlen);
    void *ptrs[AVO_PROBLEM_MAX_TENSORS];
    int64_t sz[AVO_PROBLEM_MAX_SIZES];
    memcpy(ptrs, g->dev, sizeof ptrs);
    memcpy(sz, sizes, sizeof sz);
    *ret = fn(ptrs, sz, g->rows, nrows, (void *)g->stream);
    if ((e = cudaStreamSynchronize(g->stream)) == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess)
        return fail(e, "running the reference's rows", err, errlen) == AVO_GPU_ESTICKY ? AVO_GPU_ESTICKY
                                                                                       : AVO_GPU_ELAUNCH;
    if (*ret) {
        snprintf(err, errlen, "the reference's row entry returned %d", *ret);
        return AVO_GPU_ELAUNCH;
    }
    g->nrows = nrows;
    return 0;
}

int avo_gpu_compare_rows(avo_gpu *g, int i, int64_t row_elems, int dtype, avo_gpu_cmp *out, char *err, size_t errlen)
{
    const size_t es = avo_problem_dtype_size((avo_dtype)dtype);
    const void *got, *want;
    /* The tensors must hold the last listed row whole. */
    int64_t last = 0;
    if (g->nrows > 0 && cudaMemcpy(&last, g->rows + g->nrows - 1, sizeof last, cudaMemcpyDeviceToHost) != cudaSuccess)
        return fail(cudaGetLastError(), "reading the rows back", err, errlen);
    int rc = compare_args(g, i, (last + 1) * row_elems, es, &got, &want, err, errlen);
    if (rc)
        return rc;
    avo_compare_sums s;
    if ((rc = avo_compare_run_rows(got, want, g->rows, g->nrows, row_elems, dtype, g->cmp_scratch, g->stream, &s))) {
        snprintf(err, errlen, "the comparison kernel failed (%s)", cudaGetErrorString(cudaGetLastError()));
        return rc;
    }
    return compare_result(&s, got, want, es, out, err, errlen);
}

int avo_gpu_equal(avo_gpu *g, int i, int64_t n, size_t elem_size, int64_t *first, char *err, size_t errlen)
{
    const void *a, *b;
    int rc = compare_args(g, i, n, elem_size, &a, &b, err, errlen);
    if (rc)
        return rc;
    if ((rc = avo_compare_equal(a, b, n, elem_size, g->cmp_scratch, g->stream, first)))
        snprintf(err, errlen, "the equality kernel failed (%s)", cudaGetErrorString(cudaGetLastError()));
    return rc;
}

int avo_gpu_set_inputs(avo_gpu *g, const unsigned char key[32], int n, const int *dtypes, const float *scales,
                       uint32_t nonce0, uint32_t nonce1)
{
    if (n < 0 || n > AVO_PROBLEM_MAX_TENSORS)
        return -EINVAL;
    memcpy(g->gen.key, key, sizeof g->gen.key);
    for (int i = 0; i < n; i++) {
        g->gen.dtype[i] = dtypes[i];
        g->gen.scale[i] = scales[i];
    }
    g->gen.n = n;
    g->gen.nonce0 = nonce0;
    g->gen.nonce1 = nonce1;
    g->gen.set = 1;
    return 0;
}

int avo_gpu_fill_sample(avo_gpu *g, const unsigned char key[32], int dtype, float scale, uint32_t nonce0,
                        uint32_t nonce1, uint32_t nonce2, void *host, int64_t n, char *err, size_t errlen)
{
    const size_t bytes = (size_t)n * avo_problem_dtype_size((avo_dtype)dtype);
    void *d = NULL;
    cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return fail(e, "cudaMalloc for the fill check", err, errlen);
    int rc = avo_fill_launch(d, n, dtype, scale, key, nonce0, nonce1, nonce2, g->stream);
    if (rc == -EIO)
        rc = fail(cudaGetLastError(), "the fill kernel", err, errlen);
    else if (rc)
        snprintf(err, errlen, "the fill kernel: bad arguments");
    else if ((e = cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, g->stream)) != cudaSuccess ||
             (e = cudaStreamSynchronize(g->stream)) != cudaSuccess)
        rc = fail(e, "copying the fill check back", err, errlen);
    cudaFree(d);
    return rc;
}

/* The device tensors of a call: the checker's shared ones (only a prep or a
 * fetch uses them), else this process's own, grown to the sizes asked. */
static int call_tensors(avo_gpu *g, const size_t *bytes, int n, unsigned flags, void *const **dev, char *err,
                        size_t errlen)
{
    int rc;
    *dev = g->dev;
    if (flags & AVO_GPU_SHARED) {
        if (n > g->nshared || !(flags & (AVO_GPU_PREPARE | AVO_GPU_FETCH))) {
            snprintf(err, errlen, "shared tensors: %d asked for, %d shared; only a prep or a fetch uses them", n,
                     g->nshared);
            return -EINVAL;
        }
        for (int i = 0; i < n; i++)
            if (bytes[i] > g->msize[i]) {
                snprintf(err, errlen, "tensor %d (%zu bytes) larger than its shared one (%zu)", i, bytes[i],
                         g->msize[i]);
                return -EINVAL;
            }
        *dev = g->sdev;
    } else {
        for (int i = 0; i < n; i++)
            if ((rc = ensure(g, i, bytes[i], err, errlen)))
                return rc;
    }
    return 0;
}

/* AVO_GPU_GEN_INPUTS: the inputs not masked generated on the device
 * (avo_gpu_set_inputs). */
static int generate_inputs(avo_gpu *g, void *const *dev, const size_t *bytes, int n, unsigned poison_mask, char *err,
                           size_t errlen)
{
    if (!g->gen.set || g->gen.n < n) {
        snprintf(err, errlen, "inputs to generate on the device: not set for %d tensors", n);
        return -EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if ((poison_mask >> i) & 1)
            continue;
        const int64_t elems = (int64_t)(bytes[i] / avo_problem_dtype_size((avo_dtype)g->gen.dtype[i]));
        int rc = avo_fill_launch(dev[i], elems, g->gen.dtype[i], g->gen.scale[i], g->gen.key, g->gen.nonce0,
                                 g->gen.nonce1, (uint32_t)i + 1, g->stream);
        if (rc == -EIO)
            return fail(cudaGetLastError(), "generating an input on the device", err, errlen);
        if (rc) {
            snprintf(err, errlen, "generating input %d on the device: no such stream", i);
            return rc;
        }
    }
    return 0;
}

/* The shared tensors past this call's bytes (room a larger config's take,
 * and the allocation granularity's) zeroed: every runner maps all of each
 * allocation, and no check reads the slack, so an against's runner could
 * leave its outputs there for the candidate's next call
 * (tests/hostile/gpu/pairs/stash_pair.cu). A memset on the device, before
 * the start mark: a few hundred microseconds for attention's largest. */
static int clear_slack(avo_gpu *g, const size_t *bytes, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n && i < g->nshared; i++)
        if (g->msize[i] > bytes[i]) {
            cudaError_t e = cudaMemsetAsync((char *)g->sdev[i] + bytes[i], 0, g->msize[i] - bytes[i], g->stream);
            if (e != cudaSuccess)
                return fail(e, "clearing a shared tensor's slack", err, errlen);
        }
    return 0;
}

/* Everything the flags ask before the call: inputs generated or copied,
 * outputs copied or poisoned, L2 flushed; all finished on return. */
static int prepare_call(avo_gpu *g, void *const *dev, void *const *host, const size_t *bytes, int n, unsigned flags,
                        unsigned poison_mask, char *err, size_t errlen)
{
    cudaError_t e;
    int rc;
    if ((flags & AVO_GPU_GEN_INPUTS) && (rc = generate_inputs(g, dev, bytes, n, poison_mask, err, errlen)))
        return rc;
    if (flags & (AVO_GPU_COPY_IN | AVO_GPU_COPY_INPUTS))
        for (int i = 0; i < n; i++) {
            if (!(flags & AVO_GPU_COPY_IN) && ((poison_mask >> i) & 1))
                continue;
            if ((e = cudaMemcpyAsync(dev[i], host[i], bytes[i], cudaMemcpyHostToDevice, g->stream)) != cudaSuccess)
                return fail(e, "copying a tensor to the device", err, errlen);
        }
    if (flags & AVO_GPU_COPY_OUTPUTS)
        for (int i = 0; i < n; i++)
            if (((poison_mask >> i) & 1) &&
                (e = cudaMemcpyAsync(dev[i], host[i], bytes[i], cudaMemcpyDefault, g->stream)) != cudaSuccess)
                return fail(e, "copying a cached output to the device", err, errlen);
    if (flags & AVO_GPU_POISON)
        for (int i = 0; i < n; i++)
            if ((poison_mask >> i) & 1)
                if ((e = cudaMemsetAsync(dev[i], 0xff, bytes[i], g->stream)) != cudaSuccess)
                    return fail(e, "poisoning an output on the device", err, errlen);
    if ((flags & AVO_GPU_SHARED) && (rc = clear_slack(g, bytes, n, err, errlen)))
        return rc;
    if ((flags & AVO_GPU_FLUSH) && (e = cudaMemsetAsync(g->flush, 0x5a, g->flush_bytes, g->stream)) != cudaSuccess)
        return fail(e, "flushing L2", err, errlen);
    /* Everything before the start mark is finished before it is taken. */
    if ((e = cudaStreamSynchronize(g->stream)) != cudaSuccess)
        return fail(e, "preparing the call", err, errlen);
    return 0;
}

/* AVO_GPU_GATED: the gate queued before the start mark. Returns whether the
 * call is gated; *t_ready: when the gate's blocks were resident (host clock). */
static int hold_gate(avo_gpu *g, avo_gpu_times *t, double *t_ready)
{
    /* A mark before the gate: the GPU takes it as soon as it runs this
     * context, so mark -> start is the gate's time on the GPU, which
     * is the host's hold plus whatever kept the gate's blocks from
     * their SMs. */
    cudaEventRecord(g->before, g->stream);
    const double t_hold = avo_timing_now();
    double wait = 0;
    const int gated = g->gate && avo_gate_hold(g->gate, g->stream, AVO_GPU_GATE_LIMIT_MS, &wait) == 0;
    if (!gated)
        t->notes |= AVO_GPU_NOTE_UNGATED;
    else if (wait < 0)
        t->notes |= AVO_GPU_NOTE_GATE_BUSY;
    *t_ready = t_hold + (wait >= 0 ? wait : AVO_GATE_WAIT_MAX_S);
    return gated;
}

/* The device's times of a call that ended well, from its marks; held_s: the
 * host's hold of the gate (resident -> opened). */
static void read_call_times(avo_gpu *g, int gated, double held_s, avo_gpu_times *t)
{
    if (gated && avo_gate_timed_out(g->gate))
        t->notes |= AVO_GPU_NOTE_GATE_TIMEOUT;
    float ms = 0, tail_ms = 0;
    cudaEventElapsedTime(&ms, g->start, g->end);
    cudaEventElapsedTime(&tail_ms, g->stream_end, g->end);
    t->seconds = ms * 1e-3;
    t->tail_s = tail_ms * 1e-3;
    if (gated) {
        /* Less the host's hold (gate resident -> opened): the GPU time
         * before the start mark that the host did not account for. */
        float pre_ms = 0;
        cudaEventElapsedTime(&pre_ms, g->before, g->start);
        t->gate_wait_s = fmax(0, pre_ms * 1e-3 - held_s);
    }
}

/* The call itself between its marks (or, calibrating, the smallest piece of
 * device work), *ret its return. */
static int timed_call(avo_gpu *g, avo_gpu_fn fn, const int64_t *sizes, unsigned flags, int *ret, avo_gpu_times *t,
                      char *err, size_t errlen)
{
    void *ptrs[AVO_PROBLEM_MAX_TENSORS];
    int64_t sz[AVO_PROBLEM_MAX_SIZES];
    memcpy(ptrs, g->dev, sizeof ptrs);
    memcpy(sz, sizes, sizeof sz);
    int gated = 0;
    double t_ready = 0;
    const double t_call = avo_timing_now();
    if (flags & AVO_GPU_GATED)
        gated = hold_gate(g, t, &t_ready);
    cudaEventRecord(g->start, g->stream);
    if (flags & AVO_GPU_EMPTY) {
        /* Calibration: the smallest piece of device work (a 4-byte memset)
         * in place of the call, so the launch latency that every call pays
         * is part of what is subtracted. */
        *ret = cudaMemsetAsync(g->flush, 0, 4, g->stream) == cudaSuccess ? 0 : -1;
    } else {
        const double t_entry = avo_timing_now();
        *ret = fn(ptrs, sz, (void *)g->stream);
        t->entry_s = avo_timing_now() - t_entry;
    }
    /* Queued before the gate opens, so the GPU takes it as soon as the work
     * on this stream is done: no host latency in start -> stream end. */
    cudaEventRecord(g->stream_end, g->stream);
    const double t_release = avo_timing_now();
    t->host_s = t_release - t_call;
    if (gated)
        avo_gate_release(g->gate);
    /* Device-wide: work the candidate queued on any other stream ends
     * before the end mark, so it cannot escape the timed region. */
    cudaError_t e = cudaDeviceSynchronize();
    cudaEventRecord(g->end, g->stream);
    cudaError_t e2 = cudaEventSynchronize(g->end);
    if (e == cudaSuccess)
        e = e2;
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess)
        return fail(e, "running the kernel", err, errlen) == AVO_GPU_ESTICKY ? AVO_GPU_ESTICKY : AVO_GPU_ELAUNCH;
    read_call_times(g, gated, t_release - t_ready, t);
    return 0;
}

int avo_gpu_run(avo_gpu *g, avo_gpu_fn fn, void *const *host, const size_t *bytes, int n, const int64_t *sizes,
                unsigned flags, unsigned poison_mask, int *ret, avo_gpu_times *t, char *err, size_t errlen)
{
    int rc;
    *ret = 0;
    memset(t, 0, sizeof *t);
    void *const *dev;
    if ((rc = call_tensors(g, bytes, n, flags, &dev, err, errlen)))
        return rc;
    /* The fetch on a stream of its own, outputs first: a kernel the
     * candidate launches after the call's end mark (from a thread of its
     * own, on the call's stream) neither delays the copies nor has the
     * outputs to itself before they are read. */
    if (flags & AVO_GPU_FETCH)
        return copy_back(dev, g->fetch, host, bytes, n, poison_mask, err, errlen);
    if ((rc = prepare_call(g, dev, host, bytes, n, flags, poison_mask, err, errlen)))
        return rc;
    if (flags & AVO_GPU_PREPARE)
        return 0;
    if ((rc = timed_call(g, fn, sizes, flags, ret, t, err, errlen)))
        return rc;
    if (*ret != 0) {
        snprintf(err, errlen, "the entry point returned %d", *ret);
        return AVO_GPU_ELAUNCH;
    }
    return (flags & AVO_GPU_COPY_OUT) ? copy_back(g->dev, g->stream, host, bytes, n, 0, err, errlen) : 0;
}

#endif

#ifdef AVO_WITH_CUDA
typedef struct {
    avo_gpu *g;
    avo_gpu_fn fn;
    void *const *host;
    const size_t *bytes;
    int n;
    const int64_t *sizes;
    int rc;
    char err[300];
} profile_call;

static int profiled_call(void *arg)
{
    profile_call *pc = arg;
    int ret = 0;
    avo_gpu_times t;
    /* Copies are not kernels, so only the candidate's launches become
     * ranges. Without host tensors the checker laid the shared ones out. */
    pc->rc = avo_gpu_run(pc->g, pc->fn, pc->host, pc->bytes, pc->n, pc->sizes, pc->host ? AVO_GPU_COPY_IN : 0, 0, &ret,
                         &t, pc->err, sizeof pc->err);
    return pc->rc;
}

int avo_gpu_profile(avo_gpu *g, avo_gpu_fn fn, void *const *host, const size_t *bytes, int n, const int64_t *sizes,
                    char *out, size_t cap, char *err, size_t errlen)
{
    if (g->cupti_failed) {
        snprintf(err, errlen, "%s", g->cupti_err);
        return -EPERM;
    }
    if (!g->cupti) {
        CUcontext ctx = NULL;
        cudaFree(0);
        if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
            snprintf(g->cupti_err, sizeof g->cupti_err, "no current CUDA context for CUPTI");
            g->cupti_failed = 1;
        } else if (avo_cupti_open(&g->cupti, ctx, 0, avo_cupti_default_metrics, avo_cupti_default_nmetrics,
                                  &g->unsupported, g->cupti_err, sizeof g->cupti_err) < 0) {
            g->cupti = NULL;
            g->cupti_failed = 1;
        }
        if (g->cupti_failed) {
            snprintf(err, errlen, "%s", g->cupti_err);
            return -EPERM;
        }
    }
    profile_call pc = {g, fn, host, bytes, n, sizes, 0, ""};
    json_t *ranges = NULL;
    int rc = avo_cupti_profile(g->cupti, profiled_call, &pc, &ranges, err, errlen);
    if (pc.rc) {
        snprintf(err, errlen, "the profiled call failed: %s", pc.err);
        json_decref(ranges);
        return pc.rc == AVO_GPU_ESTICKY ? AVO_GPU_ESTICKY : -EIO;
    }
    if (rc < 0)
        return rc;
    json_t *doc = json_pack("{s:i,s:O,s:o}", "passes", avo_cupti_passes(g->cupti), "unsupported", g->unsupported,
                            "kernels", ranges);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text || strlen(text) >= cap) {
        snprintf(err, errlen, "counter report larger than %zu bytes", cap);
        free(text);
        return -E2BIG;
    }
    memcpy(out, text, strlen(text) + 1);
    free(text);
    return 0;
}
#endif
