/* Schema migrations: sql/NNN_*.sql applied in order at startup, once each (migrate.h). */
#include "migrate.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_file.h"
#include "avo_log.h"

/* An arbitrary constant shared by every avod: the migration lock. */
#define AVO_MIGRATE_LOCK 7306142

typedef struct {
    int version;
    char name[256];
} migration;

static int cmp_migration(const void *a, const void *b)
{
    return ((const migration *)a)->version - ((const migration *)b)->version;
}

static int exec_ok(PGconn *c, const char *sql, char *err, size_t errlen, const char *what)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok)
        snprintf(err, errlen, "%s: %s", what, PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : -5;
}

int avo_migrate(PGconn *conn, const char *sql_dir, char *err, size_t errlen)
{
    DIR *d = opendir(sql_dir);
    if (!d) {
        snprintf(err, errlen, "cannot open migrations directory %s: %s (set --sql-dir)", sql_dir,
                 strerror(errno));
        return -2;
    }
    migration *m = NULL;
    int n = 0, cap = 0, applied = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (l < 5 || strcmp(e->d_name + l - 4, ".sql") != 0 || end == e->d_name || *end != '_' || v <= 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            migration *nm = realloc(m, (size_t)cap * sizeof *m);
            if (!nm) {
                rc = -12;
                goto cleanup;
            }
            m = nm;
        }
        m[n].version = (int)v;
        snprintf(m[n].name, sizeof m[n].name, "%s", e->d_name);
        n++;
    }
    qsort(m, (size_t)n, sizeof *m, cmp_migration);
    for (int i = 1; i < n; i++)
        if (m[i].version == m[i - 1].version) {
            snprintf(err, errlen, "%s: two migrations share version %d (%s, %s)", sql_dir, m[i].version,
                     m[i - 1].name, m[i].name);
            rc = -22;
            goto cleanup;
        }

    char lock[128];
    snprintf(lock, sizeof lock, "SELECT pg_advisory_xact_lock(%d)", AVO_MIGRATE_LOCK);
    if ((rc = exec_ok(conn, "BEGIN", err, errlen, "migrations")) < 0 ||
        (rc = exec_ok(conn, lock, err, errlen, "migration lock")) < 0 ||
        (rc = exec_ok(conn,
                      "CREATE TABLE IF NOT EXISTS avo_schema_version ("
                      " version int PRIMARY KEY, name text NOT NULL,"
                      " applied_at timestamptz NOT NULL DEFAULT now())",
                      err, errlen, "avo_schema_version")) < 0)
        goto rollback;
    /* An older avod must not run on a schema it does not know (a downgrade,
     * or a second avod of another version on the same database). */
    {
        PGresult *r = PQexec(conn, "SELECT COALESCE(max(version), 0) FROM avo_schema_version");
        int have = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : 0;
        PQclear(r);
        if (n > 0 && have > m[n - 1].version) {
            snprintf(err, errlen, "the database's schema is at version %d, newer than this avod knows (%d, %s): "
                                  "run the avod that migrated it, or a newer one", have, m[n - 1].version, sql_dir);
            rc = -22;
            goto rollback;
        }
    }

    for (int i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", m[i].version);
        const char *params[] = {v};
        PGresult *r = PQexecParams(conn, "SELECT 1 FROM avo_schema_version WHERE version = $1", 1, NULL,
                                   params, NULL, NULL, 0);
        int done = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        PQclear(r);
        if (done)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", sql_dir, m[i].name);
        char *sql = avo_file_read(path, NULL);
        if (!sql) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            rc = -5;
            goto rollback;
        }
        rc = exec_ok(conn, sql, err, errlen, path);
        free(sql);
        if (rc < 0)
            goto rollback;
        const char *p2[] = {v, m[i].name};
        r = PQexecParams(conn, "INSERT INTO avo_schema_version (version, name) VALUES ($1, $2)", 2, NULL,
                         p2, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            snprintf(err, errlen, "recording %s: %s", m[i].name, PQresultErrorMessage(r));
            PQclear(r);
            rc = -5;
            goto rollback;
        }
        PQclear(r);
        avo_info("migrate", "applied %s", m[i].name);
        applied++;
    }
    if ((rc = exec_ok(conn, "COMMIT", err, errlen, "migrations commit")) < 0)
        goto cleanup;
    rc = applied;
    goto cleanup;

rollback:
    PQclear(PQexec(conn, "ROLLBACK"));
cleanup:
    closedir(d);
    free(m);
    return rc;
}
