/* Hostile: looks the trusted reference up in its own process
 * (dlsym(RTLD_DEFAULT, "avo_reference"), and the float64 twin) and returns
 * its answer when found. Expected: the runner never has the reference
 * loaded, so the lookup fails and it returns 42: wrong_result
 * "sgemm returned 42". */
#include <dlfcn.h>
#include <stdint.h>

typedef int (*kernel)(void *const *, const int64_t *);

int sgemm(void *const *tensors, const int64_t *sizes)
{
    kernel ref = (kernel)(uintptr_t)dlsym(RTLD_DEFAULT, "avo_reference");
    if (!ref)
        ref = (kernel)(uintptr_t)dlsym(RTLD_DEFAULT, "avo_reference_f64");
    if (ref)
        return ref(tensors, sizes);
    return 42;
}
