/* `avoctl teams`: the GET /v1/teams answer as a table (docs/cli.md). One row
 * a team: its quota line and limits, device time charged today and this
 * week, evaluations running, jobs running and queued, the fair-share load
 * (decayed device-seconds over the share; lower is served first) and the
 * limit that stops its work now, if any. */
#ifndef AVOCTL_TEAMS_H
#define AVOCTL_TEAMS_H

#include <jansson.h>
#include <stdio.h>

/* 0, or -ENOMEM. */
int avoctl_teams_print(const json_t *body, FILE *out);

#endif
