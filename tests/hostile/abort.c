/* Hostile: calls abort() inside the kernel (a failed assert in disguise).
 * Expected: crash, SIGABRT. */
#include <stdint.h>
#include <stdlib.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    abort();
    return 0;
}
