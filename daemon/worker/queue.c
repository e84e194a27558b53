/* The worker's side of the queue: register, claim, renew leases, store results, wait (queue.h). */
#include "queue.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "avo_cgroup.h"
#include "avo_log.h"
#include "avo_nvml.h"
#include "avo_package.h"
#include "devices.h"
#include "sandbox.h"
#include "served.h"
#include "recentjobs.h"
#include "avo_problem.h"
#include "evaluate.h"
#include "toolchain.h"

typedef struct {
    const avo_queue_opts *o;
    PGconn *conn;
    int connecting; /* conn is a PQconnectStart still in progress */
    PostgresPollingStatusType connect_wants;
    double connect_deadline; /* a connect that hangs (a host gone silent) is abandoned then */
    double retry_at;         /* the next connect attempt, after a failed one */
    unsigned retry_ms;
    int down_logged;
    long long worker_id;
    long long eval_id;    /* the evaluation in progress */
    long long profile_id; /* the profile in progress (sql/011_profiles.sql) */
    double next_heartbeat;
    double next_profile_renew;
    double idle_since; /* the first claim that found nothing since the last work (0: busy) */
    int lease_lost;
    int unhealthy; /* the GPU failed the canary: claim nothing */
    double next_canary;
    /* Claims taken ahead (--prefetch N), oldest first: evaluated after the
     * current one, their compiles done meanwhile on a thread. */
    struct {
        PGresult *claim;
        long long id;
        int cancelled; /* a NOTIFY said it was cancelled: skipped */
    } ahead[AVO_PREFETCH_MAX];
    int nahead;
    pthread_t warm;      /* the compiles of the claims just taken */
    struct warm_job *wj; /* its job, freed once it is joined (join_warm) */
    int early_done;      /* evaluations claimed ahead and stored early (post_early): count for --max-evals */
    int warming;
    atomic_int warm_done;    /* the compile thread has finished (joined by the next heartbeat) */
    int work_pending;        /* a wake-up for new work arrived during an evaluation */
    int draining;            /* the registry already says so */
    json_t *toolchain;       /* probed once at start (toolchain.h): on the worker's row and in every result */
    avo_served_pool served;  /* the kept checkers (--serve; served.h), one per job, each closed after
                               AVO_SERVED_IDLE_S without work */
    avo_recentjobs resident; /* with --serve: the jobs of its latest claims, whose work the claim
                                 prefers (recentjobs.h) */
} worker;

static double now_s(void);

/* What every evaluation of this worker shares: where it compiles, keeps
 * state and scratch, and on which GPU; each caller adds its own. */
static avo_evaluate_opts eval_opts(const avo_queue_opts *o, int with_harness)
{
    return (avo_evaluate_opts){.harness_path = with_harness ? o->harness : NULL,
                               .cache_dir = o->cache_dir,
                               .state_dir = o->state_dir,
                               .scratch_root = o->scratch_root,
                               .gpu_index = o->gpu_index};
}

struct warm_entry {
    const avo_queue_opts *o;
    const char *problem, *src; /* the claim's (it outlives the thread) */
    size_t len;
    long long id;
    int ends_early; /* it will end before its harness (a compile error, a refused source) */
};

typedef struct warm_job {
    atomic_int *done;
    int n;
    struct warm_entry e[AVO_PREFETCH_MAX];
} warm_job;

/* The problem package a claim names, found under the worker's kernels
 * root and loaded into *p: 0, or -1 with err (nothing to free then). */
static int load_problem(const avo_queue_opts *o, const char *name, avo_problem *p, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (avo_problem_resolve(o->kernels, name, dir, sizeof dir, err, errlen) != 0 ||
        avo_problem_load(p, dir, err, errlen) != 0)
        return -1;
    return 0;
}

/* One evaluation claimed ahead compiled (avo_evaluate_precompile): its
 * reference, candidate and against land in the compile cache. */
static void *warm_one(void *arg)
{
    struct warm_entry *e = arg;
    char err[1024];
    avo_problem p;
    if (load_problem(e->o, e->problem, &p, err, sizeof err) != 0)
        return NULL;
    avo_evaluate_opts eo = eval_opts(e->o, 0);
    eo.timeout_s = e->o->timeout_s;
    double t0 = now_s();
    if (avo_evaluate_precompile(&eo, &p, e->src, e->len, &e->ends_early, err, sizeof err) == 0)
        avo_info("worker", "evaluation %lld precompiled in %.2f s while the previous one ran", e->id, now_s() - t0);
    else
        avo_warn("worker", "evaluation %lld: precompile failed: %s", e->id, err);
    avo_problem_free(&p);
    return NULL;
}

/* The compiles of evaluations claimed ahead, side by side (a thread each),
 * while the current one runs in its harness: on a GPU worker compiling
 * (CPU) overlaps timing (GPU). One after another, a screened-out attention
 * evaluation (1.3-1.8 s on an H100) outran the next tune proposal's
 * compile (2.3-3.9 s) and the GPU waited for it (docs/benchmarks.md,
 * thirty-third session). Each compile keeps off the harnesses' leased CPUs
 * (compile.c). */
static void *warm_main(void *arg)
{
    warm_job *j = arg;
    pthread_t tid[AVO_PREFETCH_MAX];
    int started[AVO_PREFETCH_MAX] = {0};
    for (int i = 1; i < j->n; i++)
        started[i] = pthread_create(&tid[i], NULL, warm_one, &j->e[i]) == 0;
    if (j->n > 0)
        warm_one(&j->e[0]);
    for (int i = 1; i < j->n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            warm_one(&j->e[i]);
    }
    /* Freed by the thread that joins this one (join_warm). */
    atomic_store(j->done, 1);
    return NULL;
}

/* A killed harness leaves its runner orphaned; as a subreaper the worker
 * inherits it (instead of PID 1, which in a container without an init
 * never reaps) and reaps it here, after the evaluation's own child is
 * waited for. Only harness processes are touched: the compile thread's
 * children (cc, nvcc) are its own to wait for. */
static void reap_orphans(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    const pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        /* pid (comm) state ppid ...; comm may hold spaces and parentheses */
        char *close = strrchr(buf, ')');
        char state = 0;
        int ppid = 0;
        if (!close || strncmp(buf + strcspn(buf, "("), "(avo-harness", 12) != 0 ||
            sscanf(close + 1, " %c %d", &state, &ppid) != 2)
            continue;
        if (ppid == self && state == 'Z')
            waitpid((pid_t)strtol(e->d_name, NULL, 10), NULL, WNOHANG);
    }
    closedir(d);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static PGresult *exec(worker *w, const char *sql, int n, const char *const *params)
{
    if (w->connecting || PQstatus(w->conn) != CONNECTION_OK)
        return NULL; /* the caller's next connect step says why */
    PGresult *r = PQexecParams(w->conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        char m[512];
        snprintf(m, sizeof m, "%s", PQresultErrorMessage(r));
        m[strcspn(m, "\n")] = 0;
        avo_warn("worker", "query failed: %s", m);
        PQclear(r);
        return NULL;
    }
    return r;
}

