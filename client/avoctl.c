/* avoctl: the command-line client of avod (docs/cli.md). One table of
 * commands drives dispatch, `avoctl help` and per-command option parsing. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "args.h"
#include "buf.h"
#include "avo_file.h"
#include "avo_home.h"
#include "avo_paths.h"
#include "avo_problem.h"
#include "avo_routes.h"
#include "avo_suggest.h"
#include "avo_tokens.h"
#include "avo_version.h"
#include "fmt.h"
#include "http.h"
#include "lineage.h"
#include "campaign.h"
#include "config.h"
#include "campreval.h"
#include "compare.h"
#include "toolchain.h"
#include "islands.h"
#include "report.h"
#include "pindiff.h"
#include "problemview.h"
#include "scaffold.h"
#include "show.h"
#include "spec.h"
#include "sse.h"
#include "teams.h"
#include "transcript.h"

enum {
    EXIT_OK = 0,
    EXIT_FAIL = 1, /* the daemon said no, or the job did not succeed */
    EXIT_USAGE = 2,
    EXIT_UNREACHABLE = 3,
};

#define GLOBAL_SYNOPSIS                                                                                                \
    "avoctl [--json] [--socket PATH | --url URL --token-file FILE] [--context NAME] [--no-color] COMMAND [ARGS]"

typedef struct avoctl_command avoctl_command;

typedef struct {
    avoctl_globals g;
    int json;                      /* --json before or after the command */
    char socket[PATH_MAX];         /* the socket path, or the TCP URL: where avod is, for messages */
    const char *url;               /* TCP: avod's listener */
    char token[AVO_TOKEN_MAX + 1]; /* TCP: the bearer token */
    avoctl_http *http;             /* opened on first use */
    const avoctl_command *cmd;
} avoctl_ctx;

struct avoctl_command {
    const char *name;
    int (*run)(avoctl_ctx *c, const avoctl_args *a);
    const char *usage; /* after "usage: "; more forms on new lines */
    const char *summary;
    const avoctl_opt *opts;
    int min_pos, max_pos;
    const char *pos_name; /* the positional, for "missing ..." */
    int local;            /* needs no avod (help, completion, man) */
};

static const avoctl_command *find_command(const char *name);
static int print_help(const char *topic, FILE *out);

/* ---- output helpers --------------------------------------------------- */

static void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void errorf(const char *fmt, ...)
{
    va_list ap;
    fputs("avoctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int usage_error(const avoctl_ctx *c, const char *msg)
{
    const char *name = c->cmd ? c->cmd->name : NULL;
    if (name) {
        /* Only the first usage form: the hint must stay short. */
        const char *u = c->cmd->usage;
        int n = (int)strcspn(u, "\n");
        fprintf(stderr, "avoctl %s: %s\n", name, msg);
        fprintf(stderr, "usage: %.*s (see 'avoctl help %s')\n", n, u, name);
    } else {
        fprintf(stderr, "avoctl: %s\n", msg);
        fprintf(stderr, "usage: " GLOBAL_SYNOPSIS " (see 'avoctl help')\n");
    }
    return EXIT_USAGE;
}

static int print_json(const json_t *v, size_t flags)
{
    if (json_dumpf(v, stdout, flags) < 0)
        return EXIT_FAIL;
    fputc('\n', stdout);
    return EXIT_OK;
}

/* ---- talking to avod -------------------------------------------------- */

static int unreachable(const avoctl_ctx *c, const char *why)
{
    errorf("cannot reach avod at %s: %s; is avod running? (set AVO_HOME, --socket or --url)", c->socket, why);
    return EXIT_UNREACHABLE;
}

/* The daemon's {"error":{"code","message"}} as one line. */
static int daemon_error(const avoctl_response *r)
{
    const json_t *e = json_object_get(r->body, "error");
    const char *msg = avoctl_fmt_str(e, "message");
    const char *code = avoctl_fmt_str(e, "code");
    if (msg)
        errorf("%s (%s)", msg, code ? code : "error");
    else
        errorf("unexpected answer from avod: HTTP %ld%s%s", r->status, r->error[0] ? ": " : "", r->error);
    return EXIT_FAIL;
}

/* The first token of a token file (avod's format, proto/avo_tokens.h). */
static int read_token(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    avo_token tokens[AVO_TOKENS_MAX];
    int n = avo_tokens_load(path, tokens, 0, err, errlen);
    if (n > 0)
        snprintf(out, outlen, "%s", tokens[0].token);
    explicit_bzero(tokens, sizeof tokens);
    return n > 0 ? 0 : -1;
}

static int open_http(avoctl_ctx *c)
{
    if (c->http)
        return 0;
    if (avoctl_http_open(&c->http, c->url ? NULL : c->socket, c->url, c->token) < 0) {
        errorf("cannot initialise libcurl");
        return -ENOMEM;
    }
    return 0;
}

/* A request whose 2xx JSON body is handed over in *out. Returns an exit
 * code; *status (may be NULL) gets the HTTP status, 0 without an answer. */
static int call_full(avoctl_ctx *c, avo_route_id route, int64_t id, const char *name, const char *query,
                     const json_t *body, json_t **out, long *status)
{
    avoctl_response r;
    int ex;

    *out = NULL;
    if (status)
        *status = 0;
    if (open_http(c) < 0)
        return EXIT_FAIL;
    int rc = name ? avoctl_http_get_name(c->http, route, name, &r)
                  : avoctl_http_call(c->http, route, id, query, body, &r);
    if (rc == -ECONNREFUSED || (rc < 0 && r.status == 0)) {
        ex = unreachable(c, r.error);
    } else if (rc < 0) {
        errorf("lost the connection to avod at %s: %s", c->socket, r.error);
        ex = EXIT_UNREACHABLE;
    } else if ((r.status < 200 || r.status >= 300) && !(route == AVO_ROUTE_HEALTH && r.status == 503 && r.body)) {
        /* (health's 503 is an answer: its body says why avod is degraded) */
        ex = daemon_error(&r);
    } else if (!r.body) {
        errorf("unexpected answer from avod: HTTP %ld: %s", r.status, r.error[0] ? r.error : "empty body");
        ex = EXIT_FAIL;
    } else {
        *out = json_incref(r.body);
        ex = EXIT_OK;
    }
    if (status)
        *status = r.status;
    avoctl_http_response_free(&r);
    return ex;
}

static int call_status(avoctl_ctx *c, avo_route_id route, int64_t id, const char *query, const json_t *body,
                       json_t **out, long *status)
{
    return call_full(c, route, id, NULL, query, body, out, status);
}

static int call(avoctl_ctx *c, avo_route_id route, int64_t id, const char *query, const json_t *body, json_t **out)
{
    return call_status(c, route, id, query, body, out, NULL);
}

static int job_arg(const avoctl_ctx *c, const avoctl_args *a, int64_t *job)
{
    char err[256];
    if (avoctl_args_i64("JOB", a->pos[0], 1, INT64_MAX, job, err, sizeof err) < 0)
        return usage_error(c, err);
    return EXIT_OK;
}

static int exit_for_state(const char *state)
{
    return state && strcmp(state, "succeeded") == 0 ? EXIT_OK : EXIT_FAIL;
}

static int is_final(const char *state)
{
    return state &&
           (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0);
}

/* ---- watch ------------------------------------------------------------ */

typedef struct {
    avoctl_ctx *c;
    avoctl_sse sse;
    int64_t last_id; /* resume point: after=<last_id> */
    int events;      /* delivered on the current connection */
    int finished;
    char state[32];      /* from job_finished */
    char unit[32];       /* learnt from events that carry one */
    int error;           /* a local failure (not the network) */
    avoctl_islands view; /* per island, for the live lines and the summary */
    int live;            /* stdout is a terminal: redraw the island lines under the events */
    int drawn;           /* island lines on screen now */
    double elapsed0, t0; /* the job's running time when the watch began, and when that was */
} watch_state;

/* Ctrl-C in watch: the handler only sets this; the stream ends within a
 * second (avoctl_http_set_stop) and watch says how to come back. */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !interrupted)
        ;
}

/* Before a message on stderr: take the island lines off the screen (they
 * come back with the next event), so the message is not drawn over. */
static void lift_lines(watch_state *w)
{
    if (w->drawn) {
        printf("\033[%dA\033[J", w->drawn);
        fflush(stdout);
        w->drawn = 0;
    }
}

/* Failures in red, new bests in green (when colour is on). */
static const char *event_color(const json_t *ev)
{
    const char *kind = avoctl_fmt_str(ev, "kind");
    const json_t *d = json_object_get(ev, "data");
    const char *outcome = avoctl_fmt_str(d, "outcome"), *state = avoctl_fmt_str(d, "state");
    if (!kind)
        return "";
    if (!strcmp(kind, "new_best"))
        return avoctl_fmt_color_good();
    if ((!strcmp(kind, "candidate_evaluated") || !strcmp(kind, "evaluation_finished")) && outcome &&
        strcmp(outcome, "ok") != 0)
        return avoctl_fmt_color_fail();
    if (!strcmp(kind, "job_finished") && state)
        return strcmp(state, "succeeded") ? avoctl_fmt_color_fail() : avoctl_fmt_color_good();
    return "";
}

static int on_event(const avoctl_sse_event *ev, void *arg)
{
    watch_state *w = arg;
    json_error_t je;
    json_t *obj = json_loads(ev->data, 0, &je);
    int64_t id = 0;
    char line[1024];

    /* "detail" (what the job waits for now) has no id of its own: the
     * stream's last id is the previous event's, and it is never replayed. */
    const int detail = ev->event && !strcmp(ev->event, "detail");
    if (detail)
        id = 0;
    else if (ev->id[0])
        id = strtoll(ev->id, NULL, 10);
    else if (json_is_integer(json_object_get(obj, "id")))
        id = json_integer_value(json_object_get(obj, "id"));
    /* A replay after reconnecting must not show an event twice. */
    if (!detail && id > 0 && id <= w->last_id) {
        json_decref(obj);
        return 0;
    }
    if (!obj) {
        lift_lines(w);
        fprintf(stderr, "avoctl: skipping event %s: data is not JSON: %s\n", ev->id, je.text);
    } else {
        const json_t *d = json_object_get(obj, "data");
        const char *unit = avoctl_fmt_str(d, "unit");
        if (unit)
            snprintf(w->unit, sizeof w->unit, "%s", unit);
        if (w->c->json) {
            /* Pass the daemon's text through: re-encoding would change how
             * its numbers are spelt. Multi-line data must be re-joined. */
            if (!strchr(ev->data, '\n'))
                puts(ev->data);
            else
                print_json(obj, JSON_COMPACT);
        } else {
            avoctl_islands_event(&w->view, obj);
            avoctl_fmt_event(obj, w->unit[0] ? w->unit : NULL, line, sizeof line);
            /* The event scrolls above; the island lines stay at the bottom. */
            if (w->drawn)
                printf("\033[%dA\033[J", w->drawn);
            printf("%s%s%s\n", event_color(obj), line, *event_color(obj) ? avoctl_fmt_color_off() : "");
            w->view.elapsed = w->elapsed0 + (now_s() - w->t0);
            if (w->live)
                w->drawn = avoctl_islands_print(&w->view, avoctl_table_term_width(stdout), stdout);
        }
        fflush(stdout);
        const char *kind = avoctl_fmt_str(obj, "kind");
        if (!kind)
            kind = ev->event;
        if (strcmp(kind, "job_finished") == 0) {
            const char *state = avoctl_fmt_str(d, "state");
            snprintf(w->state, sizeof w->state, "%s", state ? state : "");
            w->finished = 1;
        }
    }
    if (id > 0)
        w->last_id = id;
    w->events++;
    json_decref(obj);
    /* The stream ends after job_finished anyway; do not wait for the close. */
    return w->finished ? 1 : 0;
}

static int on_stream(const char *data, size_t len, void *arg)
{
    watch_state *w = arg;
    int rc = avoctl_sse_feed(&w->sse, data, len, on_event, w);
    if (rc < 0)
        w->error = rc;
    return rc;
}

/* The stream ended without job_finished (we resumed past it, or avod closed
 * the stream): ask for the job. Returns an exit code, or -1 to keep watching. */
static int check_finished(avoctl_ctx *c, int64_t job)
{
    avoctl_response r;
    int ex = -1;

    if (avoctl_http_call(c->http, AVO_ROUTE_JOB_GET, job, NULL, NULL, &r) == 0 && r.status == 200 &&
        is_final(avoctl_fmt_str(r.body, "state"))) {
        const char *state = avoctl_fmt_str(r.body, "state");
        if (!c->json) {
            json_t *ev = json_pack("{s:s, s:I, s:{s:s, s:O?, s:O?, s:O?, s:O?}}", "kind", "job_finished", "job",
                                   (json_int_t)job, "data", "state", state, "reason", json_object_get(r.body, "reason"),
                                   "best", json_object_get(r.body, "best"), "seed", json_object_get(r.body, "seed"),
                                   "speedup", json_object_get(r.body, "speedup"));
            char line[1024];
            avoctl_fmt_event(ev, avoctl_fmt_str(r.body, "unit"), line, sizeof line);
            printf("%s%s%s\n", event_color(ev), line, *event_color(ev) ? avoctl_fmt_color_off() : "");
            avoctl_islands_job_summary(r.body, stdout);
            json_decref(ev);
        }
        ex = exit_for_state(state);
    }
    avoctl_http_response_free(&r);
    return ex;
}

/* How the job ended, one line, after the events (people only): from the
 * job itself, since the events seen may be only the tail (--after N). */
static int watch_end(watch_state *w, int64_t job, int ex)
{
    avoctl_response r;
    if (w->c->json || !w->view.finished)
        return ex;
    if (avoctl_http_call(w->c->http, AVO_ROUTE_JOB_GET, job, NULL, NULL, &r) == 0 && r.status == 200 &&
        json_is_object(r.body))
        avoctl_islands_job_summary(r.body, stdout);
    else
        avoctl_islands_summary(&w->view, stdout);
    avoctl_http_response_free(&r);
    return ex;
}

/* After Ctrl-C: the job goes on; say so, and the command that resumes the
 * watch where it stopped (with the flags that named this avod). */
static int watch_interrupted(watch_state *w, int64_t job)
{
    const avoctl_globals *g = &w->c->g;
    lift_lines(w);
    fflush(stdout);
    fprintf(stderr, "\navoctl: stopped watching; job %lld keeps running (stop it with 'avoctl cancel %lld').\n",
            (long long)job, (long long)job);
    fprintf(stderr, "avoctl: to watch it again: avoctl");
    if (g->context)
        fprintf(stderr, " --context %s", g->context);
    if (g->socket)
        fprintf(stderr, " --socket %s", g->socket);
    if (g->url)
        fprintf(stderr, " --url %s", g->url);
    if (g->token_file)
        fprintf(stderr, " --token-file %s", g->token_file);
    fprintf(stderr, " watch %lld --after %lld\n", (long long)job, (long long)w->last_id);
    return 130; /* as a shell reports a command ended by SIGINT */
}

/* A stream that ended in a local failure or an error answer (not 503,
 * which is retried): its exit code, r freed; -1 to go on. */
static int stream_error(int rc, int error, avoctl_response *r)
{
    if (error) {
        errorf("cannot read the event stream: %s", strerror(-error));
        avoctl_http_response_free(r);
        return EXIT_FAIL;
    }
    if (rc == 0 && r->status != 200 && r->status != 503) {
        int ex = daemon_error(r);
        avoctl_http_response_free(r);
        return ex;
    }
    return -1;
}

