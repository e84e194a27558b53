/* Human output for avoctl: aligned tables and one-line renderings of job
 * fields and events. Everything here writes to a buffer or a FILE* given by
 * the caller so the unit tests can check the exact text. */
#ifndef AVOCTL_FORMAT_H
#define AVOCTL_FORMAT_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

typedef struct avoctl_table avoctl_table;

/* A table of ncols columns; bit i of right_mask right-aligns column i
 * (numbers). Returns 0 or -ENOMEM. */
int avoctl_table_new(avoctl_table **t, size_t ncols, const char *const *headers, unsigned right_mask);
/* Copy one row of ncols cells (NULL cells print as "-"). */
int avoctl_table_add(avoctl_table *t, const char *const *cells);
size_t avoctl_table_rows(const avoctl_table *t);
/* Let column col give way so that rows fit in cols display columns: its
 * cells are cut (ending in "...") down to what the other columns leave,
 * but never below min_col. cols 0 means no limit (output to a pipe must
 * not lose text). Only the last call counts. */
void avoctl_table_fit(avoctl_table *t, size_t cols, size_t col, size_t min_col);
/* Columns are separated by two spaces; the last column is not padded. */
int avoctl_table_print(const avoctl_table *t, FILE *out);
void avoctl_table_free(avoctl_table *t);

/* A figure with about four significant digits: 9.81, 123.5, 0.0012, 12346. */
/* obj[key] as a string, or NULL when absent or not a string. */
const char *avoctl_fmt_str(const json_t *obj, const char *key);
void avoctl_fmt_num(double v, char *buf, size_t len);
/* An ISO-8601 timestamp cut down for humans: "2024-05-01 12:03" (with_date)
 * or "12:03:04". Anything unparseable (or NULL) gives "-". */
void avoctl_fmt_time(const char *iso, int with_date, char *buf, size_t len);
/* {"candidate":C,"aggregate":A,"unit":U} -> "9.81 GFLOP/s (cand 55)";
 * unit falls back to fallback_unit; "-" for null. */
void avoctl_fmt_score(const json_t *obj, const char *fallback_unit, char *buf, size_t len);
/* speedup -> "x3.16", "-" when not a number. */
void avoctl_fmt_speedup(const json_t *v, char *buf, size_t len);
/* A job's reported speedup (the job's JSON, or job_finished's data: its
 * "speedup" and "speedup_detail"): "x1.46 [1.400, 1.520] (95% interval,
 * paired)", "x1.50 (unpaired: REASON)", "x1.00 (no version beat the seed)",
 * or as avoctl_fmt_speedup while the job has no final figure. */
void avoctl_fmt_job_speedup(const json_t *job, char *buf, size_t len);
/* The raw string value, a number in decimal, or "-" for absent/null. */
void avoctl_fmt_field(const json_t *v, char *buf, size_t len);
/* Knob values as the daemon ordered them: "BM=64 BN=128"; "" when none.
 * What does not fit is left out a whole knob at a time. */
void avoctl_fmt_knobs(const json_t *knobs, char *buf, size_t len);

/* The mark of a configuration (a result's configs[] or a candidate's
 * scores[] entry) whose timing ended over the problem's rse target:
 * "noisy", or with_figures "noisy: rse 3.1% > 0.5%". "" when it is not. */
void avoctl_fmt_noisy(const json_t *config, int with_figures, char *buf, size_t len);
/* A result's "screen" when it stopped the candidate: "screened out (x0.9312,
 * 95% [0.9100, 0.9500] on 2 configs)"; "" when screen is not an object
 * that says screened_out (not screened, or it passed). */
void avoctl_fmt_screen(const json_t *screen, char *buf, size_t len);

/* "1 evaluation", "2 evaluations": n and noun, with an "s" unless n is 1. */
void avoctl_fmt_count(long long n, const char *noun, char *buf, size_t len);
/* A length of time for people: "41 s", "3 min 12 s", "2 h 05 min", "3 d 4 h". */
void avoctl_fmt_duration(double seconds, char *buf, size_t len);
/* Seconds left for a job: from the rate so far (elapsed seconds for done
 * of budget evaluations) and, when there is one (> 0), the wall budget,
 * whichever ends first. Returns 0 and *left, or -1 when neither can say
 * (nothing done yet, no budget). */
int avoctl_fmt_eta_seconds(double elapsed, long long done, long long budget, double wall_budget, double *left);
/* "ETA 3 min 12 s" or "ETA unknown", from avoctl_fmt_eta_seconds. */
void avoctl_fmt_eta(double elapsed, long long done, long long budget, double wall_budget, char *buf, size_t len);
/* A job's elapsed running time in seconds from its JSON (accounting's
 * wall_seconds), or -1 when it has not started. */
double avoctl_fmt_job_elapsed(const json_t *job);

/* Colour on stdout: decided once (avoctl_fmt_color_init: off when stdout is not
 * a terminal, NO_COLOR is set and not empty, or --no-color), then each
 * avoctl_color_* returns the escape or "" */
void avoctl_fmt_color_init(int force_off);
void avoctl_fmt_color_set(int on);       /* for the unit tests */
const char *avoctl_fmt_color_fail(void); /* red */
const char *avoctl_fmt_color_good(void); /* green: a new best */
const char *avoctl_fmt_color_off(void);

/* The terminal's width when out is one, else 0 (no limit). */
size_t avoctl_table_term_width(FILE *out);

/* One human line (no newline) for an event object as carried in the stream's
 * data: {"id","job","kind","at","data":{...}}. fallback_unit may be NULL. */
void avoctl_fmt_event(const json_t *ev, const char *fallback_unit, char *buf, size_t len);

#endif
