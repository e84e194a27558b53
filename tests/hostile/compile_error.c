/* Hostile: does not compile. Expected: compile_error with the message. */
#include <stdint.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    return undeclared_variable + 1;
}
