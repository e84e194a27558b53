/* Supervision of the embedded PostgreSQL from the event loop: restart when it dies (pgwatch.h). */
#include "pgwatch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_log.h"

#define TICK_MS 1000
#define GRACE_MS 10000 /* after a clean shutdown that was not avod's */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000

/* W_RUNNING: the lock file names a live server. W_WAITING: it does not;
 * the next start is due at `due`. W_STARTING: a pg_ctl start in flight. */
enum watch_state { W_RUNNING, W_WAITING, W_STARTING };

struct avo_pgwatch {
    uv_loop_t *loop;
    avo_pgembed *pg;
    uv_timer_t timer;
    enum watch_state state;
    uint64_t down_since; /* uv_now when it was found gone */
    uint64_t due;
    unsigned backoff_ms;
    int attempts;  /* starts since it went down */
    long restarts; /* since avod started */
    char problem[512];
    avo_pgwatch_cb cb;
    void *arg;
};

static double down_s(const avo_pgwatch *w)
{
    return (uv_now(w->loop) - w->down_since) / 1000.0;
}

static void set_problem(avo_pgwatch *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_problem(avo_pgwatch *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->problem, sizeof w->problem, fmt, ap);
    va_end(ap);
    if (w->cb)
        w->cb(w->arg, w->problem);
}

static void now_running(avo_pgwatch *w)
{
    w->state = W_RUNNING;
    w->problem[0] = 0;
    if (w->cb)
        w->cb(w->arg, NULL);
}

static void retry_later(avo_pgwatch *w, const char *why)
{
    avo_warn("pg", "the embedded PostgreSQL did not start (attempt %d): %s; next attempt in %.0f s", w->attempts, why,
             w->backoff_ms / 1000.0);
    set_problem(w, "embedded PostgreSQL down for %.0f s: restart attempt %d failed (%s); next in %.0f s", down_s(w),
                w->attempts, why, w->backoff_ms / 1000.0);
    w->due = uv_now(w->loop) + w->backoff_ms;
    w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->backoff_ms * 2;
    w->state = W_WAITING;
}

static void found_down(avo_pgwatch *w, long pid)
{
    const uint64_t now = uv_now(w->loop);
    w->down_since = now;
    w->attempts = 0;
    w->backoff_ms = BACKOFF_MIN_MS;
    w->state = W_WAITING;
    if (pid) {
        w->due = now;
        avo_warn("pg",
                 "the embedded PostgreSQL died: postmaster pid %ld is gone and its lock file is left "
                 "behind (killed or crashed; see %s); restarting it",
                 pid, w->pg->logfile);
        set_problem(w, "embedded PostgreSQL died (postmaster pid %ld gone); restarting it", pid);
    } else {
        /* Somebody shut it down cleanly: leave them time to start it again
         * (a hand restart, maintenance) before avod does. */
        w->due = now + GRACE_MS;
        avo_warn("pg",
                 "the embedded PostgreSQL was shut down, not by avod; starting it again in %d s unless "
                 "it is started by hand",
                 GRACE_MS / 1000);
        set_problem(w, "embedded PostgreSQL shut down outside avod; restarting it in %d s", GRACE_MS / 1000);
    }
}

static void try_start(avo_pgwatch *w)
{
    long pid;
    if (avo_pgembed_running(w->pg, &pid)) {
        avo_info("pg", "the embedded PostgreSQL runs again after %.1f s (started outside avod)", down_s(w));
        now_running(w);
        return;
    }
    if (uv_now(w->loop) < w->due)
        return;
    char err[300];
    w->attempts++;
    if (avo_pgembed_restart_begin(w->pg, err, sizeof err) < 0) {
        retry_later(w, err);
        return;
    }
    avo_info("pg", "starting the embedded PostgreSQL again (attempt %d, %.1f s after it went down)", w->attempts,
             down_s(w));
    w->state = W_STARTING;
}

static void check_start(avo_pgwatch *w)
{
    int rc = avo_pgembed_restart_poll(w->pg);
    if (rc == -EINPROGRESS)
        return;
    long pid;
    if (rc == 0 || avo_pgembed_running(w->pg, &pid)) {
        /* Running even when pg_ctl failed: a hand start won the race, or a
         * long crash recovery outlasted pg_ctl's wait. Connections say
         * when it is ready. */
        w->restarts++;
        avo_warn("pg",
                 "the embedded PostgreSQL was restarted by avod after %.1f s down (attempt %d; %ld "
                 "restarts since avod started)",
                 down_s(w), w->attempts, w->restarts);
        now_running(w);
        return;
    }
    char why[1300];
    if (rc <= -1000)
        snprintf(why, sizeof why, "pg_ctl start exited with status %d; see %.900s", -rc - 1000, w->pg->logfile);
    else
        snprintf(why, sizeof why, "pg_ctl start: %s", strerror(-rc));
    retry_later(w, why);
}

static void on_tick(uv_timer_t *t)
{
    avo_pgwatch *w = t->data;
    long pid;
    switch (w->state) {
    case W_RUNNING:
        if (avo_pgembed_running(w->pg, &pid))
            return;
        found_down(w, pid);
        try_start(w);
        return;
    case W_WAITING:
        try_start(w);
        return;
    case W_STARTING:
        check_start(w);
        return;
    }
}

int avo_pgwatch_start(avo_pgwatch **out, uv_loop_t *loop, avo_pgembed *pg, avo_pgwatch_cb cb, void *arg)
{
    avo_pgwatch *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->loop = loop;
    w->pg = pg;
    w->cb = cb;
    w->arg = arg;
    w->state = W_RUNNING;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, on_tick, TICK_MS, TICK_MS);
    *out = w;
    return 0;
}

const char *avo_pgwatch_problem(const avo_pgwatch *w)
{
    return w && w->problem[0] ? w->problem : NULL;
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

void avo_pgwatch_stop(avo_pgwatch *w)
{
    if (!w)
        return;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, on_closed);
}
