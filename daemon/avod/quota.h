/* Per-team quotas (docs/operations.md, "Teams and quotas"): the quota file
 * avod's "quotas" setting names, read and checked against avod's teams at
 * start and on reload, as the JSON array that avo_quotas_set
 * (sql/022_quotas.sql) stores for the workers' claims. One team per line:
 *
 *     TEAM key=value ...      # TEAM: a team of "teams", '*' (every team
 *                             # without a line) or '-' (jobs with no team)
 *
 * keys: jobs, evals-in-flight (whole numbers >= 0), gpu-seconds-day,
 * gpu-seconds-week (seconds >= 0, or with an s, m, h or d suffix), share
 * (a fair-share weight > 0, default 1). A key left out is no limit. */
#ifndef AVO_QUOTA_H
#define AVO_QUOTA_H

#include <jansson.h>
#include <stddef.h>

#include "ident.h"

/* path "" or NULL: no quotas (an empty array). Returns 0 with a new array
 * in *out, or a negative int with "quotas FILE line N: ..." in err. */
int avo_quota_load(const char *path, const avo_ident *id, json_t **out, char *err, size_t errlen);

/* One line's text (no comment) into an object {team, ...}; where names the
 * line in errors. Exposed for the unit test. */
int avo_quota_parse_line(const char *line, const avo_ident *id, const char *where, json_t **out, char *err,
                         size_t errlen);

#endif
