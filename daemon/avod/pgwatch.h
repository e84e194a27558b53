/* Supervision of the embedded PostgreSQL (pgembed.c) from the event loop.
 * A timer looks at the server's lock file every second. When the server is
 * gone, avod starts it again (the server does its own crash recovery) and
 * retries with backoff until it runs; meanwhile avod is degraded, and the
 * reason is logged and offered to /v1/health and the systemd STATUS. A
 * server that died (killed, crashed: its lock file left behind) is started
 * at once; one that was shut down cleanly, by hand, after a grace period,
 * so that a hand restart is not raced. Nothing here blocks the loop: pg_ctl
 * runs in a child process, reaped without waiting on the same timer. */
#ifndef AVO_PGWATCH_H
#define AVO_PGWATCH_H

#include <uv.h>

#include "pgembed.h"

typedef struct avo_pgwatch avo_pgwatch;

/* problem: why avod is degraded, or NULL when the server runs again. */
typedef void (*avo_pgwatch_cb)(void *arg, const char *problem);

int avo_pgwatch_start(avo_pgwatch **out, uv_loop_t *loop, avo_pgembed *pg, avo_pgwatch_cb cb, void *arg);
/* Why the server is not running, or NULL when it is (w may be NULL: an
 * external database is not avod's to supervise). */
const char *avo_pgwatch_problem(const avo_pgwatch *w);
/* Stop watching; freed in the timer's close callback. A restart in flight
 * is left to avo_pgembed_stop, which waits for it. */
void avo_pgwatch_stop(avo_pgwatch *w);

#endif
