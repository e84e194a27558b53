/* Logging by subsystem and level, to stderr or to the journal (avo_log.h). */
#include "avo_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

static const char *log_prog = "avo";
static avo_log_level log_level = AVO_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

void avo_log_init(const char *prog)
{
    log_prog = prog;
}

int avo_log_set_level(const char *name)
{
    for (int i = 0; i <= AVO_LOG_DEBUG; i++)
        if (strcmp(name, level_names[i]) == 0) {
            log_level = (avo_log_level)i;
            return 0;
        }
    return -EINVAL;
}

/* systemd's rule (systemd.exec(5), JOURNAL_STREAM): stderr is the journal
 * when its device and inode are the ones named in the variable. */
int avo_log_to_journal(void)
{
    static int to_journal = -1;
    if (to_journal < 0) {
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev = 0, ino = 0;
        struct stat st;
        to_journal = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
                     (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
    }
    return to_journal;
}

static void emit(avo_log_level lvl, const char *subsys, const avo_log_ctx *ctx, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (avo_log_to_journal()) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        char f[8][96];
        struct iovec iov[12];
        int n = 0;
        char *m = NULL;
        if (asprintf(&m, "MESSAGE=%s: %s", subsys, msg) < 0)
            m = NULL;
        iov[n++] = (struct iovec){m ? m : msg, m ? strlen(m) : strlen(msg)};
#define FIELD(...) (snprintf(f[n], sizeof f[n], __VA_ARGS__), iov[n] = (struct iovec){f[n], strlen(f[n])}, n++)
        FIELD("PRIORITY=%d", prio[lvl]);
        FIELD("SYSLOG_IDENTIFIER=%s", log_prog);
        FIELD("AVO_SUBSYSTEM=%s", subsys);
        if (ctx && ctx->job > 0)
            FIELD("JOB_ID=%lld", ctx->job);
        if (ctx && ctx->candidate > 0)
            FIELD("CANDIDATE_ID=%lld", ctx->candidate);
        if (ctx && ctx->evaluation > 0)
            FIELD("EVALUATION_ID=%lld", ctx->evaluation);
        if (ctx && ctx->worker > 0)
            FIELD("WORKER=%lld", ctx->worker);
#undef FIELD
        int rc = sd_journal_sendv(iov, n);
        free(m);
        if (rc >= 0)
            return;
        /* The journal refused it: keep the line on stderr rather than lose it. */
    }
    struct timeval tv;
    struct tm tm;
    char ts[32];
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line, so lines from several processes sharing a
     * terminal or journal stream do not interleave mid-line. */
    fprintf(stderr, "%s.%03dZ %s[%d] %s %s: %s\n", ts, (int)(tv.tv_usec / 1000), log_prog, (int)getpid(),
            level_names[lvl], subsys, msg);
}

void avo_log(avo_log_level lvl, const char *subsys, const char *fmt, ...)
{
    if (lvl > log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(lvl, subsys, NULL, fmt, ap);
    va_end(ap);
}

void avo_log_fields(avo_log_level lvl, const char *subsys, const avo_log_ctx *ctx, const char *fmt, ...)
{
    if (lvl > log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(lvl, subsys, ctx, fmt, ap);
    va_end(ap);
}
