/* Hostile: a fork bomb. Every process forks in a loop, the children fork
 * too, and all of them then sleep; the kernel itself never returns.
 * Expected: timeout, and not one process of the bomb left afterwards.
 *
 * Containment: RLIMIT_NPROC stops the forks for an unprivileged worker, but
 * the kernel does not enforce it for root (or CAP_SYS_RESOURCE), so as root
 * only the sandbox's SIGKILL to the process group ends the bomb: no process
 * here leaves the group. The bomb is bounded on purpose (BOMB_MAX processes
 * in all, counted in shared memory): far above RLIMIT_NPROC, so as root it
 * shows the limit is not what contains it, yet a broken sandbox on a shared
 * VM (pid_max 32768 here) cannot exhaust the pid space for everyone else.
 * Every child renames itself "avo-hostile-fb" so a test can look for
 * survivors with `pgrep -x avo-hostile-fb`. */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define BOMB_MAX 1000

int sgemm(void *const *tensors, const int64_t *sizes)
{
    atomic_int *forked = mmap(NULL, sizeof *forked, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (forked == MAP_FAILED)
        return 1;
    while (atomic_fetch_add(forked, 1) < BOMB_MAX) {
        pid_t pid = fork();
        if (pid < 0)
            break; /* RLIMIT_NPROC (unprivileged) or the system limit */
        if (pid == 0)
            prctl(PR_SET_NAME, "avo-hostile-fb", 0, 0, 0);
    }
    for (;;)
        pause();
}
