/* avod: the avo daemon. One per cluster: the HTTP/JSON API, job lifecycle and
 * the evolution engine, all on one libuv loop; state lives in PostgreSQL.
 * It never runs candidate code (workers do). */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <uv.h>

#include "api.h"
#include "avo_config.h"
#include "avo_home.h"
#include "avo_log.h"
#include "avo_paths.h"
#include "avo_tokens.h"
#include "avo_version.h"
#include "agent.h"
#include "avo_file.h"
#include "db.h"
#include "engine.h"
#include "http.h"
#include "migrate.h"
#include "pgembed.h"
#include "pgwatch.h"
#include "rescuer.h"
#include "service.h"
#include "eventlog.h"
#include "ident.h"
#include "quota.h"

typedef struct {
    char config[AVO_CFG_STRLEN];
    char home[AVO_CFG_STRLEN];
    char db[AVO_CFG_STRLEN];
    char socket[AVO_CFG_STRLEN];
    char kernels[AVO_CFG_STRLEN];
    char sql_dir[AVO_CFG_STRLEN];
    char pg_bindir[AVO_CFG_STRLEN];
    char pg_user[AVO_CFG_STRLEN];
    char log_level[AVO_CFG_STRLEN];
    char providers[AVO_CFG_STRLEN];
    char listen[AVO_CFG_STRLEN];
    char token_file[AVO_CFG_STRLEN];
    char teams[AVO_CFG_STRLEN];
    char admin_group[AVO_CFG_STRLEN];
    char read_access[AVO_CFG_STRLEN];
    char socket_group[AVO_CFG_STRLEN];
    char quotas[AVO_CFG_STRLEN];
    double fair_share_half_life;
    long long engine_interval_ms;
    long long rescue_interval_ms;
    long long max_attempts;
    double retry_backoff;
} avod_settings;

#define ROW(name, type, field, dflt, env, lo, hi, help)                                                                \
    {                                                                                                                  \
        name, type, offsetof(avod_settings, field), dflt, env, lo, hi, help                                            \
    }
