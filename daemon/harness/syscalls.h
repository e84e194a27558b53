/* The runner's system-call filter (libseccomp): installed once the
 * candidate is loaded, before its first call, so what its calls can reach
 * of the kernel is computing memory, threads and the protocol pipes (on a
 * GPU runner also the driver, and files it may read but not create). */
#ifndef AVO_SYSCALLS_H
#define AVO_SYSCALLS_H

#include <stddef.h>
#include <stdint.h>

/* Descriptors 0..AVO_FDSET_MAX-1 that are open (a GPU runner's view
 * before the candidate loads). */
#define AVO_FDSET_MAX 1024
typedef struct {
    uint64_t open[AVO_FDSET_MAX / 64];
} avo_fdset;

void avo_syscalls_fdset_snapshot(avo_fdset *s);

/* CPU runner (gpu_before NULL): closes every descriptor but 0-2 and
 * keep_lo..keep_hi (the protocol's pipes: what the candidate's load opened
 * goes) and refuses every open. GPU runner: closes what was opened since
 * gpu_before except device nodes (the CUDA runtime's), and refuses only
 * opens that create. Then loads the filter for every thread of the
 * process. 0, or a negative errno with err naming the step; the caller
 * goes on without the filter (the checker reads from the kernel whether
 * one is on and reports it). */
int avo_syscalls_confine(int keep_lo, int keep_hi, const avo_fdset *gpu_before, char *err, size_t errlen);

#endif
