/* The embedded PostgreSQL cluster avod owns when no DSN is configured (pgembed.h). */
#include "pgembed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "avo_log.h"
#include "avo_paths.h"

static int is_exec(const char *dir, const char *prog)
{
    char p[PATH_MAX];
    return avo_paths_join(p, sizeof p, dir, prog) == 0 && access(p, X_OK) == 0;
}

int avo_pgembed_find_bindir(char *out, size_t len)
{
    /* Debian keeps server binaries out of PATH, one directory per major version. */
    DIR *d = opendir("/usr/lib/postgresql");
    int best = -1;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            long v = strtol(e->d_name, &end, 10);
            char dir[PATH_MAX];
            int n = snprintf(dir, sizeof dir, "/usr/lib/postgresql/%s/bin", e->d_name);
            if (n > 0 && (size_t)n < sizeof dir && *end == 0 && v > best && is_exec(dir, "initdb") &&
                is_exec(dir, "pg_ctl"))
                best = (int)v;
        }
        closedir(d);
    }
    if (best >= 0) {
        snprintf(out, len, "/usr/lib/postgresql/%d/bin", best);
        return 0;
    }
    const char *path = getenv("PATH");
    if (path) {
        char *copy = strdup(path), *save = NULL;
        for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            if (is_exec(tok, "initdb") && is_exec(tok, "pg_ctl")) {
                snprintf(out, len, "%s", tok);
                free(copy);
                return 0;
            }
        free(copy);
    }
    return -ENOENT;
}

/* Start a PostgreSQL tool as the server's user, its output in the log when
 * quiet; the child's pid, or a negative errno. */
static pid_t spawn_tool(const avo_pgembed *pg, char *const argv[], int quiet)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* avod's signal mask is not the server's business. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (geteuid() == 0) {
            if (setgroups(0, NULL) < 0 || setgid(pg->gid) < 0 || setuid(pg->uid) < 0)
                _exit(126);
        }
        /* Opened after dropping privileges so the server's user owns the log. */
        if (quiet) {
            int fd = open(pg->logfile, O_WRONLY | O_APPEND | O_CREAT, 0600);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        /* initdb and the server must not inherit avod's listening sockets or locks. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* 0 for a tool that succeeded, else -1000 less its exit status (or 128 +
 * the signal that ended it). */
static int tool_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st) == 0 ? 0 : -WEXITSTATUS(st) - 1000;
    return -1000 - 128 - (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Run a PostgreSQL tool as the server's user and wait for it. */
static int run_tool(const avo_pgembed *pg, char *const argv[], int quiet)
{
    pid_t pid = spawn_tool(pg, argv, quiet);
    if (pid < 0)
        return (int)pid;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return tool_status(st);
}

static int mkdir_owned(const avo_pgembed *pg, const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return -errno;
    if (geteuid() == 0 && chown(path, pg->uid, pg->gid) < 0)
        return -errno;
    chmod(path, mode);
    return 0;
}

/* As root the server runs as an unprivileged user, who must be able to walk
 * down to the data directory; check that up front for a clear message. */
static int check_reachable(const avo_pgembed *pg, char *err, size_t errlen)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(pg->gid) < 0 || setuid(pg->uid) < 0)
            _exit(2);
        _exit(access(pg->home, X_OK) == 0 ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    snprintf(err, errlen,
             "the embedded PostgreSQL runs as user '%s', who cannot reach the state directory %s; "
             "choose an AVO_HOME that user can traverse (e.g. /var/lib/avo) or pass --db",
             pg->os_user, pg->home);
    return -EACCES;
}