/* New work, and cancellations of what this worker runs. */
static int listen_all(worker *w)
{
    static const char *const chans[] = {"LISTEN avo_work", "LISTEN avo_cancel"};
    for (size_t i = 0; i < sizeof chans / sizeof chans[0]; i++) {
        PGresult *r = exec(w, chans[i], 0, NULL);
        if (!r)
            return -5;
        PQclear(r);
    }
    return 0;
}

static int do_register(worker *w)
{
    char host[256] = "?", pid[16];
    gethostname(host, sizeof host);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    json_t *dev = avo_devices_probe();
    char *devices = json_dumps(dev, JSON_COMPACT);
    json_decref(dev);
    char *tc = json_dumps(w->toolchain, JSON_COMPACT | JSON_SORT_KEYS);
    const char *p[] = {host, pid, w->o->target, devices ? devices : "[]", tc};
    PGresult *r = exec(w, "SELECT avo_worker_register($1, $2, $3, $4::jsonb, $5::jsonb)", 5, p);
    free(tc);
    free(devices);
    if (!r)
        return -5;
    w->worker_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    if (listen_all(w) < 0)
        return -5;
    avo_info("worker", "registered as worker %lld (%s, pid %s, target %s)", w->worker_id, host, pid, w->o->target);
    return 0;
}

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 5000
#define CONNECT_TIMEOUT_S 10.0

/* Settings, then registration (first connection) or LISTEN again. */
static int session_setup(worker *w)
{
    PQclear(PQexec(w->conn, "SET client_min_messages = warning"));
    /* A worker's commits (claim, heartbeat, completion) do not wait for the
     * WAL flush. If the server crashes, the last few may be lost: the
     * evaluation is then still 'running' under an expired lease and the
     * rescuer queues it again. At least once stays at least once, nothing
     * is applied twice (avod commits synchronously, and the WAL is flushed
     * in order), and the queue does not pay a disk flush per claim.
     * docs/queue.md. */
    PQclear(PQexec(w->conn, "SET synchronous_commit = off"));
    if (w->worker_id == 0)
        return do_register(w);
    if (listen_all(w) < 0)
        return -5;
    avo_info("worker", "reconnected to the database");
    return 0;
}

static void connect_failed(worker *w, const char *why)
{
    if (!w->down_logged++ || w->retry_ms >= RETRY_MAX_MS) {
        char m[512];
        snprintf(m, sizeof m, "%s", why);
        m[strcspn(m, "\n")] = 0;
        avo_warn("worker", "cannot reach the database: %s; retrying", m);
    }
    PQfinish(w->conn);
    w->conn = NULL;
    w->connecting = 0;
    w->retry_at = now_s() + w->retry_ms / 1000.0;
    w->retry_ms = w->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : w->retry_ms * 2;
}

/* One step towards a connection that blocks at most wait_ms, so that the
 * caller keeps serving what it owes meanwhile (the harness's deadline and
 * cancellation, a signal): libpq's non-blocking connect, polled here, with
 * attempts spaced by backoff. 0 when connected, -EAGAIN when not yet. */
static int connect_step(worker *w, int wait_ms)
{
    if (!w->connecting && PQstatus(w->conn) == CONNECTION_OK)
        return 0;
    const double until = now_s() + wait_ms / 1000.0;
    if (!w->connecting) {
        PQfinish(w->conn);
        w->conn = NULL;
        if (now_s() < w->retry_at)
            return -EAGAIN;
        if (!w->retry_ms)
            w->retry_ms = RETRY_MIN_MS;
        w->conn = PQconnectStart(w->o->dsn);
        if (!w->conn || PQstatus(w->conn) == CONNECTION_BAD) {
            connect_failed(w, w->conn ? PQerrorMessage(w->conn) : "out of memory");
            return -EAGAIN;
        }
        w->connecting = 1;
        w->connect_wants = PGRES_POLLING_WRITING;
        w->connect_deadline = now_s() + CONNECT_TIMEOUT_S;
    }
    for (;;) {
        /* libpq may change the socket at any step: read it again each time. */
        struct pollfd pfd = {.fd = PQsocket(w->conn),
                             .events = w->connect_wants == PGRES_POLLING_READING ? POLLIN : POLLOUT};
        const double left = until - now_s();
        int rc = poll(&pfd, 1, left > 0 ? (int)(left * 1000) : 0);
        if (rc < 0 && errno != EINTR) {
            connect_failed(w, strerror(errno));
            return -EAGAIN;
        }
        if (rc <= 0) {
            if (now_s() > w->connect_deadline)
                connect_failed(w, "connection attempt timed out");
            return -EAGAIN; /* not ready yet, or a signal to look at */
        }
        w->connect_wants = PQconnectPoll(w->conn);
        if (w->connect_wants == PGRES_POLLING_FAILED) {
            connect_failed(w, PQerrorMessage(w->conn));
            return -EAGAIN;
        }
        if (w->connect_wants == PGRES_POLLING_OK) {
            w->connecting = 0;
            if (session_setup(w) < 0) {
                connect_failed(w, "the session could not be set up");
                return -EAGAIN;
            }
            w->retry_ms = RETRY_MIN_MS;
            w->down_logged = 0;
            return 0;
        }
    }
}

/* Connect (or reconnect) with backoff, seeing signals within ~0.1 s. A
 * worker with a result in hand (holding) keeps trying through the first
 * SIGTERM, so that the result is stored (the drain guarantee); a second
 * signal gives up. One with nothing in hand stops at the first: an idle
 * worker must not wait for a database to come back before it can stop. */
static int ensure_connected(worker *w, int holding)
{
    for (;;) {
        if (*w->o->stop > 1 || (*w->o->stop && !holding))
            return -4;
        if (connect_step(w, 100) == 0)
            return 0;
        if (!w->connecting) {
            double wait = w->retry_at - now_s();
            sleep_ms(wait > 0.1 ? 100 : wait > 0 ? (int)(wait * 1000) + 1 : 0);
        }
    }
}

/* While the harness runs: the database may have gone away (a restart, a
 * failover) under a healthy evaluation. Reconnect in short steps, so that
 * the lease is renewed before it lapses; otherwise the rescuer would queue
 * the evaluation again and refuse this worker's result. 0 when connected;
 * after a reconnection the lease is renewed at once. */
