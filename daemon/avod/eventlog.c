/* Job events copied to avod's log with journal fields, driven by the avo_events NOTIFY (eventlog.h). */
#include "eventlog.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "avo_log.h"

#define BATCH 500

struct avo_eventlog {
    avo_db *db;
    long long last; /* highest event id logged; -1 until the start point is known */
    int busy, again, stopping;
};

static void run(avo_eventlog *l);

static void on_rows(void *arg, PGresult *res, const char *err)
{
    avo_eventlog *l = arg;
    l->busy = 0;
    if (l->stopping) {
        free(l);
        return;
    }
    if (err) {
        avo_debug("events", "reading events for the log: %s", err);
        return; /* the next NOTIFY tries again */
    }
    int n = PQntuples(res);
    if (l->last < 0) {
        l->last = n == 1 ? atoll(PQgetvalue(res, 0, 0)) : 0;
    } else {
        for (int i = 0; i < n; i++) {
            long long id = atoll(PQgetvalue(res, i, 0));
            json_t *data = json_loads(PQgetvalue(res, i, 3), 0, NULL);
            json_t *cand = json_object_get(data, "candidate");
            const avo_log_ctx ctx = {atoll(PQgetvalue(res, i, 1)), json_is_integer(cand) ? json_integer_value(cand) : 0,
                                     0, 0};
            const char *text = PQgetvalue(res, i, 3);
            avo_log_fields(AVO_LOG_INFO, "job", &ctx, "job %lld: %s %.300s", ctx.job, PQgetvalue(res, i, 2), text);
            json_decref(data);
            if (id > l->last)
                l->last = id;
        }
        if (n == BATCH)
            l->again = 1;
    }
    if (l->again) {
        l->again = 0;
        run(l);
    }
}

static void run(avo_eventlog *l)
{
    if (l->busy || l->stopping)
        return;
    char last[32], lim[16];
    snprintf(last, sizeof last, "%lld", l->last);
    snprintf(lim, sizeof lim, "%d", BATCH);
    const char *p[] = {last, lim};
    l->busy = 1;
    int rc = l->last < 0 ? avo_db_query(l->db, "SELECT COALESCE(max(id), 0) FROM events", 0, NULL, on_rows, l)
                         : avo_db_query(l->db,
                                        "SELECT id, COALESCE(job_id, 0), kind, data::text FROM events "
                                        "WHERE id > $1 ORDER BY id LIMIT $2::int",
                                        2, p, on_rows, l);
    if (rc < 0)
        l->busy = 0;
}

int avo_eventlog_start(avo_eventlog **out, avo_db *db)
{
    avo_eventlog *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->db = db;
    l->last = -1;
    *out = l;
    run(l);
    return 0;
}

void avo_eventlog_kick(avo_eventlog *l)
{
    if (!l)
        return;
    if (l->busy)
        l->again = 1;
    else
        run(l);
}

void avo_eventlog_stop(avo_eventlog *l)
{
    if (!l)
        return;
    l->stopping = 1;
    if (!l->busy)
        free(l);
}
