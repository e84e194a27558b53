/* The runner: the only process that executes candidate code. avo-harness
 * (the checker) re-executes itself as `avo-harness --runner ENTRY` in a
 * child that never loads the reference, never holds the result pipe (fd 3),
 * runs as nobody when the checker is root, and dies with the checker. The
 * tensors live in a memfd mapped MAP_SHARED by both; the candidate object
 * comes as a sealed memfd copy, so the runner needs no path at all.
 *
 * Protocol (fixed-size messages, each < PIPE_BUF so atomic): the checker
 * writes a command {op, seq, sizes, tensor offsets} on the runner's fd 10,
 * the runner answers {seq, status, ret, its own time} on fd 11. The runner
 * answers pings before it loads the candidate, so the empty round trip is
 * measured before any candidate code exists.
 *
 * Between calls the runner and everything it started are frozen: through a
 * control group of their own (avo_cgroup.h) where the host has one, else
 * the runner process alone by SIGSTOP. A call thaws them, sends the command,
 * and its round trip ends only once they are frozen again, so no work of
 * the candidate's (a thread, a forked helper) runs outside a timed call.
 * A CUDA runner given the checker's device tensors (avo_runner_devmem) is
 * thawed only for the timed run: the copies, poisoning, flush and fetch
 * around it are the checker's, in its own context.
 * The runner is the first process of its own PID and mount namespaces,
 * with a /proc of its own: it sees no process of the checker's (argv,
 * environment) and nothing it starts can outlive it. */
#ifndef AVO_HARNESS_RUNNER_H
#define AVO_HARNESS_RUNNER_H

#include "avo_attr.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "avo_cgroup.h"
#include "avo_problem.h"
#include "gpu.h"

/* What avo_runner_call / avo_runner_load report about the runner. */
enum {
    AVO_RUNNER_OK = 0,
    AVO_RUNNER_DIED = 1,     /* EOF on the pipe: crashed, exited, or closed it; runner reaped */
    AVO_RUNNER_TIMEOUT = 2,  /* no answer before the deadline; runner killed and reaped */
    AVO_RUNNER_PROTOCOL = 3, /* a malformed, out-of-order or extra answer (forged by the candidate) */
    AVO_RUNNER_LOAD = 4,     /* start only: the object does not load or lacks the entry */
    AVO_RUNNER_FAULT = 5,    /* CUDA: a sticky error broke the GPU context (illegal address, trap) */
};

typedef struct {
    pid_t pid;          /* 0 when not running */
    int cmd_w, reply_r; /* the checker's ends */
    uint32_t seq;
    int stopped;              /* frozen (or SIGSTOPped) by us, until the next command */
    int uid;                  /* uid the runner runs as */
    int seccomp;              /* its Seccomp mode after the load (/proc status): 2 is a filter */
    int exit_code, signal;    /* how it ended, once reaped (-1 / 0 unknown) */
    char host_copies[160];    /* CUDA runners: "pinned", or "pageable: why" (what the runner said) */
    avo_cgroup cg;            /* its own group (freezer), when the host has one */
    int pidns;                /* started in PID and mount namespaces of its own */
    int ipcns;                /* and an IPC namespace of its own */
    int cuda;                 /* a CUDA runner (its samples are the GPU's, not the round trip) */
    const char *freezer;      /* how it is frozen between calls: "cgroup2", "cgroup1" or "SIGSTOP" */
    char isolation_note[200]; /* what it did not get, and why */
    double cpu_s;             /* CPU time of its group so far (-1 unknown), read while frozen */
    double reply_s;           /* the last round trip up to the answer (before the freeze), checker's clock */
    double wait_s;            /* the last round trip's time with the checker ready and waiting for a CPU,
                                 from its command written to the group frozen (-1 unknown) */
} avo_runner;

/* Device tensors a CUDA runner maps from the checker (avo_gpu_share): the
 * checker then lays out and fetches every call's tensors itself, and the
 * runner is thawed only for the timed run. */
