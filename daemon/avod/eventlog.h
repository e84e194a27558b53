/* Every job event (the events table: submitted, evaluated, committed,
 * migrated, finished...) also goes to avod's log, with JOB_ID and, where the
 * event names one, CANDIDATE_ID as journal fields: `journalctl JOB_ID=42`
 * tells one job's story. Driven by the avo_events NOTIFY; events from
 * before avod started are not replayed. */
#ifndef AVO_EVENTLOG_H
#define AVO_EVENTLOG_H

#include "db.h"

typedef struct avo_eventlog avo_eventlog;

int avo_eventlog_start(avo_eventlog **out, avo_db *db);
/* New events may exist (a NOTIFY on avo_events). */
void avo_eventlog_kick(avo_eventlog *l);
/* Freed once its query in flight (if any) has answered. */
void avo_eventlog_stop(avo_eventlog *l);

#endif
