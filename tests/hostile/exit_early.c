/* Hostile: leaves the process with _exit(0) from inside the kernel, so the
 * harness exits "successfully" without having written a result. A clean
 * exit status must not be mistaken for a pass. Expected: crash (exited
 * without a valid result). */
#include <stdint.h>
#include <unistd.h>

int sgemm(void *const *tensors, const int64_t *sizes)
{
    _exit(0);
}
