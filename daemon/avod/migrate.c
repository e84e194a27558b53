/* Schema migrations: sql/NNN_*.sql applied in order at startup, once each (migrate.h). */
#include "migrate.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_file.h"
#include "avo_log.h"
#include "avo_paths.h"

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

/* sql_dir's NNN_*.sql files, in version order; two of one version are an
 * error. *m is the caller's to free. */
static int list_migrations(const char *sql_dir, migration **out, int *count, char *err, size_t errlen)
{
    DIR *d = opendir(sql_dir);
    if (!d) {
        snprintf(err, errlen, "cannot open migrations directory %s: %s (set --sql-dir)", sql_dir, strerror(errno));
        return -ENOENT;
    }
    migration *m = NULL;
    int n = 0, cap = 0, rc = 0;
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
                rc = -ENOMEM;
                break;
            }
            m = nm;
        }
        m[n].version = (int)v;
        snprintf(m[n].name, sizeof m[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    *out = m;
    *count = n;
    if (rc < 0)
        return rc;
    qsort(m, (size_t)n, sizeof *m, cmp_migration);
    for (int i = 1; i < n; i++)
        if (m[i].version == m[i - 1].version) {
            snprintf(err, errlen, "%s: two migrations share version %d (%s, %s)", sql_dir, m[i].version, m[i - 1].name,
                     m[i].name);
            return -EINVAL;
        }
    return 0;
}

/* One transaction under the migration lock, so that two avods starting
 * together migrate once. */
static int begin_migrations(PGconn *conn, char *err, size_t errlen)
{
    char lock[128];
    int rc;
    snprintf(lock, sizeof lock, "SELECT pg_advisory_xact_lock(%d)", AVO_MIGRATE_LOCK);
    if ((rc = exec_ok(conn, "BEGIN", err, errlen, "migrations")) < 0 ||
        (rc = exec_ok(conn, lock, err, errlen, "migration lock")) < 0 ||
        (rc = exec_ok(conn,
                      "CREATE TABLE IF NOT EXISTS avo_schema_version ("
                      " version int PRIMARY KEY, name text NOT NULL,"
                      " applied_at timestamptz NOT NULL DEFAULT now())",
                      err, errlen, "avo_schema_version")) < 0)
        return rc;
    return 0;
}

/* An older avod must not run on a schema it does not know (a downgrade,
 * or a second avod of another version on the same database). */
static int check_schema_not_newer(PGconn *conn, const migration *m, int n, const char *sql_dir, char *err,
                                  size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT COALESCE(max(version), 0) FROM avo_schema_version");
    int have = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    if (n > 0 && have > m[n - 1].version) {
        snprintf(err, errlen,
                 "the database's schema is at version %d, newer than this avod knows (%d, %s): "
                 "run the avod that migrated it, or a newer one",
                 have, m[n - 1].version, sql_dir);
        return -EINVAL;
    }
    return 0;
}

/* One migration, unless avo_schema_version has it: 1 applied, 0 there
 * already, < 0 failed (err says why). */
static int apply_migration(PGconn *conn, const char *sql_dir, const migration *m, char *err, size_t errlen)
{
    char v[16];
    snprintf(v, sizeof v, "%d", m->version);
    const char *params[] = {v};
    PGresult *r = PQexecParams(conn, "SELECT 1 FROM avo_schema_version WHERE version = $1", 1, NULL, params, NULL, NULL,
                               0);
    int done = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    if (done)
        return 0;
    char path[PATH_MAX];
    if (avo_paths_join(path, sizeof path, sql_dir, m->name) < 0) {
        snprintf(err, errlen, "path too long: %.200s.../%s", sql_dir, m->name);
        return -ENAMETOOLONG;
    }
    char *sql = avo_file_read(path, NULL);
    if (!sql) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -EIO;
    }
    int rc = exec_ok(conn, sql, err, errlen, path);
    free(sql);
    if (rc < 0)
        return rc;
    const char *p2[] = {v, m->name};
    r = PQexecParams(conn, "INSERT INTO avo_schema_version (version, name) VALUES ($1, $2)", 2, NULL, p2, NULL, NULL,
                     0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        snprintf(err, errlen, "recording %s: %s", m->name, PQresultErrorMessage(r));
        PQclear(r);
        return -EIO;
    }
    PQclear(r);
    avo_info("migrate", "applied %s", m->name);
    return 1;
}

int avo_migrate(PGconn *conn, const char *sql_dir, char *err, size_t errlen)
{
    migration *m = NULL;
    int n = 0, applied = 0;
    int rc = list_migrations(sql_dir, &m, &n, err, errlen);
    if (rc < 0) {
        free(m);
        return rc;
    }
    if ((rc = begin_migrations(conn, err, errlen)) == 0 &&
        (rc = check_schema_not_newer(conn, m, n, sql_dir, err, errlen)) == 0)
        for (int i = 0; i < n && rc >= 0; i++)
            if ((rc = apply_migration(conn, sql_dir, &m[i], err, errlen)) > 0)
                applied++;
    free(m);
    if (rc < 0) {
        PQclear(PQexec(conn, "ROLLBACK"));
        return rc;
    }
    if ((rc = exec_ok(conn, "COMMIT", err, errlen, "migrations commit")) < 0)
        return rc;
    return applied;
}
