/* Hardware counters through the CUPTI Range Profiler (CUDA 12.6+ API):
 * AutoRange (one range per kernel launch) with KernelReplay (CUPTI replays
 * each kernel as many times as the metric set needs passes, restoring memory
 * in between), run as a separate pass after timing, never during it. */
#ifndef AVO_CUPTI_H
#define AVO_CUPTI_H

#include <cuda.h>
#include <jansson.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct avo_cupti avo_cupti;

/* The default metric list (GH100 names): SM and DRAM throughput, achieved
 * occupancy, shared-memory bank conflicts, tensor-pipe activity,
 * instructions executed, the main stall reasons and the kernel duration. */
extern const char *const avo_cupti_default_metrics[];
extern const int avo_cupti_default_nmetrics;

/* Prepare profiling on ctx/device for the given metrics. Metrics the chip
 * does not know are dropped and listed in *unsupported (a new JSON array,
 * may be NULL). Returns 0, or a negative int with the reason in err (e.g.
 * CUPTI_ERROR_INSUFFICIENT_PRIVILEGES where profiling is not permitted). */
int avo_cupti_open(avo_cupti **out, CUcontext ctx, int device, const char *const *metrics, int nmetrics,
                   json_t **unsupported, char *err, size_t errlen);

/* Profile every kernel fn(arg) launches. Returns a new JSON array, one
 * object per kernel: {"range": name, "metrics": {name: value}}. */
int avo_cupti_profile(avo_cupti *p, int (*fn)(void *arg), void *arg, json_t **ranges, char *err, size_t errlen);

/* Replay passes the metric set needs per kernel. */
int avo_cupti_passes(const avo_cupti *p);

void avo_cupti_close(avo_cupti *p);

#ifdef __cplusplus
}
#endif

#endif