static int ensure_database(avo_pgembed *pg, char *err, size_t errlen)
{
    char dsn[sizeof pg->dsn];
    int n = snprintf(dsn, sizeof dsn, "host=%s dbname=postgres user=avo connect_timeout=10", pg->rundir);
    if (n < 0 || (size_t)n >= sizeof dsn ||
        (n = snprintf(pg->dsn, sizeof pg->dsn, "host=%s dbname=avo user=avo", pg->rundir)) < 0 ||
        (size_t)n >= sizeof pg->dsn) {
        snprintf(err, errlen, "socket directory path too long for a connection string: %.200s...", pg->rundir);
        return -ENAMETOOLONG;
    }
    PGconn *c = PQconnectdb(dsn);
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(err, errlen, "cannot connect to the embedded PostgreSQL at %s: %s", pg->rundir, PQerrorMessage(c));
        PQfinish(c);
        return -ECONNREFUSED;
    }
    PGresult *r = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = 'avo'");
    int exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    int rc = 0;
    if (!exists) {
        r = PQexec(c, "CREATE DATABASE avo");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            snprintf(err, errlen, "cannot create database avo: %s", PQresultErrorMessage(r));
            rc = -EIO;
        }
        PQclear(r);
    }
    PQfinish(c);
    return rc;
}

/* The server's avo settings live in the data directory (avo.conf, included
 * from postgresql.conf), not on pg_ctl's command line: an operator who
 * restarts the embedded server by hand, or a later `pg_ctl start`, gets the
 * same socket directory and no TCP listener. Rewritten on every start. */
static int write_server_conf(const avo_pgembed *pg, char *err, size_t errlen)
{
    char path[PATH_MAX], main_conf[PATH_MAX], line[1500];
    if (avo_paths_join(path, sizeof path, pg->datadir, "avo.conf") < 0 ||
        avo_paths_join(main_conf, sizeof main_conf, pg->datadir, "postgresql.conf") < 0) {
        snprintf(err, errlen, "data directory path too long: %.200s...", pg->datadir);
        return -ENAMETOOLONG;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -errno;
    }
    fprintf(f,
            "# Written by avod at every start of the embedded server; edits are overwritten.\n"
            "listen_addresses = ''\n"
            "unix_socket_directories = '%s'\n"
            "unix_socket_permissions = 0700\n",
            pg->rundir);
    int bad = ferror(f);
    if (geteuid() == 0 && fchown(fileno(f), pg->uid, pg->gid) < 0)
        bad = 1;
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "cannot write %s", path);
        return -EIO;
    }
    int included = 0;
    if ((f = fopen(main_conf, "r"))) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "include_if_exists = 'avo.conf'", 30) == 0)
                included = 1;
        fclose(f);
    }
    if (!included) {
        if (!(f = fopen(main_conf, "a"))) {
            snprintf(err, errlen, "cannot append to %s: %s", main_conf, strerror(errno));
            return -errno;
        }
        fprintf(f, "\n# avo: the embedded server's settings\ninclude_if_exists = 'avo.conf'\n");
        if (fclose(f) != 0) {
            snprintf(err, errlen, "cannot append to %s", main_conf);
            return -EIO;
        }
    }
    return 0;
}

