/* The jobs a worker's latest claims were for, most recent first: with
 * --serve it holds a kept checker for each (served.h), and its claims
 * prefer their queued work (sql/028_claim_affinity.sql, avo_claim's
 * p_resident), so that a campaign of more jobs than checkers does not
 * have every worker take turns on every job, each turn a checker's start.
 * At most `cap` (the worker's --serve-slots) are listed; one idle longer
 * than a kept checker lives (its checker closed) is dropped. */
#ifndef AVO_WORKER_RECENTJOBS_H
#define AVO_WORKER_RECENTJOBS_H

#include <stddef.h>

#include "served.h"

typedef struct {
    struct {
        long long job;
        double at; /* when it was last claimed (the caller's clock, s) */
    } e[AVO_SERVED_SLOTS_MAX];
    int n;
} avo_recentjobs;

/* job claimed at now: to the front, the least recent dropped beyond cap
 * (0: nothing is kept; capped at AVO_SERVED_SLOTS_MAX). */
void avo_recentjobs_note(avo_recentjobs *r, long long job, int cap, double now);

/* Those claimed within idle_s of now, as a PostgreSQL bigint[] literal
 * ("{}" when none) in out, most recent first; the older ones dropped. */
void avo_recentjobs_array(avo_recentjobs *r, double now, double idle_s, char *out, size_t len);

#endif
