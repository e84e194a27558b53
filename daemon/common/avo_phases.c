/* Wall time by phase of one evaluation, for the worker and the harness (avo_phases.h). */
#include "avo_phases.h"

#include <string.h>
#include <time.h>

double avo_phases_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void avo_phases_add(avo_phases *ph, const char *name, double seconds)
{
    int i = 0;
    /* Callers pass literals: the pointer matches before strcmp is needed. */
    while (i < ph->n && ph->name[i] != name && strcmp(ph->name[i], name) != 0)
        i++;
    if (i == ph->n) {
        if (ph->n == AVO_PHASES_MAX)
            return;
        ph->name[ph->n] = name;
        ph->s[ph->n++] = 0;
    }
    ph->s[i] += seconds;
}

void avo_phases_lap(avo_phases *ph, const char *name, double *since)
{
    const double t = avo_phases_now();
    avo_phases_add(ph, name, t - *since);
    *since = t;
}

void avo_phases_merge(avo_phases *dst, const avo_phases *src)
{
    for (int i = 0; i < src->n; i++)
        avo_phases_add(dst, src->name[i], src->s[i]);
}

double avo_phases_sum(const avo_phases *ph)
{
    double s = 0;
    for (int i = 0; i < ph->n; i++)
        s += ph->s[i];
    return s;
}

json_t *avo_phases_json(const avo_phases *ph)
{
    json_t *o = json_object();
    for (int i = 0; o && i < ph->n; i++)
        if (json_object_set_new(o, ph->name[i], json_real(ph->s[i])) != 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}