static int keep_connected(worker *w)
{
    if (!w->connecting && PQstatus(w->conn) == CONNECTION_OK)
        return 0;
    if (connect_step(w, 50) < 0)
        return -EAGAIN;
    w->next_heartbeat = 0;
    return 0;
}

/* The worker's row in the registry (sql/024_worker_states.sql has its
 * states): set_state moves it, mark_seen refreshes last_seen, which the
 * rescuer reads to mark silent workers gone. */
static void set_state(worker *w, const char *state)
{
    char id[32];
    snprintf(id, sizeof id, "%lld", w->worker_id);
    PQclear(exec(w, "SELECT avo_worker_set_state($1, $2)", 2, (const char *const[]){id, state}));
}

static void mark_seen(worker *w)
{
    char id[32];
    snprintf(id, sizeof id, "%lld", w->worker_id);
    PQclear(exec(w, "SELECT avo_worker_seen($1)", 1, (const char *const[]){id}));
}

/* Read whatever notifications arrived, without blocking. A cancellation of
 * the evaluation in hand stops it at once; of the prefetched one, skips it.
 * Returns how many wake-ups for new work were among them. */
static int read_notifies(worker *w)
{
    int work = 0;
    if (!w->conn || PQstatus(w->conn) != CONNECTION_OK || !PQconsumeInput(w->conn))
        return 0; /* a dropped connection is noticed by the next query */
    PGnotify *n;
    while ((n = PQnotifies(w->conn))) {
        if (strcmp(n->relname, "avo_work") == 0)
            work++;
        if (strcmp(n->relname, "avo_cancel") == 0) {
            long long id = strtoll(n->extra, NULL, 10);
            if (id && id == w->eval_id && !w->lease_lost) {
                avo_info("worker", "evaluation %lld was cancelled; stopping it", id);
                w->lease_lost = 1;
            } else {
                for (int i = 0; i < w->nahead; i++)
                    if (id && id == w->ahead[i].id)
                        w->ahead[i].cancelled = 1;
            }
        }
        PQfreemem(n);
    }
    return work;
}

/* The registry shows a worker that got SIGTERM as draining: it finishes the
 * evaluation in hand and claims nothing new. */
static void note_draining(worker *w)
{
    if (*w->o->stop == 1 && !w->draining && w->conn && PQstatus(w->conn) == CONNECTION_OK) {
        set_state(w, "draining");
        w->draining = 1;
    }
}

/* current (when not 0) and the claims taken ahead, as a PostgreSQL array
 * literal; 0 when there are none. */
static int lease_ids(const worker *w, long long current, char *buf, size_t len)
{
    int k = 0;
    size_t n = (size_t)snprintf(buf, len, "{");
    for (int i = current ? -1 : 0; i < w->nahead && n < len; i++, k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", k ? "," : "", i < 0 ? current : w->ahead[i].id);
    if (n < len)
        snprintf(buf + n, len - n, "}");
    return k;
}

/* Renew the leases this worker holds (sql: avo_renew_leases): the
 * evaluation in hand, current (0 for none), and those claimed ahead
 * (prefetch). -ESTALE when current was not renewed: cancelled, or no longer
 * ours. A failed query is not taken for a lost lease. */
static int renew_leases(worker *w, long long current)
{
    char ids[32 * (AVO_PREFETCH_MAX + 1) + 4], wid[32], lease[32];
    if (!lease_ids(w, current, ids, sizeof ids))
        return 0;
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    snprintf(lease, sizeof lease, "%g", w->o->lease_s);
    PGresult *r = exec(w, "SELECT id FROM avo_renew_leases($1::bigint[], $2, $3) id", 3,
                       (const char *const[]){ids, wid, lease});
    if (!r)
        return 0;
    int found = !current;
    for (int i = 0; i < PQntuples(r) && !found; i++)
        found = strtoll(PQgetvalue(r, i, 0), NULL, 10) == current;
    PQclear(r);
    return found ? 0 : -ESTALE;
}

static void prefetch(worker *w);
static void join_warm(worker *w, int post);

/* Called by the evaluator every ~100 ms while the harness runs. */
static int heartbeat(void *arg)
{
    worker *w = arg;
    if (*w->o->stop > 1)
        return 1; /* second signal: stop now */
    if (keep_connected(w) < 0)
        return 0;
    note_draining(w);
    if (read_notifies(w) > 0)
        w->work_pending = 1;
    if (w->lease_lost)
        return 1;
    /* Work queued after this evaluation began (a job's next candidate is
     * made when its last result is read, mostly while another job's
     * evaluation runs): claimed ahead now, so its compile overlaps this
     * evaluation's timing, not the next evaluation's start. */
    if (w->warming && atomic_load(&w->warm_done))
        join_warm(w, 1);
    if (w->work_pending && w->nahead < w->o->prefetch) {
        if (!w->warming) {
            w->work_pending = 0;
            prefetch(w);
        }
    }
    double t = now_s();
    if (t < w->next_heartbeat)
        return w->lease_lost;
    w->next_heartbeat = t + (w->o->lease_s / 4 > 1 ? w->o->lease_s / 4 : 1);
    if (renew_leases(w, w->eval_id) < 0) {
        /* Cancelled, or no longer ours: stop spending the machine on it. */
        avo_info("worker", "evaluation %lld was cancelled or reassigned; stopping it", w->eval_id);
        w->lease_lost = 1;
    }
    mark_seen(w);
    return w->lease_lost;
}

/* avo-canary (beside the harness) on this worker's GPU: 0 when healthy. */
static int run_canary(worker *w)
{
    char path[PATH_MAX], idx[16], err[256];
    const char *slash = strrchr(w->o->harness, '/');
    int n = snprintf(path, sizeof path, "%.*s/avo-canary", slash ? (int)(slash - w->o->harness) : 1,
                     slash ? w->o->harness : ".");
    if (n < 0 || (size_t)n >= sizeof path) {
        avo_warn("worker", "canary on GPU %d: the path beside %s is too long", w->o->gpu_index, w->o->harness);
        return -ENAMETOOLONG;
    }
    snprintf(idx, sizeof idx, "0");
    char *argv[] = {path, idx, NULL};
    avo_sandbox_opts so = {.argv = argv, .cwd = "/", .timeout_s = 60, .no_as_limit = 1, .out_cap = 1024};
    avo_sandbox_result sr = {0};
    int rc = avo_sandbox_run(&so, &sr, err, sizeof err);
    int healthy = rc == 0 && sr.exited && sr.exit_code == 0;
    avo_info("worker", "canary on GPU %d: %s %s", w->o->gpu_index, healthy ? "healthy" : "FAILED",
             sr.out ? sr.out : err);
    avo_sandbox_result_free(&sr);
    return healthy ? 0 : -5;
}

/* One avo_claim for this worker's target: 1 with the claimed row in *out,
 * 0 when nothing is claimable now, -5 when the query failed. */
static int claim(worker *w, PGresult **out)
{
    char wid[32], lease[32], res[AVO_SERVED_SLOTS_MAX * 24 + 4];
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    snprintf(lease, sizeof lease, "%g", w->o->lease_s);
    avo_recentjobs_array(&w->resident, now_s(), AVO_SERVED_IDLE_S, res, sizeof res);
    const char *p[] = {wid, w->o->target, lease, res};
    /* With the package the job pinned (sql/016_pinned_problem.sql), read
     * by name: avo_claim's own columns come first, by position. */
    PGresult *r = exec(w,
                       "SELECT c.*, j.problem_hash AS pinned_hash, j.problem_files AS pinned_files "
                       "FROM avo_claim($1, $2, $3, $4::bigint[]) c LEFT JOIN jobs j ON j.id = c.job_id",
                       4, p);
    *out = NULL;
    if (!r)
        return -5;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return 0;
    }
    if (!PQgetisnull(r, 0, 1))
        avo_recentjobs_note(&w->resident, strtoll(PQgetvalue(r, 0, 1), NULL, 10), w->o->serve ? w->o->serve_slots : 0,
                            now_s());
    *out = r;
    return 1;
}

