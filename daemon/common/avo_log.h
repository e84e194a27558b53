/* Logging by subsystem with levels (Knot Resolver style). Lines go to stderr
 * as "TIME PROG[PID] LEVEL SUBSYS: message". When stderr is the journal
 * (systemd sets JOURNAL_STREAM to its device:inode), entries go to the
 * journal directly with structured fields instead: PRIORITY,
 * SYSLOG_IDENTIFIER, AVO_SUBSYSTEM, and JOB_ID, CANDIDATE_ID, EVALUATION_ID,
 * WORKER where the entry is about one (`journalctl JOB_ID=42`).
 * Levels: error (something failed and was not retried), warn (degraded but
 * continuing), info (lifecycle: start, stop, job state changes), debug
 * (per-request and per-query detail). */
#ifndef AVO_LOG_H
#define AVO_LOG_H

typedef enum { AVO_LOG_ERROR = 0, AVO_LOG_WARN, AVO_LOG_INFO, AVO_LOG_DEBUG } avo_log_level;

void avo_log_init(const char *prog);
int avo_log_set_level(const char *name); /* 0, or -22 for an unknown name */
void avo_log(avo_log_level lvl, const char *subsys, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* What an entry is about (0: not about one). */
typedef struct {
    long long job, candidate, evaluation, worker;
} avo_log_ctx;
void avo_log_fields(avo_log_level lvl, const char *subsys, const avo_log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 1 when entries go to the journal (decided once, at the first entry). */
int avo_log_to_journal(void);

#define avo_err(sub, ...) avo_log(AVO_LOG_ERROR, sub, __VA_ARGS__)
#define avo_warn(sub, ...) avo_log(AVO_LOG_WARN, sub, __VA_ARGS__)
#define avo_info(sub, ...) avo_log(AVO_LOG_INFO, sub, __VA_ARGS__)
#define avo_debug(sub, ...) avo_log(AVO_LOG_DEBUG, sub, __VA_ARGS__)

#endif
