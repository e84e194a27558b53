/* Hostile: "computes" into a scratch buffer it never initialises and copies
 * that into C: the output is whatever the allocator hands back (often
 * zeros, sometimes stale data). Nothing here depends on the inputs.
 * Expected: wrong_result (finite garbage or zeros, far from the reference;
 * NaN when the heap hands back poisoned memory). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    float *C = tensors[2];
    const size_t n = (size_t)(sizes[0] * sizes[1]);
    float *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return 1;
    memcpy(C, tmp, n * sizeof *C);
    free(tmp);
    return 0;
}
