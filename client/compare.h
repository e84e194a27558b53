/* `avoctl compare A B`: what a compare task (POST /v1/compare,
 * sql/015_compare.sql) measured, read the one way avoctl compare and the
 * campaign's regression check both need. Pure: JSON in, numbers and text
 * out. */
#ifndef AVOCTL_COMPARE_H
#define AVOCTL_COMPARE_H

#include <stddef.h>
#include <jansson.h>

/* A paired measurement of candidate over against: ratio > 1 when the
 * candidate is faster; [lo, hi] the two-sided interval at confidence. */
typedef struct {
    double ratio, lo, hi, confidence;
} avoctl_paired_ratio;

enum {
    AVOCTL_COMPARE_MEASURED = 0,
    AVOCTL_COMPARE_PENDING = 1, /* queued or running */
    AVOCTL_COMPARE_FAILED = -1, /* over without a paired ratio: why says what happened */
};

/* Read a compare object (GET /v1/compare/{id}). MEASURED fills *out;
 * FAILED writes the reason (the evaluation's outcome and detail, the
 * pairing's error, a cancellation) into why. */
int avoctl_compare_read(const json_t *cmp, avoctl_paired_ratio *out, char *why, size_t whylen);

/* One line for a person: "candidate 12 vs 7: x1.023, 95% [1.011, 1.035]",
 * "candidate 12 vs 7: queued (compare 40)" or "... : no paired measurement:
 * WHY". */
void avoctl_compare_line(const json_t *cmp, char *buf, size_t len);

#endif