int avo_pgembed_start(avo_pgembed *pg, const char *home, const char *bindir, const char *os_user, char *err,
                      size_t errlen)
{
    memset(pg, 0, sizeof *pg);
    if (avo_paths_join(pg->home, sizeof pg->home, home, "pg") < 0 ||
        avo_paths_join(pg->datadir, sizeof pg->datadir, pg->home, "data") < 0 ||
        avo_paths_join(pg->rundir, sizeof pg->rundir, pg->home, "run") < 0 ||
        avo_paths_join(pg->logfile, sizeof pg->logfile, pg->home, "postgresql.log") < 0) {
        snprintf(err, errlen, "state directory path too long for the embedded PostgreSQL: %.200s...", home);
        return -ENAMETOOLONG;
    }

    if (bindir && *bindir)
        snprintf(pg->bindir, sizeof pg->bindir, "%s", bindir);
    else if (avo_pgembed_find_bindir(pg->bindir, sizeof pg->bindir) < 0) {
        snprintf(err, errlen,
                 "no PostgreSQL server binaries (initdb, pg_ctl) found: install the "
                 "'postgresql' package (make deps) or pass --pg-bindir or --db");
        return -ENOENT;
    }
    if (!is_exec(pg->bindir, "initdb") || !is_exec(pg->bindir, "pg_ctl")) {
        snprintf(err, errlen, "%s has no initdb/pg_ctl: fix --pg-bindir", pg->bindir);
        return -ENOENT;
    }

    pg->uid = geteuid();
    pg->gid = getegid();
    if (geteuid() == 0) {
        /* The server refuses to run as root. */
        const char *user = os_user && *os_user ? os_user : NULL;
        struct passwd *pw = user ? getpwnam(user) : getpwnam("postgres");
        if (!pw && !user)
            pw = getpwnam("nobody");
        if (!pw) {
            snprintf(err, errlen, "user '%s' for the embedded PostgreSQL does not exist", user ? user : "postgres");
            return -ENOENT;
        }
        snprintf(pg->os_user, sizeof pg->os_user, "%s", pw->pw_name);
        pg->uid = pw->pw_uid;
        pg->gid = pw->pw_gid;
    } else {
        struct passwd *pw = getpwuid(pg->uid);
        snprintf(pg->os_user, sizeof pg->os_user, "%s", pw ? pw->pw_name : "?");
    }

    int rc;
    if ((rc = mkdir_owned(pg, pg->home, 0700)) < 0 || (rc = mkdir_owned(pg, pg->rundir, 0700)) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", pg->home, strerror(-rc));
        return rc;
    }
    if (geteuid() == 0 && (rc = check_reachable(pg, err, errlen)) < 0)
        return rc;

    char pgver[PATH_MAX], initdb[PATH_MAX], pg_ctl[PATH_MAX];
    if (avo_paths_join(pgver, sizeof pgver, pg->datadir, "PG_VERSION") < 0 ||
        avo_paths_join(initdb, sizeof initdb, pg->bindir, "initdb") < 0 ||
        avo_paths_join(pg_ctl, sizeof pg_ctl, pg->bindir, "pg_ctl") < 0) {
        snprintf(err, errlen, "path too long for the embedded PostgreSQL: %.200s... or %.200s...", pg->datadir,
                 pg->bindir);
        return -ENAMETOOLONG;
    }

    if (access(pgver, F_OK) != 0) {
        avo_info("pg", "creating the embedded PostgreSQL cluster in %s (as %s)", pg->datadir, pg->os_user);
        char *argv[] = {initdb,  "-D", pg->datadir, "-U",         "avo",       "-A",
                        "trust", "-E", "UTF8",      "--locale=C", "--no-sync", NULL};
        if ((rc = run_tool(pg, argv, 1)) < 0) {
            snprintf(err, errlen, "initdb failed (exit %d); see %s", -rc - 1000, pg->logfile);
            return -EIO;
        }
    }

    char *status_argv[] = {pg_ctl, "-D", pg->datadir, "status", NULL};
    if (run_tool(pg, status_argv, 1) == 0) {
        /* Left running by an avod that was killed: we hold the state-directory
         * lock, so it is ours to adopt. */
        avo_warn("pg", "adopting the embedded PostgreSQL left running in %s", pg->datadir);
    } else {
        if ((rc = write_server_conf(pg, err, errlen)) < 0)
            return rc;
        char *argv[] = {pg_ctl, "-D", pg->datadir, "-l", pg->logfile, "-w", "-t", "60", "start", NULL};
        if ((rc = run_tool(pg, argv, 1)) < 0) {
            snprintf(err, errlen, "the embedded PostgreSQL did not start; see %s", pg->logfile);
            return -EIO;
        }
        pg->started_by_us = 1;
        avo_info("pg", "embedded PostgreSQL started (socket in %s)", pg->rundir);
    }
    pg->started_by_us = 1;
    return ensure_database(pg, err, errlen);
}