static const avo_cfg_row avod_rows[] = {
    ROW("config", AVO_CFG_STR, config, NULL, "AVO_CONFIG", 1, 0, "config file ('name = value' lines)"),
    ROW("home", AVO_CFG_STR, home, NULL, "AVO_HOME", 1, 0,
        "state directory (default /var/lib/avo as root, else ~/.local/state/avo)"),
    ROW("db", AVO_CFG_STR, db, NULL, "AVO_DB", 1, 0,
        "PostgreSQL connection string; empty = embedded PostgreSQL under the state directory"),
    ROW("socket", AVO_CFG_STR, socket, NULL, NULL, 1, 0, "API unix socket (default <home>/avod.sock)"),
    ROW("kernels", AVO_CFG_STR, kernels, NULL, "AVO_KERNELS", 1, 0, "problem packages root"),
    ROW("sql-dir", AVO_CFG_STR, sql_dir, NULL, NULL, 1, 0, "schema migrations directory"),
    ROW("pg-bindir", AVO_CFG_STR, pg_bindir, NULL, "AVO_PG_BINDIR", 1, 0, "PostgreSQL server binaries (embedded mode)"),
    ROW("pg-user", AVO_CFG_STR, pg_user, NULL, "AVO_PG_USER", 1, 0,
        "OS user for the embedded PostgreSQL when avod runs as root (default postgres)"),
    ROW("log-level", AVO_CFG_STR, log_level, "info", "AVO_LOG_LEVEL", 1, 0, "error, warn, info or debug"),
    ROW("providers", AVO_CFG_STR, providers, NULL, "AVO_PROVIDERS", 1, 0,
        "LLM providers for agent jobs: a JSON file, an array of provider objects (docs/agent.md)"),
    ROW("listen", AVO_CFG_STR, listen, NULL, "AVO_LISTEN", 1, 0,
        "also serve the API on TCP HOST:PORT (e.g. 127.0.0.1:7460); every request needs a bearer token"),
    ROW("token-file", AVO_CFG_STR, token_file, NULL, "AVO_TOKEN_FILE", 1, 0,
        "bearer tokens for the TCP listener, one per line ('TOKEN [principal=NAME] [team=TEAM] [admin]'), "
        "'#' comments; not readable by others"),
    ROW("teams", AVO_CFG_STR, teams, NULL, "AVO_TEAMS", 1, 0,
        "teams, comma-separated (ml,infra): a unix user is in a team when in the unix group of that name; "
        "tokens name theirs with team="),
    ROW("admin-group", AVO_CFG_STR, admin_group, NULL, NULL, 1, 0,
        "unix group whose members may change any job (root and avod's own user always may)"),
    ROW("read-access", AVO_CFG_STR, read_access, "all", NULL, 1, 0,
        "who may read a job: all, or team (its owner, its team, admins)"),
    ROW("socket-group", AVO_CFG_STR, socket_group, NULL, NULL, 1, 0,
        "unix group given the API socket (0660): its members may connect (not reloaded)"),
    ROW("quotas", AVO_CFG_STR, quotas, NULL, "AVO_QUOTAS", 1, 0,
        "per-team quota file, a team a line ('TEAM jobs=N evals-in-flight=N gpu-seconds-day=S "
        "gpu-seconds-week=S share=W'; TEAM '*' = every other team, '-' = jobs with no team)"),
    ROW("fair-share-half-life", AVO_CFG_DOUBLE, fair_share_half_life, "604800", NULL, 1, 1e9,
        "seconds after which a team's past device time counts half in the fair-share claim order"),
    ROW("engine-interval-ms", AVO_CFG_INT, engine_interval_ms, "1000", NULL, 50, 60000,
        "evolution engine polling interval (NOTIFY wakes it sooner)"),
    ROW("rescue-interval-ms", AVO_CFG_INT, rescue_interval_ms, "2000", NULL, 100, 600000,
        "how often expired leases are looked for"),
    ROW("max-attempts", AVO_CFG_INT, max_attempts, "3", NULL, 1, 100,
        "attempts of an evaluation whose worker keeps getting lost before it fails"),
    ROW("retry-backoff", AVO_CFG_DOUBLE, retry_backoff, "2", NULL, 0, 3600,
        "base delay (s) before a rescued evaluation is claimable again; doubles per attempt, jittered"),
};
#undef ROW
#define NROWS ((int)(sizeof avod_rows / sizeof avod_rows[0]))

typedef struct {
    uv_loop_t *loop;
    avo_db db;
    avo_db listen;
    avo_engine *engine;
    avo_rescuer *rescuer;
    avo_agent *agent;
    avo_api *api;
    avo_http *http;
    avo_http *http_tcp; /* --listen: the same API on TCP, behind bearer tokens */
    uv_signal_t sigint, sigterm, sighup;
    avo_service *service;
    avo_pgwatch *pgwatch; /* the embedded PostgreSQL's supervisor (NULL with --db) */
    avo_eventlog *eventlog;
    avo_ident *ident; /* teams, admins, read access: replaced on reload */
    int argc;         /* the command line as given, for reloads */
    char **argv;
    int dbs_open; /* how many of db, listen are initialised (each needs its close) */
    int signals;  /* the signal handles are initialised */
    int ready;    /* avod_start completed */
    int stopping;
} avod;

static void on_db_closed(avo_db *db)
{
    (void)db;
}

/* avod's shutdown, after a signal and after a start that failed part way:
 * it stops whatever avod_start got to (every stop takes NULL). */
