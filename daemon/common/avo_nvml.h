/* NVML, loaded at run time (dlopen "libnvidia-ml.so.1"), so one worker binary
 * runs on GPU hosts and on machines with no NVIDIA driver at all (where every
 * call reports -ENODEV). Used to describe the GPUs a worker registers with and
 * to read the total-energy counter around an evaluation. */
#ifndef AVO_NVML_H
#define AVO_NVML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int index;
    char name[96];
    char uuid[96];
    int cc_major, cc_minor; /* compute capability */
} avo_gpu_info;

/* Load and initialise NVML. Returns the device count (>= 0), or a negative
 * int with the reason in err (library missing, driver not loaded). */
int avo_nvml_open(char *err, size_t errlen);
void avo_nvml_close(void);
int avo_nvml_device(int index, avo_gpu_info *out);
int avo_nvml_driver_version(char *out, size_t len);
/* Energy used by the device since the driver loaded, millijoules. */
int avo_nvml_energy_mj(int index, uint64_t *mj);
/* Current and maximum SM clock, MHz (max_mhz NULL: the current alone, one
 * NVML call on a handle looked up once). */
int avo_nvml_sm_clock(int index, unsigned *current_mhz, unsigned *max_mhz);
/* Application clocks (what the GPU runs work at unless boosted), MHz. */
int avo_nvml_app_clocks(int index, unsigned *sm_mhz, unsigned *mem_mhz);
/* The board's VBIOS version text. */
int avo_nvml_vbios(int index, char *out, size_t len);
/* The CUDA version the driver supports, as CUDA encodes it (13000 = 13.0). */
int avo_nvml_cuda_driver_version(int *version);

#ifdef __cplusplus
}
#endif

#endif
