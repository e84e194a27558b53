/* `avoctl transcript`: an agent job's steps as a readable trajectory (GET
 * /v1/jobs/{id}/transcript): per step its outcome and totals, per turn what
 * was sent (the messages the turn added) and what came back (text and tool
 * calls). Pure: JSON in, text out. */
#ifndef AVOCTL_TRANSCRIPT_H
#define AVOCTL_TRANSCRIPT_H

#include <stdio.h>
#include <jansson.h>

/* full: print every message whole; otherwise each is cut to a few lines.
 * Returns 0, -EINVAL when t is not the API's object, or -EIO. */
int avoctl_transcript_print(const json_t *t, int full, FILE *out);

#endif
