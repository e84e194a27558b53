/* `avoctl lineage`: the candidates of a job (GET /v1/jobs/{id}/lineage) as a
 * tree by parent. Pure: JSON in, text out, so the tests check the text. */
#ifndef AVOCTL_LINEAGE_H
#define AVOCTL_LINEAGE_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* Print a summary line and the tree: committed candidates, and with all
 * the attempts too (leaves under the head they were proposed against,
 * with their outcome). width: see avoctl_table_fit (0 = no limit).
 * Returns 0, -EINVAL when lineage is not the API's object, -ENOMEM or
 * -EIO. */
int avoctl_lineage_print(const json_t *lineage, int all, size_t width, FILE *out);

#endif