/* Whether another live worker of this target is idle: then a second claim
 * ahead would hold work it could start at once (on a host of several GPUs,
 * an idle GPU), so only one is taken (an unanswered query counts as idle). */
static int others_idle(worker *w)
{
    char wid[32];
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    const char *p[] = {wid, w->o->target};
    PGresult *r = exec(w,
                       "SELECT EXISTS (SELECT 1 FROM workers WHERE id <> $1 AND target = $2 AND state = 'idle' "
                       "AND last_seen > now() - interval '2 minutes')",
                       2, p);
    if (!r)
        return 1;
    const int idle = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return idle;
}

/* Claim ahead (when prefetching) until --prefetch N claims wait (beyond
 * the first only while no other worker of the target is idle), and compile
 * the new ones side by side on a thread; they are evaluated after the
 * current one, in claim order, their compiles cache hits. The thread is
 * joined before the current evaluation's end (evaluate_one), so no claim
 * it reads is freed under it. */
static void prefetch(worker *w)
{
    if (w->warming || *w->o->stop)
        return;
    warm_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->done = &w->warm_done;
    w->wj = j;
    PGresult *r;
    while (w->nahead < w->o->prefetch && w->nahead < AVO_PREFETCH_MAX && (w->nahead < 1 || !others_idle(w)) &&
           claim(w, &r) == 1) {
        const long long id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        w->ahead[w->nahead].claim = r;
        w->ahead[w->nahead].id = id;
        w->ahead[w->nahead].cancelled = 0;
        w->nahead++;
        j->e[j->n].o = w->o;
        j->e[j->n].problem = PQgetvalue(r, 0, 3);
        j->e[j->n].src = PQgetvalue(r, 0, 4);
        j->e[j->n].len = (size_t)PQgetlength(r, 0, 4);
        j->e[j->n].id = id;
        j->n++;
    }
    if (j->n)
        avo_info("worker", "claimed %d evaluation(s) ahead: %d waiting", j->n, w->nahead);
    atomic_store(&w->warm_done, 0);
    if (j->n && pthread_create(&w->warm, NULL, warm_main, j) == 0) {
        w->warming = 1;
    } else {
        w->wj = NULL;
        free(j);
    }
}

/* The oldest claim taken ahead, handed over (NULL when none). */
static PGresult *take_ahead(worker *w, long long *id, int *cancelled)
{
    if (!w->nahead)
        return NULL;
    PGresult *r = w->ahead[0].claim;
    *id = w->ahead[0].id;
    *cancelled = w->ahead[0].cancelled;
    w->nahead--;
    memmove(&w->ahead[0], &w->ahead[1], (size_t)w->nahead * sizeof w->ahead[0]);
    return r;
}

/* Give the claims taken ahead back to the queue (the worker is stopping). */
static void release_ahead(worker *w)
{
    PGresult *r;
    long long id;
    int cancelled;
    while ((r = take_ahead(w, &id, &cancelled))) {
        char nid[32], wid[32];
        snprintf(nid, sizeof nid, "%lld", id);
        snprintf(wid, sizeof wid, "%lld", w->worker_id);
        const char *p[] = {nid, wid};
        if (w->conn && PQstatus(w->conn) == CONNECTION_OK)
            PQclear(exec(w, "SELECT avo_give_back($1, $2)", 2, p));
        avo_info("worker", "evaluation %lld given back to the queue", id);
        PQclear(r);
    }
}

/* A crash or a hang can leave the GPU wedged (a sticky error, a kernel that
 * did not die with its process): after one, the GPU is checked with a
 * known-good kernel in a fresh process before anything is claimed again. */
static int gpu_suspect(const worker *w, const char *outcome)
{
    return strncmp(w->o->target, "sm_", 3) == 0 && (!strcmp(outcome, "crash") || !strcmp(outcome, "timeout"));
}

/* The worker's state after an evaluation or a profile: unhealthy when the
 * GPU was suspect and failed the canary, else idle (draining once told to
 * stop). */
static void after_run(worker *w, int suspect)
{
    if (suspect && run_canary(w) != 0) {
        w->unhealthy = 1;
        w->next_canary = now_s() + 30;
        set_state(w, "unhealthy");
        avo_err("worker", "GPU %d failed the canary after a crash or a timeout; not claiming until it passes again",
                w->o->gpu_index);
        return;
    }
    set_state(w, *w->o->stop ? "draining" : "idle");
}

/* The package on disk against the one the claim's job pinned: 0 when the
 * files the evaluation reads (problem.json, the reference, the baseline)
 * are the pinned ones, or the job pinned nothing (from before the pin);
 * else -ESTALE with the reason in why, naming both hashes and the path.
 * Seed files are not among them: avod keeps the job's seed text, and a
 * worker never reads a seed. */
