/* Hostile (GPU, the worker as the target): a source that ends inside a raw
 * string prefix with no "(" (R" and a few characters). The policy scanner
 * (daemon/worker/policy.c) once took the text after a missing "(" as the
 * raw string's body and copied a negative length: the worker aborted with
 * heap corruption before any compile, so one candidate stopped a worker.
 * Defended: without its "(" it is no raw string; the scan goes on and nvcc
 * refuses the literal. Expected: compile_error, the worker alive. */
#include <stdint.h>

extern "C" int gemm_bf16(void *const *tensors, const int64_t *sizes, void *stream)
{
    (void)tensors;
    (void)sizes;
    (void)stream;
    return 0;
}
const char *avo_hostile_tail = R"abc