typedef struct {
    int n;                                 /* 0: none (the runner copies to devices of its own) */
    int fd[AVO_PROBLEM_MAX_TENSORS];       /* exported handles (the checker's; each runner gets copies) */
    size_t bytes[AVO_PROBLEM_MAX_TENSORS]; /* their mapped sizes */
} avo_runner_devmem;

/* How many runners this process spawned without PID and IPC namespaces
 * and a control group of their own (avo-harness --serve keeps nothing
 * after an evaluation that had one: what such a runner leaves, a SysV
 * object or a process, would outlive it). */
int avo_runner_unconfined(void);

/* Start the runner with the shared region mem_fd (sealed against resizing)
 * and a sealed copy of the object cand_so, which it does not load yet: it
 * answers pings until avo_runner_load. Returns AVO_RUNNER_OK, AVO_RUNNER_LOAD
 * (the object cannot be read), or a negative int with the reason in why
 * (the checker's own failure). */
AVO_MUSTCHECK int avo_runner_spawn(avo_runner *r, const char *cand_so, const char *entry, int cuda, int mem_fd,
                                   const avo_runner_devmem *dev, double deadline, char *why, size_t wl);

/* Load the object into a spawned runner. Returns AVO_RUNNER_OK,
 * AVO_RUNNER_LOAD / DIED / TIMEOUT / PROTOCOL with the reason in why (the
 * candidate's fault), or a negative int (the checker's). */
int avo_runner_load(avo_runner *r, double deadline, char *why, size_t wl);

/* Let the runner's group run for seconds with no command, then freeze it
 * again; *cpu_s the CPU time it used meanwhile (-1 when the host cannot
 * count it). An honest runner waits for its next command and uses none:
 * more is work left running outside a call. */
int avo_runner_idle(avo_runner *r, double seconds, double *cpu_s, char *why, size_t wl);

/* One call of the entry point on the tensors at offs[] (bytes from the start
 * of the shared region) with sizes[]. A CUDA runner (started with cuda = 1)
 * mirrors the tensors on the device as `flags` (AVO_GPU_*) say and times the
 * call with CUDA events (gpu.h). *round_trip_s is the checker's own
 * CLOCK_MONOTONIC measurement from before the command to after the answer;
 * *claimed is what the runner reports (untrusted): seconds its own time of
 * the call, the rest only from CUDA runners. deadline is absolute
 * (avo_timing_now()). */
int avo_runner_call(avo_runner *r, const int64_t *sizes, int nsizes, const uint64_t *offs, const uint64_t *bytes,
                    int ntensors, unsigned flags, unsigned poison_mask, double deadline, int *ret, double *round_trip_s,
                    avo_gpu_times *claimed, char *why, size_t wl);

/* CUDA runners: the counters pass for one call (gpu.h, avo_gpu_profile);
 * the JSON report lands in the shared region at aux_off (at most aux_len
 * bytes). *status is 0, or nonzero with the reason in why (profiling not
 * permitted...). */
int avo_runner_profile(avo_runner *r, const int64_t *sizes, int nsizes, const uint64_t *offs, const uint64_t *bytes,
                       int ntensors, uint64_t aux_off, uint64_t aux_len, double deadline, int *status, char *why,
                       size_t wl);

/* An empty round trip (no candidate code runs), for calibrating the
 * protocol overhead. */
int avo_runner_ping(avo_runner *r, double deadline, double *round_trip_s, char *why, size_t wl);

/* Kill and reap the runner (idempotent). */
void avo_runner_stop(avo_runner *r);

/* Kill the runner without reaping it, so that several runners' ends (each
 * a GPU context torn down) overlap before avo_runner_stop reaps them. */
void avo_runner_kill(avo_runner *r);

/* The runner side: `avo-harness --runner ENTRY`. Never returns. */
_Noreturn void avo_runner_main(int argc, char **argv);

#endif
