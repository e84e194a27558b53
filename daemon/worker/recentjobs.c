/* The jobs of a worker's latest claims (recentjobs.h). */
#include "recentjobs.h"

#include <stdio.h>
#include <string.h>

void avo_recentjobs_note(avo_recentjobs *r, long long job, int cap, double now)
{
    if (cap > AVO_SERVED_SLOTS_MAX)
        cap = AVO_SERVED_SLOTS_MAX;
    if (r->n > cap)
        r->n = cap < 0 ? 0 : cap;
    int i = 0;
    while (i < r->n && r->e[i].job != job)
        i++;
    if (i == r->n && r->n < cap)
        r->n++;
    if (i >= r->n)
        i = r->n - 1;
    if (i < 0)
        return;
    /* Entries 0..i-1 move down one; i (this job's, or the least recent
     * when it was not listed and the list is full) is overwritten. */
    memmove(&r->e[1], &r->e[0], (size_t)i * sizeof r->e[0]);
    r->e[0].job = job;
    r->e[0].at = now;
}

void avo_recentjobs_array(avo_recentjobs *r, double now, double idle_s, char *out, size_t len)
{
    int k = 0;
    for (int i = 0; i < r->n; i++)
        if (now - r->e[i].at < idle_s)
            r->e[k++] = r->e[i];
    r->n = k;
    size_t n = (size_t)snprintf(out, len, "{");
    for (int i = 0; i < k && n + 24 < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%s%lld", i ? "," : "", r->e[i].job);
    if (n < len)
        snprintf(out + n, len - n, "}");
}