static int watch_job(avoctl_ctx *c, int64_t job, int64_t after, int connected_before)
{
    watch_state w = {.c = c, .last_id = after};
    double delay = 0.2;
    double last_ok = now_s();
    int outage = 0;
    char query[64];

    if (open_http(c) < 0)
        return EXIT_FAIL;
    /* The job's shape for the island lines: how many, and the budget. */
    {
        avoctl_response r;
        json_t *spec = NULL;
        int islands = 1, budget = 0;
        const char *unit = NULL;
        if (avoctl_http_call(c->http, AVO_ROUTE_JOB_GET, job, NULL, NULL, &r) == 0 && r.status == 200) {
            spec = json_object_get(r.body, "spec");
            islands = (int)json_integer_value(json_object_get(spec, "islands"));
            budget = (int)json_integer_value(json_object_get(json_object_get(spec, "budget"), "evaluations"));
            unit = avoctl_fmt_str(r.body, "unit");
        }
        avoctl_islands_init(&w.view, islands, budget, unit);
        w.view.wall_budget = json_number_value(json_object_get(json_object_get(spec, "budget"), "wall_seconds"));
        /* a queued job's clock starts about now */
        w.elapsed0 = r.status == 200 && avoctl_fmt_job_elapsed(r.body) > 0 ? avoctl_fmt_job_elapsed(r.body) : 0;
        w.t0 = now_s();
        avoctl_http_response_free(&r);
        w.live = !c->json && isatty(STDOUT_FILENO);
    }
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a sleep ends at once */
    avoctl_http_set_stop(c->http, &interrupted);
    for (;;) {
        avoctl_response r;
        avoctl_sse_init(&w.sse); /* a partial event from a lost stream is replayed */
        w.events = 0;
        /* people get the job's detail when it changes; --json gets the events only */
        snprintf(query, sizeof query, "after=%lld%s", (long long)w.last_id, c->json ? "" : "&detail=true");
        int rc = avoctl_http_stream(c->http, AVO_ROUTE_JOB_EVENTS, job, query, on_stream, &w, &r);
        avoctl_sse_free(&w.sse);

        if (w.finished) {
            avoctl_http_response_free(&r);
            return watch_end(&w, job, exit_for_state(w.state));
        }
        if (interrupted) {
            avoctl_http_response_free(&r);
            return watch_interrupted(&w, job);
        }
        const int fail = stream_error(rc, w.error, &r);
        if (fail >= 0)
            return fail;
        if (r.status != 0) {
            last_ok = now_s();
            connected_before = 1;
            if (outage) {
                lift_lines(&w);
                fprintf(stderr, "avoctl: reconnected to avod\n");
            }
            outage = 0;
        }
        if (rc == 0 && r.status == 200) {
            int ex = check_finished(c, job);
            if (ex >= 0) {
                avoctl_http_response_free(&r);
                return ex;
            }
        }
        if (!connected_before) {
            int ex = unreachable(c, r.error[0] ? r.error : "connection failed");
            avoctl_http_response_free(&r);
            return ex;
        }
        if (now_s() - last_ok > 60) {
            int ex = unreachable(c, r.error[0] ? r.error : "no answer for 60 s");
            avoctl_http_response_free(&r);
            return ex;
        }
        /* A clean close of a live job (avod shutting down) is not news; the
         * failure to reconnect that usually follows it is. */
        if (!outage && (rc < 0 || r.status != 200)) {
            lift_lines(&w);
            fprintf(stderr, "avoctl: event stream interrupted (%s); reconnecting after event %lld\n",
                    r.error[0] ? r.error : "avod unavailable", (long long)w.last_id);
            outage = 1;
        }
        avoctl_http_response_free(&r);
        if (w.events)
            delay = 0.2;
        sleep_s(delay);
        delay = delay * 2 > 5 ? 5 : delay * 2;
    }
}

static int cmd_watch(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job, after = 0;
    char err[256];
    int ex = job_arg(c, a, &job);
    if (ex)
        return ex;
    const char *s = avoctl_args_get(a, "after");
    if (s && avoctl_args_i64("--after", s, 0, INT64_MAX, &after, err, sizeof err) < 0)
        return usage_error(c, err);
    return watch_job(c, job, after, 0);
}

/* ---- events of every job ---------------------------------------------- */

typedef struct {
    avoctl_ctx *c;
    avoctl_sse sse;
    int64_t last_id;
    int events;
    int error;
    json_t *units; /* job id -> unit, learnt from the events that carry one */
} events_state;

static int on_any_event(const avoctl_sse_event *ev, void *arg)
{
    events_state *w = arg;
    json_error_t je;
    int64_t id = ev->id[0] ? strtoll(ev->id, NULL, 10) : 0;
    if (id > 0 && id <= w->last_id)
        return 0; /* a replay after reconnecting */
    json_t *obj = json_loads(ev->data, 0, &je);
    if (!obj) {
        fprintf(stderr, "avoctl: skipping event %s: data is not JSON: %s\n", ev->id, je.text);
    } else if (w->c->json) {
        if (!strchr(ev->data, '\n'))
            puts(ev->data);
        else
            print_json(obj, JSON_COMPACT);
    } else {
        char line[1024], job[32];
        snprintf(job, sizeof job, "%lld", (long long)json_integer_value(json_object_get(obj, "job")));
        const char *unit = avoctl_fmt_str(json_object_get(obj, "data"), "unit");
        if (unit && w->units)
            json_object_set_new(w->units, job, json_string(unit));
        avoctl_fmt_event(obj, json_string_value(json_object_get(w->units, job)), line, sizeof line);
        printf("job %s %s%s%s\n", job, event_color(obj), line, *event_color(obj) ? avoctl_fmt_color_off() : "");
    }
    fflush(stdout);
    json_decref(obj);
    if (id > 0)
        w->last_id = id;
    w->events++;
    return 0;
}

static int on_any_stream(const char *data, size_t len, void *arg)
{
    events_state *w = arg;
    int rc = avoctl_sse_feed(&w->sse, data, len, on_any_event, w);
    if (rc < 0)
        w->error = rc;
    return rc;
}

static int events_loop(avoctl_ctx *c, events_state *wp, int follow, int use_last, int64_t last);

/* The events of every job this principal may read: the last N (or those
 * after --after) and, with -f, the new ones as they come, until Ctrl-C;
 * a lost connection is resumed after the last event shown. */
static int cmd_events(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t after = -1, last = 20;
    char err[256];
    const int follow = avoctl_args_get(a, "follow") != NULL;
    const char *s = avoctl_args_get(a, "after");
    if (s && avoctl_args_i64("--after", s, 0, INT64_MAX, &after, err, sizeof err) < 0)
        return usage_error(c, err);
    s = avoctl_args_get(a, "last");
    if (s && avoctl_args_i64("--last", s, 1, 10000, &last, err, sizeof err) < 0)
        return usage_error(c, err);
    if (after >= 0 && avoctl_args_get(a, "last"))
        return usage_error(c, "--after and --last: give one of them");
    if (open_http(c) < 0)
        return EXIT_FAIL;
    events_state w = {.c = c, .last_id = after >= 0 ? after : 0, .units = json_object()};
    int ex = events_loop(c, &w, follow, after < 0, last);
    json_decref(w.units);
    return ex;
}

static int events_loop(avoctl_ctx *c, events_state *wp, int follow, int use_last, int64_t last)
{
    events_state w = *wp;
    char query[96];
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    avoctl_http_set_stop(c->http, &interrupted);
    double delay = 0.2, last_ok = now_s();
    for (int first = 1;; first = 0) {
        avoctl_response r;
        if (first && use_last)
            snprintf(query, sizeof query, "last=%lld&follow=%s", (long long)last, follow ? "true" : "false");
        else
            snprintf(query, sizeof query, "after=%lld&follow=%s", (long long)w.last_id, follow ? "true" : "false");
        avoctl_sse_init(&w.sse);
        w.events = 0;
        int rc = avoctl_http_stream(c->http, AVO_ROUTE_EVENTS, 0, query, on_any_stream, &w, &r);
        avoctl_sse_free(&w.sse);
        if (interrupted) {
            avoctl_http_response_free(&r);
            return follow ? EXIT_OK : 130;
        }
        const int fail = stream_error(rc, w.error, &r);
        if (fail >= 0)
            return fail;
        if (r.status == 200)
            last_ok = now_s();
        if (!follow || (first && r.status == 0) || now_s() - last_ok > 60) {
            int ex = rc == 0 && r.status == 200 ? EXIT_OK : unreachable(c, r.error[0] ? r.error : "connection failed");
            avoctl_http_response_free(&r);
            return ex;
        }
        avoctl_http_response_free(&r);
        if (w.events)
            delay = 0.2;
        sleep_s(delay);
        delay = delay * 2 > 5 ? 5 : delay * 2;
    }
}

/* ---- commands --------------------------------------------------------- */

