/* Matching a request against the shared API route table (avo_routes.h). */
#include "avo_routes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const avo_route avo_routes[AVO_ROUTE_COUNT] = {
#define AVO_ROUTE_ROW(id, m, p, h) {AVO_ROUTE_##id, m, p, h},
    AVO_ROUTES(AVO_ROUTE_ROW)
#undef AVO_ROUTE_ROW
};

/* Compare one pattern with a path segment by segment. */
static int path_matches(const char *pat, const char *path, int64_t *id_arg)
{
    while (*pat && *path) {
        if (strcmp(pat, "{name}") == 0)
            return 1; /* the rest, non-empty (the loop saw a character) */
        if (strncmp(pat, "{id}", 4) == 0) {
            char *end;
            errno = 0;
            long long v = strtoll(path, &end, 10);
            if (end == path || errno || v <= 0 || (*end && *end != '/'))
                return 0;
            *id_arg = v;
            pat += 4;
            path = end;
            continue;
        }
        if (*pat != *path)
            return 0;
        pat++;
        path++;
    }
    /* one trailing slash is tolerated */
    if (*pat == 0 && path[0] == '/' && path[1] == 0)
        return 1;
    return *pat == 0 && *path == 0;
}

int avo_routes_match(const char *method, const char *path, int64_t *id_arg)
{
    int path_seen = 0;
    for (int i = 0; i < AVO_ROUTE_COUNT; i++) {
        int64_t arg = 0;
        if (!path_matches(avo_routes[i].pattern, path, &arg))
            continue;
        path_seen = 1;
        if (strcmp(avo_routes[i].method, method) == 0) {
            if (id_arg)
                *id_arg = arg;
            return (int)avo_routes[i].id;
        }
    }
    return path_seen ? -405 : -404;
}

void avo_routes_allow(const char *path, char *out, size_t outlen)
{
    size_t n = 0;
    if (outlen)
        out[0] = 0;
    for (int i = 0; i < AVO_ROUTE_COUNT; i++) {
        int64_t arg;
        if (!path_matches(avo_routes[i].pattern, path, &arg) || n >= outlen)
            continue;
        int w = snprintf(out + n, outlen - n, "%s%s", n ? ", " : "", avo_routes[i].method);
        n += w > 0 ? (size_t)w : 0;
    }
}