static int check_pinned(const PGresult *claim, const avo_problem *p, char *why, size_t whylen)
{
    const int fh = PQfnumber(claim, "pinned_hash"), ff = PQfnumber(claim, "pinned_files");
    if (fh < 0 || ff < 0 || PQgetisnull(claim, 0, fh) || PQgetisnull(claim, 0, ff))
        return 0;
    const char *pinned_hash = PQgetvalue(claim, 0, fh);
    json_t *pinned = json_loads(PQgetvalue(claim, 0, ff), 0, NULL), *disk = NULL;
    char err[600] = "", disk_hash[AVO_SHA256_HEX] = "?";
    int rc = 0;
    if (avo_package_manifest(p->dir, p->json, 0, &disk, err, sizeof err) == 0)
        avo_package_hash(disk, disk_hash);
    const char *const used[] = {"problem.json", p->reference, p->baseline, NULL};
    const char *f = disk && pinned ? avo_package_first_change(pinned, disk, used) : "problem.json";
    if (f) {
        const char *ps = json_string_value(json_object_get(pinned, f));
        const char *ds = json_string_value(json_object_get(disk, f));
        snprintf(why, whylen,
                 "problem package %.100s (%.500s) is not the version its job pinned: %.64s is %.12s here, %.12s "
                 "pinned (package %.64s here, %.64s pinned); not evaluated",
                 p->name, p->dir, f, ds ? ds : "unreadable", ps ? ps : "absent", disk_hash, pinned_hash);
        rc = -ESTALE;
    }
    json_decref(pinned);
    json_decref(disk);
    return rc;
}

/* The claim taken: the worker's state says so, and more is claimed ahead
 * (prefetch) to compile while this one runs. Returns the log context. */
static avo_log_ctx begin_evaluation(worker *w, const PGresult *claim)
{
    w->eval_id = strtoll(PQgetvalue(claim, 0, 0), NULL, 10);
    w->lease_lost = 0;
    w->next_heartbeat = now_s() + 1;
    const avo_log_ctx lc = {strtoll(PQgetvalue(claim, 0, 1), NULL, 10), strtoll(PQgetvalue(claim, 0, 2), NULL, 10),
                            w->eval_id, w->worker_id};
    avo_log_fields(AVO_LOG_INFO, "worker", &lc, "evaluation %lld: job %s, candidate %s, problem %s", w->eval_id,
                   PQgetvalue(claim, 0, 1), PQgetvalue(claim, 0, 2), PQgetvalue(claim, 0, 3));
    set_state(w, "busy");
    prefetch(w);
    return lc;
}

/* A result for an evaluation that did not run: no score, the reason in detail. */
static json_t *unrun_result(const char *outcome, const char *detail)
{
    return json_pack("{s:s,s:s,s:f,s:[]}", "outcome", outcome, "detail", detail, "aggregate", 0.0, "configs");
}

/* What the claim asks of the evaluation beyond the candidate, read from
 * avo_claim's columns after the source. */
static void claim_options(const PGresult *claim, avo_evaluate_opts *eo)
{
    /* avo_claim's against (the island's best, or the seed for a job's
     * final measurement) and the job's commit confidence: the result's
     * paired member is what the commit rule decides on. */
    if (PQnfields(claim) >= 9 && !PQgetisnull(claim, 0, 7)) {
        eo->against_id = strtoll(PQgetvalue(claim, 0, 6), NULL, 10);
        eo->against_src = PQgetvalue(claim, 0, 7);
        eo->against_len = (size_t)PQgetlength(claim, 0, 7);
        eo->confidence = strtod(PQgetvalue(claim, 0, 8), NULL);
        /* A search's evaluation screens; a job's final measurement
         * is measured in full (sql/013_screen.sql). */
        eo->screen = PQnfields(claim) >= 10 && strcmp(PQgetvalue(claim, 0, 9), "t") == 0;
    }
    /* The job's secret seed (sql/014_job_seed.sql): the warm-up calls'
     * input sets, the same in each of its evaluations. Never logged. */
    if (PQnfields(claim) >= 11 && !PQgetisnull(claim, 0, 10))
        eo->job_seed = strtoull(PQgetvalue(claim, 0, 10), NULL, 10);
}

/* The evaluation options a claim asks for (claim_options) beside the
 * worker's own. */
static avo_evaluate_opts claim_eval_opts(const worker *w, const PGresult *claim)
{
    avo_evaluate_opts eo = eval_opts(w->o, 1);
    eo.timeout_s = w->o->timeout_s;
    claim_options(claim, &eo);
    return eo;
}

/* The problem package found and checked against the job's pin, then the
 * candidate compiled and run in the harness (heartbeat() renewing the
 * lease meanwhile). Returns the result, a failed one when it could not run. */
static json_t *run_evaluation(worker *w, const PGresult *claim, const avo_log_ctx *lc)
{
    char err[1024];
    avo_problem p;
    json_t *result = NULL;
    if (load_problem(w->o, PQgetvalue(claim, 0, 3), &p, err, sizeof err) != 0) {
        reap_orphans();
        return unrun_result("crash", err);
    }
    if (check_pinned(claim, &p, err, sizeof err) < 0) {
        avo_log_fields(AVO_LOG_WARN, "worker", lc, "evaluation %lld refused: %s", w->eval_id, err);
        result = unrun_result("package_mismatch", err);
    } else {
        avo_evaluate_opts eo = claim_eval_opts(w, claim);
        eo.gpu_lock_dir = w->o->gpu_lock_dir;
        eo.ref_cache_bytes = w->o->ref_cache_bytes;
        eo.served = w->o->serve ? &w->served : NULL;
        eo.should_cancel = heartbeat;
        eo.cancel_arg = w;
        if (avo_evaluate_candidate(&eo, &p, PQgetvalue(claim, 0, 4), (size_t)PQgetlength(claim, 0, 4), &result, err,
                                   sizeof err) < 0) {
            avo_log_fields(AVO_LOG_ERROR, "worker", lc, "evaluation %lld could not run: %s", w->eval_id, err);
            result = unrun_result("crash", err);
        }
        /* A busy worker's idle checkers too (a finished job's holds its
         * GPU context and device tensors). */
        avo_served_pool_idle(&w->served, AVO_SERVED_IDLE_S);
    }
    avo_problem_free(&p);
    reap_orphans();
    return result;
}

/* The result's outcome, "crash" when it has none. */
static const char *outcome_of(const json_t *result)
{
    const char *outcome = json_string_value(json_object_get(result, "outcome"));
    return outcome ? outcome : "crash";
}

/* A completion (sql returning whether the task was still this worker's)
 * run once (store_once), or until the database answers, through database
 * blips, as long as the worker is not told twice to stop
 * (store_until_answered). 1 when stored, 0 when refused (no longer ours),
 * -EAGAIN when not answered. */
static int store_once(worker *w, const char *sql, int n, const char *const *params)
{
    PGresult *r = exec(w, sql, n, params);
    if (!r)
        return -EAGAIN;
    const int stored = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return stored;
}
static int store_until_answered(worker *w, const char *sql, int n, const char *const *params, int attempts)
{
    for (int attempt = 0; attempt < attempts && !(*w->o->stop > 1); attempt++) {
        if (ensure_connected(w, 1) < 0)
            break;
        const int stored = store_once(w, sql, n, params);
        if (stored >= 0)
            return stored;
        sleep_ms(500);
    }
    return -EAGAIN;
}

