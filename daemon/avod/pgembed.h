/* The embedded PostgreSQL: with no DSN configured, avod owns a private
 * cluster under <home>/pg (initdb on first start, unix socket only, trust
 * authentication on a socket directory only its owner can enter), and stops
 * it when avod exits. Runs at startup and shutdown, outside the event loop,
 * so blocking child processes are fine here. */
#ifndef AVO_PGEMBED_H
#define AVO_PGEMBED_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    char home[1024];
    char datadir[1100];
    char rundir[1100];
    char logfile[1100];
    char bindir[1024];
    char os_user[64];       /* server's OS user when avod runs as root */
    uid_t uid;
    gid_t gid;
    int started_by_us;      /* stop it on exit only if we started it */
    char dsn[1400];
} avo_pgembed;

/* Find binaries, create the cluster if needed, start it (or adopt one left
 * running by a killed avod on the same state directory), create database
 * "avo". bindir may be "" (search), os_user may be "" (auto when root). */
int avo_pgembed_start(avo_pgembed *pg, const char *home, const char *bindir, const char *os_user,
                      char *err, size_t errlen);
int avo_pgembed_stop(avo_pgembed *pg);

/* Locate initdb/pg_ctl: /usr/lib/postgresql/<highest>/bin, then PATH. */
int avo_pgembed_find_bindir(char *out, size_t len);

#endif
