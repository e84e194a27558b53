/* A gated start for CUDA-event timing (the "blocking kernel" of nvbench).
 *
 * Without it the start mark is taken while the host is still inside the
 * candidate's entry point: the GPU waits for the first launch, and that
 * host-side gap (different in every process) lands in the timed region.
 * With it, a gate kernel holds the stream while the entry point queues its
 * work; the host opens the gate when the entry returns, so the start mark
 * fires with the work already queued behind it.
 *
 * The gate fills every SM's thread slots, so a kernel the candidate put on a
 * stream of its own cannot start before the gate opens either: its head
 * start over the start mark is bounded by the gate's exit, not by the host.
 * An entry point that waits on its own work (a device synchronisation, a
 * cudaFree) would wait on the gate: the gate opens by itself after a time
 * limit and says so, and the caller times that call again without it. */
#ifndef AVO_GATE_H
#define AVO_GATE_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct avo_gate avo_gate;

/* Allocate the gate's host-mapped and device words. Returns 0 or a negative
 * int with the reason in err. */
int avo_gate_open(avo_gate **out, char *err, size_t errlen);

/* Queue the closed gate on stream and wait (at most AVO_GATE_WAIT_MAX_S)
 * until all its blocks are resident; *wait_s how long that took (host
 * clock), or -1 when they were not resident by then. A long wait means the
 * GPU was running other work when the call began: a kernel the process
 * launched before the gate (from a thread of its own) holds the SMs, and
 * the start mark, queued behind the gate, waits for it, so that work
 * escapes the events unless the wait is charged. Returns 0, or a negative
 * int when the launch failed (the stream then holds no gate). */
#define AVO_GATE_WAIT_MAX_S 0.005
int avo_gate_hold(avo_gate *g, cudaStream_t stream, unsigned limit_ms, double *wait_s);

/* Open the gate (the host's side of the flag). */
void avo_gate_release(avo_gate *g);

/* After the stream has passed the gate: 1 when it opened by its time limit
 * rather than by avo_gate_release, 0 otherwise. */
int avo_gate_timed_out(const avo_gate *g);

void avo_gate_close(avo_gate *g);

/* Launch one tiny kernel on stream and wait for it: how long that took is
 * how long the GPU kept it waiting. Run from the checker's own context right
 * after a call returned, it finds work the call left running (the GPU
 * time-slices between processes, so the probe waits for it). Returns 0 with
 * *seconds (host clock, launch to completion), or a negative int. */
int avo_gate_probe(cudaStream_t stream, double *seconds);

#ifdef __cplusplus
}
#endif

#endif
