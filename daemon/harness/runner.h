/* The runner: the only process that executes candidate code. avo-harness
 * (the checker) re-executes itself as `avo-harness --runner ENTRY` in a
 * child that never loads the reference, never holds the result pipe (fd 3),
 * runs as nobody when the checker is root, and dies with the checker. The
 * tensors live in a memfd mapped MAP_SHARED by both; the candidate object
 * comes as a sealed memfd copy, so the runner needs no path at all.
 *
 * Protocol (fixed-size messages, each < PIPE_BUF so atomic): the checker
 * writes a command {op, seq, sizes, tensor offsets} on the runner's fd 10,
 * the runner answers {seq, status, ret, its own time} on fd 11. The checker
 * times the round trip itself and stops the runner (SIGSTOP) as soon as the
 * answer arrives, so nothing of the candidate runs while outputs are read. */
#ifndef AVO_HARNESS_RUNNER_H
#define AVO_HARNESS_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "avo_problem.h"
#include "gpu.h"

/* What avo_runner_call / avo_runner_start report about the runner. */
enum {
    AVO_RUNNER_OK = 0,
    AVO_RUNNER_DIED = 1,      /* EOF on the pipe: crashed, exited, or closed it; runner reaped */
    AVO_RUNNER_TIMEOUT = 2,   /* no answer before the deadline; runner killed and reaped */
    AVO_RUNNER_PROTOCOL = 3,  /* a malformed, out-of-order or extra answer (forged by the candidate) */
    AVO_RUNNER_LOAD = 4,      /* start only: the object does not load or lacks the entry */
    AVO_RUNNER_FAULT = 5,     /* CUDA: a sticky error broke the GPU context (illegal address, trap) */
};

typedef struct {
    pid_t pid;               /* 0 when not running */
    int cmd_w, reply_r;      /* the checker's ends */
    uint32_t seq;
    int stopped;             /* SIGSTOPped by us, waiting for SIGCONT */
    int uid;                 /* uid the runner runs as */
    int exit_code, signal;   /* how it ended, once reaped (-1 / 0 unknown) */
    char host_copies[160];   /* CUDA runners: "pinned", or "pageable: why" (what the runner said) */
} avo_runner;

/* Fork and exec the runner with the shared region mem_fd (mem_bytes long,
 * sealed against resizing) and the candidate object cand_so; before it
 * loads the candidate, before_load(arg, pid) runs (the checker opens its
 * counters there, so threads the candidate starts are counted too). Returns
 * AVO_RUNNER_OK, AVO_RUNNER_LOAD / DIED / TIMEOUT / PROTOCOL with the reason
 * in why (the candidate's fault), or a negative int with the reason in why
 * (the checker's own failure). */
int avo_runner_start(avo_runner *r, const char *cand_so, const char *entry, int cuda, int mem_fd, size_t mem_bytes,
                     double deadline, void (*before_load)(void *arg, pid_t pid), void *arg, char *why,
                     size_t wl);

/* One call of the entry point on the tensors at offs[] (bytes from the start
 * of the shared region) with sizes[]. A CUDA runner (started with cuda = 1)
 * mirrors the tensors on the device as `flags` (AVO_GPU_*) say and times the
 * call with CUDA events (gpu.h). *round_trip_s is the checker's own
 * CLOCK_MONOTONIC measurement from before the command to after the answer;
 * *claimed is what the runner reports (untrusted): seconds its own time of
 * the call, the rest only from CUDA runners. deadline is absolute
 * (avo_now()). */
int avo_runner_call(avo_runner *r, const int64_t *sizes, int nsizes, const uint64_t *offs, const uint64_t *bytes,
                    int ntensors, unsigned flags, unsigned poison_mask, double deadline, int *ret,
                    double *round_trip_s, avo_gpu_times *claimed, char *why, size_t wl);

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

/* Let a stopped runner go on (before the next command; a call does it too). */
void avo_runner_resume(avo_runner *r);

/* Kill and reap the runner (idempotent). */
void avo_runner_stop(avo_runner *r);

/* The runner side: `avo-harness --runner ENTRY`. Never returns. */
_Noreturn void avo_runner_main(int argc, char **argv);

#endif
