/* The ptxas resource report (nvcc -Xptxas -v) turned into data: per kernel,
 * the target, registers, barriers, shared and constant memory, stack frame
 * and spills. The agent operator reads these to decide its next edit
 * (spills and stack frames mean local memory on the hot path). */
#ifndef AVO_PTXAS_H
#define AVO_PTXAS_H

#include <jansson.h>

/* Returns a new array of {"kernel","target","registers","barriers",
 * "smem_bytes","cmem_bytes","stack_bytes","spill_store_bytes",
 * "spill_load_bytes"}; kernels not mentioned get no entry. Never NULL. */
json_t *avo_ptxas_parse(const char *log);

#endif
