/* The rescuer timer: requeues evaluations with expired leases, marks silent workers gone (rescuer.h). */
#include "rescuer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "avo_log.h"

struct avo_rescuer {
    avo_db *db;
    avo_engine *engine;
    uv_timer_t timer;
    int max_attempts;
    double backoff_s;
    int busy;
};

static void on_rescued(void *arg, PGresult *res, const char *err)
{
    avo_rescuer *r = arg;
    r->busy = 0;
    if (err) {
        avo_debug("rescuer", "rescue query failed: %s", err);
        return;
    }
    long n = PQntuples(res) == 1 ? strtol(PQgetvalue(res, 0, 0), NULL, 10) : 0;
    if (n > 0) {
        avo_warn("rescuer", "%ld evaluation(s) with an expired lease requeued or failed", n);
        avo_engine_kick(r->engine);
    }
}

static void on_timer(uv_timer_t *t)
{
    avo_rescuer *r = t->data;
    if (r->busy || !avo_db_is_up(r->db))
        return;
    char max[16], backoff[32];
    snprintf(max, sizeof max, "%d", r->max_attempts);
    snprintf(backoff, sizeof backoff, "%g", r->backoff_s);
    const char *p[] = {max, backoff};
    if (avo_db_query(r->db, "SELECT avo_rescue($1, $2)", 2, p, on_rescued, r) == 0)
        r->busy = 1;
}

int avo_rescuer_start(avo_rescuer **out, uv_loop_t *loop, avo_db *db, avo_engine *engine, unsigned interval_ms,
                      int max_attempts, double backoff_s)
{
    avo_rescuer *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->db = db;
    r->engine = engine;
    r->max_attempts = max_attempts;
    r->backoff_s = backoff_s;
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_timer, interval_ms, interval_ms);
    *out = r;
    return 0;
}

static void closed(uv_handle_t *h)
{
    free(h->data);
}

void avo_rescuer_stop(avo_rescuer *r)
{
    if (!r)
        return;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, closed);
}
