/* NVML loaded at run time: GPU descriptions, clocks and energy counters (avo_nvml.h). */
#include "avo_nvml.h"

#include <errno.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The handful of NVML entry points avo uses, declared here because the
 * worker must build without the CUDA toolkit's nvml.h; their signatures are
 * NVML's stable C ABI (nvmlReturn_t is an int enum, 0 = success). */
typedef int nvml_ret;
typedef struct nvml_device *nvml_device;
#define NVML_OK 0

static struct {
    void *lib;
    int refs;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    nvml_ret (*count)(unsigned *);
    nvml_ret (*handle)(unsigned, nvml_device *);
    nvml_ret (*name)(nvml_device, char *, unsigned);
    nvml_ret (*uuid)(nvml_device, char *, unsigned);
    nvml_ret (*cc)(nvml_device, int *, int *);
    nvml_ret (*energy)(nvml_device, unsigned long long *);
    nvml_ret (*driver)(char *, unsigned);
    nvml_ret (*clock)(nvml_device, int, unsigned *);
    nvml_ret (*max_clock)(nvml_device, int, unsigned *);
    nvml_ret (*app_clock)(nvml_device, int, unsigned *);
    nvml_ret (*vbios)(nvml_device, char *, unsigned);
    nvml_ret (*cuda_driver)(int *);
    const char *(*error_string)(nvml_ret);
    /* Handles already looked up, by index (bit i of have): a lookup costs
     * more than the clock reading a timed call makes (bench/gpu_probe). */
    nvml_device dev[16];
    unsigned have;
} nv;

/* Open and close may race (the worker's precompile thread reads the GPU's
 * architecture while the main thread reads energy): one lock for both. */
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;
static int nvml_open_locked(char *err, size_t errlen);

int avo_nvml_open(char *err, size_t errlen)
{
    pthread_mutex_lock(&nv_lock);
    int rc = nvml_open_locked(err, errlen);
    pthread_mutex_unlock(&nv_lock);
    return rc;
}

static int nvml_open_locked(char *err, size_t errlen)
{
    if (!nv.lib) {
        nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!nv.lib) {
            snprintf(err, errlen, "NVML not available (libnvidia-ml.so.1: %s)", dlerror());
            return -ENODEV;
        }
#define SYM(field, name) *(void **)&nv.field = dlsym(nv.lib, name)
        SYM(init, "nvmlInit_v2");
        SYM(shutdown, "nvmlShutdown");
        SYM(count, "nvmlDeviceGetCount_v2");
        SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
        SYM(name, "nvmlDeviceGetName");
        SYM(uuid, "nvmlDeviceGetUUID");
        SYM(cc, "nvmlDeviceGetCudaComputeCapability");
        SYM(energy, "nvmlDeviceGetTotalEnergyConsumption");
        SYM(driver, "nvmlSystemGetDriverVersion");
        SYM(clock, "nvmlDeviceGetClockInfo");
        SYM(max_clock, "nvmlDeviceGetMaxClockInfo");
        SYM(app_clock, "nvmlDeviceGetApplicationsClock");
        SYM(vbios, "nvmlDeviceGetVbiosVersion");
        SYM(cuda_driver, "nvmlSystemGetCudaDriverVersion_v2");
        SYM(error_string, "nvmlErrorString");
#undef SYM
        if (!nv.init || !nv.shutdown || !nv.count || !nv.handle || !nv.name || !nv.cc) {
            snprintf(err, errlen, "NVML library lacks required functions");
            dlclose(nv.lib);
            memset(&nv, 0, sizeof nv);
            return -ENOSYS;
        }
        nvml_ret r = nv.init();
        if (r != NVML_OK) {
            snprintf(err, errlen, "nvmlInit failed: %s", nv.error_string ? nv.error_string(r) : "error");
            dlclose(nv.lib);
            memset(&nv, 0, sizeof nv);
            return -ENODEV;
        }
    }
    nv.refs++;
    unsigned n = 0;
    if (nv.count(&n) != NVML_OK)
        return 0;
    return (int)n;
}

void avo_nvml_close(void)
{
    pthread_mutex_lock(&nv_lock);
    if (nv.lib && --nv.refs <= 0) {
        nv.shutdown();
        dlclose(nv.lib);
        memset(&nv, 0, sizeof nv);
    }
    pthread_mutex_unlock(&nv_lock);
}

int avo_nvml_device(int index, avo_gpu_info *out)
{
    nvml_device d;
    memset(out, 0, sizeof *out);
    if (!nv.lib || nv.handle((unsigned)index, &d) != NVML_OK)
        return -ENODEV;
    out->index = index;
    nv.name(d, out->name, sizeof out->name);
    if (nv.uuid)
        nv.uuid(d, out->uuid, sizeof out->uuid);
    nv.cc(d, &out->cc_major, &out->cc_minor);
    return 0;
}

int avo_nvml_driver_version(char *out, size_t len)
{
    if (!nv.lib || !nv.driver || nv.driver(out, (unsigned)len) != NVML_OK)
        return -ENODEV;
    return 0;
}

int avo_nvml_energy_mj(int index, uint64_t *mj)
{
    nvml_device d;
    unsigned long long e = 0;
    if (!nv.lib || !nv.energy || nv.handle((unsigned)index, &d) != NVML_OK)
        return -ENODEV;
    if (nv.energy(d, &e) != NVML_OK)
        return -ENOTSUP; /* not supported on this device */
    *mj = e;
    return 0;
}

/* Device index's handle, looked up once. */
static int cached_handle(int index, nvml_device *d)
{
    int rc = 0;
    pthread_mutex_lock(&nv_lock);
    if (index >= 0 && index < 16 && ((nv.have >> index) & 1))
        *d = nv.dev[index];
    else if (!nv.lib || nv.handle((unsigned)index, d) != NVML_OK)
        rc = -ENODEV;
    else if (index >= 0 && index < 16)
        nv.dev[index] = *d, nv.have |= 1u << index;
    pthread_mutex_unlock(&nv_lock);
    return rc;
}

int avo_nvml_sm_clock(int index, unsigned *current_mhz, unsigned *max_mhz)
{
    nvml_device d;
    enum { NVML_CLOCK_SM = 1 };
    if (!nv.lib || !nv.clock || !nv.max_clock || cached_handle(index, &d) != 0)
        return -ENODEV;
    if (nv.clock(d, NVML_CLOCK_SM, current_mhz) != NVML_OK ||
        (max_mhz && nv.max_clock(d, NVML_CLOCK_SM, max_mhz) != NVML_OK))
        return -ENOTSUP;
    return 0;
}

int avo_nvml_app_clocks(int index, unsigned *sm_mhz, unsigned *mem_mhz)
{
    nvml_device d;
    enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
    if (!nv.lib || !nv.app_clock || nv.handle((unsigned)index, &d) != NVML_OK)
        return -ENODEV;
    if (nv.app_clock(d, NVML_CLOCK_SM, sm_mhz) != NVML_OK || nv.app_clock(d, NVML_CLOCK_MEM, mem_mhz) != NVML_OK)
        return -ENOTSUP;
    return 0;
}

int avo_nvml_vbios(int index, char *out, size_t len)
{
    nvml_device d;
    if (!nv.lib || !nv.vbios || nv.handle((unsigned)index, &d) != NVML_OK)
        return -ENODEV;
    return nv.vbios(d, out, (unsigned)len) == NVML_OK ? 0 : -95;
}

int avo_nvml_cuda_driver_version(int *version)
{
    if (!nv.lib || !nv.cuda_driver || nv.cuda_driver(version) != NVML_OK)
        return -ENODEV;
    return 0;
}