int avo_pgembed_running(const avo_pgembed *pg, long *pid)
{
    char path[PATH_MAX], line[64] = "";
    *pid = 0;
    /* avo_pgembed_start joined datadir's files already: this one fits. */
    if (avo_paths_join(path, sizeof path, pg->datadir, "postmaster.pid") < 0)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* no lock file: the server was shut down */
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got)
        return 1; /* being written by a server starting now */
    char *end;
    *pid = strtol(line, &end, 10);
    if (end == line || *pid <= 0)
        return 1;
    /* The lock file outlives a killed server; the process does not, but
     * it stays a zombie until its parent (init, which in a container may
     * never reap) waits for it: a zombie is no server. */
    if (kill((pid_t)*pid, 0) < 0 && errno != EPERM)
        return 0;
    char stat[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", *pid);
    if ((f = fopen(path, "r"))) {
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        stat[n] = 0;
        fclose(f);
    }
    /* pid (comm) state ppid ...; comm may hold spaces and parentheses */
    const char *close = strrchr(stat, ')');
    if (!(close && close[1] == ' ' && close[2] == 'Z'))
        return 1;
    /* A zombie still answers kill(pid, 0), and so PostgreSQL's own lock
     * check takes it for a live server and refuses to start. One of ours
     * (avod as a container's first process inherits the orphaned
     * postmaster) is reaped here; another parent's must reap it itself
     * (docs/operations.md: a container needs an init that reaps). */
    if (strtol(close + 4, NULL, 10) == (long)getpid())
        waitpid((pid_t)*pid, NULL, WNOHANG);
    return 0;
}

int avo_pgembed_restart_begin(avo_pgembed *pg, char *err, size_t errlen)
{
    if (pg->starter > 0)
        return -EBUSY;
    int rc = write_server_conf(pg, err, errlen);
    if (rc < 0)
        return rc;
    char pg_ctl[PATH_MAX];
    if (avo_paths_join(pg_ctl, sizeof pg_ctl, pg->bindir, "pg_ctl") < 0) {
        snprintf(err, errlen, "path too long: %.200s.../pg_ctl", pg->bindir);
        return -ENAMETOOLONG;
    }
    /* -w: pg_ctl exits when the server accepts connections, after any
     * crash recovery; a recovery longer than -t leaves it running, which
     * the supervisor sees on its next look. */
    char *argv[] = {pg_ctl, "-D", pg->datadir, "-l", pg->logfile, "-w", "-t", "120", "start", NULL};
    pid_t pid = spawn_tool(pg, argv, 1);
    if (pid < 0) {
        snprintf(err, errlen, "cannot start pg_ctl: %s", strerror((int)-pid));
        return (int)pid;
    }
    pg->starter = pid;
    return 0;
}

int avo_pgembed_restart_poll(avo_pgembed *pg)
{
    if (pg->starter <= 0)
        return -ECHILD;
    int st;
    pid_t r = waitpid(pg->starter, &st, WNOHANG);
    if (r == 0)
        return -EINPROGRESS;
    pg->starter = 0;
    return r < 0 ? -errno : tool_status(st);
}

int avo_pgembed_stop(avo_pgembed *pg)
{
    if (pg->starter > 0) {
        /* A restart in flight finishes first, so the stop below finds
         * the server it started (outside the loop: blocking is fine). */
        int st;
        while (waitpid(pg->starter, &st, 0) < 0 && errno == EINTR)
            ;
        pg->starter = 0;
    }
    if (!pg->started_by_us)
        return 0;
    char pg_ctl[PATH_MAX];
    if (avo_paths_join(pg_ctl, sizeof pg_ctl, pg->bindir, "pg_ctl") < 0) {
        avo_warn("pg", "%s/pg_ctl: path too long; the embedded PostgreSQL is left running", pg->bindir);
        return -ENAMETOOLONG;
    }
    char *argv[] = {pg_ctl, "-D", pg->datadir, "-m", "fast", "-w", "-t", "60", "stop", NULL};
    int rc = run_tool(pg, argv, 1);
    if (rc < 0)
        avo_warn("pg", "pg_ctl stop failed (%d); see %s", rc, pg->logfile);
    else
        avo_info("pg", "embedded PostgreSQL stopped");
    pg->started_by_us = 0;
    return rc;
}
