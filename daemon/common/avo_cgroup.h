/* One control group per evaluation (and one for its runner inside it), on
 * whatever the host offers: the unified hierarchy (cgroup v2: freeze, kill,
 * cpu.stat, and pids.max where the pids controller is enabled for us) and
 * the v1 freezer, pids and cpuacct hierarchies, mixed where a host mounts
 * both (systemd's "hybrid" layout, as on the build machines). A group is
 * created as a child of the calling process's own group in each hierarchy,
 * so it works as root anywhere and without root inside a delegated subtree
 * (systemd Delegate=yes). What a host lacks is reported, never faked: the
 * caller decides what it can promise (docs/evaluation.md, "Isolation").
 *
 * AVO_CGROUP=none turns groups off, AVO_CGROUP=v1 ignores the unified
 * hierarchy (to test the v1 path on a hybrid host). */
#ifndef AVO_CGROUP_H
#define AVO_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

/* The hierarchies a group may live in. */
enum { AVO_CG_UNIFIED = 0, AVO_CG_FREEZER, AVO_CG_PIDS, AVO_CG_CPUACCT, AVO_CG_NHIER };

typedef struct {
    int dir[AVO_CG_NHIER];   /* the group's directory, -1 where it has none */
    int procs[AVO_CG_NHIER]; /* its cgroup.procs, open for writing: a child joins with avo_cgroup_join */
    char path[AVO_CG_NHIER][1024];
    int freezer; /* AVO_CG_UNIFIED or AVO_CG_FREEZER; -1 none */
    int pids;    /* hierarchy holding pids.max, or -1 */
    int cpu;     /* hierarchy holding the CPU usage, or -1 */
    int frozen;
} avo_cgroup;

/* Create `name` under the calling process's own group in every hierarchy
 * it may write, with pids.max = pids_max (0: no limit) where a pids
 * controller is available. Returns 0 when at least a freezer exists (the
 * group is usable), else a negative int with the reason in why and *cg
 * holding no group. */
int avo_cgroup_create(avo_cgroup *cg, const char *name, long pids_max, char *why, size_t wl)
    __attribute__((warn_unused_result));

/* Create `name` inside parent (same hierarchies, for freezing a part of
 * it: the runner inside its evaluation). */
int avo_cgroup_create_child(const avo_cgroup *parent, const char *name, avo_cgroup *cg, char *why, size_t wl)
    __attribute__((warn_unused_result));

/* The calling process joins the group (writes "0" to each cgroup.procs
 * opened at creation): async-signal-safe, for a child between fork and
 * exec. Returns 0 or -errno. */
int avo_cgroup_join(const avo_cgroup *cg);

/* Freeze (on = 1) or thaw (on = 0) every process of the group and its
 * children. Freezing waits until the kernel says all are frozen, at most
 * timeout_s; thawing returns at once. Returns 0, -ETIMEDOUT, or -errno. */
int avo_cgroup_freeze(avo_cgroup *cg, int on, double timeout_s);

/* SIGKILL every process in the group (and below). */
void avo_cgroup_kill(avo_cgroup *cg);

/* CPU time consumed by the group and below, in seconds (exact for frozen
 * or exited processes), or -1 when the host keeps no such count. */
double avo_cgroup_cpu_s(const avo_cgroup *cg);

/* Processes in the group now (0 when empty, -1 unknown). */
int avo_cgroup_nprocs(const avo_cgroup *cg);

/* Kill what is left, wait briefly for it to go, remove the directories and
 * close the descriptors. Idempotent; a group never created is a no-op. */
void avo_cgroup_destroy(avo_cgroup *cg);

/* "cgroup2", "cgroup1" or "none": how avo_cgroup_freeze works for cg. */
const char *avo_cgroup_freezer_name(const avo_cgroup *cg);

/* Remove the groups a killed process left under the calling process's own
 * group in every hierarchy: those named "<prefix>-PID-N" whose PID is no
 * live process and that are over a minute old, with the groups inside
 * them, where they hold no process (rmdir refuses a group that does). A worker or harness killed with
 * SIGKILL cannot remove its evaluation's group; the next one started in
 * the same group does. Returns how many it removed. */
int avo_cgroup_sweep(const char *prefix);

/* An empty group (nothing to destroy). */
void avo_cgroup_clear(avo_cgroup *cg);

#endif
