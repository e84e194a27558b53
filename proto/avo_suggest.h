/* "Did you mean": the nearest of a list of known names to a mistyped one,
 * by Damerau-Levenshtein distance (optimal string alignment: insertions,
 * deletions, substitutions and swaps of neighbours each cost 1). Shared by
 * avoctl (commands, flags) and avod (problem names). */
#ifndef AVO_SUGGEST_H
#define AVO_SUGGEST_H

#include <stddef.h>

/* The distance between a and b; names longer than 63 bytes count as far
 * (64) rather than costing an allocation. */
int avo_suggest_distance(const char *a, const char *b);

/* The known name nearest to word when it is close enough to be a typo
 * (distance at most 1 for words of up to 4 characters, 2 up to 8, else 3,
 * and less than the word's length), else the one name that word (3 or
 * more characters) abbreviates, else NULL. Ties: the first in names. */
const char *avo_suggest(const char *word, const char *const *names, size_t n);

#endif
