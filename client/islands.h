/* `avoctl watch` on a terminal: one live line per island (evaluations done
 * of the budget, best score, speedup over the seed, a sparkline of the best
 * over time) redrawn as events arrive, and a summary when the job ends.
 * Pure: events in (the API's event objects), text out. */
#ifndef AVOCTL_ISLANDS_H
#define AVOCTL_ISLANDS_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

#define AVOCTL_MAX_ISLANDS 64
#define AVOCTL_SPARK 24 /* points of history kept per island */

typedef struct {
    int evaluations, failed;
    double best; /* 0 until a commit */
    double history[AVOCTL_SPARK];
    int nhistory;
} avoctl_island;

typedef struct {
    avoctl_island isl[AVOCTL_MAX_ISLANDS];
    int nislands; /* highest island seen + 1 (at least the job's count) */
    int budget;   /* evaluations of the job's budget, 0 if unknown */
    double seed;  /* the seed's score, 0 until known */
    char unit[32];
    int finished;
    char state[32], reason[256];
    double speedup;
    char speedup_text[512]; /* job_finished's, with its interval; "" until then */
    double elapsed;         /* the job's running time, < 0: unknown (no clock line) */
    double wall_budget;     /* its wall-clock budget in seconds, 0: none */
} avoctl_islands;

/* islands: the job's island count; budget: its evaluation budget (0 if
 * none). */
void avoctl_islands_init(avoctl_islands *v, int islands, int budget, const char *unit);
/* Fold one event ({"kind", "data"}) into the view. */
void avoctl_islands_event(avoctl_islands *v, const json_t *event);
/* The lines, one per island (and, once v->elapsed >= 0, one more with
 * the elapsed time and an ETA), each at most width columns (0: no limit).
 * Returns how many lines were written. */
int avoctl_islands_print(const avoctl_islands *v, size_t width, FILE *out);
/* One line: how the job ended, its best, speedup and evaluations, from
 * the events seen (the fallback when the job itself cannot be read). */
void avoctl_islands_summary(const avoctl_islands *v, FILE *out);
/* The same line from the job's own state (GET /v1/jobs/{id}): what watch
 * prints at the end, right even when it saw only part of the events
 * (--after N). "seed failed (OUTCOME)" / "no valid evaluation yet" rather
 * than a zero score. */
void avoctl_islands_job_summary(const json_t *job, FILE *out);

#endif
