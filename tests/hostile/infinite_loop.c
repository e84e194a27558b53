/* Hostile: never returns. Expected: timeout, the process group killed. */
#include <stdint.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    volatile uint64_t n = 0;
    for (;;)
        n++;
    return 0;
}
