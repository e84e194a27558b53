/* Schema migrations: sql/NNN_name.sql files applied in order at startup, all
 * pending ones in one transaction under an advisory lock (so two daemons
 * starting together cannot both apply them), each recorded in
 * avo_schema_version and never applied again. Blocking: startup only. */
#ifndef AVO_MIGRATE_H
#define AVO_MIGRATE_H

#include <libpq-fe.h>
#include <stddef.h>

/* Returns the number of migrations applied (>= 0) or a negative int with a
 * message naming the file and the server's error. */
int avo_migrate(PGconn *conn, const char *sql_dir, char *err, size_t errlen);

#endif