static void avod_stop(avod *d)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    avo_service_stop(d->service);
    avo_pgwatch_stop(d->pgwatch);
    avo_eventlog_stop(d->eventlog);
    if (d->ready)
        avo_info("avod", "shutting down");
    /* Order: stop producing work, end client streams, then the database. The
     * engine and the API free themselves in close callbacks that run after
     * the database has failed their pending queries. */
    avo_agent_stop(d->agent);
    avo_engine_stop(d->engine);
    avo_rescuer_stop(d->rescuer);
    avo_api_stop(d->api);
    avo_http_stop(d->http);
    avo_http_stop(d->http_tcp);
    if (d->dbs_open >= 1)
        avo_db_close(&d->db, on_db_closed);
    if (d->dbs_open >= 2)
        avo_db_close(&d->listen, on_db_closed);
    if (d->signals) {
        uv_close((uv_handle_t *)&d->sigint, NULL);
        uv_close((uv_handle_t *)&d->sigterm, NULL);
        uv_close((uv_handle_t *)&d->sighup, NULL);
    }
}

static int load_providers(const char *path, avo_llm_provider **out, int *n, char *err, size_t errlen);

/* Teams, admins, read access, the quota file and (with a TCP listener) the
 * token file, checked together: a token's or a quota line's team must be
 * one of the teams. *ntokens is 0 without a listener. */
static int load_ident(const avod_settings *s, int tcp, avo_ident **ident, avo_token *tokens, int *ntokens,
                      json_t **quotas, char *err, size_t errlen)
{
    *ntokens = 0;
    if (avo_ident_new(ident, s->teams, s->admin_group, s->read_access, err, errlen) < 0)
        return -EINVAL;
    if (avo_quota_load(s->quotas, *ident, quotas, err, errlen) < 0) {
        avo_ident_free(*ident);
        *ident = NULL;
        return -EINVAL;
    }
    if (tcp) {
        int n = *s->token_file ? avo_tokens_load(s->token_file, tokens, 1, err, errlen) : 0;
        if (n == 0)
            snprintf(err, errlen, "listen %s: a TCP listener needs --token-file (tokens, one per line)", s->listen);
        if (n <= 0 || avo_ident_check_tokens(*ident, tokens, n, s->token_file, err, errlen) < 0) {
            explicit_bzero(tokens, sizeof *tokens * AVO_TOKENS_MAX);
            avo_ident_free(*ident);
            *ident = NULL;
            json_decref(*quotas);
            *quotas = NULL;
            return -EINVAL;
        }
        *ntokens = n;
    }
    return 0;
}

/* SIGHUP (systemctl reload): the configuration is read again from the same
 * command line, file and environment; what can change while running is
 * applied (the log level, the LLM providers for new agent steps). A bad
 * configuration changes nothing and says why, in the log and in STATUS. */
static void on_quotas_stored(void *arg, PGresult *res, const char *err)
{
    (void)arg;
    (void)res;
    if (err)
        avo_err("avod", "reload: the quotas could not be stored, workers keep the previous ones: %s", err);
}

/* The quotas and half-life as the workers' claims read them. */
static int store_quotas(avo_db *db, json_t *quotas, double half_life)
{
    char hl[64];
    snprintf(hl, sizeof hl, "%.17g", half_life);
    char *text = json_dumps(quotas, JSON_COMPACT);
    const char *params[] = {text, hl};
    int rc = text ? avo_db_query(db, "SELECT avo_quotas_set($1::jsonb, $2::float8)", 2, params, on_quotas_stored, NULL)
                  : -12;
    free(text);
    return rc;
}

