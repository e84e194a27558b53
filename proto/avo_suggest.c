/* "Did you mean": the nearest known name to a mistyped one (avo_suggest.h). */
#include "avo_suggest.h"

#include <string.h>

#define MAXLEN 63

int avo_suggest_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > MAXLEN || m > MAXLEN)
        return MAXLEN + 1;
    int d[MAXLEN + 1][MAXLEN + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

const char *avo_suggest(const char *word, const char *const *names, size_t n)
{
    size_t len = strlen(word);
    /* A short word is within 2 edits of nearly every short name. */
    int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    const char *best = NULL;
    int bestd = limit + 1;
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        int dist = avo_suggest_distance(word, names[i]);
        if (dist < bestd && (size_t)dist < len) {
            bestd = dist;
            best = names[i];
        }
    }
    if (best || len < 3)
        return best;
    /* An abbreviation ("--evals") is a typo too, when only one name
     * starts with it. */
    for (size_t i = 0; i < n; i++) {
        if (names[i] && strncmp(names[i], word, len) == 0) {
            if (best)
                return NULL;
            best = names[i];
        }
    }
    return best;
}
