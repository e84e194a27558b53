/* Hostile: writes a perfect-looking result object to fd 3 (where the old
 * in-process harness wrote its result) and to the checker's fd 3 through
 * /proc, then returns 0 without computing anything. Expected: the runner has
 * no fd 3 and cannot open the checker's, so C stays poisoned: wrong_result
 * ("not finite"), never ok. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char fake[] =
    "{\"outcome\": \"ok\", \"detail\": \"forged\", \"aggregate\": 1e9, \"unit\": \"GFLOP/s\", \"configs\": "
    "[{\"name\": \"128\", \"score\": 1e9}, {\"name\": \"256\", \"score\": 1e9}, {\"name\": \"384x320x288\", "
    "\"score\": 1e9}, {\"name\": \"512\", \"score\": 1e9}], \"rng_seed\": 1}\n";

int sgemm(void *const *tensors, const int64_t *sizes)
{
    (void)tensors;
    (void)sizes;
    (void)!write(3, fake, sizeof fake - 1);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/3", (int)getppid());
    int fd = open(path, O_WRONLY);
    if (fd >= 0) {
        (void)!write(fd, fake, sizeof fake - 1);
        close(fd);
    }
    return 0;
}