/* The result stored with avo_complete, which re-checks state and lease
 * owner: through database blips (until answered), or with once a single
 * attempt on a connection that is up, which never blocks (the heartbeat's
 * early store). 1 stored, 0 refused (no longer ours), -EAGAIN not
 * answered. */
static int store_evaluation(worker *w, long long id, json_t *result, const avo_log_ctx *lc, int once)
{
    /* Every result says what produced it (sql/018_toolchain.sql), the
     * clocks this evaluation saw included. */
    json_object_set_new(result, "toolchain", avo_toolchain_for_result(w->toolchain, result));
    const char *outcome = outcome_of(result);
    double agg = json_number_value(json_object_get(result, "aggregate"));
    if (strcmp(outcome, "ok") != 0 || !isfinite(agg))
        agg = 0;
    char *text = json_dumps(result, JSON_COMPACT);
    char eid[32], wid[32], aggs[64];
    snprintf(eid, sizeof eid, "%lld", id);
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    snprintf(aggs, sizeof aggs, "%.17g", agg);
    const char *params[] = {eid, wid, outcome, aggs, text};
    const char *unit = json_string_value(json_object_get(result, "unit"));
    avo_log_fields(AVO_LOG_INFO, "worker", lc, "evaluation %lld: %s, aggregate %.4g %s", id, outcome, agg,
                   unit ? unit : "");
    static const char sql[] = "SELECT avo_complete($1, $2, $3, $4, $5::jsonb)";
    int stored = -EAGAIN;
    if (!once) {
        /* The result must not be lost to a database blip. */
        stored = store_until_answered(w, sql, 5, params, 60);
    } else if (!w->connecting && w->conn && PQstatus(w->conn) == CONNECTION_OK) {
        stored = store_once(w, sql, 5, params);
    }
    if (stored == 0)
        avo_info("worker", "evaluation %lld: result not stored (cancelled or reassigned meanwhile)", id);
    free(text);
    return stored;
}

/* The compiles of the claims taken ahead joined (their claims may be freed
 * from now on), and the GPU checked when the evaluation may have wedged it. */
static void end_evaluation(worker *w, const json_t *result)
{
    join_warm(w, 0);
    /* The against crashing or hanging can wedge the GPU as well, while the
     * candidate's own outcome is ok. */
    const char *perr = json_string_value(json_object_get(json_object_get(result, "paired"), "error"));
    int suspect = gpu_suspect(w, outcome_of(result)) ||
                  (perr && (strstr(perr, ": crash") || strstr(perr, ": timeout")) && gpu_suspect(w, "crash"));
    w->eval_id = 0;
    after_run(w, suspect);
}

/* Claimed-ahead evaluation id, found by the compile thread to end before
 * its harness (a compile error, a source the policy refuses): its result
 * made now (the compiles are cache hits) and stored while the current
 * evaluation runs, so that its job's next proposal is queued, claimed
 * ahead and compiled meanwhile, instead of after the current evaluation
 * with the GPU idle (a campaign lost 3-4 s of GPU time per failed tune
 * proposal that way: docs/benchmarks.md, thirty-second session). Left in
 * place (evaluated in turn) when anything differs from that. */
static void post_early(worker *w, long long id)
{
    int k = 0;
    while (k < w->nahead && w->ahead[k].id != id)
        k++;
    if (k == w->nahead || w->ahead[k].cancelled)
        return;
    PGresult *claim = w->ahead[k].claim;
    char err[1024];
    avo_problem p;
    if (load_problem(w->o, PQgetvalue(claim, 0, 3), &p, err, sizeof err) != 0)
        return;
    json_t *result = NULL;
    if (check_pinned(claim, &p, err, sizeof err) == 0) {
        avo_evaluate_opts eo = claim_eval_opts(w, claim);
        eo.compile_only = 1;
        if (avo_evaluate_candidate(&eo, &p, PQgetvalue(claim, 0, 4), (size_t)PQgetlength(claim, 0, 4), &result, err,
                                   sizeof err) < 0) {
            json_decref(result);
            result = NULL;
        }
    }
    avo_problem_free(&p);
    if (!result)
        return;
    const avo_log_ctx lc = {strtoll(PQgetvalue(claim, 0, 1), NULL, 10), strtoll(PQgetvalue(claim, 0, 2), NULL, 10), id,
                            w->worker_id};
    /* One attempt: a database that does not answer now leaves it in
     * place, evaluated in turn (its compiles cache hits). */
    const int stored = store_evaluation(w, id, result, &lc, 1);
    json_decref(result);
    if (stored < 0)
        return;
    avo_log_fields(AVO_LOG_INFO, "worker", &lc,
                   "evaluation %lld (claimed ahead) ends before its harness: stored while evaluation %lld runs", id,
                   w->eval_id);
    w->nahead--;
    memmove(&w->ahead[k], &w->ahead[k + 1], (size_t)(w->nahead - k) * sizeof w->ahead[0]);
    PQclear(claim);
    w->early_done++;
}

/* The compile thread joined and its job freed (its claims may be freed
 * from then on); with post, the evaluations it found ending before their
 * harness are stored first (post_early). */
static void join_warm(worker *w, int post)
{
    if (!w->warming)
        return;
    pthread_join(w->warm, NULL);
    w->warming = 0;
    warm_job *j = w->wj;
    w->wj = NULL;
    for (int i = 0; post && j && i < j->n; i++)
        if (j->e[i].ends_early)
            post_early(w, j->e[i].id);
    free(j);
}

static int evaluate_one(worker *w, PGresult *claim)
{
    const avo_log_ctx lc = begin_evaluation(w, claim);
    json_t *result = run_evaluation(w, claim, &lc);
    store_evaluation(w, w->eval_id, result, &lc, 0);
    end_evaluation(w, result);
    json_decref(result);
    return 0;
}

/* While a microbenchmark compiles and runs (minutes at worst), the worker
 * stays alive in the database and keeps the lease of an evaluation it has
 * already prefetched, as heartbeat() does during an evaluation. */
static int program_tick(void *arg)
{
    worker *w = arg;
    if (*w->o->stop > 1)
        return 1;
    if (keep_connected(w) < 0)
        return 0;
    const double t = now_s();
    if (t < w->next_heartbeat)
        return 0;
    w->next_heartbeat = t + (w->o->lease_s / 4 > 1 ? w->o->lease_s / 4 : 1);
    (void)renew_leases(w, 0); /* only those claimed ahead: no evaluation is in hand */
    mark_seen(w);
    return 0;
}

/* Store a program's or a profile's result (sql: a completion taking the
 * task's id, the worker's id and the result, answering whether it was
 * still this worker's), retrying through a database blip as long as the
 * worker is not told twice to stop. */