static int load_spec_file(avoctl_ctx *c, const char *path, json_t **spec)
{
    (void)c;
    json_error_t je;
    *spec = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &je) : json_load_file(path, 0, &je);
    if (!*spec) {
        const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
        if (je.line > 0) /* no line when the file could not be opened */
            errorf("%s: %s (line %d)", name, je.text, je.line);
        else
            errorf("%s", je.text);
        return EXIT_FAIL;
    }
    if (!json_is_object(*spec)) {
        errorf("%s: a job spec must be a JSON object", path);
        json_decref(*spec);
        *spec = NULL;
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

static void spec_flags(const avoctl_args *a, avoctl_spec_flags *f)
{
    /* Flags a command's table lacks read as NULL (not given). */
    *f = (avoctl_spec_flags){
        .problem = avoctl_args_get(a, "problem"),
        .operator_name = avoctl_args_get(a, "operator"),
        .evaluations = avoctl_args_get(a, "evaluations"),
        .islands = avoctl_args_get(a, "islands"),
        .wall = avoctl_args_get(a, "wall"),
        .epsilon = avoctl_args_get(a, "epsilon"),
        .priority = avoctl_args_get(a, "priority"),
        .seed_file = avoctl_args_get(a, "seed"),
        .seed_candidate = avoctl_args_get(a, "seed-candidate"),
        .seed_name = avoctl_args_get(a, "seed-name"),
        .target_score = avoctl_args_get(a, "target-score"),
        .patience = avoctl_args_get(a, "patience"),
        .stagnation_limit = avoctl_args_get(a, "stagnation-limit"),
        .gpu_seconds = avoctl_args_get(a, "gpu-seconds"),
        .energy_joules = avoctl_args_get(a, "energy-joules"),
        .migrate_every = avoctl_args_get(a, "migrate-every"),
        .min_gain = avoctl_args_get(a, "min-gain"),
        .name = avoctl_args_get(a, "name"),
        .labels = avoctl_args_get(a, "label"),
        .confidence = avoctl_args_get(a, "confidence"),
    };
}

/* avoctl_spec_build's failures as exit codes: a bad flag is a usage error;
 * an unreadable --seed file is bad input too (exit 2) but needs no usage
 * hint, the message says what is wrong with it. */
static int spec_error(const avoctl_ctx *c, int rc, const char *err)
{
    if (rc == -EINVAL)
        return usage_error(c, err);
    if (rc == -ENOMEM) {
        errorf("%s", err);
        return EXIT_FAIL;
    }
    fprintf(stderr, "avoctl %s: %s\n", c->cmd->name, err);
    return EXIT_USAGE;
}

/* Submit a built spec, print the new job, and watch it if asked. */
static int submit_spec(avoctl_ctx *c, const json_t *spec, int watch)
{
    json_t *job = NULL;
    int ex;

    if ((ex = call(c, AVO_ROUTE_JOB_SUBMIT, 0, NULL, spec, &job)) != EXIT_OK)
        return ex;
    json_int_t id = json_integer_value(json_object_get(job, "id"));
    if (c->json) {
        /* With --watch the events follow, one per line, so keep this compact. */
        print_json(job, watch ? JSON_COMPACT : JSON_INDENT(2));
    } else {
        const char *op = avoctl_fmt_str(job, "operator");
        const json_t *seed = json_object_get(spec, "seed");
        char from[300] = "";
        if (!op)
            op = avoctl_fmt_str(spec, "operator");
        if (json_is_integer(json_object_get(seed, "candidate")))
            snprintf(from, sizeof from, "; seed: cand %lld",
                     (long long)json_integer_value(json_object_get(seed, "candidate")));
        else if (avoctl_fmt_str(seed, "file"))
            snprintf(from, sizeof from, "; seed: %.250s", avoctl_fmt_str(seed, "file"));
        printf("job %lld submitted (%s, %s%s)\n", (long long)id,
               avoctl_fmt_str(job, "problem") ? avoctl_fmt_str(job, "problem") : "?", op ? op : "default operator",
               from);
    }
    /* e.g. a toolchain no live worker has (sql/018): accepted, but it waits */
    size_t wi;
    json_t *w;
    json_array_foreach(json_object_get(job, "warnings"), wi, w) if (json_is_string(w))
        fprintf(stderr, "avoctl: warning: %s\n", json_string_value(w));
    fflush(stdout);
    if (watch) {
        if (id <= 0) {
            errorf("avod did not return a job id to watch");
            ex = EXIT_FAIL;
        } else {
            ex = watch_job(c, id, 0, 1);
        }
    }
    json_decref(job);
    return ex;
}

static int cmd_submit(avoctl_ctx *c, const avoctl_args *a)
{
    avoctl_spec_flags f;
    json_t *spec = NULL;
    char err[512];
    int ex, rc;

    spec_flags(a, &f);
    if (a->npos == 0 && !f.problem)
        return usage_error(c, "give a spec FILE (or '-') or --problem P");
    /* Validate the flags before reading stdin, so a typo fails fast;
     * without a spec file this is the spec. */
    if ((rc = avoctl_spec_build(&f, &spec, err, sizeof err)) < 0)
        return spec_error(c, rc, err);
    if (a->npos == 1) {
        json_decref(spec);
        spec = NULL;
        if ((ex = load_spec_file(c, a->pos[0], &spec)) != EXIT_OK)
            goto cleanup;
        if ((rc = avoctl_spec_build(&f, &spec, err, sizeof err)) < 0) {
            ex = spec_error(c, rc, err);
            goto cleanup;
        }
    }
    ex = submit_spec(c, spec, avoctl_args_get(a, "watch") != NULL);
cleanup:
    json_decref(spec);
    return ex;
}

static int candidate_arg(const avoctl_ctx *c, const char *s, const char *what, int64_t *id)
{
    char err[256];
    if (avoctl_args_i64(what, s, 1, INT64_MAX, id, err, sizeof err) < 0)
        return usage_error(c, err);
    return EXIT_OK;
}

/* The problem a candidate was evaluated on: its job's. */
static int problem_of(avoctl_ctx *c, int64_t cand, char *buf, size_t len)
{
    json_t *cj = NULL, *job = NULL;
    int ex = call(c, AVO_ROUTE_CANDIDATE, cand, NULL, NULL, &cj);
    if (ex == EXIT_OK)
        ex = call(c, AVO_ROUTE_JOB_GET, json_integer_value(json_object_get(cj, "job")), NULL, NULL, &job);
    if (ex == EXIT_OK) {
        if (avoctl_fmt_str(job, "problem")) {
            snprintf(buf, len, "%s", avoctl_fmt_str(job, "problem"));
        } else {
            errorf("avod named no problem for the job of candidate %lld; give --problem", (long long)cand);
            ex = EXIT_FAIL;
        }
    }
    json_decref(cj);
    json_decref(job);
    return ex;
}

static int cmd_fork(avoctl_ctx *c, const avoctl_args *a)
{
    avoctl_spec_flags f;
    json_t *spec = NULL;
    char err[512], problem[512];
    int64_t cand;
    int ex, rc;

    if ((ex = candidate_arg(c, a->pos[0], "CANDIDATE", &cand)) != EXIT_OK)
        return ex;
    spec_flags(a, &f);
    f.seed_candidate = a->pos[0];
    /* Validate before asking avod anything. */
    if ((rc = avoctl_spec_build(&f, &spec, err, sizeof err)) < 0)
        return spec_error(c, rc, err);
    if (!f.problem) {
        /* Default: carry on with the candidate's own problem. */
        if ((ex = problem_of(c, cand, problem, sizeof problem)) != EXIT_OK)
            goto cleanup;
        if (json_object_set_new(spec, "problem", json_string(problem)) != 0) {
            errorf("out of memory");
            ex = EXIT_FAIL;
            goto cleanup;
        }
    }
    ex = submit_spec(c, spec, avoctl_args_get(a, "watch") != NULL);
cleanup:
    json_decref(spec);
    return ex;
}

static void evals_cell(const json_t *job, char *buf, size_t len)
{
    const json_t *e = json_object_get(job, "evaluations");
    char done[32], budget[32];
    avoctl_fmt_field(json_object_get(e, "done"), done, sizeof done);
    avoctl_fmt_field(json_object_get(e, "budget"), budget, sizeof budget);
    snprintf(buf, len, "%s/%s", done, budget);
}

static void aggregate_cell(const json_t *score, char *buf, size_t len)
{
    const json_t *agg = json_object_get(score, "aggregate");
    if (json_is_number(agg))
        avoctl_fmt_num(json_number_value(agg), buf, len);
    else
        snprintf(buf, len, "-");
}

/* "alice/ml", "alice" (no team), "-" (from before owners) */
static void owner_cell(const json_t *job, char *out, size_t outlen)
{
    const char *o = avoctl_fmt_str(job, "owner"), *t = avoctl_fmt_str(job, "team");
    snprintf(out, outlen, "%s%s%s", o ? o : "-", o && t ? "/" : "", o && t ? t : "");
}

static int cmd_list(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t limit = 0;
    char err[256], query[1024] = "";
    json_t *body = NULL;
    avoctl_table *t = NULL;
    int ex;

    const char *s = avoctl_args_get(a, "limit");
    if (s) {
        if (avoctl_args_i64("--limit", s, 1, AVO_JOB_LIST_LIMIT_MAX, &limit, err, sizeof err) < 0)
            return usage_error(c, err);
        snprintf(query, sizeof query, "limit=%lld", (long long)limit);
    }
    if (avoctl_args_get(a, "mine"))
        snprintf(query + strlen(query), sizeof query - strlen(query), "%smine=true", *query ? "&" : "");
    static const char *const filters[] = {"owner", "team", "label"};
    for (int i = 0; i < 3; i++) {
        const char *v = avoctl_args_get(a, filters[i]);
        if (!v)
            continue;
        if (!*v || (i == 2 && !strchr(v, '='))) {
            snprintf(err, sizeof err, "--%s: needs %s", filters[i], i == 2 ? "KEY=VALUE" : "a name");
            return usage_error(c, err);
        }
        char *q = curl_easy_escape(NULL, v, 0);
        if (!q)
            return EXIT_FAIL;
        snprintf(query + strlen(query), sizeof query - strlen(query), "%s%s=%s", *query ? "&" : "", filters[i], q);
        curl_free(q);
    }
    if ((ex = call(c, AVO_ROUTE_JOB_LIST, 0, query, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json) {
        ex = print_json(body, JSON_INDENT(2));
        goto cleanup;
    }
    static const char *const hdr[] = {"ID",   "STATE",   "PROBLEM", "OPERATOR", "EVALS", "BEST",
                                      "UNIT", "SPEEDUP", "CREATED", "OWNER",    "NAME"};
    if (avoctl_table_new(&t, 11, hdr, 1u << 0 | 1u << 4 | 1u << 5 | 1u << 7) < 0) {
        ex = EXIT_FAIL;
        goto cleanup;
    }
    size_t i;
    json_t *job;
    json_array_foreach(json_object_get(body, "jobs"), i, job)
    {
        char id[32], evals[64], best[32], sp[32], created[32], owner[160];
        avoctl_fmt_field(json_object_get(job, "id"), id, sizeof id);
        evals_cell(job, evals, sizeof evals);
        aggregate_cell(json_object_get(job, "best"), best, sizeof best);
        avoctl_fmt_speedup(json_object_get(job, "speedup"), sp, sizeof sp);
        avoctl_fmt_time(avoctl_fmt_str(job, "created_at"), 1, created, sizeof created);
        owner_cell(job, owner, sizeof owner);
        const char *row[] = {id,
                             avoctl_fmt_str(job, "state"),
                             avoctl_fmt_str(job, "problem"),
                             avoctl_fmt_str(job, "operator"),
                             evals,
                             best,
                             avoctl_fmt_str(job, "unit"),
                             sp,
                             created,
                             owner,
                             avoctl_fmt_str(job, "name") ? avoctl_fmt_str(job, "name") : "-"};
        if (avoctl_table_add(t, row) < 0) {
            ex = EXIT_FAIL;
            goto cleanup;
        }
    }
    if (avoctl_table_rows(t) == 0) {
        puts("no jobs");
    } else {
        avoctl_table_print(t, stdout);
        /* what each unfinished job waits for, under the table so its columns stay narrow */
        json_array_foreach(json_object_get(body, "jobs"), i, job) if (avoctl_fmt_str(job, "detail")) printf(
            "job %lld: %s\n", (long long)json_integer_value(json_object_get(job, "id")), avoctl_fmt_str(job, "detail"));
    }
cleanup:
    avoctl_table_free(t);
    json_decref(body);
    return ex;
}

static void kv(const char *key, const char *val)
{
    printf("%-12s %s\n", key, val && *val ? val : "-");
}

static void print_job(const json_t *job)
{
    const char *unit = avoctl_fmt_str(job, "unit");
    const json_t *e = json_object_get(job, "evaluations");
    char buf[256], n[4][32];

    avoctl_fmt_field(json_object_get(job, "id"), buf, sizeof buf);
    kv("job", buf);
    if (avoctl_fmt_str(job, "name"))
        kv("name", avoctl_fmt_str(job, "name"));
    kv("problem", avoctl_fmt_str(job, "problem"));
    kv("owner",
       avoctl_fmt_str(job, "owner") ? avoctl_fmt_str(job, "owner") : "none (submitted before jobs had owners)");
    kv("team", avoctl_fmt_str(job, "team"));
    const json_t *labels = json_object_get(job, "labels");
    if (json_object_size(labels)) {
        const char *k;
        const json_t *v;
        size_t used = 0;
        buf[0] = 0;
        json_object_foreach((json_t *)labels, k, v)
        {
            used += (size_t)snprintf(buf + used, used < sizeof buf ? sizeof buf - used : 0, "%s%s=%s", used ? "," : "",
                                     k, json_string_value(v) ? json_string_value(v) : "");
            if (used >= sizeof buf)
                break;
        }
        kv("labels", buf);
    }
    /* the package version it runs, whatever the disk holds now (docs/jobs.md) */
    const char *pkg = avoctl_fmt_str(job, "problem_hash");
    kv("package", pkg ? pkg : "not pinned (submitted before jobs pinned their package)");
    kv("operator", avoctl_fmt_str(job, "operator"));
    /* the commit rule that applies (resolved at submission) */
    const json_t *cm = json_object_get(json_object_get(job, "spec"), "commit");
    if (json_is_number(json_object_get(cm, "min_gain")) && json_is_number(json_object_get(cm, "confidence"))) {
        snprintf(buf, sizeof buf, "paired lower bound above %+.2f%% at %g%% confidence",
                 100 * json_number_value(json_object_get(cm, "min_gain")),
                 100 * json_number_value(json_object_get(cm, "confidence")));
        kv("commit", buf);
    }
    kv("state", avoctl_fmt_str(job, "state"));
    if (avoctl_fmt_str(job, "reason"))
        kv("reason", avoctl_fmt_str(job, "reason"));
    /* what it waits for or does right now (sql/023_why.sql) */
    if (avoctl_fmt_str(job, "detail"))
        kv("detail", avoctl_fmt_str(job, "detail"));
    avoctl_fmt_time(avoctl_fmt_str(job, "created_at"), 1, buf, sizeof buf);
    kv("created", buf);
    avoctl_fmt_time(avoctl_fmt_str(job, "started_at"), 1, buf, sizeof buf);
    kv("started", buf);
    avoctl_fmt_time(avoctl_fmt_str(job, "finished_at"), 1, buf, sizeof buf);
    kv("finished", buf);
    static const char *const keys[] = {"done", "running", "queued", "budget"};
    for (int i = 0; i < 4; i++)
        avoctl_fmt_field(json_object_get(e, keys[i]), n[i], sizeof n[i]);
    snprintf(buf, sizeof buf, "%s done, %s running, %s queued (budget %s)", n[0], n[1], n[2], n[3]);
    kv("evaluations", buf);
    /* how long it has run, and how long the budget leaves at this rate */
    const double el = avoctl_fmt_job_elapsed(job);
    if (el >= 0) {
        char d[64], eta[96];
        avoctl_fmt_duration(el, d, sizeof d);
        if (is_final(avoctl_fmt_str(job, "state"))) {
            kv("elapsed", d);
        } else {
            const json_t *b = json_object_get(json_object_get(job, "spec"), "budget");
            avoctl_fmt_eta(el, json_integer_value(json_object_get(e, "done")),
                           json_integer_value(json_object_get(e, "budget")),
                           json_number_value(json_object_get(b, "wall_seconds")), eta, sizeof eta);
            snprintf(buf, sizeof buf, "%s, %s", d, eta);
            kv("elapsed", buf);
        }
    }
    avoctl_fmt_score(json_object_get(job, "seed"), unit, buf, sizeof buf);
    kv("seed", json_is_object(json_object_get(job, "seed")) ? buf : "not evaluated yet");
    avoctl_fmt_score(json_object_get(job, "best"), unit, buf, sizeof buf);
    kv("best",
       json_is_number(json_object_get(json_object_get(job, "best"), "aggregate")) ? buf : "no valid evaluation yet");
    avoctl_fmt_job_speedup(job, buf, sizeof buf);
    kv("speedup", buf);
    if (json_is_true(json_object_get(job, "finishing")))
        kv("finishing", "measuring the best paired against the seed");
}

static int cmd_status(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job;
    json_t *body = NULL;
    int ex = job_arg(c, a, &job);
    if (ex || (ex = call(c, AVO_ROUTE_JOB_GET, job, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        print_job(body);
    json_decref(body);
    return ex;
}

static int cmd_cancel(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job;
    json_t *body = NULL;
    int ex = job_arg(c, a, &job);
    if (ex || (ex = call(c, AVO_ROUTE_JOB_CANCEL, job, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json) {
        ex = print_json(body, JSON_INDENT(2));
    } else {
        const char *state = avoctl_fmt_str(body, "state");
        if (state && strcmp(state, "cancelled") == 0)
            printf("job %lld cancelled\n", (long long)job);
        else /* running evaluations finish first */
            printf("job %lld: cancel requested (state %s)\n", (long long)job, state ? state : "?");
    }
    json_decref(body);
    return ex;
}

static const json_t *score_for(const json_t *cand, const char *config)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(cand, "scores"), i, s)
    {
        const char *name = avoctl_fmt_str(s, "config");
        if (name && strcmp(name, config) == 0)
            return json_object_get(s, "score");
    }
    return NULL;
}

/* The best's speedup over the seed: the job's final paired measurement as
 * `status` shows it where there is one, else the recorded aggregates'
 * ratio, said to be that (they drift between evaluations). */
static void best_speedup(const json_t *body, const json_t *jobj, char *sp, size_t len)
{
    const json_t *best = json_object_get(body, "best"), *seed = json_object_get(body, "seed");
    snprintf(sp, len, "-");
    if (json_is_object(json_object_get(jobj, "speedup_detail")) || json_is_number(json_object_get(jobj, "speedup")))
        avoctl_fmt_job_speedup(jobj, sp, len);
    else if (json_is_number(json_object_get(body, "speedup")))
        avoctl_fmt_speedup(json_object_get(body, "speedup"), sp, len);
    else if (json_is_number(json_object_get(best, "aggregate")) &&
             json_number_value(json_object_get(seed, "aggregate")) > 0)
        snprintf(sp, len, "x%.2f (of the recorded aggregates, unpaired)",
                 json_number_value(json_object_get(best, "aggregate")) /
                     json_number_value(json_object_get(seed, "aggregate")));
}

static int print_best(const json_t *body, const json_t *jobj, int64_t job)
{
    const json_t *best = json_object_get(body, "best");
    const json_t *seed = json_object_get(body, "seed");
    const char *unit = avoctl_fmt_str(best, "unit");
    char b[128], s[128], sp[256], n1[32], n2[32];
    avoctl_table *t = NULL;
    int ex = EXIT_OK;

    avoctl_fmt_score(best, unit, b, sizeof b);
    avoctl_fmt_score(seed, unit, s, sizeof s);
    best_speedup(body, jobj, sp, sizeof sp);
    printf("job %lld: best %s, seed %s, speedup %s\n", (long long)job, b, s, sp);
    avoctl_fmt_field(json_object_get(best, "parent"), n1, sizeof n1);
    avoctl_fmt_field(json_object_get(best, "operator"), n2, sizeof n2);
    printf("parent %s, operator %s, outcome %s, sha256 %s\n", n1, n2,
           avoctl_fmt_str(best, "outcome") ? avoctl_fmt_str(best, "outcome") : "-",
           avoctl_fmt_str(best, "sha256") ? avoctl_fmt_str(best, "sha256") : "-");

    const json_t *knobs = json_object_get(best, "knobs");
    if (json_is_object(knobs) && json_object_size(knobs)) {
        const char *k;
        json_t *v;
        fputs("knobs", stdout);
        json_object_foreach((json_t *)knobs, k, v)
        {
            avoctl_fmt_field(v, n1, sizeof n1);
            printf(" %s=%s", k, n1);
        }
        fputc('\n', stdout);
    }

    static const char *const hdr[] = {"CONFIG", "BEST", "SEED", "SPEEDUP"};
    if (avoctl_table_new(&t, 4, hdr, 1u << 1 | 1u << 2 | 1u << 3) < 0)
        return EXIT_FAIL;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(best, "scores"), i, row)
    {
        const char *config = avoctl_fmt_str(row, "config");
        const json_t *bs = json_object_get(row, "score");
        const json_t *ss = config ? score_for(seed, config) : NULL;
        char cb[32], cs[32], csp[32] = "-";
        avoctl_fmt_field(bs, cb, sizeof cb);
        avoctl_fmt_field(ss, cs, sizeof cs);
        if (json_is_number(bs) && json_is_number(ss) && json_number_value(ss) > 0)
            snprintf(csp, sizeof csp, "x%.2f", json_number_value(bs) / json_number_value(ss));
        const char *cells[] = {config, cb, cs, csp};
        if (avoctl_table_add(t, cells) < 0) {
            ex = EXIT_FAIL;
            goto cleanup;
        }
    }
    if (avoctl_table_rows(t)) {
        fputc('\n', stdout);
        avoctl_table_print(t, stdout);
    }
cleanup:
    avoctl_table_free(t);
    return ex;
}

/* mkdir -p (avo_file_mkdirs) with a message for people: err names the part
 * that failed. */
static int make_out_dir(const char *path, char *err, size_t errlen)
{
    char failed[PATH_MAX];
    if (!*path) {
        snprintf(err, errlen, "'': an empty directory name");
        return -EINVAL;
    }
    int rc = avo_file_mkdirs(path, 0777, failed, sizeof failed);
    if (rc == -ENAMETOOLONG)
        snprintf(err, errlen, "%.200s...: path too long", path);
    else if (rc == -ENOTDIR && strcmp(failed, path) == 0)
        snprintf(err, errlen, "%s: not a directory", path);
    /* (a long path is cut: the message stays one line) */
    else if (rc && snprintf(err, errlen, "%s: cannot create the directory %s: %s", path, failed, strerror(-rc)) < 0)
        err[0] = 0;
    return rc;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        errorf("%s: %s", path, strerror(errno));
        return EXIT_FAIL;
    }
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad) {
        errorf("%s: write failed: %s", path, strerror(errno));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

static int cmd_best(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job;
    json_t *body = NULL;
    const char *out = avoctl_args_get(a, "output");
    int ex = job_arg(c, a, &job);
    if (ex || (ex = call(c, AVO_ROUTE_JOB_BEST, job, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    const json_t *best = json_object_get(body, "best");
    const char *src = avoctl_fmt_str(best, "source");
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    if (!json_is_object(best)) {
        if (!c->json) {
            errorf("job %lld has no committed candidate yet", (long long)job);
            ex = EXIT_FAIL;
        }
        goto cleanup;
    }
    if (!c->json) {
        /* The job's final measurement, for the speedup line; without it
         * (an older avod, a failed request) the aggregates' ratio, so
         * labelled. */
        json_t *jobj = NULL;
        if (call(c, AVO_ROUTE_JOB_GET, job, NULL, NULL, &jobj) != EXIT_OK) {
            json_decref(jobj);
            jobj = NULL;
        }
        ex = print_best(body, jobj, job);
        json_decref(jobj);
        if (ex != EXIT_OK)
            goto cleanup;
    }
    if (out) {
        if (!src) {
            errorf("avod sent no source for candidate %lld",
                   (long long)json_integer_value(json_object_get(best, "id")));
            ex = EXIT_FAIL;
        } else if ((ex = write_file(out, src)) == EXIT_OK && !c->json) {
            printf("\nwrote the source of cand %lld to %s\n",
                   (long long)json_integer_value(json_object_get(best, "id")), out);
        }
    } else if (!c->json && src) {
        printf("\n%s%s", src, src[0] && src[strlen(src) - 1] != '\n' ? "\n" : "");
    }
cleanup:
    json_decref(body);
    return ex;
}

/* A renderer's return value as an exit code: -EINVAL means avod's answer
 * did not have the shape the renderer needs. */
static int rendered(int rc, const char *what)
{
    if (rc == -EINVAL)
        errorf("unexpected answer from avod: not a %s", what);
    else if (rc == -ENOMEM)
        errorf("out of memory");
    else if (rc < 0)
        errorf("cannot write the output: %s", strerror(-rc));
    return rc < 0 ? EXIT_FAIL : EXIT_OK;
}

static int cmd_lineage(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job;
    json_t *body = NULL;
    int ex = job_arg(c, a, &job);
    if (ex || (ex = call(c, AVO_ROUTE_JOB_LINEAGE, job, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        ex = rendered(
            avoctl_lineage_print(body, avoctl_args_get(a, "all") != NULL, avoctl_table_term_width(stdout), stdout),
            "lineage");
    json_decref(body);
    return ex;
}

static int cmd_diff(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t from, to = 0;
    json_t *body = NULL;
    char query[64] = "";
    long status;
    int ex;

    if ((ex = candidate_arg(c, a->pos[0], "A", &from)) != EXIT_OK ||
        (a->npos > 1 && (ex = candidate_arg(c, a->pos[1], "B", &to)) != EXIT_OK))
        return ex;
    if (to)
        snprintf(query, sizeof query, "to=%lld", (long long)to);
    if ((ex = call_status(c, AVO_ROUTE_CANDIDATE_DIFF, from, query, NULL, &body, &status)) != EXIT_OK) {
        /* avod's message speaks of its query string; say it in our terms. */
        if (status == 400 && !to)
            fprintf(stderr, "avoctl diff: candidate %lld has no parent; compare it with another: avoctl diff %lld B\n",
                    (long long)from, (long long)from);
        return ex;
    }
    const char *diff = avoctl_fmt_str(body, "diff");
    if (c->json) {
        ex = print_json(body, JSON_INDENT(2));
    } else if (!diff) {
        errorf("unexpected answer from avod: no diff");
        ex = EXIT_FAIL;
    } else {
        /* As is: the text is for patch(1) and diff viewers. */
        fputs(diff, stdout);
    }
    json_decref(body);
    return ex;
}

/* `avoctl problem diff JOB`: exit 0 when the disk holds the pinned
 * version, 1 when it differs (as diff(1)). */
static int problem_diff(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job;
    json_t *body = NULL;
    char err[256];
    int ex;
    if (avoctl_args_i64("JOB", a->pos[1], 1, INT64_MAX, &job, err, sizeof err) < 0)
        return usage_error(c, err);
    if ((ex = call(c, AVO_ROUTE_JOB_PROBLEM_DIFF, job, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else if (avoctl_pindiff_print(body, stdout) < 0)
        ex = EXIT_FAIL;
    if (ex == EXIT_OK && !json_is_true(json_object_get(body, "same")))
        ex = EXIT_FAIL;
    json_decref(body);
    return ex;
}

/* `avoctl problem list` and `avoctl problem show NAME`: what avod's
 * kernels directory holds, as avod loads it. */
static int problem_view(avoctl_ctx *c, const avoctl_args *a, int show)
{
    json_t *body = NULL;
    int ex = show ? call_full(c, AVO_ROUTE_PROBLEM, 0, a->pos[1], NULL, NULL, &body, NULL)
                  : call(c, AVO_ROUTE_PROBLEMS, 0, NULL, NULL, &body);
    if (ex != EXIT_OK)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        ex = rendered(show ? avoctl_problemview_print(body, stdout)
                           : avoctl_problemview_list(body, avoctl_table_term_width(stdout), stdout),
                      "problem");
    json_decref(body);
    return ex;
}

/* `avoctl problem check DIR|NAME`: the worker's own compile and evaluation
 * code does the work (`avo-worker check`, daemon/worker/check.h); avoctl
 * finds the package and the worker binary and hands over. */
static int problem_check(avoctl_ctx *c, const avoctl_args *a)
{
    const char *arg = a->pos[1], *v;
    char dir[PATH_MAX], root[PATH_MAX], worker[PATH_MAX], err[600];
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (avo_paths_join(dir, sizeof dir, "", arg) < 0) {
            errorf("problem check: '%.200s...': path too long", arg);
            return EXIT_FAIL;
        }
    } else {
        /* Not a directory here: a problem's name under the local kernels root. */
        const char *k = avoctl_args_get(a, "kernels") ? avoctl_args_get(a, "kernels") : getenv("AVO_KERNELS");
        if (k && *k) {
            if (avo_paths_join(root, sizeof root, "", k) < 0)
                root[0] = 0;
        } else if (avo_paths_data("kernels", root, sizeof root) < 0)
            root[0] = 0;
        if (!root[0] || avo_problem_resolve(root, arg, dir, sizeof dir, err, sizeof err) < 0 || stat(dir, &st) != 0 ||
            !S_ISDIR(st.st_mode)) {
            errorf("problem check: '%s' is neither a directory nor a problem under %s (give a package "
                   "directory, or --kernels DIR)",
                   arg, root[0] ? root : "any kernels directory found");
            return EXIT_FAIL;
        }
    }
    const char *w = getenv("AVO_WORKER");
    int rc = w && *w                                     ? avo_paths_join(worker, sizeof worker, "", w)
             : avo_paths_exe_dir(root, sizeof root) == 0 ? avo_paths_join(worker, sizeof worker, root, "avo-worker")
                                                         : avo_paths_join(worker, sizeof worker, "", "avo-worker");
    if (rc < 0) {
        errorf("problem check: the path of avo-worker is too long (set AVO_WORKER to the avo-worker binary)");
        return EXIT_FAIL;
    }
    char *argv[16];
    int n = 0;
    argv[n++] = worker;
    argv[n++] = "check";
    argv[n++] = dir;
    static const char *const pass[] = {"max-builds", "sample-seed", "gpu-arch", "timeout"};
    char flags[4][24];
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        if ((v = avoctl_args_get(a, pass[i]))) {
            snprintf(flags[i], sizeof flags[i], "--%s", pass[i]);
            argv[n++] = flags[i];
            argv[n++] = (char *)v;
        }
    }
    if (avoctl_args_get(a, "no-eval"))
        argv[n++] = "--no-eval";
    if (c->json)
        argv[n++] = "--json";
    argv[n] = NULL;
    fflush(stdout);
    execv(worker, argv);
    errorf("problem check: cannot run %s: %s (set AVO_WORKER to the avo-worker binary)", worker, strerror(errno));
    return EXIT_FAIL;
}

/* `avoctl problem new DIR --target cpu|cuda [--name N]`. */
static int problem_new(avoctl_ctx *c, const avoctl_args *a)
{
    char files[256], err[600];
    const char *target = avoctl_args_get(a, "target");
    if (!target)
        return usage_error(c, "problem new: --target cpu or --target cuda: where the kernel runs");
    if (avoctl_scaffold(a->pos[1], target, avoctl_args_get(a, "name"), files, sizeof files, err, sizeof err) < 0) {
        if (strstr(err, "--target") == err || strstr(err, "--name") == err)
            return usage_error(c, err);
        errorf("problem new: %s", err);
        return EXIT_FAIL;
    }
    if (c->json) {
        json_t *o = json_pack("{s:s,s:s,s:s}", "dir", a->pos[1], "target", target, "files", files);
        int ex = print_json(o, JSON_INDENT(2));
        json_decref(o);
        return ex;
    }
    printf("wrote %s: %s\n"
           "a %s row-sum problem to make your own (docs/problems.md, \"Your own kernel\"); next:\n"
           "  avoctl problem check %s\n",
           a->pos[1], files, target, a->pos[1]);
    return EXIT_OK;
}

static int cmd_problem(avoctl_ctx *c, const avoctl_args *a)
{
    static const struct {
        const char *verb;
        int npos;
        const char *form;
    } verbs[] = {{"list", 1, "problem list"},
                 {"show", 2, "problem show NAME"},
                 {"check", 2, "problem check DIR|NAME"},
                 {"new", 2, "problem new DIR --target cpu|cuda"},
                 {"diff", 2, "problem diff JOB"}};
    size_t i;
    char err[256];
    for (i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(a->pos[0], verbs[i].verb))
            break;
    if (i == sizeof verbs / sizeof verbs[0]) {
        snprintf(err, sizeof err, "problem: unknown verb '%s' (list, show, check, new, diff)", a->pos[0]);
        return usage_error(c, err);
    }
    if (a->npos != verbs[i].npos) {
        snprintf(err, sizeof err, "%s: %s", a->npos < verbs[i].npos ? "missing argument" : "too many arguments",
                 verbs[i].form);
        return usage_error(c, err);
    }
    /* Each option belongs to one verb: one given to another is a mistake
     * to name, not to ignore. */
    static const char *const check_only[] = {"max-builds", "sample-seed", "no-eval", "gpu-arch", "timeout", "kernels"};
    static const char *const new_only[] = {"target", "name"};
    for (size_t k = 0; k < sizeof check_only / sizeof *check_only + sizeof new_only / sizeof *new_only; k++) {
        const int is_check = k < sizeof check_only / sizeof *check_only;
        const char *opt = is_check ? check_only[k] : new_only[k - sizeof check_only / sizeof *check_only];
        if (avoctl_args_get(a, opt) && i != (is_check ? 2u : 3u)) {
            snprintf(err, sizeof err, "--%s goes with 'problem %s', not 'problem %s'", opt, is_check ? "check" : "new",
                     verbs[i].verb);
            return usage_error(c, err);
        }
    }
    switch (i) {
    case 0:
    case 1:
        return problem_view(c, a, i == 1);
    case 2:
        return problem_check(c, a);
    case 3:
        return problem_new(c, a);
    default:
        return problem_diff(c, a);
    }
}

static int cmd_show(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t cand;
    json_t *body = NULL;
    int source = avoctl_args_get(a, "source") != NULL;
    int ex;

    if ((ex = candidate_arg(c, a->pos[0], "CANDIDATE", &cand)) != EXIT_OK ||
        (ex = call(c, AVO_ROUTE_CANDIDATE, cand, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json) {
        ex = print_json(body, JSON_INDENT(2));
        goto cleanup;
    }
    if (!source && !avoctl_fmt_str(body, "diff") && json_is_integer(json_object_get(body, "parent"))) {
        /* No stored diff (older candidates): avod computes one. Showing the
         * rest matters more than this, so a failure here is not an error. */
        avoctl_response r;
        if (avoctl_http_call(c->http, AVO_ROUTE_CANDIDATE_DIFF, cand, NULL, NULL, &r) == 0 && r.status == 200 &&
            avoctl_fmt_str(r.body, "diff"))
            json_object_set(body, "diff", json_object_get(r.body, "diff"));
        avoctl_http_response_free(&r);
    }
    ex = rendered(avoctl_show_print(body, source, avoctl_table_term_width(stdout), stdout), "candidate");
cleanup:
    json_decref(body);
    return ex;
}

/* POST /v1/candidates/{id}/profile, then with --wait GET /v1/profiles/{id}
 * until it is done or failed. Exit 0 when its counters (or why there are
 * none) are in; 1 when the candidate failed its checked calls or the task
 * was lost. */
static int cmd_profile(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t cand;
    json_t *body = NULL, *req = json_object();
    const char *config = avoctl_args_get(a, "config");
    int ex;

    if (!req)
        return EXIT_FAIL;
    if (config)
        json_object_set_new(req, "config", json_string(config));
    if ((ex = candidate_arg(c, a->pos[0], "CANDIDATE", &cand)) != EXIT_OK ||
        (ex = call(c, AVO_ROUTE_CANDIDATE_PROFILE, cand, NULL, req, &body)) != EXIT_OK)
        goto cleanup;
    const int64_t id = json_integer_value(json_object_get(body, "id"));
    if (avoctl_args_get(a, "wait")) {
        const char *state;
        while ((state = avoctl_fmt_str(body, "state")) && (!strcmp(state, "queued") || !strcmp(state, "running"))) {
            sleep_s(0.5);
            json_decref(body);
            if ((ex = call(c, AVO_ROUTE_PROFILE, id, NULL, NULL, &body)) != EXIT_OK)
                goto cleanup;
        }
        ex = state && !strcmp(state, "done") ? EXIT_OK : EXIT_FAIL;
    }
    if (c->json) {
        int pe = print_json(body, JSON_INDENT(2));
        ex = ex != EXIT_OK ? ex : pe;
    } else {
        int re = rendered(avoctl_show_profile(body, avoctl_table_term_width(stdout), stdout), "profile");
        ex = ex != EXIT_OK ? ex : re;
    }
cleanup:
    json_decref(req);
    json_decref(body);
    return ex;
}

/* Queue a paired comparison of candidate a against b at confidence conf
 * (<= 0: the daemon's default): the compare object in *out. */
static int compare_request(avoctl_ctx *c, int64_t a, int64_t b, double conf, json_t **out)
{
    json_t *req = json_pack("{s:I,s:I}", "candidate", (json_int_t)a, "against", (json_int_t)b);
    if (!req)
        return EXIT_FAIL;
    if (conf > 0)
        json_object_set_new(req, "confidence", json_real(conf));
    int ex = call(c, AVO_ROUTE_COMPARE, 0, NULL, req, out);
    json_decref(req);
    return ex;
}

/* Poll a compare (*cmp, replaced as it moves) until it is over or the
 * monotonic clock passes deadline (0: no deadline). */
static int compare_wait(avoctl_ctx *c, json_t **cmp, double deadline)
{
    avoctl_paired_ratio pr;
    char why[8];
    const int64_t id = json_integer_value(json_object_get(*cmp, "id"));
    while (avoctl_compare_read(*cmp, &pr, why, sizeof why) == AVOCTL_COMPARE_PENDING &&
           (!deadline || now_s() < deadline)) {
        sleep_s(0.5);
        json_t *next = NULL;
        int ex = call(c, AVO_ROUTE_COMPARE_GET, id, NULL, NULL, &next);
        if (ex != EXIT_OK)
            return ex;
        json_decref(*cmp);
        *cmp = next;
    }
    return EXIT_OK;
}

static int cmd_compare(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t ca, cb;
    double conf = 0;
    char err[256], line[1024];
    json_t *cmp = NULL;
    int ex;
    const char *cs = avoctl_args_get(a, "confidence");
    if ((ex = candidate_arg(c, a->pos[0], "A", &ca)) != EXIT_OK ||
        (ex = candidate_arg(c, a->pos[1], "B", &cb)) != EXIT_OK)
        return ex;
    if (cs && (avoctl_args_double("--confidence", cs, 0, 1, &conf, err, sizeof err) < 0 || !(conf > 0 && conf < 1)))
        return usage_error(c, "--confidence: a number in (0, 1), e.g. 0.95");
    if ((ex = compare_request(c, ca, cb, conf, &cmp)) != EXIT_OK)
        return ex;
    if (avoctl_args_get(a, "wait")) {
        avoctl_paired_ratio pr;
        if ((ex = compare_wait(c, &cmp, 0)) != EXIT_OK)
            goto cleanup;
        ex = avoctl_compare_read(cmp, &pr, line, sizeof line) == AVOCTL_COMPARE_MEASURED ? EXIT_OK : EXIT_FAIL;
    }
    if (c->json) {
        int pe = print_json(cmp, JSON_INDENT(2));
        ex = ex != EXIT_OK ? ex : pe;
    } else {
        avoctl_compare_line(cmp, line, sizeof line);
        puts(line);
    }
cleanup:
    json_decref(cmp);
    return ex;
}

/* avoctl revalidate JOB|cand:ID [--on WORKER|GPU] [--wait]: the committed
 * versions of a job (or one candidate) evaluated again on the toolchain
 * that claims them now, against their recorded results (sql/018). */
static int cmd_revalidate(avoctl_ctx *c, const avoctl_args *a)
{
    const char *arg = a->pos[0], *on = avoctl_args_get(a, "on");
    const char *what = "job";
    char *end;
    json_t *req = NULL, *rv = NULL;
    int ex;
    if (!strncmp(arg, "cand:", 5) || !strncmp(arg, "candidate:", 10)) {
        what = "candidate";
        arg = strchr(arg, ':') + 1;
    } else if (!strncmp(arg, "job:", 4)) {
        arg += 4;
    }
    long long id = strtoll(arg, &end, 10);
    if (!*arg || *end || id < 1)
        return usage_error(c, "JOB: a job id (7, job:7) or a candidate (cand:55)");
    req = json_pack("{s:I}", what, (json_int_t)id);
    if (on) {
        long long w = strtoll(on, &end, 10);
        if (!*on || (*end == 0 && w < 1))
            return json_decref(req), usage_error(c, "--on: a worker id or a GPU model or UUID");
        if (*end == 0)
            json_object_set_new(req, "on_worker", json_integer(w));
        else
            json_object_set_new(req, "on_gpu", json_string(on));
    }
    if ((ex = call(c, AVO_ROUTE_REVALIDATE, 0, NULL, req, &rv)) != EXIT_OK)
        goto cleanup;
    if (avoctl_args_get(a, "wait")) {
        const int64_t rid = json_integer_value(json_object_get(rv, "id"));
        while (!avoctl_toolchain_revalidation_over(rv)) {
            sleep_s(0.5);
            json_t *next = NULL;
            if ((ex = call(c, AVO_ROUTE_REVALIDATION, rid, NULL, NULL, &next)) != EXIT_OK)
                goto cleanup;
            json_decref(rv);
            rv = next;
        }
    }
    if (c->json)
        ex = print_json(rv, JSON_INDENT(2));
    else
        ex = rendered(avoctl_toolchain_revalidation_print(rv, avoctl_table_term_width(stdout), stdout), "revalidation");
cleanup:
    json_decref(req);
    json_decref(rv);
    return ex;
}

static int write_markdown(const json_t *report, const char *path)
{
    if (strcmp(path, "-") == 0)
        return rendered(avoctl_report_markdown(report, stdout), "report");
    FILE *f = fopen(path, "w");
    if (!f) {
        errorf("%s: %s", path, strerror(errno));
        return EXIT_FAIL;
    }
    int rc = avoctl_report_markdown(report, f);
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc == -EINVAL)
        return rendered(rc, "report");
    if (rc < 0) {
        errorf("%s: write failed: %s", path, strerror(-rc));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

static int cmd_report(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job;
    json_t *body = NULL;
    const char *md = avoctl_args_get(a, "markdown");
    int ex = job_arg(c, a, &job);
    if (ex || (ex = call(c, AVO_ROUTE_JOB_REPORT, job, NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (md && strcmp(md, "-") == 0) {
        /* The markdown is the output; nothing else may go to stdout. */
        ex = write_markdown(body, md);
        goto cleanup;
    }
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        ex = rendered(avoctl_report_print(body, avoctl_table_term_width(stdout), stdout), "report");
    if (ex == EXIT_OK && md && (ex = write_markdown(body, md)) == EXIT_OK && !c->json)
        printf("\nwrote the report of job %lld to %s\n", (long long)job, md);
cleanup:
    json_decref(body);
    return ex;
}

static int cmd_transcript(avoctl_ctx *c, const avoctl_args *a)
{
    int64_t job, step = 0;
    json_t *body = NULL;
    char err[256], query[32] = "";
    const char *st = avoctl_args_get(a, "step");
    int ex = job_arg(c, a, &job);
    if (ex)
        return ex;
    if (st) {
        if (avoctl_args_i64("--step", st, 1, 1000000, &step, err, sizeof err) < 0)
            return usage_error(c, err);
        snprintf(query, sizeof query, "step=%lld", (long long)step);
    }
    if ((ex = call(c, AVO_ROUTE_JOB_TRANSCRIPT, job, st ? query : NULL, NULL, &body)) != EXIT_OK)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        ex = rendered(avoctl_transcript_print(body, avoctl_args_get(a, "full") != NULL, stdout), "transcript");
    json_decref(body);
    return ex;
}

static int cmd_workers(avoctl_ctx *c, const avoctl_args *a)
{
    (void)a;
    json_t *body = NULL;
    avoctl_table *t = NULL;
    int ex = call(c, AVO_ROUTE_WORKERS, 0, NULL, NULL, &body);
    if (ex)
        return ex;
    if (c->json) {
        ex = print_json(body, JSON_INDENT(2));
        goto cleanup;
    }
    static const char *const hdr[] = {"ID",        "HOST", "PID",       "TARGET", "STATE",
                                      "LAST_SEEN", "JOB",  "CANDIDATE", "WORK",   "ELAPSED"};
    if (avoctl_table_new(&t, 10, hdr, 1u << 0 | 1u << 2 | 1u << 6 | 1u << 7) < 0) {
        ex = EXIT_FAIL;
        goto cleanup;
    }
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(body, "workers"), i, w)
    {
        char id[32], pid[32], seen[32];
        avoctl_fmt_field(json_object_get(w, "id"), id, sizeof id);
        avoctl_fmt_field(json_object_get(w, "pid"), pid, sizeof pid);
        avoctl_fmt_time(avoctl_fmt_str(w, "last_seen"), 1, seen, sizeof seen);
        /* what it runs now (sql/023_why.sql's avo_worker_current), "-" when idle */
        const json_t *cur = json_object_get(w, "current");
        char job[32] = "-", cand[32] = "-", work[64] = "-", el[64] = "-";
        if (json_is_object(cur)) {
            avoctl_fmt_field(json_object_get(cur, "job"), job, sizeof job);
            avoctl_fmt_field(json_object_get(cur, "candidate"), cand, sizeof cand);
            snprintf(work, sizeof work, "%s %lld", avoctl_fmt_str(cur, "kind") ? avoctl_fmt_str(cur, "kind") : "?",
                     (long long)json_integer_value(json_object_get(cur, "id")));
            avoctl_fmt_duration(json_number_value(json_object_get(cur, "elapsed_s")), el, sizeof el);
        }
        const char *row[] = {id,
                             avoctl_fmt_str(w, "host"),
                             pid,
                             avoctl_fmt_str(w, "target"),
                             avoctl_fmt_str(w, "state"),
                             seen,
                             job,
                             cand,
                             work,
                             el};
        if (avoctl_table_add(t, row) < 0) {
            ex = EXIT_FAIL;
            goto cleanup;
        }
    }
    if (avoctl_table_rows(t) == 0)
        puts("no workers");
    else
        avoctl_table_print(t, stdout);
cleanup:
    avoctl_table_free(t);
    json_decref(body);
    return ex;
}

static int cmd_teams(avoctl_ctx *c, const avoctl_args *a)
{
    (void)a;
    json_t *body = NULL;
    int ex = call(c, AVO_ROUTE_TEAMS, 0, NULL, NULL, &body);
    if (ex)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        ex = rendered(avoctl_teams_print(body, stdout), "teams");
    json_decref(body);
    return ex;
}

/* ---- knowledge base ----------------------------------------------------- */

static int kb_add(avoctl_ctx *c, const avoctl_args *a)
{
    int ex = EXIT_OK;
    if (a->npos < 2)
        return usage_error(c, "kb add: name at least one FILE");
    for (int i = 1; i < a->npos; i++) {
        char err[600];
        json_t *text = NULL, *res = NULL;
        /* the daemon's own limit; checked here so the message names the file */
        int rc = avoctl_buf_read_text("kb add", a->pos[i], 512u * 1024u, &text, err, sizeof err);
        if (rc < 0) {
            errorf("%s", err);
            ex = EXIT_FAIL;
            continue;
        }
        const char *slash = strrchr(a->pos[i], '/');
        json_t *body = json_pack("{s:s,s:o}", "name", slash ? slash + 1 : a->pos[i], "text", text);
        int e = body ? call(c, AVO_ROUTE_KB_ADD, 0, NULL, body, &res) : EXIT_FAIL;
        json_decref(body);
        if (e) {
            if (e == EXIT_UNREACHABLE)
                return e;
            ex = EXIT_FAIL;
            continue;
        }
        if (c->json)
            print_json(res, JSON_COMPACT);
        else if (json_is_true(json_object_get(res, "added")))
            printf("added %s: document %lld, %lld chunk%s\n", a->pos[i],
                   (long long)json_integer_value(json_object_get(res, "id")),
                   (long long)json_integer_value(json_object_get(res, "chunks")),
                   json_integer_value(json_object_get(res, "chunks")) == 1 ? "" : "s");
        else
            printf("%s: already in the knowledge base as document %lld (%s, %lld chunk%s)\n", a->pos[i],
                   (long long)json_integer_value(json_object_get(res, "id")), avoctl_fmt_str(res, "name"),
                   (long long)json_integer_value(json_object_get(res, "chunks")),
                   json_integer_value(json_object_get(res, "chunks")) == 1 ? "" : "s");
        json_decref(res);
    }
    return ex;
}

static int kb_search(avoctl_ctx *c, const avoctl_args *a)
{
    if (a->npos < 2)
        return usage_error(c, "kb search: give the words to search for");
    avoctl_buf words = {0}, query = {0};
    for (int i = 1; i < a->npos; i++)
        if (avoctl_buf_append(&words, " ", i > 1, 0) < 0 ||
            avoctl_buf_append(&words, a->pos[i], strlen(a->pos[i]), 0) < 0)
            return EXIT_FAIL;
    int64_t limit = AVO_KB_SEARCH_LIMIT_DEFAULT;
    const char *l = avoctl_args_get(a, "limit");
    char err[256];
    if (l && avoctl_args_i64("--limit", l, 1, AVO_KB_SEARCH_LIMIT_MAX, &limit, err, sizeof err) < 0) {
        avoctl_buf_free(&words);
        return usage_error(c, err);
    }
    char *esc = curl_easy_escape(NULL, words.p, (int)words.len), num[32];
    snprintf(num, sizeof num, "&limit=%lld", (long long)limit);
    json_t *res = NULL;
    int ex = EXIT_FAIL;
    if (esc && avoctl_buf_append(&query, "q=", 2, 0) == 0 && avoctl_buf_append(&query, esc, strlen(esc), 0) == 0 &&
        avoctl_buf_append(&query, num, strlen(num), 0) == 0)
        ex = call(c, AVO_ROUTE_KB_SEARCH, 0, query.p, NULL, &res);
    curl_free(esc);
    avoctl_buf_free(&words);
    avoctl_buf_free(&query);
    if (ex)
        return ex;
    if (c->json) {
        ex = print_json(res, JSON_INDENT(2));
    } else {
        size_t i;
        json_t *h;
        json_array_foreach(json_object_get(res, "hits"), i, h)
        {
            const int doc = !strcmp(avoctl_fmt_str(h, "kind") ? avoctl_fmt_str(h, "kind") : "", "document");
            const char *title = avoctl_fmt_str(h, "title");
            printf("%s[%s %lld] %s%s%s (rank %.3g)\n", i ? "\n" : "", doc ? "chunk" : "case",
                   (long long)json_integer_value(json_object_get(h, "id")), doc ? avoctl_fmt_str(h, "source") : title,
                   doc && title && *title ? " - " : "", doc && title ? title : "",
                   json_number_value(json_object_get(h, "rank")));
            const char *snip = avoctl_fmt_str(h, "snippet");
            for (const char *p = snip ? snip : ""; *p;) {
                size_t n = strcspn(p, "\n");
                printf("    %.*s\n", (int)n, p);
                p += n + (p[n] == '\n');
            }
        }
        if (!json_array_size(json_object_get(res, "hits")))
            printf("no hits for '%s'\n", avoctl_fmt_str(res, "query"));
        ex = EXIT_OK;
    }
    json_decref(res);
    return ex;
}

static int cmd_kb(avoctl_ctx *c, const avoctl_args *a)
{
    const char *verb = a->pos[0];
    json_t *res = NULL;
    int ex;
    if (!strcmp(verb, "add"))
        return kb_add(c, a);
    if (!strcmp(verb, "search"))
        return kb_search(c, a);
    if (!strcmp(verb, "show")) {
        int64_t id;
        char err[256];
        if (a->npos != 2 || avoctl_args_i64("ID", a->pos[1], 1, INT64_MAX, &id, err, sizeof err) < 0)
            return usage_error(c, a->npos != 2 ? "kb show: give one chunk ID (from kb search)" : err);
        if ((ex = call(c, AVO_ROUTE_KB_CHUNK, id, NULL, NULL, &res)))
            return ex;
        if (c->json)
            ex = print_json(res, JSON_INDENT(2));
        else
            printf("chunk %lld of %s (%lld of %lld)%s%s\n\n%s\n", (long long)id, avoctl_fmt_str(res, "source"),
                   (long long)json_integer_value(json_object_get(res, "seq")) + 1,
                   (long long)json_integer_value(json_object_get(res, "of")), *avoctl_fmt_str(res, "title") ? ": " : "",
                   avoctl_fmt_str(res, "title"), avoctl_fmt_str(res, "body"));
        json_decref(res);
        return ex;
    }
    if (!strcmp(verb, "list")) {
        if (a->npos != 1)
            return usage_error(c, "kb list takes no arguments");
        if ((ex = call(c, AVO_ROUTE_KB_LIST, 0, NULL, NULL, &res)))
            return ex;
        if (c->json) {
            ex = print_json(res, JSON_INDENT(2));
        } else {
            static const char *const hdr[] = {"ID", "NAME", "KIND", "BYTES", "CHUNKS", "ADDED"};
            avoctl_table *t = NULL;
            ex = avoctl_table_new(&t, 6, hdr, 1u << 0 | 1u << 3 | 1u << 4) < 0 ? EXIT_FAIL : EXIT_OK;
            size_t i;
            json_t *d;
            json_array_foreach(json_object_get(res, "documents"), i, d)
            {
                char id[32], bytes[32], chunks[32], added[32];
                avoctl_fmt_field(json_object_get(d, "id"), id, sizeof id);
                avoctl_fmt_field(json_object_get(d, "bytes"), bytes, sizeof bytes);
                avoctl_fmt_field(json_object_get(d, "chunks"), chunks, sizeof chunks);
                avoctl_fmt_time(avoctl_fmt_str(d, "added_at"), 1, added, sizeof added);
                const char *row[] = {id, avoctl_fmt_str(d, "name"), avoctl_fmt_str(d, "kind"), bytes, chunks, added};
                if (!ex && avoctl_table_add(t, row) < 0)
                    ex = EXIT_FAIL;
            }
            if (!ex) {
                if (avoctl_table_rows(t) == 0)
                    puts("the knowledge base is empty (avoctl kb add FILE...)");
                else
                    avoctl_table_print(t, stdout);
            }
            avoctl_table_free(t);
        }
        json_decref(res);
        return ex;
    }
    static const char *const verbs[] = {"add", "search", "show", "list"};
    const char *near = avo_suggest(verb, verbs, 4);
    char msg[160];
    snprintf(msg, sizeof msg, "unknown kb command '%.40s' (add, search, show, list)%s%s%s", verb,
             near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    return usage_error(c, msg);
}

/* ---- campaign ---------------------------------------------------------- */

static void utc_now(char *buf, size_t len, const char *fmt)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, fmt, &tm);
}

/* A summary (JSON, or its Markdown) as the whole of path, written
 * atomically, so a reader (or the next campaign) never sees half of one. */
static int write_atomic(const char *path, const json_t *summary, int markdown)
{
    char *text = NULL;
    size_t len = 0;
    int rc = -ENOMEM;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        rc = markdown ? avoctl_campaign_markdown(summary, f) : json_dumpf(summary, f, JSON_INDENT(2));
        if (!markdown)
            fputc('\n', f);
        if (fclose(f) != 0 && rc >= 0)
            rc = -ENOMEM;
    }
    if (rc >= 0)
        rc = avo_file_write_atomic(path, text, len, 0666);
    free(text);
    if (rc < 0) {
        errorf("cannot write %s: %s", path, strerror(rc < -1 ? -rc : EIO));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* Cancel a campaign's job (a finished one answers 409 conflict: said, and
 * nothing more to do). */
static void cancel_quietly(avoctl_ctx *c, json_int_t id)
{
    json_t *r = NULL;
    long status = 0;
    call_status(c, AVO_ROUTE_JOB_CANCEL, id, NULL, NULL, &r, &status);
    json_decref(r);
}

/* The paired compares a campaign's summary needs (avoctl_campaign_compare_list),
 * queued together and waited for until deadline (monotonic): {problem:
 * compare object, or {"error": why} when avod refused it or could not be
 * asked}. NULL when out of memory. */
static json_t *campaign_compares(avoctl_ctx *c, const char *name, const json_t *summary, double deadline)
{
    json_t *todo = avoctl_campaign_compare_list(summary), *out = json_object();
    size_t i;
    json_t *t;
    if (!todo || !out) {
        json_decref(todo);
        json_decref(out);
        return NULL;
    }
    json_array_foreach(todo, i, t)
    {
        const char *problem = avoctl_fmt_str(t, "problem");
        const json_int_t a = json_integer_value(json_object_get(t, "candidate"));
        const json_int_t b = json_integer_value(json_object_get(t, "against"));
        json_t *req = json_pack("{s:I,s:I}", "candidate", a, "against", b);
        avoctl_response r = {0};
        char why[600];
        if (now_s() >= deadline) {
            snprintf(why, sizeof why, "the campaign's --timeout was reached before it could be measured paired");
        } else if (!req || open_http(c) < 0 || avoctl_http_call(c->http, AVO_ROUTE_COMPARE, 0, NULL, req, &r) < 0) {
            snprintf(why, sizeof why, "avod could not be asked for a paired compare: %s",
                     r.error[0] ? r.error : "no answer");
        } else if (r.status != 202 || !json_is_integer(json_object_get(r.body, "id"))) {
            const char *msg = avoctl_fmt_str(json_object_get(r.body, "error"), "message");
            snprintf(why, sizeof why, "avod refused the paired compare: %s", msg ? msg : "unexpected answer");
        } else {
            why[0] = 0;
            json_object_set(out, problem, r.body);
            if (!c->json)
                printf("campaign %s: %s: measuring this best (candidate %lld) against the previous (%lld) paired, "
                       "compare %lld\n",
                       name, problem, (long long)a, (long long)b,
                       (long long)json_integer_value(json_object_get(r.body, "id")));
        }
        if (why[0]) {
            json_object_set_new(out, problem, json_pack("{s:s}", "error", why));
            if (!c->json)
                printf("campaign %s: %s: %s\n", name, problem, why);
        }
        json_decref(req);
        avoctl_http_response_free(&r);
    }
    fflush(stdout);
    const char *problem;
    json_t *cmp;
    json_object_foreach(out, problem, cmp)
    {
        if (json_object_get(cmp, "error"))
            continue;
        json_t *now = json_incref(cmp);
        if (compare_wait(c, &now, deadline) != EXIT_OK) {
            json_decref(now);
            continue; /* the last state seen stands; the summary says why */
        }
        json_object_set_new(out, problem, now);
    }
    json_decref(todo);
    return out;
}

/* One call whose failure the campaign reports rather than prints: the
 * answer's body (2xx) in *out, or why not in why. 0 or -1. */
static int ask_quietly(avoctl_ctx *c, avo_route_id route, int64_t id, const json_t *body, json_t **out, char *why,
                       size_t whylen)
{
    avoctl_response r = {0};
    int rc = -1;
    *out = NULL;
    if (open_http(c) < 0 || avoctl_http_call(c->http, route, id, NULL, body, &r) < 0) {
        snprintf(why, whylen, "avod could not be asked: %s", r.error[0] ? r.error : "no answer");
    } else if (r.status < 200 || r.status >= 300 || !r.body) {
        const char *msg = avoctl_fmt_str(json_object_get(r.body, "error"), "message");
        snprintf(why, whylen, "avod refused: %s", msg ? msg : "unexpected answer");
    } else {
        *out = json_incref(r.body);
        rc = 0;
    }
    avoctl_http_response_free(&r);
    return rc;
}

/* The campaign's re-validation (client/campreval.h): reads the previous
 * summary's best candidates and the live workers, decides which problems'
 * toolchain changed, queues a re-validation of each such best on the
 * worker whose toolchain differs (why "campaign"), and prints one line
 * per problem queued, or the one line that nothing changed. *plan: the
 * summary's section; *revs: {problem: re-validation or {"error"}}.
 * EXIT_OK, or EXIT_FAIL when out of memory. */
static int campaign_reval_queue(avoctl_ctx *c, const char *name, avoctl_campreval_mode mode, const json_t *prev,
                                const json_t *jobs, json_t **plan, json_t **revs)
{
    json_t *cands = json_object(), *workers = NULL, *wl = NULL, *todo = NULL;
    char why[700];
    const char *pname;
    json_t *p;
    *revs = json_object();
    *plan = NULL;
    if (!cands || !*revs)
        goto oom;
    json_object_foreach(json_object_get(prev, "problems"), pname, p)
    {
        const json_t *bc = json_object_get(p, "baseline_candidate");
        json_t *cand = NULL;
        if (!json_is_integer(bc))
            continue;
        if (ask_quietly(c, AVO_ROUTE_CANDIDATE, json_integer_value(bc), NULL, &cand, why, sizeof why) < 0)
            cand = json_pack("{s:s}", "error", why);
        if (!cand || json_object_set_new(cands, pname, cand) < 0)
            goto oom;
    }
    if (ask_quietly(c, AVO_ROUTE_WORKERS, 0, NULL, &wl, why, sizeof why) < 0 && !c->json)
        printf("campaign %s: the workers could not be listed (%s): no toolchain to compare with\n", name, why);
    workers = json_object_get(wl, "workers");
    if (!(*plan = avoctl_campreval_plan(mode, prev, cands, jobs, workers)) || !(todo = avoctl_campreval_todo(*plan)))
        goto oom;
    if (!c->json)
        printf("campaign %s: %s\n", name, avoctl_fmt_str(*plan, "message"));
    size_t i;
    json_t *t;
    json_array_foreach(todo, i, t)
    {
        const char *problem = avoctl_fmt_str(t, "problem");
        const json_t *e = json_object_get(json_object_get(*plan, "problems"), problem);
        json_t *req = json_pack("{s:O,s:O,s:s}", "candidate", json_object_get(t, "candidate"), "on_worker",
                                json_object_get(t, "worker"), "why", "campaign");
        json_t *rv = NULL;
        if (!req)
            goto oom;
        if (ask_quietly(c, AVO_ROUTE_REVALIDATE, 0, req, &rv, why, sizeof why) < 0)
            rv = json_pack("{s:s}", "error", why);
        json_decref(req);
        if (!rv || json_object_set_new(*revs, problem, rv) < 0)
            goto oom;
        if (c->json)
            continue;
        if (json_object_get(rv, "error"))
            printf("campaign %s: %s: the previous best (candidate %lld) could not be re-validated: %s\n", name, problem,
                   (long long)json_integer_value(json_object_get(t, "candidate")), why);
        else
            printf("campaign %s: %s: %s%s%son worker %lld: re-validating the previous best (candidate %lld), "
                   "revalidation %lld\n",
                   name, problem, avoctl_fmt_str(e, "changes") ? "toolchain changed (" : "",
                   avoctl_fmt_str(e, "changes") ? avoctl_fmt_str(e, "changes") : "",
                   avoctl_fmt_str(e, "changes") ? ") " : "",
                   (long long)json_integer_value(json_object_get(t, "worker")),
                   (long long)json_integer_value(json_object_get(t, "candidate")),
                   (long long)json_integer_value(json_object_get(rv, "id")));
    }
    fflush(stdout);
    json_decref(cands);
    json_decref(wl);
    json_decref(todo);
    return EXIT_OK;
oom:
    json_decref(cands);
    json_decref(wl);
    json_decref(todo);
    return EXIT_FAIL;
}

/* Poll each queued re-validation of revs until it is done or the
 * monotonic clock passes deadline; the last state seen stands. */
static void campaign_reval_wait(avoctl_ctx *c, json_t *revs, double deadline)
{
    const char *problem;
    json_t *rv;
    json_object_foreach(revs, problem, rv)
    {
        const json_int_t id = json_integer_value(json_object_get(rv, "id"));
        json_t *now = json_incref(rv);
        char why[700];
        while (id && !avoctl_toolchain_revalidation_over(now) && now_s() < deadline) {
            sleep_s(0.5);
            json_t *next = NULL;
            if (ask_quietly(c, AVO_ROUTE_REVALIDATION, id, NULL, &next, why, sizeof why) < 0)
                break;
            json_decref(now);
            now = next;
        }
        json_object_set_new(revs, problem, now);
    }
}

/* One `avoctl campaign run`: its options, the file, the jobs and what
 * they came to. */
typedef struct {
    const char *file, *out_dir, *name, *prev_path, *mode_s;
    double tol;
    int64_t timeout;
    double until; /* when --timeout ends (0: none) */
    avoctl_campreval_mode mode;
    json_t *doc, *specs, *prev, *ids, *jobs, *summary, *compares, *rplan, *revs;
    json_t *waits;                    /* job id -> the "no live worker" detail last said of it */
    char started[32], path[PATH_MAX]; /* path: the NAME-latest.json summary */
} campaign_run;

/* The flags, checked before anything is read or sent. */
static int campaign_options(avoctl_ctx *c, const avoctl_args *a, campaign_run *r)
{
    char err[512];
    if (strcmp(a->pos[0], "run") != 0 || a->npos != 2)
        return usage_error(c, strcmp(a->pos[0], "run") ? "campaign: the subcommand is 'run'"
                                                       : "campaign run: give one campaign FILE");
    r->file = a->pos[1];
    r->out_dir = avoctl_args_get(a, "out") ? avoctl_args_get(a, "out") : ".";
    const char *timeout_s = avoctl_args_get(a, "timeout");
    if (timeout_s && avoctl_args_i64("--timeout", timeout_s, 1, 30 * 86400, &r->timeout, err, sizeof err) < 0)
        return usage_error(c, err);
    r->mode = AVOCTL_REVAL_OFF;
    r->mode_s = avoctl_args_get(a, "revalidate");
    if (r->mode_s && avoctl_campreval_mode_parse(r->mode_s, &r->mode) < 0)
        return usage_error(c, "--revalidate: one of off, on_toolchain_change, always");
    return EXIT_OK;
}

/* DIR/NAME-TAG.EXT, a summary's path, into out (a PATH_MAX buffer): 0, or
 * -ENAMETOOLONG (said on stderr) when it does not fit. */
static int summary_path(char *out, size_t outlen, const char *dir, const char *name, const char *tag, const char *ext)
{
    int n = snprintf(out, outlen, "%s/%s-%s.%s", dir, name, tag, ext);
    if (n >= 0 && (size_t)n < outlen)
        return 0;
    errorf("--out %.200s: the path of the summary %s-%s.%s is too long", dir, name, tag, ext);
    return -ENAMETOOLONG;
}

/* The campaign file, the output directory and the previous summary. */
static int campaign_load(const avoctl_args *a, campaign_run *r)
{
    char err[512];
    json_error_t je;
    if (!(r->doc = json_load_file(r->file, 0, &je))) {
        if (je.line > 0)
            errorf("%s: %s (line %d)", r->file, je.text, je.line);
        else
            errorf("%s", je.text);
        return EXIT_USAGE;
    }
    if (avoctl_campaign_parse(r->doc, &r->name, &r->tol, &r->specs, err, sizeof err) < 0) {
        errorf("%s: %s", r->file, err);
        return EXIT_USAGE;
    }
    /* the file's option (checked by avoctl_campaign_parse), unless the flag said */
    if (!r->mode_s)
        avoctl_campreval_mode_parse(json_string_value(json_object_get(r->doc, "revalidate")), &r->mode);
    /* A new directory is made (with its parents, as mkdir -p) */
    if (make_out_dir(r->out_dir, err, sizeof err) < 0) {
        errorf("--out %s", err);
        return EXIT_USAGE;
    }
    /* The previous campaign of this name, to compare each problem's best. */
    r->prev_path = avoctl_args_get(a, "previous");
    if (summary_path(r->path, sizeof r->path, r->out_dir, r->name, "latest", "json") < 0)
        return EXIT_USAGE;
    if (!r->prev_path && access(r->path, R_OK) == 0)
        r->prev_path = r->path;
    if (r->prev_path && !(r->prev = json_load_file(r->prev_path, 0, &je))) {
        errorf("previous summary %s: %s", r->prev_path, je.text);
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

/* Every job, or none: one refused cancels those submitted before it. */
static int campaign_submit(avoctl_ctx *c, campaign_run *r)
{
    size_t i;
    json_t *spec;
    json_array_foreach(r->specs, i, spec)
    {
        json_t *job = NULL;
        int ex = call(c, AVO_ROUTE_JOB_SUBMIT, 0, NULL, spec, &job);
        if (ex != EXIT_OK) {
            errorf("campaign %s: job %zu (%s) was not accepted; cancelling the %zu submitted before it", r->name, i + 1,
                   avoctl_fmt_str(spec, "problem"), json_array_size(r->ids));
            size_t k;
            json_t *id;
            json_array_foreach(r->ids, k, id) cancel_quietly(c, json_integer_value(id));
            return ex;
        }
        json_array_append_new(r->ids, json_integer(json_integer_value(json_object_get(job, "id"))));
        if (!c->json)
            printf("campaign %s: job %lld submitted (%s)\n", r->name,
                   (long long)json_integer_value(json_object_get(job, "id")), avoctl_fmt_str(spec, "problem"));
        /* as `avoctl submit` says them: a campaign that no worker can run
         * must not wait in silence */
        size_t wi;
        json_t *w;
        json_array_foreach(json_object_get(job, "warnings"), wi, w) if (json_is_string(w))
            fprintf(stderr, "avoctl: warning: campaign %s, job %lld (%s): %s\n", r->name,
                    (long long)json_integer_value(json_object_get(job, "id")), avoctl_fmt_str(spec, "problem"),
                    json_string_value(w));
        json_decref(job);
    }
    fflush(stdout);
    return EXIT_OK;
}

/* A job that waits because no live worker would claim its work (avod's
 * detail, docs/api.md "Job detail"): said on stderr when it starts or its
 * reason changes, never again while it stays the same. */
static void campaign_say_wait(campaign_run *r, const json_t *job)
{
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)json_integer_value(json_object_get(job, "id")));
    const char *d = avoctl_fmt_str(job, "detail");
    const int waits = !is_final(avoctl_fmt_str(job, "state")) && d && strstr(d, "no live worker");
    const char *said = json_string_value(json_object_get(r->waits, key));
    if (!waits) {
        json_object_del(r->waits, key);
        return;
    }
    if (said && !strcmp(said, d))
        return;
    fprintf(stderr, "avoctl: warning: campaign %s, job %s (%s): %s\n", r->name, key,
            avoctl_fmt_str(job, "problem") ? avoctl_fmt_str(job, "problem") : "?", d);
    json_object_set_new(r->waits, key, json_string(d));
}

/* Each job's state into r->jobs; *done: how many are final. */
static int campaign_poll(avoctl_ctx *c, campaign_run *r, size_t *done)
{
    size_t i;
    json_t *id;
    *done = 0;
    json_array_clear(r->jobs);
    json_array_foreach(r->ids, i, id)
    {
        json_t *job = NULL;
        int ex = call(c, AVO_ROUTE_JOB_GET, json_integer_value(id), NULL, NULL, &job);
        if (ex != EXIT_OK)
            return ex;
        *done += is_final(avoctl_fmt_str(job, "state"));
        campaign_say_wait(r, job);
        json_array_append_new(r->jobs, job);
    }
    return EXIT_OK;
}

/* Wait for every job; a timeout cancels what is left (it then counts as
 * failed in the summary). */
static int campaign_wait(avoctl_ctx *c, campaign_run *r)
{
    int64_t timeout = r->timeout;
    const double t0 = now_s();
    double down_since = 0;
    size_t done = 0, shown = 0;
    r->until = timeout ? t0 + (double)timeout : 0;
    for (;;) {
        int ex = campaign_poll(c, r, &done);
        if (ex != EXIT_OK) {
            /* avod restarting is waited out (its jobs go on); anything
             * else, or two minutes without it, ends the campaign. */
            if (ex != EXIT_UNREACHABLE || (down_since && now_s() - down_since > 120))
                return ex;
            if (!down_since)
                down_since = now_s();
            sleep_s(2);
            continue;
        }
        down_since = 0;
        if (!c->json && done != shown) {
            printf("campaign %s: %zu of %zu jobs finished\n", r->name, done, json_array_size(r->ids));
            fflush(stdout);
            shown = done;
        }
        if (done == json_array_size(r->ids))
            return EXIT_OK;
        if (timeout && now_s() - t0 > (double)timeout) {
            errorf("campaign %s: --timeout %lld s reached; cancelling the jobs still running", r->name,
                   (long long)timeout);
            size_t i;
            json_t *id;
            json_array_foreach(r->ids, i, id) cancel_quietly(c, json_integer_value(id));
            timeout = 0; /* one more pass collects their final states */
        }
        struct timespec nap = {2, 0};
        nanosleep(&nap, NULL);
    }
}

/* The previous bests re-validated where the toolchain that would run the
 * work changed (queued first, so they run beside the compares), then each
 * problem's best against the previous baseline's candidate, measured
 * paired before a regression is called; within what is left of --timeout
 * (an hour without one). Tonight's jobs say which workers would claim a
 * problem's work, so this comes after them. */
static int campaign_measure(avoctl_ctx *c, campaign_run *r)
{
    const double deadline = r->until ? r->until : now_s() + 3600;
    if ((r->mode != AVOCTL_REVAL_OFF &&
         campaign_reval_queue(c, r->name, r->mode, r->prev, r->jobs, &r->rplan, &r->revs) != EXIT_OK) ||
        !(r->summary = avoctl_campaign_summary(r->name, r->jobs, r->prev, NULL, r->tol, r->started, r->started)) ||
        !(r->compares = campaign_compares(c, r->name, r->summary, deadline))) {
        errorf("out of memory");
        return EXIT_FAIL;
    }
    if (r->rplan) {
        campaign_reval_wait(c, r->revs, deadline);
        if (avoctl_campreval_finish(r->rplan, r->revs) < 0) {
            errorf("out of memory");
            return EXIT_FAIL;
        }
    }
    return EXIT_OK;
}

/* The summary, written as NAME-STAMP.json, NAME-STAMP.md and
 * NAME-latest.json, and shown. */
static int campaign_report(avoctl_ctx *c, campaign_run *r)
{
    char finished[32], stamp[32], json_path[PATH_MAX], md_path[PATH_MAX];
    int ex;
    json_decref(r->summary);
    utc_now(finished, sizeof finished, "%Y-%m-%dT%H:%M:%SZ");
    utc_now(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ");
    json_t *summary = r->summary = avoctl_campaign_summary(r->name, r->jobs, r->prev, r->compares, r->tol, r->started,
                                                           finished);
    if (!summary) {
        errorf("out of memory");
        return EXIT_FAIL;
    }
    json_object_set_new(summary, "previous_summary", r->prev_path ? json_string(r->prev_path) : json_null());
    if (r->rplan)
        json_object_set(summary, "revalidation", r->rplan);
    if (summary_path(json_path, sizeof json_path, r->out_dir, r->name, stamp, "json") < 0 ||
        summary_path(md_path, sizeof md_path, r->out_dir, r->name, stamp, "md") < 0)
        return EXIT_FAIL;
    if ((ex = write_atomic(json_path, summary, 0)) != EXIT_OK || (ex = write_atomic(md_path, summary, 1)) != EXIT_OK ||
        (ex = write_atomic(r->path, summary, 0)) != EXIT_OK)
        return ex;
    if (c->json) {
        print_json(summary, JSON_INDENT(2));
    } else {
        avoctl_campaign_markdown(summary, stdout);
        printf("\nwrote %s and %s\n", json_path, md_path);
    }
    return json_is_true(json_object_get(summary, "ok")) ? EXIT_OK : EXIT_FAIL;
}

static int cmd_campaign(avoctl_ctx *c, const avoctl_args *a)
{
    campaign_run r = {0};
    int ex = campaign_options(c, a, &r);
    if (ex != EXIT_OK)
        return ex;
    r.ids = json_array();
    r.jobs = json_array();
    r.waits = json_object();
    if ((ex = campaign_load(a, &r)) == EXIT_OK) {
        utc_now(r.started, sizeof r.started, "%Y-%m-%dT%H:%M:%SZ");
        if ((ex = campaign_submit(c, &r)) == EXIT_OK && (ex = campaign_wait(c, &r)) == EXIT_OK &&
            (ex = campaign_measure(c, &r)) == EXIT_OK)
            ex = campaign_report(c, &r);
    }
    json_decref(r.doc);
    json_decref(r.prev);
    json_decref(r.ids);
    json_decref(r.jobs);
    json_decref(r.summary);
    json_decref(r.compares);
    json_decref(r.rplan);
    json_decref(r.revs);
    json_decref(r.waits);
    return ex;
}

static int cmd_whoami(avoctl_ctx *c, const avoctl_args *a)
{
    (void)a;
    json_t *body = NULL;
    int ex = call(c, AVO_ROUTE_WHOAMI, 0, NULL, NULL, &body);
    if (ex)
        return ex;
    if (c->json)
        ex = print_json(body, JSON_INDENT(2));
    else
        printf("%s (%s%s), %s, via %s\n", avoctl_fmt_str(body, "name") ? avoctl_fmt_str(body, "name") : "?",
               avoctl_fmt_str(body, "team") ? "team " : "no team",
               avoctl_fmt_str(body, "team") ? avoctl_fmt_str(body, "team") : "",
               json_is_true(json_object_get(body, "admin")) ? "admin" : "not an admin",
               avoctl_fmt_str(body, "via") ? avoctl_fmt_str(body, "via") : "?");
    json_decref(body);
    return ex;
}

static int cmd_health(avoctl_ctx *c, const avoctl_args *a)
{
    (void)a;
    json_t *body = NULL;
    int ex = call(c, AVO_ROUTE_HEALTH, 0, NULL, NULL, &body);
    if (ex)
        return ex;
    if (c->json) {
        ex = print_json(body, JSON_INDENT(2));
    } else {
        printf("avod %s at %s: %s, database %s%s%s\n",
               avoctl_fmt_str(body, "version") ? avoctl_fmt_str(body, "version") : "?", c->socket,
               avoctl_fmt_str(body, "status")              ? avoctl_fmt_str(body, "status")
               : json_is_true(json_object_get(body, "ok")) ? "ok"
                                                           : "not ok",
               avoctl_fmt_str(body, "db") ? avoctl_fmt_str(body, "db") : "?",
               avoctl_fmt_str(body, "reason") ? ": " : "",
               avoctl_fmt_str(body, "reason") ? avoctl_fmt_str(body, "reason") : "");
    }
    if (!json_is_true(json_object_get(body, "ok")))
        ex = EXIT_FAIL;
    json_decref(body);
    return ex;
}

static int cmd_help(avoctl_ctx *c, const avoctl_args *a)
{
    (void)c;
    return print_help(a->npos ? a->pos[0] : NULL, stdout);
}

/* ---- the command table ------------------------------------------------ */

static int cmd_completion(avoctl_ctx *c, const avoctl_args *a);
static int cmd_man(avoctl_ctx *c, const avoctl_args *a);

/* What submit and fork share; fork seeds from its CANDIDATE instead. */
#define JOB_OPTS                                                                                                       \
    {"problem", 0, 1, "P", "problem name under kernels/, e.g. cpu/sgemm"},                                             \
        {"operator", 0, 1, "OP", "proposal operator: tune or agent (default: the daemon's)"},                          \
        {"evaluations", 0, 1, "N", "budget: number of evaluations"},                                                   \
        {"wall", 0, 1, "SECONDS", "budget: wall-clock seconds"},                                                       \
        {"gpu-seconds", 0, 1, "X", "budget: GPU-seconds (harness time on GPU workers)"},                               \
        {"energy-joules", 0, 1, "X", "budget: energy in joules (NVML)"},                                               \
        {"target-score", 0, 1, "X", "stop once the best aggregate reaches X"},                                         \
        {"patience", 0, 1, "N", "evaluations without a commit before an island counts as stagnant"},                   \
        {"stagnation-limit", 0, 1, "N", "end the job after N evaluations without a commit"},                           \
        {"islands", 0, 1, "N", "parallel islands (lineages)"},                                                         \
        {"migrate-every", 0, 1, "N", "commits between migrations of the best to the other islands"},                   \
        {"epsilon", 0, 1, "X", "unpaired results only: accept >= best*(1+min_gain-X), 0 <= X <= 0.5"},                 \
        {"min-gain", 0, 1, "G", "commit: paired lower bound must exceed 1+G, 0 <= G < 1 (cuda 0.005, cpu 0.02)"},      \
        {"confidence", 0, 1, "C", "commit: confidence of that lower bound, 0 < C < 1 (default 0.95)"},                 \
        {"priority", 0, 1, "N", "scheduling priority (higher first)"},                                                 \
        {"name", 0, 1, "NAME", "the job's name (shown by status and list)"},                                           \
        {"label", 'l', 1, "K=V[,K=V]", "labels to filter by (list --label), merged into the spec's"},                  \
    {                                                                                                                  \
        "watch", 'w', 0, NULL, "watch the job's events after submitting"                                               \
    }

static const avoctl_opt submit_opts[] = {
    {"seed", 0, 1, "FILE", "start from this source file instead of the problem's seed"},
    {"seed-candidate", 0, 1, "ID", "start from candidate ID of any job (transfer; see fork)"},
    {"seed-name", 0, 1, "NAME", "one of the problem's named seeds (its file and knobs), e.g. sm90"},
    JOB_OPTS,
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt fork_opts[] = {
    JOB_OPTS,
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt lineage_opts[] = {
    {"all", 'a', 0, NULL, "also the attempts (candidates not committed), with their outcome"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt show_opts[] = {
    {"source", 's', 0, NULL, "print the full source instead of the diff against the parent"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt profile_opts[] = {
    {"config", 'c', 1, "NAME", "this configuration only (default: those the problem's counters.configs lists)"},
    {"wait", 'w', 0, NULL, "wait for the task and print its counters"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt compare_opts[] = {
    {"confidence", 'c', 1, "C", "confidence of the interval, 0 < C < 1 (default 0.95)"},
    {"wait", 'w', 0, NULL, "wait for the measurement and print it (exit 1 when it failed)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt revalidate_opts[] = {
    {"on", 0, 1, "WORKER|GPU", "only this worker (its id) or a worker of this GPU (model or GPU-UUID) claims them"},
    {"wait", 'w', 0, NULL, "wait until every re-evaluation is over, then print the ratios"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt report_opts[] = {
    {"markdown", 'm', 1, "FILE", "also write the report as a markdown document ('-': stdout only)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt list_opts[] = {
    {"limit", 'n', 1, "N", "show at most N jobs (default 50, at most 1000)"},
    {"mine", 'm', 0, NULL, "only jobs I own (the principal avod sees: unix user or token)"},
    {"owner", 0, 1, "NAME", "only jobs of this owner"},
    {"team", 0, 1, "TEAM", "only jobs of this team"},
    {"label", 'l', 1, "K=V", "only jobs with this label"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt watch_opts[] = {
    {"after", 0, 1, "N", "start after event id N (default 0: replay everything)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt events_opts[] = {
    {"follow", 'f', 0, NULL, "keep streaming new events until Ctrl-C"},
    {"after", 0, 1, "N", "start after event id N"},
    {"last", 'n', 1, "N", "start with the last N events (default 20)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt transcript_opts[] = {
    {"step", 0, 1, "N", "only the job's Nth agent step"},
    {"full", 'f', 0, NULL, "print every message whole (default: a few lines each)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt kb_opts[] = {
    {"limit", 'n', 1, "N", "search: at most N hits (default 10, at most 100)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt campaign_opts[] = {
    {"out", 'o', 1, "DIR", "where the summaries go (default .): NAME-STAMP.json/.md and NAME-latest.json"},
    {"previous", 0, 1, "FILE", "compare with this summary (default DIR/NAME-latest.json, when present)"},
    {"timeout", 't', 1, "SECONDS", "cancel what is still running after this long"},
    {"revalidate", 0, 1, "MODE",
     "off, on_toolchain_change or always: re-validate the previous campaign's bests when the live workers' "
     "toolchain differs from theirs (default: the file's \"revalidate\", else off)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt problem_opts[] = {
    {"max-builds", 0, 1, "N",
     "check: knob settings compiled per seed, a random sample when more are allowed "
     "(default 64; 0: every one)"},
    {"sample-seed", 0, 1, "S", "check: repeat an earlier sample (its line names the seed)"},
    {"no-eval", 0, 0, NULL, "check: compile only, do not evaluate the seeds"},
    {"gpu-arch", 0, 1, "sm_XY", "check: compile a cuda package for this GPU (default: this host's, else sm_90a)"},
    {"timeout", 0, 1, "SECONDS", "check: limit per compile and per evaluation (default 120)"},
    {"kernels", 0, 1, "DIR", "check NAME: the packages' root (default $AVO_KERNELS, else the installed kernels)"},
    {"target", 0, 1, "cpu|cuda", "new: where the kernel runs"},
    {"name", 0, 1, "ENTRY", "new: the seed's entry point (default: DIR's last component as an identifier)"},
    {NULL, 0, 0, NULL, NULL},
};
static const avoctl_opt best_opts[] = {
    {"output", 'o', 1, "FILE", "write the best candidate's source to FILE"},
    {NULL, 0, 0, NULL, NULL},
};

static const avoctl_command commands[] = {
    {"submit", cmd_submit,
     "avoctl submit FILE|- [flags] [--watch]\n"
     "       avoctl submit --problem P [--seed FILE | --seed-candidate ID] [--seed-name NAME]\n"
     "                     [--operator OP]\n"
     "                     [--evaluations N] [--wall SECONDS] [--gpu-seconds X] [--energy-joules X]\n"
     "                     [--target-score X] [--patience N] [--stagnation-limit N]\n"
     "                     [--islands N] [--migrate-every N] [--epsilon X] [--min-gain G] [--confidence C]\n"
     "                     [--priority N] [--watch]",
     "submit a job from a spec file, stdin or flags (flags override the file)", submit_opts, 0, 1, "FILE", 0},
    {"fork", cmd_fork, "avoctl fork CANDIDATE [--problem P] [submit flags] [--watch]",
     "submit a new job seeded from a candidate (default problem: the candidate's)", fork_opts, 1, 1, "CANDIDATE", 0},
    {"list", cmd_list, "avoctl list [--limit N] [--mine] [--owner NAME] [--team TEAM] [--label K=V]",
     "list jobs, newest first (OWNER is owner/team)", list_opts, 0, 0, NULL, 0},
    {"status", cmd_status, "avoctl status JOB", "show one job's state and progress", NULL, 1, 1, "JOB", 0},
    {"watch", cmd_watch, "avoctl watch JOB [--after N]",
     "follow a job's events until it finishes (exit 0 if it succeeded)", watch_opts, 1, 1, "JOB", 0},
    {"events", cmd_events, "avoctl events [-f] [--after N | --last N]",
     "events of every job you may read, each with its job (-f: follow new ones until Ctrl-C)", events_opts, 0, 0, NULL,
     0},
    {"cancel", cmd_cancel, "avoctl cancel JOB", "cancel a queued or running job", NULL, 1, 1, "JOB", 0},
    {"best", cmd_best, "avoctl best JOB [-o FILE]", "show the best candidate's scores and source", best_opts, 1, 1,
     "JOB", 0},
    {"lineage", cmd_lineage, "avoctl lineage JOB [--all]",
     "a job's committed candidates as a tree by parent (--all: with the attempts)", lineage_opts, 1, 1, "JOB", 0},
    {"show", cmd_show, "avoctl show CANDIDATE [--source]",
     "one candidate: origin, scores, compile report, counters, diff against its parent", show_opts, 1, 1, "CANDIDATE",
     0},
    {"profile", cmd_profile, "avoctl profile CANDIDATE [--config NAME] [--wait]",
     "queue a hardware-counters profile of a candidate on a worker (checked calls, then the counters; no timing)",
     profile_opts, 1, 1, "CANDIDATE", 0},
    {"compare", cmd_compare, "avoctl compare A B [--confidence C] [--wait]",
     "measure candidate A against B paired on a worker (one problem): their speed ratio with an interval", compare_opts,
     2, 2, "A B", 0},
    {"revalidate", cmd_revalidate, "avoctl revalidate JOB|cand:ID [--on WORKER|GPU] [--wait]",
     "evaluate a job's committed versions (or one candidate) again on today's toolchain; ratios against the "
     "recorded results",
     revalidate_opts, 1, 1, "JOB|cand:ID", 0},
    {"diff", cmd_diff, "avoctl diff A [B]", "unified diff from candidate A to B (without B: from A's parent to A)",
     NULL, 1, 2, "A", 0},
    {"problem", cmd_problem,
     "avoctl problem list\n"
     "       avoctl problem show NAME\n"
     "       avoctl problem check DIR|NAME [--max-builds N] [--sample-seed S] [--no-eval] [--gpu-arch sm_XY]\n"
     "                            [--timeout SECONDS] [--kernels DIR]\n"
     "       avoctl problem new DIR --target cpu|cuda [--name ENTRY]\n"
     "       avoctl problem diff JOB",
     "problem packages: list and show avod's, check one before submitting it (compiles every allowed knob setting, "
     "evaluates the seed), scaffold a new one, diff a job's pinned version against the disk",
     problem_opts, 1, 2, "list|show|check|new|diff", 0},
    {"report", cmd_report, "avoctl report JOB [--markdown FILE]",
     "seed vs best per configuration, evaluations, commits and what the job spent", report_opts, 1, 1, "JOB", 0},
    {"workers", cmd_workers, "avoctl workers", "list registered workers", NULL, 0, 0, NULL, 0},
    {"teams", cmd_teams, "avoctl teams",
     "teams: quota limits, device time used today and this week, running work, fair-share load, what blocks them", NULL,
     0, 0, NULL, 0},
    {"transcript", cmd_transcript, "avoctl transcript JOB [--step N] [--full]",
     "an agent job's steps: each turn's messages, tool calls and results, tokens and cost", transcript_opts, 1, 1,
     "JOB", 0},
    {"campaign", cmd_campaign,
     "avoctl campaign run FILE [--out DIR] [--previous FILE] [--timeout SECONDS] [--revalidate MODE]",
     "submit a campaign's jobs, wait for them, write a summary against the previous one; exit 1 when a job "
     "failed or a problem's best regressed",
     campaign_opts, 2, 2, "run FILE", 0},
    {"health", cmd_health, "avoctl health", "check that avod and its database are up", NULL, 0, 0, NULL, 0},
    {"whoami", cmd_whoami, "avoctl whoami", "who avod takes this client for: principal, team, admin", NULL, 0, 0, NULL,
     0},
    {"kb", cmd_kb,
     "avoctl kb add FILE...\n"
     "       avoctl kb search WORDS... [--limit N]\n"
     "       avoctl kb show ID\n"
     "       avoctl kb list",
     "the agent's knowledge base: add documents, search them (and past cases), read a chunk", kb_opts, 1,
     AVOCTL_MAX_POS, "add|search|show|list", 0},
    {"help", cmd_help, "avoctl help [COMMAND|api]", "list commands, show a command's usage, or list the API routes",
     NULL, 0, 1, NULL, 1},
    {"completion", cmd_completion, "avoctl completion bash|zsh",
     "print a shell completion script (source <(avoctl completion bash))", NULL, 1, 1, "bash|zsh", 1},
    {"man", cmd_man, "avoctl man", "print avoctl's manual page (roff; man -l <(avoctl man))", NULL, 0, 0, NULL, 1},
};

/* The options before the command: for help, completion and the man page
 * (avoctl_args_globals reads them). */
static const avoctl_opt global_opts[] = {
    {"json", 0, 0, NULL, "machine-readable JSON output (also after the command)"},
    {"socket", 0, 1, "PATH", "avod's socket (default $AVO_HOME/" AVO_SOCKET_NAME ")"},
    {"url", 0, 1, "URL", "avod's TCP listener instead (AVO_URL), e.g. http://gpu-head:7460"},
    {"token-file", 0, 1, "FILE", "its bearer token, first line of FILE (AVO_TOKEN_FILE; chmod 600)"},
    {"context", 0, 1, "NAME", "a named context of the config file (AVO_CONTEXT)"},
    {"no-color", 0, 0, NULL, "no colour (also when NO_COLOR is set or stdout is not a terminal)"},
    {"help", 'h', 0, NULL, "this help (also after the command)"},
    {"version", 0, 0, NULL, "print avoctl's version"},
    {NULL, 0, 0, NULL, NULL},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const avoctl_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* The command a mistyped name is nearest to, or NULL. */
static const char *suggest_command(const char *name)
{
    const char *names[NCOMMANDS];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    return avo_suggest(name, names, NCOMMANDS);
}

static void print_opts(const avoctl_opt *opts, FILE *out)
{
    for (const avoctl_opt *o = opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "%s%c%s--%s%s%s", o->short_name ? "-" : "", o->short_name ? o->short_name : ' ',
                 o->short_name ? ", " : "  ", o->name, o->arg_name ? " " : "", o->arg_name ? o->arg_name : "");
        fprintf(out, "  %-24s %s\n", o->short_name ? left : left + 1, o->help);
    }
}

static int print_help(const char *topic, FILE *out)
{
    if (!topic) {
        fprintf(out, "usage: " GLOBAL_SYNOPSIS "\n\ncommands:\n");
        for (size_t i = 0; i < NCOMMANDS; i++)
            fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fprintf(out, "\nglobal options (before the command; --json and -h also after it):\n");
        print_opts(global_opts, out);
        fprintf(out, "\ncontexts: --context NAME picks a context of $XDG_CONFIG_HOME/avo/config\n"
                     "(~/.config/avo/config); a flag beats the environment, which beats the context.\n"
                     "\nexit status: 0 ok, 1 failed (daemon error, job not succeeded), 2 usage,\n"
                     "3 avod unreachable. 'avoctl help COMMAND' for details, 'avoctl help api'\n"
                     "for the HTTP routes.\n");
        return EXIT_OK;
    }
    if (strcmp(topic, "api") == 0) {
        avoctl_table *t = NULL;
        static const char *const hdr[] = {"METHOD", "PATH", "DESCRIPTION"};
        if (avoctl_table_new(&t, 3, hdr, 0) < 0)
            return EXIT_FAIL;
        for (int i = 0; i < AVO_ROUTE_COUNT; i++) {
            const char *row[] = {avo_routes[i].method, avo_routes[i].pattern, avo_routes[i].help};
            avoctl_table_add(t, row);
        }
        fprintf(out, "avod HTTP/JSON API on unix socket $AVO_HOME/" AVO_SOCKET_NAME " (docs/api.md):\n\n");
        avoctl_table_print(t, out);
        avoctl_table_free(t);
        return EXIT_OK;
    }
    const avoctl_command *cmd = find_command(topic);
    if (!cmd) {
        const char *near = suggest_command(topic);
        fprintf(stderr, "avoctl help: unknown command '%s'%s%s%s (see 'avoctl help')\n", topic,
                near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        return EXIT_USAGE;
    }
    fprintf(out, "usage: %s\n\n%s\n", cmd->usage, cmd->summary);
    if (cmd->opts) {
        fprintf(out, "\noptions:\n");
        print_opts(cmd->opts, out);
    }
    return EXIT_OK;
}

/* ---- generated from the table: completion scripts and the man page ---- */

/* s in single quotes for a shell, with zsh's _arguments specials ([]:)
 * escaped when zsh_spec. */
static void shell_quoted(const char *s, int zsh_spec, FILE *out)
{
    fputc('\'', out);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", out);
        else if (zsh_spec && (*s == '[' || *s == ']' || *s == ':' || *s == '\\'))
            fprintf(out, "\\%c", *s);
        else
            fputc(*s, out);
    }
    fputc('\'', out);
}

static void bash_words(const avoctl_opt *opts, FILE *out)
{
    for (const avoctl_opt *o = opts; o && o->name; o++)
        fprintf(out, " --%s", o->name);
}

/* A command's words for its first argument: its subcommands (problem's
 * "list|show|check|new|diff", campaign's "run FILE", completion's
 * "bash|zsh") as space-separated words, or for help every command; ""
 * for a command whose first argument is a value (JOB, cand:ID). */
static void first_words(const avoctl_command *c, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (!strcmp(c->name, "help")) {
        for (size_t k = 0; k < NCOMMANDS && n < len; k++)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? " " : "", commands[k].name);
        return;
    }
    const char *w = c->pos_name;
    if (!w)
        return;
    size_t end = strcspn(w, " ");
    for (size_t i = 0; i < end; i++)
        if (!(w[i] >= 'a' && w[i] <= 'z') && w[i] != '|')
            return;
    for (size_t i = 0; i < end && n + 1 < len; i++)
        buf[n++] = w[i] == '|' ? ' ' : w[i];
    buf[n < len ? n : len - 1] = '\0';
}

static void completion_bash(FILE *out)
{
    fprintf(out,
            "# bash completion for avoctl %s, generated by 'avoctl completion bash'\n"
            "_avoctl() {\n"
            "    local cur=${COMP_WORDS[COMP_CWORD]} cmd= i\n"
            "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
            "        case ${COMP_WORDS[i]} in\n"
            "        ",
            AVO_VERSION);
    int first = 1;
    for (const avoctl_opt *o = global_opts; o->name; o++)
        if (o->has_arg) {
            fprintf(out, "%s--%s", first ? "" : "|", o->name);
            first = 0;
        }
    fprintf(out, ") ((i++)) ;;\n"
                 "        -*) ;;\n"
                 "        *) cmd=${COMP_WORDS[i]}; break ;;\n"
                 "        esac\n"
                 "    done\n"
                 "    local words\n"
                 "    case $cmd in\n"
                 "    '') words=\"");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "%s%s", i ? " " : "", commands[i].name);
    bash_words(global_opts, out);
    fprintf(out, "\" ;;\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(out, "    %s) words=\"--json --help", commands[i].name);
        bash_words(commands[i].opts, out);
        char words[1024];
        first_words(&commands[i], words, sizeof words);
        fprintf(out, "%s%s\" ;;\n", *words ? " " : "", words);
    }
    fprintf(out, "    esac\n"
                 "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
                 "}\n"
                 "complete -o default -F _avoctl avoctl\n");
}

static void zsh_opts(const avoctl_opt *opts, FILE *out)
{
    for (const avoctl_opt *o = opts; o && o->name; o++) {
        fputs("        ", out);
        /* the help inside [] must not close it early */
        fputc('\'', out);
        fprintf(out, "--%s[", o->name);
        for (const char *s = o->help; *s; s++) {
            if (*s == '\'')
                fputs("'\\''", out);
            else if (*s == '[' || *s == ']' || *s == ':' || *s == '\\')
                fprintf(out, "\\%c", *s);
            else
                fputc(*s, out);
        }
        fputc(']', out);
        if (o->has_arg)
            fprintf(out, ":%s:%s", o->arg_name ? o->arg_name : "VALUE",
                    o->arg_name &&
                            (strstr(o->arg_name, "FILE") || strstr(o->arg_name, "PATH") || strstr(o->arg_name, "DIR"))
                        ? "_files"
                        : " ");
        fputs("' \\\n", out);
    }
}

static void completion_zsh(FILE *out)
{
    fprintf(out,
            "#compdef avoctl\n# zsh completion for avoctl %s, generated by 'avoctl completion zsh'\n"
            "_avoctl() {\n"
            "    local curcontext=$curcontext state line\n"
            "    local -a cmds\n"
            "    cmds=(\n",
            AVO_VERSION);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        char item[600];
        snprintf(item, sizeof item, "%s:%s", commands[i].name, commands[i].summary);
        fputs("        ", out);
        shell_quoted(item, 0, out);
        fputc('\n', out);
    }
    fprintf(out, "    )\n"
                 "    _arguments -C \\\n");
    zsh_opts(global_opts, out);
    fprintf(out, "        '1:command:->cmd' '*::arg:->args'\n"
                 "    case $state in\n"
                 "    cmd) _describe -t commands 'avoctl command' cmds ;;\n"
                 "    args)\n"
                 "        case $line[1] in\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(out, "        %s) _arguments \\\n", commands[i].name);
        zsh_opts(commands[i].opts, out);
        char words[1024];
        first_words(&commands[i], words, sizeof words);
        if (*words)
            fprintf(out, "        '1:%s:(%s)' \\\n", strcmp(commands[i].name, "help") ? "subcommand" : "command",
                    words);
        fprintf(out, "        '--json[machine-readable JSON output]' '*:argument:_files' ;;\n");
    }
    fprintf(out, "        esac ;;\n"
                 "    esac\n"
                 "}\n"
                 "_avoctl \"$@\"\n");
}

static int cmd_completion(avoctl_ctx *c, const avoctl_args *a)
{
    if (!strcmp(a->pos[0], "bash"))
        completion_bash(stdout);
    else if (!strcmp(a->pos[0], "zsh"))
        completion_zsh(stdout);
    else
        return usage_error(c, "completion: a shell, bash or zsh");
    return EXIT_OK;
}

/* Text for roff: backslashes and minus signs escaped, and a line that
 * would start with a control character protected. */
static void roff(const char *s, FILE *out)
{
    int bol = 1;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\''))
            fputs("\\&", out);
        bol = *s == '\n';
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else
            fputc(*s, out);
    }
}

static void man_opts(const avoctl_opt *opts, FILE *out)
{
    for (const avoctl_opt *o = opts; o && o->name; o++) {
        fputs(".TP\n", out);
        if (o->short_name)
            fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
        fputs("\\fB", out);
        roff("--", out);
        roff(o->name, out);
        fputs("\\fR", out);
        if (o->has_arg) {
            fputs(" \\fI", out);
            roff(o->arg_name ? o->arg_name : "VALUE", out);
            fputs("\\fR", out);
        }
        fputc('\n', out);
        roff(o->help, out);
        fputc('\n', out);
    }
}

static int cmd_man(avoctl_ctx *c, const avoctl_args *a)
{
    (void)c, (void)a;
    FILE *out = stdout;
    fprintf(out,
            ".\\\" generated by 'avoctl man' from avoctl's command table\n"
            ".TH AVOCTL 1 \"\" \"avo %s\" \"User Commands\"\n"
            ".SH NAME\navoctl \\- the command-line client of avod, the avo kernel optimisation service\n"
            ".SH SYNOPSIS\n",
            AVO_VERSION);
    roff(GLOBAL_SYNOPSIS, out);
    fputs("\n.SH DESCRIPTION\n"
          "avoctl talks to avod over its unix socket (or its TCP listener with a bearer token) and prints "
          "tables for people, or JSON with \\fB\\-\\-json\\fR.\n"
          ".SH GLOBAL OPTIONS\n",
          out);
    man_opts(global_opts, out);
    fputs(".SH COMMANDS\n", out);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(out, ".SS %s\n.nf\n", commands[i].name);
        roff(commands[i].usage, out);
        fputs("\n.fi\n", out);
        roff(commands[i].summary, out);
        fputc('\n', out);
        man_opts(commands[i].opts, out);
    }
    fputs(".SH ENVIRONMENT\n"
          ".TP\n.B AVO_HOME\navod's state directory; the default socket is \\fI$AVO_HOME/" AVO_SOCKET_NAME "\\fR\n"
          ".TP\n.B AVO_URL, AVO_TOKEN_FILE\nas \\fB\\-\\-url\\fR and \\fB\\-\\-token\\-file\\fR\n"
          ".TP\n.B AVO_CONTEXT\nas \\fB\\-\\-context\\fR\n"
          ".TP\n.B NO_COLOR\nset and not empty: no colour (https://no\\-color.org)\n"
          ".TP\n.B XDG_CONFIG_HOME\nwhere the config file is (default \\fI~/.config\\fR)\n"
          ".SH FILES\n"
          ".TP\n.I $XDG_CONFIG_HOME/avo/config\n"
          "named contexts: sections \\fB[context NAME]\\fR with \\fBurl\\fR or \\fBsocket\\fR and "
          "\\fBtoken_file\\fR; \\fBcurrent = NAME\\fR before the first section picks the default one. "
          "A flag beats the environment, which beats the context.\n"
          ".SH EXIT STATUS\n"
          "0 ok, 1 failed (daemon error, job not succeeded), 2 usage, 3 avod unreachable, "
          "130 watch interrupted (the job goes on).\n"
          ".SH SEE ALSO\n"
          "avod(8), avo\\-worker(8); docs/cli.md\n",
          out);
    return EXIT_OK;
}

/* Returned by main's phases when the command goes on (exit codes are >= 0). */
#define GO_ON (-1)

/* The global flags, the command and its arguments: GO_ON, or the exit
 * code of what was answered already (--version, help, a usage error). */
static int parse_command_line(avoctl_ctx *c, int argc, char **argv, avoctl_args *a)
{
    char err[256];
    int ci = avoctl_args_globals(argc, argv, &c->g, err, sizeof err);
    if (ci < 0)
        return usage_error(c, err);
    c->json = c->g.json;
    avoctl_fmt_color_init(c->g.no_color);
    if (c->g.version) {
        printf("avoctl %s\n", AVO_VERSION);
        return EXIT_OK;
    }
    if (ci >= argc) {
        /* A bare `avoctl` is a usage error, but still shows what to type. */
        print_help(NULL, c->g.help ? stdout : stderr);
        return c->g.help ? EXIT_OK : EXIT_USAGE;
    }
    c->cmd = find_command(argv[ci]);
    if (!c->cmd) {
        const char *near = suggest_command(argv[ci]);
        snprintf(err, sizeof err, "unknown command '%.100s'%s%s%s", argv[ci], near ? "; did you mean '" : "",
                 near ? near : "", near ? "'?" : "");
        return usage_error(c, err);
    }
    if (avoctl_args_parse(c->cmd->opts, c->cmd->max_pos, argc - ci - 1, argv + ci + 1, a, err, sizeof err) < 0)
        return usage_error(c, err);
    if (c->g.help || a->help)
        return print_help(c->cmd->name, stdout);
    c->json |= a->json;
    if (a->npos < c->cmd->min_pos) {
        snprintf(err, sizeof err, "missing argument %s", c->cmd->pos_name);
        return usage_error(c, err);
    }
    if (c->g.url && c->g.socket)
        return usage_error(c, "--url and --socket name two different daemons; give one");
    return GO_ON;
}

/* The config file's context: the one named (--context, AVO_CONTEXT) or
 * its 'current'. *have_ctx: 1 when *ctx holds one. */
static int read_context(const avoctl_ctx *c, avoctl_context *ctx, const char **ctx_name, int *have_ctx)
{
    char err[256], cfg[4096];
    *ctx_name = c->g.context ? c->g.context : getenv("AVO_CONTEXT");
    if (*ctx_name && !**ctx_name)
        *ctx_name = NULL;
    *have_ctx = 0;
    if (avoctl_config_path(cfg, sizeof cfg) == 0) {
        *have_ctx = avoctl_config_load(cfg, *ctx_name, ctx, err, sizeof err);
        if (*have_ctx < 0) {
            errorf("%s", err);
            return EXIT_USAGE;
        }
    } else if (*ctx_name) {
        errorf("--context %s: no config file (neither XDG_CONFIG_HOME nor HOME is set)", *ctx_name);
        return EXIT_USAGE;
    }
    return GO_ON;
}

/* A TCP daemon needs its bearer token: a flag, the environment, else the
 * context's token file. */
static int use_url(avoctl_ctx *c, const avoctl_context *ctx, int have_ctx)
{
    char err[256];
    const char *tf = c->g.token_file ? c->g.token_file : getenv("AVO_TOKEN_FILE");
    if ((!tf || !*tf) && have_ctx && ctx->token_file[0])
        tf = ctx->token_file;
    if (strncmp(c->url, "http://", 7) != 0 && strncmp(c->url, "https://", 8) != 0)
        return usage_error(c, "--url wants http://HOST:PORT (avod's --listen address)");
    if (!tf || !*tf)
        return usage_error(c, "--url needs --token-file FILE (or AVO_TOKEN_FILE): avod's TCP listener "
                              "answers only requests with a bearer token");
    if (read_token(tf, c->token, sizeof c->token, err, sizeof err) < 0) {
        errorf("%s", err);
        return EXIT_USAGE;
    }
    snprintf(c->socket, sizeof c->socket, "%s", c->url);
    return GO_ON;
}

/* Which daemon to talk to. Each setting: a flag, else the environment,
 * else the context, else the default (docs/cli.md, "Contexts"). */
static int choose_daemon(avoctl_ctx *c, avoctl_context *ctx)
{
    const char *ctx_name;
    int have_ctx, ex = read_context(c, ctx, &ctx_name, &have_ctx);
    if (ex != GO_ON)
        return ex;
    /* A flag beats the environment: --socket wins over AVO_URL. */
    c->url = c->g.url ? c->g.url : c->g.socket ? NULL : getenv("AVO_URL");
    if (c->url && !*c->url)
        c->url = NULL;
    const char *ctx_socket = NULL;
    /* AVO_HOME set is the environment naming the socket: it beats the
     * file's "current", not a context asked for by name. */
    const char *home_env = getenv("AVO_HOME");
    if (!ctx_name && home_env && *home_env)
        have_ctx = 0;
    if (!c->url && !c->g.socket && have_ctx) {
        if (ctx->url[0])
            c->url = ctx->url;
        else
            ctx_socket = ctx->socket;
    }
    if (c->url)
        return use_url(c, ctx, have_ctx);
    if (c->g.socket || ctx_socket) {
        if (avo_paths_join(c->socket, sizeof c->socket, "", c->g.socket ? c->g.socket : ctx_socket) < 0)
            return usage_error(c, "--socket: path too long");
    } else if (avo_home_path(AVO_SOCKET_NAME, c->socket, sizeof c->socket) < 0) {
        errorf("cannot determine AVO_HOME (no HOME); use --socket PATH");
        return EXIT_UNREACHABLE;
    }
    return GO_ON;
}

int main(int argc, char **argv)
{
    avoctl_ctx c = {0};
    avoctl_context ctx; /* from the config file; c.url may point into it */
    avoctl_args a;

    int ex = parse_command_line(&c, argc, argv, &a);
    /* (local commands: help, completion, man: nothing to reach, no config to read) */
    if (ex == GO_ON && !c.cmd->local)
        ex = choose_daemon(&c, &ctx);
    if (ex == GO_ON)
        ex = c.cmd->run(&c, &a);
    avoctl_http_close(c.http);
    explicit_bzero(c.token, sizeof c.token);
    fflush(stdout);
    return ex;
}
