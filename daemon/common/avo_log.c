#include "avo_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
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
    return -22;
}

void avo_log(avo_log_level lvl, const char *subsys, const char *fmt, ...)
{
    if (lvl > log_level)
        return;
    struct timeval tv;
    struct tm tm;
    char ts[32];
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);

    /* One fprintf per line, so lines from several processes sharing a
     * terminal or journal stream do not interleave mid-line. */
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03dZ %s[%d] %s %s: %s\n", ts, (int)(tv.tv_usec / 1000), log_prog,
            (int)getpid(), level_names[lvl], subsys, msg);
}
