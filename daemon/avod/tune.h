/* The `tune` operator: proposes knob configurations of a problem. Small
 * spaces (every allowed configuration fits in the remaining budget) are
 * enumerated; larger ones are searched evolutionarily (tournament selection,
 * uniform crossover, neighbour-biased mutation, random restarts). A
 * configuration already tried is never proposed again. Pure: no I/O. */
#ifndef AVO_TUNE_H
#define AVO_TUNE_H

#include <stdint.h>

#include "avo_problem.h"

typedef struct {
    int64_t v[AVO_PROBLEM_MAX_KNOBS]; /* knob values, in spec order */
    double score;                     /* aggregate; <= 0 when failed */
    int evaluated;                    /* 0 while in flight */
    int foreign;                      /* tried[]: another island's; never re-proposed, never a parent */
    int from[2];                      /* out[]: indices into tried[] of its parents, -1 = none (random) */
} avo_tune_point;

/* How the search behaves for an island that has gone `level` stagnation
 * periods without a commit: 0 normal; 1 mutates more and restarts more
 * often; 2 and above mostly restarts from random points. */
#define AVO_TUNE_MAX_LEVEL 2

uint64_t avo_tune_rand(uint64_t *state);

/* Fill out[0..n) with new allowed configurations, none of them in tried[].
 * Returns how many were proposed (fewer than n when the space runs out). */
int avo_tune_propose(const avo_problem *p, uint64_t *rng, const avo_tune_point *tried, int ntried, int budget_left,
                     int level, avo_tune_point *out, int n);

/* Number of configurations in the space (product of value counts), capped. */
uint64_t avo_tune_space_size(const avo_problem *p);

#endif
