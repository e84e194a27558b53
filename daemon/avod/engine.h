/* The evolution engine's loop inside avod: on a NOTIFY (a job submitted, an
 * evaluation done) or a periodic tick, it walks the active jobs one at a time:
 * snapshot (one query), decide (evolve.c, in C), apply (one transaction).
 * It keeps no job state in memory, so a restarted daemon carries on from the
 * database exactly where the last one stopped. */
#ifndef AVO_ENGINE_H
#define AVO_ENGINE_H

#include <jansson.h>
#include <uv.h>

#include "db.h"

typedef struct avo_engine avo_engine;

int avo_engine_start(avo_engine **out, uv_loop_t *loop, avo_db *db, const char *kernels_dir, unsigned interval_ms);
/* Ask for a pass soon; passes never overlap, and requests made during one
 * are folded into a single follow-up pass. */
void avo_engine_kick(avo_engine *e);
/* Agent jobs: the engine starts and stops their steps in its passes. */
struct avo_agent;
void avo_engine_set_agent(avo_engine *e, struct avo_agent *a);
/* No pass starts after this; the engine frees itself from the loop once its
 * timers are closed and a query of a pass in flight has called back, with
 * an answer or with the connection's close (so the connection may close in
 * the same turn, as avod does, or stay up). e may be NULL. */
void avo_engine_stop(avo_engine *e);

#endif