static void store_task_result(worker *w, const char *sql, const char *const *params, const char *what)
{
    if (store_until_answered(w, sql, 3, params, 20) == 0)
        avo_info("worker", "%s %s: result not stored (no longer ours)", what, params[0]);
}

/* A queued microbenchmark (sql/007_programs.sql), run before any
 * evaluation: an agent is waiting on it, and it is bounded (compile and
 * AVO_PROGRAM_TIMEOUT_S), so its lease covers it whole without heartbeats.
 * Returns 2 when one ran, 0 when none was queued, negative on a database
 * error. */
static int run_program(worker *w)
{
    char wid[32], lease[32];
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    snprintf(lease, sizeof lease, "%d", 120 + AVO_PROGRAM_TIMEOUT_S + 60);
    const char *p[] = {wid, w->o->target, lease};
    PGresult *r = exec(w, "SELECT * FROM avo_claim_program($1, $2, $3)", 3, p);
    if (!r) /* a lost connection shows in the evaluation claim; nothing else may stop evaluations */
        return 0;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return 0;
    }
    const char *id = PQgetvalue(r, 0, 0);
    avo_info("worker", "program %s (%s): compiling and running it", id, PQgetvalue(r, 0, 1));
    set_state(w, "busy");
    w->next_heartbeat = now_s() + 1;
    avo_evaluate_opts eo = eval_opts(w->o, 0);
    eo.gpu_lock_dir = w->o->gpu_lock_dir;
    eo.should_cancel = program_tick;
    eo.cancel_arg = w;
    json_t *res = NULL;
    char err[600];
    if (avo_evaluate_program(&eo, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), (size_t)PQgetlength(r, 0, 2), &res, err,
                             sizeof err) < 0)
        res = json_pack("{s:s,s:s}", "outcome", "crash", "detail", err);
    char *text = res ? json_dumps(res, JSON_COMPACT) : NULL;
    const char *pc[] = {id, wid, text ? text : "{\"outcome\": \"crash\", \"detail\": \"out of memory\"}"};
    avo_info("worker", "program %s: %s", id, json_string_value(json_object_get(res, "outcome")));
    store_task_result(w, "SELECT avo_complete_program($1, $2, $3::jsonb)", pc, "program");
    free(text);
    json_decref(res);
    PQclear(r);
    set_state(w, *w->o->stop ? "draining" : "idle");
    return 2;
}

/* While a profile runs: the worker stays alive in the database and renews
 * the profile's lease (and that of an evaluation it has prefetched); a
 * profile no longer this worker's (its lease lapsed and another claimed
 * it) is stopped. */
static int profile_tick(void *arg)
{
    worker *w = arg;
    if (program_tick(arg))
        return 1;
    if (w->lease_lost)
        return 1;
    const double t = now_s();
    if (t < w->next_profile_renew)
        return 0;
    w->next_profile_renew = t + (w->o->lease_s / 4 > 1 ? w->o->lease_s / 4 : 1);
    char pid[32], wid[32], lease[32];
    snprintf(pid, sizeof pid, "%lld", w->profile_id);
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    snprintf(lease, sizeof lease, "%g", w->o->lease_s);
    PGresult *r = exec(w, "SELECT avo_renew_profile($1, $2, $3)", 3, (const char *const[]){pid, wid, lease});
    if (r && strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
        avo_info("worker", "profile %lld is no longer ours; stopping it", w->profile_id);
        w->lease_lost = 1;
    }
    PQclear(r);
    return w->lease_lost;
}

/* How long a worker finds nothing to claim before it runs a new best's
 * profile (try_claim). */
#define BACKGROUND_IDLE_S 1.0

/* A queued profile (sql/011_profiles.sql): the candidate compiled through
 * the cache and run by the harness in its profile-only mode (checked calls,
 * then the counters; no timing, no score), between evaluations. background
 * 0: only one someone waits for (the agent's, a person's); 1: a new best's
 * too, for a worker with no evaluation to run (sql/027_profile_order.sql).
 * Returns 3 when one ran, 0 when none was queued. */
static int run_profile(worker *w, int background)
{
    char wid[32], lease[32];
    snprintf(wid, sizeof wid, "%lld", w->worker_id);
    snprintf(lease, sizeof lease, "%g", w->o->lease_s);
    /* With the package the job pinned, as an evaluation's claim has it. */
    PGresult *r = exec(w,
                       "SELECT c.*, j.problem_hash AS pinned_hash, j.problem_files AS pinned_files "
                       "FROM avo_claim_profile($1, $2, $3, $4) c LEFT JOIN jobs j ON j.id = c.job_id",
                       4, (const char *const[]){wid, w->o->target, lease, background ? "true" : "false"});
    if (!r) /* as for programs: a lost connection shows in the evaluation claim */
        return 0;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return 0;
    }
    const char *id = PQgetvalue(r, 0, 0), *problem = PQgetvalue(r, 0, 3);
    const char *config = PQgetisnull(r, 0, 4) ? NULL : PQgetvalue(r, 0, 4);
    w->profile_id = strtoll(id, NULL, 10);
    w->lease_lost = 0;
    w->next_heartbeat = w->next_profile_renew = now_s() + 1;
    const avo_log_ctx lc = {strtoll(PQgetvalue(r, 0, 1), NULL, 10), strtoll(PQgetvalue(r, 0, 2), NULL, 10), 0,
                            w->worker_id};
    avo_log_fields(AVO_LOG_INFO, "worker", &lc, "profile %s: candidate %s, problem %s, config %s, attempt %s", id,
                   PQgetvalue(r, 0, 2), problem, config ? config : "(counters.configs)", PQgetvalue(r, 0, 6));
    set_state(w, "busy");
    char dir[PATH_MAX], err[1024];
    avo_problem p;
    json_t *res = NULL;
    if (avo_problem_resolve(w->o->kernels, problem, dir, sizeof dir, err, sizeof err) < 0 ||
        avo_problem_load(&p, dir, err, sizeof err) < 0) {
        res = json_pack("{s:s,s:s}", "outcome", "crash", "detail", err);
    } else if (check_pinned(r, &p, err, sizeof err) < 0) {
        avo_log_fields(AVO_LOG_WARN, "worker", &lc, "profile %s refused: %s", id, err);
        res = json_pack("{s:s,s:s}", "outcome", "package_mismatch", "detail", err);
        avo_problem_free(&p);
    } else {
        avo_evaluate_opts eo = eval_opts(w->o, 1);
        eo.timeout_s = w->o->timeout_s;
        eo.gpu_lock_dir = w->o->gpu_lock_dir;
        eo.profile = 1;
        eo.profile_config = config;
        eo.should_cancel = profile_tick;
        eo.cancel_arg = w;
        if (avo_evaluate_candidate(&eo, &p, PQgetvalue(r, 0, 5), (size_t)PQgetlength(r, 0, 5), &res, err, sizeof err) <
            0)
            res = json_pack("{s:s,s:s}", "outcome", "crash", "detail", err);
        avo_problem_free(&p);
    }
    reap_orphans();
    const char *outcome = json_string_value(json_object_get(res, "outcome"));
    if (!outcome)
        outcome = "crash";
    avo_log_fields(AVO_LOG_INFO, "worker", &lc, "profile %s: %s", id, outcome);
    int suspect = gpu_suspect(w, outcome);
    char *text = res ? json_dumps(res, JSON_COMPACT) : NULL;
    const char *pc[] = {id, wid, text ? text : "{\"outcome\": \"crash\", \"detail\": \"out of memory\"}"};
    if (!w->lease_lost)
        store_task_result(w, "SELECT avo_complete_profile($1, $2, $3::jsonb)", pc, "profile");
    free(text);
    json_decref(res);
    PQclear(r);
    w->profile_id = 0;
    w->lease_lost = 0;
    after_run(w, suspect);
    return 3;
}