static void on_reload(uv_signal_t *h, int signum)
{
    avod *d = h->data;
    (void)signum;
    avo_service_reloading(d->service);
    avod_settings s;
    avo_llm_provider *prov = NULL;
    int nrest = 0, n = 0;
    char err[2048], note[300];
    char **argv = calloc((size_t)d->argc + 1, sizeof *argv);
    if (!argv) {
        snprintf(err, sizeof err, "out of memory");
    } else {
        memcpy(argv, d->argv, (size_t)d->argc * sizeof *argv);
        if (avo_config_load(avod_rows, NROWS, &s, d->argc, argv, &nrest, err, sizeof err) == 0 &&
            load_providers(s.providers, &prov, &n, err, sizeof err) == 0) {
            avo_token tokens[AVO_HTTP_MAX_TOKENS];
            avo_ident *ident = NULL;
            json_t *quotas = NULL;
            int nt = 0;
            if (load_ident(&s, d->http_tcp != NULL, &ident, tokens, &nt, &quotas, err, sizeof err) < 0)
                ; /* err says why */
            else if (avo_log_set_level(s.log_level) < 0)
                snprintf(err, sizeof err, "log-level: '%s' is not one of error, warn, info, debug", s.log_level);
            else if (avo_agent_set_providers(d->agent, prov, n) < 0)
                snprintf(err, sizeof err, "out of memory");
            else if (store_quotas(&d->db, quotas, s.fair_share_half_life) < 0)
                snprintf(err, sizeof err, "the database is not connected: quotas cannot be stored");
            else {
                err[0] = 0;
                if (nt > 0)
                    avo_http_set_tokens(d->http_tcp, tokens, nt);
                avo_api_set_ident(d->api, ident);
                avo_ident_free(d->ident);
                d->ident = ident;
                ident = NULL;
            }
            avo_ident_free(ident);
            json_decref(quotas);
            explicit_bzero(tokens, sizeof tokens);
        }
    }
    free(argv);
    free(prov);
    if (err[0]) {
        avo_err("avod", "reload failed, the running configuration stays: %s", err);
        snprintf(note, sizeof note, "last reload failed: %.240s", err);
    } else {
        avo_info("avod", "configuration reloaded: log level %s, %d LLM providers, quotas %s", s.log_level, n,
                 *s.quotas ? s.quotas : "none");
        snprintf(note, sizeof note, "reloaded: log level %.16s, %d LLM providers", s.log_level, n);
    }
    avo_service_reloaded(d->service, note);
}

static void on_signal(uv_signal_t *s, int signum)
{
    avo_info("avod", "received %s", strsignal(signum));
    avod_stop(s->data);
}

static void kick_engine(void *arg)
{
    avod *d = arg;
    avo_engine_kick(d->engine);
}

static void on_notify(void *arg, const char *channel, const char *payload)
{
    avod *d = arg;
    if (!strcmp(channel, "avo_events")) {
        avo_api_job_event(d->api, strtoll(payload, NULL, 10));
        avo_eventlog_kick(d->eventlog);
    } else
        avo_engine_kick(d->engine);
}

static void on_db_state(void *arg, int up)
{
    avod *d = arg;
    if (up) {
        avo_info("db", "connected");
        if (d->agent)
            avo_agent_db_up(d->agent);
        avo_engine_kick(d->engine);
        avo_eventlog_kick(d->eventlog);
    }
}

static void on_pg_problem(void *arg, const char *problem)
{
    avod *d = arg;
    avo_service_degraded(d->service, problem);
}

/* The providers file: a JSON array of provider objects, each checked. */
static int load_providers(const char *path, avo_llm_provider **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (!path || !*path)
        return 0;
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        snprintf(err, errlen, "providers %s: %s (line %d)", path, je.text, je.line);
        return -EINVAL;
    }
    if (!json_is_array(j) || json_array_size(j) == 0) {
        snprintf(err, errlen, "providers %s: must be a non-empty JSON array of provider objects", path);
        json_decref(j);
        return -EINVAL;
    }
    avo_llm_provider *p = calloc(json_array_size(j), sizeof *p);
    size_t i;
    json_t *x;
    char why[400];
    json_array_foreach(j, i, x)
    {
        if (!p || avo_llm_provider_parse(x, &p[i], why, sizeof why) < 0) {
            snprintf(err, errlen, "providers %s: [%zu]: %s", path, i, p ? why : "out of memory");
            free(p);
            json_decref(j);
            return -EINVAL;
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp(p[k].name, p[i].name)) {
                snprintf(err, errlen, "providers %s: [%zu]: a second provider named '%s'", path, i, p[i].name);
                free(p);
                json_decref(j);
                return -EINVAL;
            }
        /* A key that cannot be read is a broken entry too: found now, not
         * when a job's first step needs it. */
        if (avo_llm_key_check(&p[i], why, sizeof why) < 0) {
            snprintf(err, errlen, "providers %s: [%zu] (%s): %s", path, i, p[i].name, why);
            free(p);
            json_decref(j);
            return -EINVAL;
        }
    }
    *n = (int)json_array_size(j);
    *out = p;
    json_decref(j);
    return 0;
}

