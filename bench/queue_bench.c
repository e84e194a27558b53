/* Queue throughput and wake-up latency: no-op evaluations through the real
 * claim and completion functions (avo_claim, avo_complete) of a migrated avo
 * database, by N worker processes, each with its own connection, as
 * avo-worker issues them (PQexecParams, LISTEN avo_work, poll fallback).
 *
 *   queue_bench --db DSN --workers N --evals M [--rate R] [--poll-ms P] [--no-notify]
 *
 * --rate 0 (default): the M evaluations are queued first, in one statement;
 *   the workers drain them: throughput = M / drain time.
 * --rate R: a producer inserts one evaluation per transaction, R per second,
 *   while the workers run: the enqueue-to-claim latency of a queue that is
 *   not saturated (claimed_at - created_at, both set by PostgreSQL).
 * Prints one JSON line. Rows go under a job of their own, target
 * "bench-<pid>", so nothing else claims them. */
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *dsn;
    int workers, evals, rate, poll_ms, notify, sync_commit;
} bench_opts;

typedef struct {
    atomic_int done;
    atomic_int failed;
} shared_counts;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static PGresult *q(PGconn *c, const char *sql, int n, const char *const *params)
{
    PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        fprintf(stderr, "queue_bench: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
        return NULL;
    }
    return r;
}

/* A statement whose rows are not needed: 0, or -1 (said by q). */
static int exec_ok(PGconn *c, const char *sql, int n, const char *const *params)
{
    PGresult *r = q(c, sql, n, params);
    if (!r)
        return -1;
    PQclear(r);
    return 0;
}

static PGconn *connect_db(const char *dsn)
{
    PGconn *c = PQconnectdb(dsn);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "queue_bench: cannot connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

/* One worker: claim, complete, and when the queue is empty sleep on the
 * connection's socket (a NOTIFY wakes it) for at most poll_ms. */
static int worker_main(const bench_opts *o, const char *wid, const char *target, shared_counts *sc)
{
    PGconn *c = connect_db(o->dsn);
    if (!c)
        return 1;
    if (o->notify)
        PQclear(PQexec(c, "LISTEN avo_work"));
    if (!o->sync_commit)
        PQclear(PQexec(c, "SET synchronous_commit = off"));
    const char *cp[] = {wid, target, "60"};
    while (atomic_load(&sc->done) + atomic_load(&sc->failed) < o->evals) {
        PGresult *r = q(c, "SELECT * FROM avo_claim($1, $2, $3)", 3, cp);
        if (!r) {
            PQfinish(c);
            return 1;
        }
        if (PQntuples(r) == 1) {
            const char *pp[] = {PQgetvalue(r, 0, 0), wid, "ok", "1", "{}"};
            PGresult *d = q(c, "SELECT avo_complete($1, $2, $3, $4, $5::jsonb)", 5, pp);
            if (d && strcmp(PQgetvalue(d, 0, 0), "t") == 0)
                atomic_fetch_add(&sc->done, 1);
            else
                atomic_fetch_add(&sc->failed, 1);
            PQclear(d);
            PQclear(r);
            continue;
        }
        PQclear(r);
        /* As avo-worker: a wake-up read during the empty claim means claim
         * again; otherwise sleep on the socket. */
        int pending = 0;
        PGnotify *n;
        if (PQconsumeInput(c))
            while ((n = PQnotifies(c)))
                pending = 1, PQfreemem(n);
        if (pending)
            continue;
        struct pollfd pf = {PQsocket(c), POLLIN, 0};
        if (poll(&pf, 1, o->poll_ms) > 0 && PQconsumeInput(c))
            while ((n = PQnotifies(c)))
                PQfreemem(n);
    }
    PQfinish(c);
    return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.workers = 1, .evals = 10000, .poll_ms = 2000, .notify = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-notify")) {
            o->notify = 0;
            continue;
        }
        if (!strcmp(a, "--sync-commit")) {
            o->sync_commit = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "queue_bench: %s needs a value\n", a);
            return -EINVAL;
        }
        i++;
        if (!strcmp(a, "--db"))
            o->dsn = v;
        else if (!strcmp(a, "--workers"))
            o->workers = atoi(v);
        else if (!strcmp(a, "--evals"))
            o->evals = atoi(v);
        else if (!strcmp(a, "--rate"))
            o->rate = atoi(v);
        else if (!strcmp(a, "--poll-ms"))
            o->poll_ms = atoi(v);
        else {
            fprintf(stderr, "queue_bench: unknown option %s\n", a);
            return -EINVAL;
        }
    }
    if (!o->dsn || o->workers < 1 || o->workers > 256 || o->evals < 1 || o->rate < 0 || o->poll_ms < 1) {
        fprintf(stderr, "usage: queue_bench --db DSN --workers 1..256 --evals M [--rate R] [--poll-ms P] "
                        "[--no-notify]\n");
        return -EINVAL;
    }
    return 0;
}