static int try_claim(worker *w)
{
    int prog = run_program(w);
    /* A profile someone waits for goes before the evaluations, even one
     * already claimed ahead (profile_tick renews its lease meanwhile): with
     * several jobs a GPU worker has always prefetched one. */
    if (prog != 0 || (prog = run_profile(w, 0)) != 0) {
        w->idle_since = 0;
        return prog;
    }
    long long id;
    int cancelled;
    PGresult *n = take_ahead(w, &id, &cancelled);
    if (n) {
        if (cancelled)
            avo_info("worker", "prefetched evaluation %lld was cancelled; skipping it", id);
        else
            evaluate_one(w, n);
        PQclear(n);
        w->idle_since = 0;
        return 1;
    }
    PGresult *r;
    int got = claim(w, &r);
    if (got == 1) {
        evaluate_one(w, r);
        PQclear(r);
    }
    /* A new best's counters wait for a worker with nothing else to do: by
     * then a later best may have replaced it (then it is skipped), and a
     * queued evaluation never waits behind seconds of counter replay. Not
     * at the first empty claim: a job queues its next evaluation when the
     * last one's result is applied, a moment after the worker stored it;
     * at the next claim at least BACKGROUND_IDLE_S later (the worker's next
     * wake-up: a NOTIFY, or --poll-ms). */
    if (got != 0) {
        w->idle_since = 0;
        return got;
    }
    const double t = now_s();
    if (!w->idle_since)
        w->idle_since = t;
    else if (t - w->idle_since >= BACKGROUND_IDLE_S && (prog = run_profile(w, 1)) != 0) {
        w->idle_since = 0;
        return prog;
    }
    return 0;
}

static void wait_for_work(worker *w)
{
    /* A wake-up that arrived during the last (empty) claim is already in
     * libpq's queue, not on the socket: claim again instead of sleeping. */
    if (read_notifies(w) > 0)
        return;
    struct pollfd pfd = {.fd = PQsocket(w->conn), .events = POLLIN};
    if (pfd.fd < 0)
        return;
    int rc = poll(&pfd, 1, w->o->poll_ms);
    if (rc > 0)
        read_notifies(w);
}

int avo_queue_run(const avo_queue_opts *o)
{
    worker w = {.o = o, .served = {.n = o->serve_slots}};
    char err[512];
    const avo_toolchain_opts to = {.target = o->target, .gpu_index = o->gpu_index, .override_file = o->toolchain_file};
    if (avo_toolchain_probe(&to, &w.toolchain, err, sizeof err) < 0) {
        avo_err("worker", "%s", err);
        return -22;
    }
    {
        const json_t *v = json_object_get(w.toolchain, "versions");
        const char *cc = json_string_value(json_object_get(v, "cc")),
                   *nv = json_string_value(json_object_get(v, "nvcc"));
        const char *dr = json_string_value(json_object_get(v, "driver"));
        avo_info("worker", "toolchain: cc %s, nvcc %s, driver %s%s", cc ? cc : "none", nv ? nv : "none",
                 dr ? dr : "none",
                 json_is_true(json_object_get(w.toolchain, "overridden")) ? " (overridden by --toolchain-file)" : "");
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* Groups of evaluations whose worker (or harness) was killed: theirs
     * to remove, and they never will (named by pid: sandbox.c, runner.c). */
    const int swept = avo_cgroup_sweep("avo") + avo_cgroup_sweep("avo-runner");
    if (swept)
        avo_info("worker", "removed %d empty control group(s) left by killed workers or harnesses", swept);
    /* NVML held for the worker's life: every GPU evaluation reads it (the
     * lock's key, the energy counter before and after, the architecture),
     * and each open that finds no other holder loads and initialises the
     * library again (tens of ms on the evaluation's path). */
    char nerr[128];
    const int nvml_held = strcmp(o->target, "gpu") == 0 && avo_nvml_open(nerr, sizeof nerr) >= 0;
    int done = 0;
    while (!*o->stop) {
        if (ensure_connected(&w, 0) < 0)
            break;
        if (w.unhealthy) {
            /* Stay registered and visible as unhealthy; retry the canary now
             * and then, and take work again once the GPU recovers. */
            if (now_s() >= w.next_canary) {
                if (run_canary(&w) == 0) {
                    w.unhealthy = 0;
                    set_state(&w, "idle");
                    avo_info("worker", "GPU %d healthy again; claiming", o->gpu_index);
                    continue;
                }
                w.next_canary = now_s() + 30;
            }
            sleep_ms(o->poll_ms);
            continue;
        }
        int got = try_claim(&w);
        if (got > 0) {
            /* 2: a microbenchmark ran, 3: a profile; neither is an evaluation. */
            if (got == 1 && o->max_evals && ++done + w.early_done >= o->max_evals)
                break;
            continue;
        }
        if (got < 0 && PQstatus(w.conn) != CONNECTION_OK)
            continue;
        /* A kept checker holds GPU memory: not for a worker with nothing
         * to do (a job's next evaluation comes within seconds, an agent's
         * within its model's turn). */
        avo_served_pool_idle(&w.served, AVO_SERVED_IDLE_S);
        wait_for_work(&w);
        if (PQstatus(w.conn) == CONNECTION_OK)
            mark_seen(&w);
    }
    join_warm(&w, 0);
    avo_served_pool_close(&w.served);
    release_ahead(&w);
    if (w.conn && PQstatus(w.conn) == CONNECTION_OK && w.worker_id)
        set_state(&w, "gone");
    if (w.conn)
        PQfinish(w.conn);
    json_decref(w.toolchain);
    if (nvml_held)
        avo_nvml_close();
    avo_info("worker", "stopped");
    return 0;
}
