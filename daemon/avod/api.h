/* The /v1 API handlers (docs/api.md): each request is matched against the
 * shared route table (proto/avo_routes.h), validated, and answered from
 * PostgreSQL through asynchronous queries. Event streams replay stored events
 * after the client's last id and then follow NOTIFYs live. */
#ifndef AVO_API_H
#define AVO_API_H

#include <stdint.h>
#include <uv.h>

#include "db.h"
#include "engine.h"
#include "http.h"
#include "pgwatch.h"

typedef struct avo_api avo_api;

/* home: the state directory (the seed compile check caches there). */
int avo_api_start(avo_api **out, uv_loop_t *loop, avo_db *db, avo_engine *engine, const char *kernels_dir,
                  const char *home);
/* Agent jobs are refused at submission unless their provider is configured. */
struct avo_agent;
void avo_api_set_agent(avo_api *a, struct avo_agent *agent);
/* The embedded PostgreSQL's supervisor, whose problem /v1/health reports
 * (none with an external database). */
void avo_api_set_pgwatch(avo_api *a, const avo_pgwatch *w);
/* Who may do what (ident.h): set before serving, and again on reload;
 * the caller keeps it alive. */
struct avo_ident;
void avo_api_set_ident(avo_api *a, const struct avo_ident *ident);
/* avo_http_handler */
void avo_api_handle(void *arg, avo_http_req *req);
/* A NOTIFY on avo_events: wake the streams of that job. */
void avo_api_job_event(avo_api *a, int64_t job);
/* End every stream; call before avo_http_stop. */
void avo_api_stop(avo_api *a);

#endif
