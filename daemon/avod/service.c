/* avod as a systemd notify service: READY, STATUS, WATCHDOG, RELOADING, STOPPING (service.h). */
#include "service.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "avo_log.h"

#define STATUS_MS 5000

struct avo_service {
    uv_loop_t *loop;
    avo_db *db;
    uv_timer_t watchdog, status;
    int open_handles, pending, stopping, ready;
    char note[200];     /* the last reload's outcome, shown in STATUS */
    char degraded[520]; /* why avod is degraded ("" when it is not), shown first */
};

static void maybe_free(avo_service *s)
{
    if (s->stopping && s->open_handles == 0 && s->pending == 0)
        free(s);
}

static void on_closed(uv_handle_t *h)
{
    avo_service *s = h->data;
    s->open_handles--;
    maybe_free(s);
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    /* From the loop itself: if the loop stops turning, this stops too. */
    sd_notify(0, "WATCHDOG=1");
}

/* The database cannot answer: say why when avod knows (degraded). */
static void notify_unavailable(avo_service *s)
{
    if (s->degraded[0])
        sd_notifyf(0, "STATUS=degraded: %s%s%s", s->degraded, s->note[0] ? "; " : "", s->note);
    else
        sd_notifyf(0, "STATUS=database unavailable%s%s", s->note[0] ? "; " : "", s->note);
}

static void on_counts(void *arg, PGresult *res, const char *err)
{
    avo_service *s = arg;
    s->pending--;
    if (s->stopping) {
        maybe_free(s);
        return;
    }
    if (err || PQntuples(res) != 1) {
        notify_unavailable(s);
        return;
    }
    sd_notifyf(0, "STATUS=%s%s%s%s jobs running, %s evaluations queued, %s workers%s%s",
               s->degraded[0] ? "degraded: " : "", s->degraded, s->degraded[0] ? "; " : "", PQgetvalue(res, 0, 0),
               PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2), s->note[0] ? "; " : "", s->note);
}

static void refresh(avo_service *s)
{
    if (s->stopping || s->pending)
        return;
    s->pending++;
    if (avo_db_query(s->db,
                     "SELECT (SELECT count(*) FROM jobs WHERE state = 'running'), "
                     "(SELECT count(*) FROM evaluations WHERE state = 'queued'), "
                     "(SELECT count(*) FROM workers WHERE state IN ('idle', 'busy', 'draining'))",
                     0, NULL, on_counts, s) < 0) {
        s->pending--;
        notify_unavailable(s);
    }
}

static void on_status(uv_timer_t *t)
{
    refresh(t->data);
}

int avo_service_start(avo_service **out, uv_loop_t *loop, avo_db *db)
{
    avo_service *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->db = db;
    uv_timer_init(loop, &s->watchdog);
    uv_timer_init(loop, &s->status);
    s->watchdog.data = s->status.data = s;
    s->open_handles = 2;
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        uint64_t ms = usec / 2000 ? usec / 2000 : 1;
        uv_timer_start(&s->watchdog, on_watchdog, ms, ms);
        avo_info("avod", "systemd watchdog: %.1f s, pinged every %.1f s from the loop", usec / 1e6, ms / 1e3);
    }
    *out = s;
    return 0;
}

void avo_service_ready(avo_service *s)
{
    s->ready = 1;
    sd_notify(0, "READY=1\nSTATUS=ready");
    uv_timer_start(&s->status, on_status, 0, STATUS_MS);
}

void avo_service_reloading(avo_service *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    (void)s;
    sd_notifyf(0, "RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=%llu",
               (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
}

void avo_service_reloaded(avo_service *s, const char *note)
{
    snprintf(s->note, sizeof s->note, "%s", note ? note : "");
    /* One line: a newline would start another notify field. */
    for (char *p = s->note; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    sd_notifyf(0, "READY=1\nSTATUS=%s", s->note);
    refresh(s);
}

void avo_service_degraded(avo_service *s, const char *why)
{
    if (!s || s->stopping)
        return;
    snprintf(s->degraded, sizeof s->degraded, "%s", why ? why : "");
    for (char *p = s->degraded; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (!s->ready)
        return;
    if (s->degraded[0])
        notify_unavailable(s);
    else
        refresh(s);
}

void avo_service_stop(avo_service *s)
{
    if (!s || s->stopping)
        return;
    s->stopping = 1;
    sd_notify(0, "STOPPING=1\nSTATUS=stopping");
    uv_timer_stop(&s->watchdog);
    uv_timer_stop(&s->status);
    uv_close((uv_handle_t *)&s->watchdog, on_closed);
    uv_close((uv_handle_t *)&s->status, on_closed);
}
