/* What this worker's host has: the CPU, and the NVIDIA GPUs NVML reports
 * (name, UUID, compute capability, driver). Stored with the worker's
 * registration and printed by `avo-worker devices`. */
#ifndef AVO_DEVICES_H
#define AVO_DEVICES_H

#include <jansson.h>
#include <stddef.h>

/* Returns a new array: [{"kind":"cpu",...}, {"kind":"gpu",...}...]; a host
 * without NVML gets a {"kind":"gpu-probe","available":false,"reason":...}
 * entry instead of GPUs, so the reason is visible in `avoctl workers`. */
json_t *avo_devices_probe(void);

/* The first "model name" of /proc/cpuinfo into out, else none. */
void avo_devices_cpu_model(char *out, size_t len, const char *none);

/* The NVML index of the GPU that CUDA calls device 0 under cvd (the value
 * of CUDA_VISIBLE_DEVICES; NULL or "": index 0): its first entry, an index
 * or a GPU's UUID (or a prefix of one, as CUDA accepts). -EINVAL for an
 * entry that is neither, -ENODEV for a UUID no GPU here has. */
int avo_devices_visible_index(const char *cvd);

#endif
