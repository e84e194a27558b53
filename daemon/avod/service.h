/* avod as a systemd service (Type=notify): READY=1 once the API listens,
 * STATUS= with the running jobs, the queue depth and the live workers
 * (refreshed every few seconds from the database), WATCHDOG=1 from the
 * event loop at half of WatchdogSec (so a stuck loop is restarted),
 * RELOADING=1 / READY=1 around a SIGHUP reload, STOPPING=1 at shutdown;
 * "degraded: <why>" first in STATUS while the embedded PostgreSQL is down.
 * Outside systemd (no NOTIFY_SOCKET) every notification is a no-op. */
#ifndef AVO_SERVICE_H
#define AVO_SERVICE_H

#include <uv.h>

#include "db.h"

typedef struct avo_service avo_service;

/* Starts the watchdog timer when the service manager asked for one. */
int avo_service_start(avo_service **out, uv_loop_t *loop, avo_db *db);
/* READY=1 with a first STATUS=; then the status timer runs. */
void avo_service_ready(avo_service *s);
/* A reload begins (RELOADING=1 with the monotonic time systemd expects). */
void avo_service_reloading(avo_service *s);
/* A reload ended: READY=1, and STATUS= says what happened (note). */
void avo_service_reloaded(avo_service *s, const char *note);
/* avod is degraded (why: one line) or no longer (why NULL): STATUS= says
 * so at once and keeps saying it until cleared. */
void avo_service_degraded(avo_service *s, const char *why);
/* STOPPING=1; timers closed; freed once its last query has answered. */
void avo_service_stop(avo_service *s);

#endif
