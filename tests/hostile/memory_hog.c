/* Hostile: allocates and touches memory in 64 MiB steps until allocation
 * fails, keeping all of it, then returns without computing. Touching every
 * page makes the memory real (not just reserved address space), so the
 * address-space limit (RLIMIT_AS), not the machine, is what stops it.
 * Expected: wrong_result (the output is never written) or crash (killed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define STEP (64u << 20)

int sgemm(void *const *tensors, const int64_t *sizes)
{
    /* 1 TiB worth of steps: far beyond any sane limit; the loop ends when
     * malloc fails, which must happen first. */
    static void *chunks[16384];
    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
        chunks[i] = malloc(STEP);
        if (!chunks[i])
            break;
        memset(chunks[i], 0xa5, STEP);
    }
    return 0;
}