static int take_lock(const char *home, int *fd_out, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (avo_paths_join(path, sizeof path, home, "avod.lock") < 0) {
        snprintf(err, errlen, "path too long: %.200s.../avod.lock", home);
        return -ENAMETOOLONG;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %.1500s: %s", path, strerror(errno));
        return -errno;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        char pid[32] = "?";
        ssize_t n = read(fd, pid, sizeof pid - 1);
        pid[n > 0 ? n : 1] = 0;
        pid[strcspn(pid, "\n")] = 0;
        snprintf(err, errlen,
                 "another avod (pid %s) is already running on state directory %s; stop it first "
                 "or use another AVO_HOME",
                 pid, home);
        close(fd);
        return -EAGAIN;
    }
    if (ftruncate(fd, 0) == 0) {
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
        if (write(fd, pid, (size_t)n) != n)
            avo_warn("avod", "cannot write pid to %s", path);
    }
    *fd_out = fd;
    return 0;
}

static int write_dsn_file(const char *home, const char *dsn)
{
    char path[PATH_MAX], text[AVO_CFG_STRLEN + 2];
    int rc = avo_paths_join(path, sizeof path, home, "avod.dsn");
    if (rc)
        return rc;
    int n = snprintf(text, sizeof text, "%s\n", dsn);
    if (n < 0 || (size_t)n >= sizeof text)
        return -ENAMETOOLONG;
    /* 0600: an external DSN may carry a password. */
    return avo_file_write_atomic(path, text, (size_t)n, 0600);
}

/* Startup check and migrations on a short blocking connection, before the
 * loop runs. */
static int prepare_database(const char *dsn, const char *sql_dir, json_t *quotas, double half_life, char *err,
                            size_t errlen)
{
    PGconn *c = PQconnectdb(dsn);
    if (PQstatus(c) != CONNECTION_OK) {
        char m[512];
        snprintf(m, sizeof m, "%s", PQerrorMessage(c));
        m[strcspn(m, "\n")] = 0;
        snprintf(err, errlen, "cannot connect to the database: %s; check --db / AVO_DB", m);
        PQfinish(c);
        return -ECONNREFUSED;
    }
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    int rc = avo_migrate(c, sql_dir, err, errlen); /* >= 0: how many were applied */
    if (rc >= 0) {
        /* before any worker claims under this avod: the quotas of this start */
        char hl[64], *text = json_dumps(quotas, JSON_COMPACT);
        snprintf(hl, sizeof hl, "%.17g", half_life);
        const char *params[] = {text, hl};
        PGresult *r = text ? PQexecParams(c, "SELECT avo_quotas_set($1::jsonb, $2::float8)", 2, NULL, params, NULL,
                                          NULL, 0)
                           : NULL;
        if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
            snprintf(err, errlen, "storing the quotas: %s", r ? PQresultErrorMessage(r) : "out of memory");
            err[strcspn(err, "\n")] = 0;
            rc = -EIO;
        }
        PQclear(r);
        free(text);
    }
    PQfinish(c);
    return rc;
}

/* Everything run() acquires, so that one function releases it whichever
 * step failed. */
typedef struct {
    avod_settings s;
    avod d;
    avo_pgembed pg;
    const char *dsn;
    avo_llm_provider *providers;
    int nproviders;
    avo_token tokens[AVO_HTTP_MAX_TOKENS];
    int ntokens;
    json_t *quotas;
    gid_t socket_gid;
    int lock_fd;
    int pg_started;
    int loop_ready;
} avod_boot;