/* The bench's job and its one candidate, under target (nothing else claims
 * it): their ids into job and cand. Returns 0, or -1 (said). */
static int insert_bench_job(PGconn *c, const char *target, char *job, size_t joblen, char *cand, size_t candlen)
{
    const char *tp[] = {target};
    PGresult *r = q(c,
                    "WITH s AS (INSERT INTO sources (sha256, body) VALUES ('queue-bench', '') "
                    "           ON CONFLICT (sha256) DO UPDATE SET body = '' RETURNING sha256), "
                    "     j AS (INSERT INTO jobs (problem, operator, spec, target, eval_budget, state) "
                    "           VALUES ('bench/noop', 'none', '{}', $1, 1, 'cancelled') RETURNING id) "
                    "INSERT INTO candidates (job_id, sha256, operator) SELECT j.id, s.sha256, 'none' FROM j, s "
                    "RETURNING job_id, id",
                    1, tp);
    if (!r)
        return -1;
    snprintf(job, joblen, "%s", PQgetvalue(r, 0, 0));
    snprintf(cand, candlen, "%s", PQgetvalue(r, 0, 1));
    PQclear(r);
    return 0;
}

/* One workers row per worker process, its id into wids[i] (to free). */
static int register_workers(PGconn *c, int workers, const char *target, char **wids)
{
    const char *tp[] = {target};
    for (int i = 0; i < workers; i++) {
        PGresult *r = q(c,
                        "INSERT INTO workers (host, pid, target) VALUES ('queue-bench', pg_backend_pid(), $1) "
                        "RETURNING id",
                        1, tp);
        if (!r)
            return -1;
        wids[i] = strdup(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    return 0;
}

/* --rate R: one evaluation per transaction, on schedule from t0 (no
 * catch-up bursts beyond what a late tick owes). ip: job, candidate, target. */
static int produce_paced(PGconn *c, const bench_opts *o, double t0, const char *const *ip)
{
    for (int i = 0; i < o->evals; i++) {
        double due = t0 + (double)i / o->rate, wait = due - now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
        if (exec_ok(c,
                    "INSERT INTO evaluations (job_id, candidate_id, problem, target) "
                    "VALUES ($1, $2, 'bench/noop', $3)",
                    3, ip) < 0)
            return -1;
    }
    return 0;
}

/* Waits for every worker process; returns 1 when one failed. */
static int wait_workers(int workers, pid_t *kids)
{
    int bad = 0;
    for (int i = 0; i < workers; i++) {
        int st = 0;
        waitpid(kids[i], &st, 0);
        kids[i] = 0;
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

/* The JSON line from the job's evaluations. Returns the exit status: 0
 * when all were done and no worker failed (bad). */
static int report(PGconn *c, const bench_opts *o, const char *job, double wall, int bad)
{
    const char *jp[] = {job};
    PGresult *r = q(c,
                    "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE attempts > 1), "
                    "       percentile_disc(0.5) WITHIN GROUP (ORDER BY claimed_at - created_at), "
                    "       percentile_disc(0.99) WITHIN GROUP (ORDER BY claimed_at - created_at), "
                    "       max(claimed_at - created_at) "
                    "  FROM (SELECT state, attempts, "
                    "               extract(epoch FROM claimed_at) * 1000 AS claimed_at, "
                    "               extract(epoch FROM created_at) * 1000 AS created_at "
                    "          FROM evaluations WHERE job_id = $1) e",
                    1, jp);
    if (!r)
        return 1;
    int done = atoi(PQgetvalue(r, 0, 0));
    printf("{\"workers\": %d, \"evals\": %d, \"mode\": \"%s\", \"rate\": %d, \"notify\": %s, \"poll_ms\": %d, "
           "\"done\": %d, \"reclaimed\": %s, \"wall_s\": %.3f, \"evals_per_s\": %.0f, "
           "\"enqueue_to_claim_ms\": {\"p50\": %s, \"p99\": %s, \"max\": %s}}\n",
           o->workers, o->evals, o->rate ? "paced" : "drain", o->rate, o->notify ? "true" : "false", o->poll_ms, done,
           PQgetvalue(r, 0, 1), wall, done / wall, PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
    int rc = bad || done != o->evals;
    if (rc)
        fprintf(stderr, "queue_bench: %d of %d evaluations done%s\n", done, o->evals,
                bad ? "; a worker process failed" : "");
    PQclear(r);
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts o;
    if (parse_args(argc, argv, &o) < 0)
        return 2;
    int rc = 1;
    PGconn *c = connect_db(o.dsn);
    shared_counts *sc = NULL;
    pid_t *kids = NULL;
    char **wids = NULL;
    char target[64], job[32], cand[32], evals[32];
    snprintf(target, sizeof target, "bench-%d", (int)getpid());
    snprintf(evals, sizeof evals, "%d", o.evals);
    if (!c)
        goto cleanup;
    if (insert_bench_job(c, target, job, sizeof job, cand, sizeof cand) < 0)
        goto cleanup;

    wids = calloc((size_t)o.workers, sizeof *wids);
    kids = calloc((size_t)o.workers, sizeof *kids);
    sc = mmap(NULL, sizeof *sc, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!wids || !kids || sc == MAP_FAILED) {
        sc = NULL;
        goto cleanup;
    }
    atomic_init(&sc->done, 0);
    atomic_init(&sc->failed, 0);
    if (register_workers(c, o.workers, target, wids) < 0)
        goto cleanup;

    const char *ip[] = {job, cand, target, evals};
    if (o.rate == 0 && exec_ok(c,
                               "INSERT INTO evaluations (job_id, candidate_id, problem, target) "
                               "SELECT $1, $2, 'bench/noop', $3 FROM generate_series(1, $4::int)",
                               4, ip) < 0)
        goto cleanup;
    const double t0 = now_s();
    for (int i = 0; i < o.workers; i++) {
        pid_t p = fork();
        if (p == 0)
            _exit(worker_main(&o, wids[i], target, sc));
        kids[i] = p;
    }
    if (o.rate > 0 && produce_paced(c, &o, t0, ip) < 0)
        goto cleanup;
    int bad = wait_workers(o.workers, kids);
    rc = report(c, &o, job, now_s() - t0, bad);

cleanup:
    if (kids)
        for (int i = 0; i < o.workers; i++)
            if (kids[i] > 0)
                kill(kids[i], SIGKILL), waitpid(kids[i], NULL, 0);
    if (wids)
        for (int i = 0; i < o.workers; i++)
            free(wids[i]);
    free(wids);
    free(kids);
    if (sc)
        munmap(sc, sizeof *sc);
    PQfinish(c);
    return rc;
}
