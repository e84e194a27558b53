/* One GPU, one timing harness at a time: an exclusive lock per GPU that
 * every worker of a host takes around the harness of a GPU evaluation or
 * profile, so two workers given the same GPU (a configuration error, or a
 * second worker started by hand beside the systemd one) never time on it
 * together. A flock(2) on a file named by the GPU's UUID in a directory all
 * workers of the host share: the kernel drops it when its holder dies, so a
 * killed worker never leaves the GPU locked. */
#ifndef AVO_GPULOCK_H
#define AVO_GPULOCK_H

#include <stddef.h>

/* The default directory: /run/lock (world-writable and sticky on Debian,
 * a tmpfs cleared at boot), else /tmp. */
const char *avo_gpulock_default_dir(void);

/* The lock's name for NVML device index: its UUID ("GPU-..."), or
 * "index-N" where NVML cannot say. */
void avo_gpulock_key(int gpu_index, char *out, size_t len);

/* Takes the lock of key in dir, waiting while another process holds it.
 * should_cancel (may be NULL) is polled about every 50 ms while waiting; it
 * returning nonzero gives up with -ECANCELED. *waited_s: the time spent
 * waiting. Returns the lock's descriptor (close-on-exec, never passed to
 * what the harness runs) for avo_gpulock_release, or a negative errno with
 * the reason in err. */
int avo_gpulock_take(const char *dir, const char *key, int (*should_cancel)(void *), void *arg, double *waited_s,
                     char *err, size_t errlen);
void avo_gpulock_release(int fd);

/* Whether the lock of key can be opened in dir (created where missing),
 * without taking it: a worker checks at start, so a directory it cannot
 * write refuses the worker instead of failing every evaluation. 0, or a
 * negative errno with the reason in err. */
int avo_gpulock_check(const char *dir, const char *key, char *err, size_t errlen);

/* The lock file at path opened read-only (created where missing, no link
 * followed) for flock, refused unless a regular file that the sandbox user
 * does not own (the lock directory is world-writable). what names the lock
 * in err ("GPU lock", "CPU lease"). The descriptor, or a negative errno. */
int avo_gpulock_open_path(const char *what, const char *path, char *err, size_t errlen);

#endif
