/* Hostile: dereferences NULL. Expected: crash, SIGSEGV. */
#include <stdint.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    volatile float *p = (volatile float *)0;
    *p = 1.0f;
    return 0;
}
