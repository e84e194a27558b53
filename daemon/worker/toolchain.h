/* The worker's toolchain (issue 21, point 2; docs/evaluation.md, "The
 * toolchain record"): the compilers (path, banner line, version), the
 * NVIDIA driver, the CUDA version it supports and the CUDA runtime, the
 * GPU (model, UUID, VBIOS, application clocks), the CPU model and avo's
 * version. Probed once at start, stored on the worker's row (matched by
 * avo_claim against jobs' "toolchain" constraints, sql/018_toolchain.sql)
 * and copied into every result with the clocks that evaluation saw.
 * Anything the host lacks (no GPU, no nvcc) is "none" in the record and
 * absent from "versions", the flat part that matching and grouping read. */
#ifndef AVO_WORKER_TOOLCHAIN_H
#define AVO_WORKER_TOOLCHAIN_H

#include <jansson.h>

typedef struct {
    const char *target;        /* "cpu" or "sm_XY": a CPU worker has no GPU to record */
    int gpu_index;             /* NVML index of the worker's GPU */
    const char *override_file; /* --toolchain-file (tests, operators), or NULL */
} avo_toolchain_opts;

/* A new object {"versions": {...}, "cc": {...}, "nvcc": {...}, "driver",
 * "cuda_driver", "cuda_runtime", "gpu": {...}, "cpu", "avo"}. With an
 * override file (a JSON object), its members replace the probed ones
 * ("versions" member by member), and "overridden": true says so. Returns
 * 0, or a negative int with err when the override file cannot be used
 * (the worker refuses to start: a label it cannot honour would route work
 * wrongly). */
int avo_toolchain_probe(const avo_toolchain_opts *o, json_t **out, char *err, size_t errlen);

/* The record for one result: the worker's object with "clocks": the
 * lowest and highest SM clock the harness saw over the result's
 * configurations ("configs"[].clock), when it reported any. */
json_t *avo_toolchain_for_result(const json_t *toolchain, const json_t *result);

#endif