/* --help and --version answer before any configuration is read. */
static int answer_info_flags(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            avo_config_usage(avod_rows, NROWS, "avod", "[options]");
            return 1;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("avod %s\n", AVO_VERSION);
            return 1;
        }
    }
    return 0;
}

/* The settings, the LLM providers, teams, tokens and quotas and the socket
 * group, all checked before anything starts: a broken providers file is a
 * configuration error, not something to find at the first agent job.
 * 0, or the exit code 2 with the reason on stderr. */
static int load_settings(avod_boot *b, int argc, char **argv)
{
    avod_settings *s = &b->s;
    char err[2048];
    int nrest = 0;
    if (avo_config_load(avod_rows, NROWS, s, argc, argv, &nrest, err, sizeof err) < 0) {
        fprintf(stderr, "avod: %s\n", err);
        return 2;
    }
    if (nrest > 1) {
        fprintf(stderr, "avod: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (avo_log_set_level(s->log_level) < 0) {
        fprintf(stderr, "avod: log-level: '%s' is not one of error, warn, info, debug\n", s->log_level);
        return 2;
    }
    if (load_providers(s->providers, &b->providers, &b->nproviders, err, sizeof err) < 0 ||
        load_ident(s, *s->listen != 0, &b->d.ident, b->tokens, &b->ntokens, &b->quotas, err, sizeof err) < 0) {
        fprintf(stderr, "avod: %s\n", err);
        return 2;
    }
    if (*s->socket_group) {
        struct group *gr = getgrnam(s->socket_group);
        if (!gr) {
            fprintf(stderr, "avod: socket-group: there is no unix group '%s'\n", s->socket_group);
            return 2;
        }
        b->socket_gid = gr->gr_gid;
    }
    return 0;
}

/* An explicit state directory must exist (a typo should not silently
 * create a second, empty installation); the default one is created.
 * 0, or the exit code 1 with the reason on stderr. */
static int make_state_dir(avod_settings *s)
{
    if (*s->home) {
        struct stat st;
        if (stat(s->home, &st) < 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr,
                    "avod: state directory %s does not exist; create it (mkdir -p) or unset "
                    "AVO_HOME/--home to use the default\n",
                    s->home);
            return 1;
        }
        return 0;
    }
    if (avo_home_default(s->home, sizeof s->home) < 0) {
        fprintf(stderr, "avod: cannot determine a state directory; set AVO_HOME\n");
        return 1;
    }
    /* mkdir -p semantics without a shell */
    for (char *p = s->home + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(s->home, 0755);
            *p = '/';
        }
    if (mkdir(s->home, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "avod: cannot create state directory %s: %s\n", s->home, strerror(errno));
        return 1;
    }
    return 0;
}

/* Where avod keeps and finds things: the state directory, the API socket,
 * the problem packages, the migrations. 0, or the exit code 1. */
static int resolve_paths(avod_settings *s)
{
    if (make_state_dir(s) != 0)
        return 1;
    char real[PATH_MAX];
    if (realpath(s->home, real) && strlen(real) < sizeof s->home)
        memcpy(s->home, real, strlen(real) + 1);
    if (!*s->socket) {
        if (strlen(s->home) + sizeof AVO_SOCKET_NAME + 1 > sizeof s->socket) {
            fprintf(stderr, "avod: state directory path too long\n");
            return 1;
        }
        strcat(strcat(strcpy(s->socket, s->home), "/"), AVO_SOCKET_NAME);
    }
    if (!*s->kernels && avo_paths_data("kernels", s->kernels, sizeof s->kernels) < 0) {
        fprintf(stderr, "avod: no problem packages at %s; pass --kernels DIR\n", s->kernels);
        return 1;
    }
    if (!*s->sql_dir && avo_paths_data("sql", s->sql_dir, sizeof s->sql_dir) < 0) {
        fprintf(stderr, "avod: no schema migrations at %s; pass --sql-dir DIR\n", s->sql_dir);
        return 1;
    }
    return 0;
}

