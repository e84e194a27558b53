/* The embedded PostgreSQL: with no DSN configured, avod owns a private
 * cluster under <home>/pg (initdb on first start, unix socket only, trust
 * authentication on a socket directory only its owner can enter), and stops
 * it when avod exits. Start and stop run outside the event loop, so their
 * blocking child processes are fine; what the supervisor (pgwatch.c) calls
 * from the loop never waits. */
#ifndef AVO_PGEMBED_H
#define AVO_PGEMBED_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    char home[PATH_MAX];
    char datadir[PATH_MAX];
    char rundir[PATH_MAX];
    char logfile[PATH_MAX];
    char bindir[PATH_MAX];
    char os_user[64]; /* server's OS user when avod runs as root */
    uid_t uid;
    gid_t gid;
    int started_by_us; /* stop it on exit only if we started it */
    pid_t starter;     /* a pg_ctl start in flight (a restart), not yet reaped */
    char dsn[1400];
} avo_pgembed;

/* Find binaries, create the cluster if needed, start it (or adopt one left
 * running by a killed avod on the same state directory), create database
 * "avo". bindir may be "" (search), os_user may be "" (auto when root). */
int avo_pgembed_start(avo_pgembed *pg, const char *home, const char *bindir, const char *os_user, char *err,
                      size_t errlen);
/* Waits for a restart in flight, then stops the server (fast shutdown). */
int avo_pgembed_stop(avo_pgembed *pg);

/* Whether the server runs, from its lock file (postmaster.pid): 1, or 0
 * with *pid the pid of a server that died and left the file behind (killed,
 * crashed), or *pid 0 when there is none (the server was shut down). */
int avo_pgembed_running(const avo_pgembed *pg, long *pid);
/* Start the server again without waiting: pg_ctl start as the server's
 * user in a child process (the server does its crash recovery itself).
 * -EBUSY while one is in flight. */
int avo_pgembed_restart_begin(avo_pgembed *pg, char *err, size_t errlen);
/* Reap that pg_ctl without blocking: 0 when the server started,
 * -EINPROGRESS while pg_ctl still waits for it, -ECHILD with none in
 * flight, or -1000 less pg_ctl's exit status when it failed. */
int avo_pgembed_restart_poll(avo_pgembed *pg);

/* Locate initdb/pg_ctl: /usr/lib/postgresql/<highest>/bin, then PATH. */
int avo_pgembed_find_bindir(char *out, size_t len);

#endif
