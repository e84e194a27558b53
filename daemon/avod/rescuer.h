/* The rescuer: every few seconds, evaluations whose worker stopped renewing
 * its lease (killed, partitioned, the machine gone) are requeued with
 * backoff, or failed after too many attempts (avo_rescue in sql/). Workers
 * that stopped heartbeating are marked gone. */
#ifndef AVO_RESCUER_H
#define AVO_RESCUER_H

#include <uv.h>

#include "db.h"
#include "engine.h"

typedef struct avo_rescuer avo_rescuer;

int avo_rescuer_start(avo_rescuer **out, uv_loop_t *loop, avo_db *db, avo_engine *engine, unsigned interval_ms,
                      int max_attempts, double backoff_s);
void avo_rescuer_stop(avo_rescuer *r);

#endif