/* The state directory's lock, the database (--db, or the embedded one
 * started here), its migrations and quotas, and the DSN file workers read.
 * 0, or the exit code 1 with the reason on stderr. */
static int open_database(avod_boot *b)
{
    avod_settings *s = &b->s;
    char err[2048];
    if (take_lock(s->home, &b->lock_fd, err, sizeof err) < 0) {
        fprintf(stderr, "avod: %s\n", err);
        return 1;
    }
    if (*s->db) {
        b->dsn = s->db;
    } else {
        if (avo_pgembed_start(&b->pg, s->home, s->pg_bindir, s->pg_user, err, sizeof err) < 0) {
            fprintf(stderr, "avod: %s\n", err);
            return 1;
        }
        b->pg_started = 1;
        b->dsn = b->pg.dsn;
    }
    if (prepare_database(b->dsn, s->sql_dir, b->quotas, s->fair_share_half_life, err, sizeof err) < 0) {
        fprintf(stderr, "avod: %s\n", err);
        return 1;
    }
    if (write_dsn_file(s->home, b->dsn) < 0)
        avo_warn("avod", "cannot write %s/avod.dsn; workers will need --db", s->home);
    return 0;
}

/* The API on the unix socket and, with --listen, on TCP. */
static int start_listeners(avod_boot *b)
{
    avod *d = &b->d;
    avod_settings *s = &b->s;
    char err[2048];
    if (avo_http_start(&d->http, d->loop, s->socket, avo_api_handle, d->api, err, sizeof err) < 0 ||
        (*s->socket_group && avo_http_socket_group(d->http, b->socket_gid, err, sizeof err) < 0) ||
        (*s->listen && avo_http_start_tcp(&d->http_tcp, d->loop, s->listen, b->tokens, b->ntokens, avo_api_handle,
                                          d->api, err, sizeof err) < 0)) {
        fprintf(stderr, "avod: %s\n", err);
        return -EIO;
    }
    return 0;
}

static void start_signals(avod *d)
{
    uv_signal_init(d->loop, &d->sigint);
    uv_signal_init(d->loop, &d->sigterm);
    uv_signal_init(d->loop, &d->sighup);
    d->signals = 1;
    d->sigint.data = d->sigterm.data = d->sighup.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    uv_signal_start(&d->sighup, on_reload, SIGHUP);
}

/* avod's start on the loop: the database connections, then what uses them
 * (engine, agent, API, rescuer), the listeners, the service, the signals.
 * On failure what was started is left for avod_stop. */
static int avod_start(avod_boot *b)
{
    avod *d = &b->d;
    avod_settings *s = &b->s;
    d->loop = uv_default_loop();
    b->loop_ready = 1;
    if (avo_db_open(&d->db, d->loop, b->dsn, "main") < 0)
        return -ENOMEM;
    d->dbs_open = 1;
    if (avo_db_open(&d->listen, d->loop, b->dsn, "listen") < 0)
        return -ENOMEM;
    d->dbs_open = 2;
    avo_db_set_callbacks(&d->db, NULL, on_db_state, d);
    avo_db_set_callbacks(&d->listen, on_notify, NULL, d);
    /* Without its channels avod would wait on timers alone: a start
     * that cannot register them (memory) fails. */
    if (avo_db_listen(&d->listen, "avo_eval_done") < 0 || avo_db_listen(&d->listen, "avo_jobs") < 0 ||
        avo_db_listen(&d->listen, "avo_events") < 0)
        return -ENOMEM;
    if (avo_engine_start(&d->engine, d->loop, &d->db, s->kernels, (unsigned)s->engine_interval_ms) < 0 ||
        avo_agent_start(&d->agent, d->loop, &d->db, s->kernels, s->home, b->providers, b->nproviders, kick_engine, d) <
            0 ||
        avo_api_start(&d->api, d->loop, &d->db, d->engine, s->kernels, s->home) < 0 ||
        avo_rescuer_start(&d->rescuer, d->loop, &d->db, d->engine, (unsigned)s->rescue_interval_ms,
                          (int)s->max_attempts, s->retry_backoff) < 0)
        return -EIO;
    avo_api_set_ident(d->api, d->ident);
    if (start_listeners(b) < 0)
        return -EIO;
    if (avo_service_start(&d->service, d->loop, &d->db) < 0 || avo_eventlog_start(&d->eventlog, &d->db) < 0 ||
        (b->pg_started && avo_pgwatch_start(&d->pgwatch, d->loop, &b->pg, on_pg_problem, d) < 0))
        return -EIO;
    avo_api_set_pgwatch(d->api, d->pgwatch);
    if (*s->listen)
        avo_info("avod", "API also on TCP %s (bearer tokens: %d)", s->listen, b->ntokens);
    avo_engine_set_agent(d->engine, d->agent);
    avo_api_set_agent(d->api, d->agent);
    avo_db_connect(&d->db);
    avo_db_connect(&d->listen);
    start_signals(d);
    d->ready = 1;
    avo_info("avod", "avod %s ready: api %s, kernels %s, database %s", AVO_VERSION, s->socket, s->kernels,
             *s->db ? "external (--db)" : "embedded");
    avo_service_ready(d->service);
    return 0;
}

