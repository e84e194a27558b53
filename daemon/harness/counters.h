/* Hardware counters (cycles, instructions, cache misses) and the runner's
 * CPU time (task-clock), opened by the checker with perf_event_open on the
 * runner's pid, so an untrusted runner never reports its own figures.
 * User space only (exclude_kernel), inherited by threads the runner starts
 * after opening. Where the machine has no PMU (common in VMs) or
 * perf_event_paranoid forbids it, the hardware part is unavailable with the
 * reason; task-clock is a software event and usually still works. */
#ifndef AVO_HARNESS_COUNTERS_H
#define AVO_HARNESS_COUNTERS_H

#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

enum { AVO_CTR_CYCLES, AVO_CTR_INSTRUCTIONS, AVO_CTR_CACHE_MISSES, AVO_CTR_TASK_CLOCK, AVO_CTR_N };

typedef struct {
    int fd[AVO_CTR_N]; /* -1 when that event could not be opened */
    int hw;            /* every hardware event opened */
    int paranoid;      /* /proc/sys/kernel/perf_event_paranoid, or -99 */
    char reason[256];  /* why hw is 0 */
} avo_counters;

typedef struct {
    int valid[AVO_CTR_N];
    double value[AVO_CTR_N]; /* scaled for multiplexing; task-clock in ns */
} avo_counter_values;

/* Never fails: what could not be opened is recorded. */
void avo_counters_open(avo_counters *c, pid_t pid);
void avo_counters_start(avo_counters *c);
void avo_counters_stop(avo_counters *c, avo_counter_values *v);
void avo_counters_close(avo_counters *c);

/* {"available": bool, "reason": str|null, "perf_event_paranoid": n,
 *  "events": [...], "task_clock": bool} */
json_t *avo_counters_info_json(const avo_counters *c);
/* Per-run means over runs timed runs: {"cycles": .., "instructions": ..,
 * "cache_misses": .., "ipc": .., "task_clock_s": ..}, null where unavailable. */
json_t *avo_counters_values_json(const avo_counters *c, const avo_counter_values *v, int runs);

#endif
