/* avo-harness --serve: evaluations one after another in one checker
 * process, its state kept between them (harness.h, avo_harness_keep), so
 * a job's evaluations pay the process's start, the GPU context, the
 * reference's load and validation once.
 *
 * A request is one message on the unix socket (SOCK_SEQPACKET or
 * SOCK_DGRAM pair): a JSON object
 *   {"seed": N, "job_seed": N, "deadline": S, "confidence": C,
 *    "screen": bool, "counters": bool,
 *    "objects": ["candidate", "against", "baseline"]}
 * with the objects' open descriptors attached (SCM_RIGHTS) in the order
 * "objects" names them; "candidate" is required, seed in [0, 2^63),
 * job_seed in [1, 2^63) or absent, the rest optional. The seeds never
 * appear on a command line or in a file. Each request's result is one
 * JSON line on `out`, with "served": {"evaluation": n (1, 2, ...),
 * "kept": whether it took over the state of an earlier one, and "ends"
 * (why) when the server ends after it: one of its runners lacked its own
 * PID or IPC namespace or control group}; a request
 * that cannot be read is answered {"served": ..., "error": "..."} and
 * the server goes on. An evaluation that cannot be made ends the process
 * as a one-shot avo-harness would (exit 2 or 3, the reason on stderr). */
#ifndef AVO_HARNESS_SERVE_H
#define AVO_HARNESS_SERVE_H

#include "harness.h"

/* The maximum length of a request. */
#define AVO_SERVE_REQUEST_MAX 4096

/* Serve requests on sock until its end of file; returns the exit code. */
int avo_serve_main(const char *problem_dir, const char *ref_so, const avo_harness_opts *base, int sock, int out);

#endif
