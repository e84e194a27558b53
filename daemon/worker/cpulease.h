/* One CPU per timing harness on a host: every harness pins itself to one
 * CPU (checker and runner together; daemon/harness/main.c), by default the
 * highest its worker may use. Several workers of one host (one per GPU, or
 * several CPU workers) would then all time on the same CPU, each one's
 * calls and busy probes waiting for the others'. A worker instead leases a
 * CPU of its own for its lifetime: a flock(2) on a file named by the CPU in
 * the directory every worker of the host shares (the GPU locks' one,
 * gpulock.h), highest free CPU first. The kernel drops a lease when its
 * holder dies. The worker's own threads (its compiles, which run while a
 * harness times) then keep off the CPUs leased at that moment. */
#ifndef AVO_CPULEASE_H
#define AVO_CPULEASE_H

#include <sched.h>
#include <stddef.h>

/* Leases the highest CPU of allowed that no other process of the host holds,
 * in dir. *cpu: the CPU. Returns the lease's descriptor (close-on-exec) for
 * avo_cpulease_release, -EBUSY when every CPU of allowed is leased, or
 * another negative errno; the reason in err either way. */
int avo_cpulease_take(const char *dir, const cpu_set_t *allowed, int *cpu, char *err, size_t errlen);
void avo_cpulease_release(int fd);

/* The CPUs of allowed that nobody holds a lease on in dir (its own lease
 * counts as held). When that leaves none, allowed less own (own < 0: none),
 * and when that leaves none either, allowed. Returns how many CPUs *out has. */
int avo_cpulease_free_set(const char *dir, const cpu_set_t *allowed, int own, cpu_set_t *out);

/* The worker's own lease (own: its CPU, -1 when it has none), its CPUs
 * before any were kept off (base) and the lease directory, remembered at
 * start; then avo_cpulease_keep_off moves the calling thread, and what it
 * starts from then on (a compile), onto avo_cpulease_free_set's CPUs. */
void avo_cpulease_keep_off_init(const char *dir, const cpu_set_t *base, int own);
void avo_cpulease_keep_off(void);

#endif
