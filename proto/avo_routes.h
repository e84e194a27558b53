/* The API route table, shared by avod (dispatch) and avoctl (help, paths), so
 * that the two cannot drift. X(ID, METHOD, PATTERN, HELP): a PATTERN segment
 * "{id}" matches a positive integer; a final "{name}" matches the rest of
 * the path, slashes included (a problem's name is a path under kernels/),
 * which the handler reads from the path itself. */
#ifndef AVO_ROUTES_H
#define AVO_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#define AVO_ROUTES(X)                                                                                                  \
    X(HEALTH, "GET", "/v1/health", "daemon and database health")                                                       \
    X(WHOAMI, "GET", "/v1/whoami", "who this request is: principal, team, admin")                                      \
    X(JOB_SUBMIT, "POST", "/v1/jobs", "submit a job spec")                                                             \
    X(JOB_LIST, "GET", "/v1/jobs", "list jobs, newest first")                                                          \
    X(JOB_GET, "GET", "/v1/jobs/{id}", "one job with its progress")                                                    \
    X(JOB_CANCEL, "POST", "/v1/jobs/{id}/cancel", "cancel a job")                                                      \
    X(JOB_BEST, "GET", "/v1/jobs/{id}/best", "best and seed candidates")                                               \
    X(JOB_EVENTS, "GET", "/v1/jobs/{id}/events", "server-sent event stream")                                           \
    X(JOB_LINEAGE, "GET", "/v1/jobs/{id}/lineage", "every candidate: lineage and attempts")                            \
    X(JOB_REPORT, "GET", "/v1/jobs/{id}/report", "seed vs best per configuration, budget spent")                       \
    X(JOB_PROBLEM_DIFF, "GET", "/v1/jobs/{id}/problem/diff", "the job's pinned problem package against the disk")      \
    X(JOB_TRANSCRIPT, "GET", "/v1/jobs/{id}/transcript", "agent steps with every provider call (?step=N)")             \
    X(CANDIDATE, "GET", "/v1/candidates/{id}", "one candidate: source, diff, scores, counters")                        \
    X(CANDIDATE_DIFF, "GET", "/v1/candidates/{id}/diff", "unified diff from it to ?to=ID (default: from its parent)")  \
    X(CANDIDATE_PROFILE, "POST", "/v1/candidates/{id}/profile", "queue its hardware counters {config?}")               \
    X(PROFILE, "GET", "/v1/profiles/{id}", "one profile task: state, counters")                                        \
    X(COMPARE, "POST", "/v1/compare", "queue a paired comparison {candidate, against, confidence?}")                   \
    X(COMPARE_GET, "GET", "/v1/compare/{id}", "one paired comparison: state, ratio, interval")                         \
    X(REVALIDATE, "POST", "/v1/revalidate",                                                                            \
      "re-evaluate committed versions on today's toolchain {job|candidate, on_worker?, on_gpu?}")                      \
    X(REVALIDATION, "GET", "/v1/revalidations/{id}", "one re-validation: new vs recorded result per candidate")        \
    X(PROBLEMS, "GET", "/v1/problems", "the problem packages avod can run: name, backend, knobs, configurations")      \
    X(PROBLEM, "GET", "/v1/problems/{name}", "one problem package in detail (NAME may hold slashes: cpu/sgemm)")       \
    X(WORKERS, "GET", "/v1/workers", "registered workers, each with its current work")                                 \
    X(EVENTS, "GET", "/v1/events", "server-sent events of every job one may read (?after=N, ?last=N, ?follow=false)")  \
    X(TEAMS, "GET", "/v1/teams", "teams: quotas, device time used, fair-share load, what blocks them")                 \
    X(KB_ADD, "POST", "/v1/kb", "add a document {name, text} to the knowledge base")                                   \
    X(KB_LIST, "GET", "/v1/kb", "the knowledge base's documents")                                                      \
    X(KB_SEARCH, "GET", "/v1/kb/search", "full-text search: ?q=WORDS[&limit=N]")                                       \
    X(KB_CHUNK, "GET", "/v1/kb/{id}", "one knowledge-base chunk in full")                                              \
    X(METRICS, "GET", "/metrics", "Prometheus metrics (text exposition format 0.0.4)")

typedef enum {
#define AVO_ROUTE_ENUM(id, m, p, h) AVO_ROUTE_##id,
    AVO_ROUTES(AVO_ROUTE_ENUM)
#undef AVO_ROUTE_ENUM
        AVO_ROUTE_COUNT
} avo_route_id;

typedef struct {
    avo_route_id id;
    const char *method;
    const char *pattern;
    const char *help;
} avo_route;

extern const avo_route avo_routes[AVO_ROUTE_COUNT];

/* Query limits avod enforces and avoctl checks against (one source). */
#define AVO_JOB_LIST_LIMIT_DEFAULT 50 /* GET /v1/jobs?limit= */
#define AVO_JOB_LIST_LIMIT_MAX 1000
#define AVO_KB_SEARCH_LIMIT_DEFAULT 10 /* GET /v1/kb/search?limit= */
#define AVO_KB_SEARCH_LIMIT_MAX 100

/* Match a method and path (no query string). Returns the route id and sets
 * *id_arg for "{id}" routes; -404 when no path matches, -405 when the path
 * matches under another method. */
int avo_routes_match(const char *method, const char *path, int64_t *id_arg);

/* The methods path is served under, "GET, POST" (a 405's Allow header,
 * RFC 9110 15.5.6); "" when no route has the path. */
void avo_routes_allow(const char *path, char *out, size_t outlen);

#endif
