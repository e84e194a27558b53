/* The CPU runner's system-call filter (libseccomp): installed once the
 * candidate is loaded, before its first call, so what its calls can reach
 * of the kernel is computing memory, threads and the protocol pipes. */
#ifndef AVO_SYSCALLS_H
#define AVO_SYSCALLS_H

#include <stddef.h>

/* Closes every descriptor but 0-2 and keep_lo..keep_hi (the protocol's
 * pipes: what the candidate's load opened goes), then loads the filter for
 * every thread of the process. 0, or a negative errno with err naming the
 * step; the caller goes on without the filter (the checker reads from the
 * kernel whether one is on and reports it). */
int avo_syscalls_confine(int keep_lo, int keep_hi, char *err, size_t errlen);

#endif
