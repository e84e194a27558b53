/* `avoctl report`: seed against best per configuration and what a job spent
 * (GET /v1/jobs/{id}/report), as aligned text or as a markdown document.
 * Pure: JSON in, text out. */
#ifndef AVOCTL_REPORT_H
#define AVOCTL_REPORT_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* width: see avoctl_table_fit (0 = no limit). Both return 0, -EINVAL when
 * report is not the API's object, -ENOMEM or -EIO. */
int avoctl_report_print(const json_t *report, size_t width, FILE *out);
int avoctl_report_markdown(const json_t *report, FILE *out);

#endif
