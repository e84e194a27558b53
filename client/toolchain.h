/* Toolchain records and re-validations as avoctl prints them (issue 21,
 * points 2 and 3; sql/018_toolchain.sql): a one-line label for a
 * result's toolchain, `avoctl report`'s toolchain groups and `avoctl
 * revalidate`'s table. Pure: JSON in, text out. */
#ifndef AVOCTL_TOOLCHAIN_H
#define AVOCTL_TOOLCHAIN_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* "cc 12.2.0, nvcc 13.0.88, driver 580.95.05, cuda 13.0/13.0, NVIDIA H200,
 * avo 0.1.0" from a toolchain's "versions" object (CPU model only when
 * there is no GPU); "unrecorded" for the string the API gives results
 * from before the record existed. */
void avoctl_toolchain_label(const json_t *versions, char *buf, size_t len);

/* The report's "toolchains" array as a table (TOOLCHAIN EVALUATIONS OK
 * BEST WORKERS), or in markdown; nothing when the array is absent. */
int avoctl_toolchain_groups_print(const json_t *groups, size_t width, FILE *out);
void avoctl_toolchain_groups_markdown(const json_t *groups, FILE *out);

/* A re-validation (GET /v1/revalidations/{id}): a title line, a table
 * CANDIDATE RECORDED NEW RATIO TOOLCHAIN (the new result's, "(same)" when
 * unchanged, and the recorded one under it when it differs), then the
 * summary line (geometric mean, min, max of the ratios). Returns 0 or a
 * negative int. */
int avoctl_toolchain_revalidation_print(const json_t *rv, size_t width, FILE *out);

/* Whether every entry is over (1) or some are queued or running (0). */
int avoctl_toolchain_revalidation_over(const json_t *rv);

#endif