static void log_leaked_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    avo_err("avod", "leaked a libuv %s handle%s", uv_handle_type_name(uv_handle_get_type(h)),
            uv_is_closing(h) ? " (closing)" : "");
}

/* A handle left open is a stop function that forgot one: said, not hidden. */
static void close_loop(uv_loop_t *loop)
{
    int rc = uv_loop_close(loop);
    if (rc < 0) {
        avo_err("avod", "the event loop did not close: %s", uv_strerror(rc));
        uv_walk(loop, log_leaked_handle, NULL);
    }
}

/* What load_settings, open_database and avod_start acquired, last first;
 * the loop's handles are closed by then (avod_stop and uv_run). */
static void release_boot(avod_boot *b)
{
    explicit_bzero(b->tokens, sizeof b->tokens);
    json_decref(b->quotas);
    avo_ident_free(b->d.ident);
    free(b->providers);
    if (b->loop_ready)
        close_loop(b->d.loop);
    if (b->pg_started)
        avo_pgembed_stop(&b->pg);
    if (b->lock_fd >= 0)
        close(b->lock_fd);
}

/* The loop until a signal stops avod, or, when the start failed part way,
 * only until what did start has closed. 0, or the exit code 1. */
static int serve(avod_boot *b)
{
    int rc = avod_start(b) < 0 ? 1 : 0;
    if (rc != 0)
        avod_stop(&b->d);
    uv_run(b->d.loop, UV_RUN_DEFAULT);
    return rc;
}

/* argv_copy: the command line before avo_config_load compacts argv, kept
 * for reloads (main owns it, so no return path can leak it). */
static int run(int argc, char **argv, char **argv_copy)
{
    avod_boot b;
    memset(&b, 0, sizeof b);
    b.lock_fd = -1;
    avo_log_init("avod");
    signal(SIGPIPE, SIG_IGN);
    b.d.argc = argc;
    b.d.argv = argv_copy;
    if (answer_info_flags(argc, argv))
        return 0;
    int rc = load_settings(&b, argc, argv);
    if (rc == 0)
        rc = resolve_paths(&b.s);
    if (rc == 0)
        rc = open_database(&b);
    if (rc == 0)
        rc = serve(&b);
    release_boot(&b);
    if (rc == 0)
        avo_info("avod", "stopped");
    return rc;
}

int main(int argc, char **argv)
{
    char **copy = calloc((size_t)argc + 1, sizeof *copy);
    if (!copy)
        return 1;
    memcpy(copy, argv, (size_t)argc * sizeof *argv);
    int rc = run(argc, argv, copy);
    free(copy);
    return rc;
}
