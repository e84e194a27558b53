/* Unit tests for avoctl's modules: SSE parsing, argument parsing, tables and
 * event lines, job spec building, the lineage tree, the job report, the
 * candidate view, AVO_HOME resolution and route paths. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "avo_home.h"
#include "avo_suggest.h"
#include "client/args.h"
#include "client/config.h"
#include "client/fmt.h"
#include "client/http.h"
#include "client/lineage.h"
#include "client/report.h"
#include "client/show.h"
#include "client/spec.h"
#include "client/sse.h"

/* ---- SSE -------------------------------------------------------------- */

typedef struct {
    int n;
    char id[8][32];
    char event[8][32];
    char data[8][256];
    int stop_after; /* return 1 from the callback after this many events */
} events;

static int collect(const avoctl_sse_event *ev, void *arg)
{
    events *e = arg;
    if (e->n < 8) {
        snprintf(e->id[e->n], sizeof e->id[0], "%s", ev->id);
        snprintf(e->event[e->n], sizeof e->event[0], "%s", ev->event);
        snprintf(e->data[e->n], sizeof e->data[0], "%s", ev->data);
        assert_int_equal(strlen(ev->data), ev->data_len);
    }
    e->n++;
    return e->stop_after && e->n >= e->stop_after ? 1 : 0;
}

/* Feed text in pieces of `step` bytes (0 = all at once). */
static int feed(avoctl_sse *p, const char *text, size_t step, events *e)
{
    size_t len = strlen(text);
    if (!step)
        step = len ? len : 1;
    for (size_t i = 0; i < len; i += step) {
        size_t n = len - i < step ? len - i : step;
        int rc = avoctl_sse_feed(p, text + i, n, collect, e);
        if (rc)
            return rc;
    }
    return 0;
}

static const char *const STREAM = "id: 1\nevent: job_started\ndata: {\"id\":1,\"kind\":\"job_started\"}\n\n"
                                  ": keep-alive\n\n"
                                  "id: 2\r\nevent: committed\r\ndata: {\"id\":2,\r\n"
                                  "data: \"kind\":\"committed\"}\r\n\r\n"
                                  "id: 3\revent: new_best\rdata:{\"id\":3}\r\r";

static void check_stream(const events *e)
{
    assert_int_equal(e->n, 3);
    assert_string_equal(e->id[0], "1");
    assert_string_equal(e->event[0], "job_started");
    assert_string_equal(e->data[0], "{\"id\":1,\"kind\":\"job_started\"}");
    assert_string_equal(e->id[1], "2");
    assert_string_equal(e->event[1], "committed");
    assert_string_equal(e->data[1], "{\"id\":2,\n\"kind\":\"committed\"}");
    assert_string_equal(e->id[2], "3");
    assert_string_equal(e->event[2], "new_best");
    assert_string_equal(e->data[2], "{\"id\":3}"); /* no space after the colon */
}

static void test_sse_whole(void **state)
{
    (void)state;
    avoctl_sse p;
    events e = {0};
    avoctl_sse_init(&p);
    assert_int_equal(feed(&p, STREAM, 0, &e), 0);
    check_stream(&e);
    avoctl_sse_free(&p);
}

/* Every chunking must give the same events: lines, CRLF pairs and events
 * are split across chunks at every possible place. */
static void test_sse_split_everywhere(void **state)
{
    (void)state;
    for (size_t step = 1; step <= strlen(STREAM); step++) {
        avoctl_sse p;
        events e = {0};
        avoctl_sse_init(&p);
        assert_int_equal(feed(&p, STREAM, step, &e), 0);
        check_stream(&e);
        avoctl_sse_free(&p);
    }
}

static void test_sse_crlf_split_between_chunks(void **state)
{
    (void)state;
    avoctl_sse p;
    events e = {0};
    avoctl_sse_init(&p);
    /* CR ends chunk one; its LF opens chunk two and must not read as an
     * empty line (which would dispatch early). */
    assert_int_equal(avoctl_sse_feed(&p, "data: a\r", 8, collect, &e), 0);
    assert_int_equal(avoctl_sse_feed(&p, "\ndata: b\r", 9, collect, &e), 0);
    assert_int_equal(e.n, 0);
    assert_int_equal(avoctl_sse_feed(&p, "\n\r\n", 3, collect, &e), 0);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.data[0], "a\nb");
    avoctl_sse_free(&p);
}

static void test_sse_incomplete_event_waits(void **state)
{
    (void)state;
    avoctl_sse p;
    events e = {0};
    avoctl_sse_init(&p);
    assert_int_equal(feed(&p, "id: 5\nevent: x\ndata: partial", 0, &e), 0);
    assert_int_equal(e.n, 0);
    assert_int_equal(feed(&p, "\n", 0, &e), 0);
    assert_int_equal(e.n, 0); /* the blank line has not come yet */
    assert_int_equal(feed(&p, "\n", 0, &e), 0);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.data[0], "partial");
    avoctl_sse_free(&p);
}

static void test_sse_rules(void **state)
{
    (void)state;
    avoctl_sse p;
    events e = {0};
    avoctl_sse_init(&p);
    /* No data: not dispatched, and its type does not leak into the next.
     * Unknown fields and a field without a colon are ignored; the id
     * persists; retry is recorded. */
    assert_int_equal(feed(&p,
                          "event: lonely\nid: 9\n\n"
                          "foo: bar\ndata\nretry: 1500\n\n"
                          "data:  two spaces\n\n",
                          0, &e),
                     0);
    assert_int_equal(e.n, 2);
    assert_string_equal(e.event[0], "message");
    assert_string_equal(e.id[0], "9");
    assert_string_equal(e.data[0], ""); /* "data" alone is one empty line */
    assert_string_equal(e.data[1], " two spaces");
    assert_int_equal(p.retry_ms, 1500);
    avoctl_sse_free(&p);
}

static void test_sse_stop_and_limit(void **state)
{
    (void)state;
    avoctl_sse p;
    events e = {.stop_after = 1};
    avoctl_sse_init(&p);
    assert_int_equal(feed(&p, "data: 1\n\ndata: 2\n\n", 0, &e), 1);
    assert_int_equal(e.n, 1);
    avoctl_sse_free(&p);

    events e2 = {0};
    avoctl_sse_init(&p);
    p.limit = 16;
    assert_int_equal(feed(&p, "data: 0123456789abcdefXYZ", 0, &e2), -E2BIG);
    avoctl_sse_free(&p);
    avoctl_sse_init(&p);
    p.limit = 16;
    assert_int_equal(feed(&p, "data: 0123456789\ndata: 0123456789\n", 0, &e2), -E2BIG);
    avoctl_sse_free(&p);
}

/* ---- arguments -------------------------------------------------------- */

static void test_globals(void **state)
{
    (void)state;
    avoctl_globals g;
    char err[256];
    char *v1[] = {"avoctl", "--json", "--socket", "/tmp/s", "list", "--limit", "3"};
    assert_int_equal(avoctl_args_globals(7, v1, &g, err, sizeof err), 4);
    assert_true(g.json);
    assert_string_equal(g.socket, "/tmp/s");

    char *v2[] = {"avoctl", "--socket=/x", "-h"};
    assert_int_equal(avoctl_args_globals(3, v2, &g, err, sizeof err), 3);
    assert_string_equal(g.socket, "/x");
    assert_true(g.help);
    assert_false(g.json);

    char *v3[] = {"avoctl", "--socket"};
    assert_int_equal(avoctl_args_globals(2, v3, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--socket"));

    char *v4[] = {"avoctl", "--jsn", "list"};
    assert_int_equal(avoctl_args_globals(3, v4, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "'--jsn'"));

    char *v5[] = {"avoctl", "--version"};
    assert_int_equal(avoctl_args_globals(2, v5, &g, err, sizeof err), 2);
    assert_true(g.version);
}

static const avoctl_opt opts[] = {
    {"problem", 0, 1, "P", ""},     {"priority", 0, 1, "N", ""}, {"watch", 'w', 0, NULL, ""},
    {"output", 'o', 1, "FILE", ""}, {NULL, 0, 0, NULL, NULL},
};

static void test_args(void **state)
{
    (void)state;
    avoctl_args a;
    char err[256];

    char *v1[] = {"spec.json", "--problem", "cpu/sgemm", "--priority=-3", "-w", "--json", "-o", "x.c"};
    assert_int_equal(avoctl_args_parse(opts, 1, 8, v1, &a, err, sizeof err), 0);
    assert_int_equal(a.npos, 1);
    assert_string_equal(a.pos[0], "spec.json");
    assert_string_equal(avoctl_args_get(&a, "problem"), "cpu/sgemm");
    assert_string_equal(avoctl_args_get(&a, "priority"), "-3");
    assert_non_null(avoctl_args_get(&a, "watch"));
    assert_string_equal(avoctl_args_get(&a, "output"), "x.c");
    assert_null(avoctl_args_get(&a, "nosuch"));
    assert_true(a.json);
    assert_false(a.help);

    /* A value that looks like an option is still the value. */
    char *v2[] = {"--priority", "-5", "-"};
    assert_int_equal(avoctl_args_parse(opts, 1, 3, v2, &a, err, sizeof err), 0);
    assert_string_equal(avoctl_args_get(&a, "priority"), "-5");
    assert_string_equal(a.pos[0], "-");
    assert_null(avoctl_args_get(&a, "watch"));

    char *v3[] = {"--", "--problem"};
    assert_int_equal(avoctl_args_parse(opts, 1, 2, v3, &a, err, sizeof err), 0);
    assert_string_equal(a.pos[0], "--problem");

    char *v4[] = {"--problme", "x"};
    assert_int_equal(avoctl_args_parse(opts, 1, 2, v4, &a, err, sizeof err), -EINVAL);
    assert_string_equal(err, "unknown option '--problme'; did you mean '--problem'?");

    char *v5[] = {"--problem"};
    assert_int_equal(avoctl_args_parse(opts, 1, 1, v5, &a, err, sizeof err), -EINVAL);
    assert_string_equal(err, "option '--problem' needs a value (P)");

    char *v6[] = {"7", "8"};
    assert_int_equal(avoctl_args_parse(opts, 1, 2, v6, &a, err, sizeof err), -EINVAL);
    assert_string_equal(err, "unexpected argument '8'");

    char *v7[] = {"--watch=yes"};
    assert_int_equal(avoctl_args_parse(opts, 1, 1, v7, &a, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "takes no value"));

    char *v8[] = {"-x"};
    assert_int_equal(avoctl_args_parse(NULL, 1, 1, v8, &a, err, sizeof err), -EINVAL);
    assert_string_equal(err, "unknown option '-x'");

    char *v9[] = {"-h"};
    assert_int_equal(avoctl_args_parse(NULL, 0, 1, v9, &a, err, sizeof err), 0);
    assert_true(a.help);
}

static void test_numbers(void **state)
{
    (void)state;
    int64_t i;
    double d;
    char err[256];
    assert_int_equal(avoctl_args_i64("JOB", "42", 1, INT64_MAX, &i, err, sizeof err), 0);
    assert_int_equal(i, 42);
    assert_int_equal(avoctl_args_i64("JOB", "0", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_string_equal(err, "JOB: expected an integer >= 1, got '0'");
    assert_int_equal(avoctl_args_i64("JOB", "7x", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_args_i64("JOB", "", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_args_i64("JOB", "99999999999999999999", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_args_double("--epsilon", "0.05", 0, 1, &d, err, sizeof err), 0);
    assert_true(d == 0.05);
    assert_int_equal(avoctl_args_double("--epsilon", "2", 0, 1, &d, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_args_double("--epsilon", "nan", 0, 1, &d, err, sizeof err), -EINVAL);
}

/* ---- formatting ------------------------------------------------------- */

static char *render(const avoctl_table *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(avoctl_table_print(t, f), 0);
    fclose(f);
    return text;
}

static void test_table(void **state)
{
    (void)state;
    avoctl_table *t;
    static const char *const hdr[] = {"ID", "STATE", "BEST"};
    assert_int_equal(avoctl_table_new(&t, 3, hdr, 1u << 0 | 1u << 2), 0);
    const char *r1[] = {"7", "running", "9.81"};
    const char *r2[] = {"12", NULL, "123.5"};
    const char *r3[] = {"3", "succeeded×", ""};
    assert_int_equal(avoctl_table_add(t, r1), 0);
    assert_int_equal(avoctl_table_add(t, r2), 0);
    assert_int_equal(avoctl_table_add(t, r3), 0);
    assert_int_equal(avoctl_table_rows(t), 3);
    char *text = render(t);
    assert_string_equal(text, "ID  STATE        BEST\n"
                              " 7  running      9.81\n"
                              "12  -           123.5\n"
                              " 3  succeeded×      -\n");
    free(text);
    avoctl_table_free(t);

    /* The last column is never padded (no trailing blanks). */
    static const char *const h2[] = {"A", "B"};
    assert_int_equal(avoctl_table_new(&t, 2, h2, 0), 0);
    const char *r4[] = {"x", "long text"};
    assert_int_equal(avoctl_table_add(t, r4), 0);
    text = render(t);
    assert_string_equal(text, "A  B\nx  long text\n");
    free(text);
    avoctl_table_free(t);
}

static void test_table_fit(void **state)
{
    (void)state;
    avoctl_table *t;
    static const char *const hdr[] = {"ID", "KNOBS", "N"};
    assert_int_equal(avoctl_table_new(&t, 3, hdr, 1u << 2), 0);
    const char *r1[] = {"1", "BM=64 BN=128 BK=32", "7"};
    const char *r2[] = {"22", "é=1", "8"};
    assert_int_equal(avoctl_table_add(t, r1), 0);
    assert_int_equal(avoctl_table_add(t, r2), 0);
    /* 2 + 2 + 18 + 2 + 1 = 25 columns; 20 leaves the knobs 13. */
    avoctl_table_fit(t, 20, 1, 6);
    char *text = render(t);
    assert_string_equal(text, "ID  KNOBS          N\n"
                              "1   BM=64 BN=1...  7\n"
                              "22  é=1            8\n");
    free(text);
    /* Never below the minimum, even if the row stays too wide. */
    avoctl_table_fit(t, 5, 1, 6);
    text = render(t);
    assert_string_equal(text, "ID  KNOBS   N\n"
                              "1   BM=...  7\n"
                              "22  é=1     8\n");
    free(text);
    /* 0: no limit (a pipe gets everything). */
    avoctl_table_fit(t, 0, 1, 6);
    text = render(t);
    assert_non_null(strstr(text, "BM=64 BN=128 BK=32"));
    free(text);
    avoctl_table_free(t);
}

static void test_fmt_values(void **state)
{
    (void)state;
    char b[128];
    avoctl_fmt_num(9.8123, b, sizeof b);
    assert_string_equal(b, "9.812");
    avoctl_fmt_num(123.456, b, sizeof b);
    assert_string_equal(b, "123.5");
    avoctl_fmt_num(0.00123, b, sizeof b);
    assert_string_equal(b, "0.00123");
    avoctl_fmt_num(12345.6, b, sizeof b);
    assert_string_equal(b, "12346");
    avoctl_fmt_time("2024-05-01T12:03:04.123Z", 1, b, sizeof b);
    assert_string_equal(b, "2024-05-01 12:03");
    avoctl_fmt_time("2024-05-01 12:03:04+00", 0, b, sizeof b);
    assert_string_equal(b, "12:03:04");
    avoctl_fmt_time("yesterday", 0, b, sizeof b);
    assert_string_equal(b, "-");
    avoctl_fmt_time(NULL, 1, b, sizeof b);
    assert_string_equal(b, "-");

    json_t *s = json_pack("{s:i, s:f, s:s}", "candidate", 55, "aggregate", 9.8, "unit", "GFLOP/s");
    avoctl_fmt_score(s, NULL, b, sizeof b);
    assert_string_equal(b, "9.8 GFLOP/s (cand 55)");
    json_decref(s);
    s = json_pack("{s:i, s:f}", "id", 41, "aggregate", 3.1);
    avoctl_fmt_score(s, "GB/s", b, sizeof b);
    assert_string_equal(b, "3.1 GB/s (cand 41)");
    json_decref(s);
    avoctl_fmt_score(json_null(), NULL, b, sizeof b);
    assert_string_equal(b, "-");
    s = json_real(3.1578);
    avoctl_fmt_speedup(s, b, sizeof b);
    assert_string_equal(b, "x3.16");
    json_decref(s);
    avoctl_fmt_speedup(NULL, b, sizeof b);
    assert_string_equal(b, "-");

    s = json_pack("{s:i, s:i, s:s}", "BM", 64, "BN", 128, "MODE", "fast");
    avoctl_fmt_knobs(s, b, sizeof b);
    assert_string_equal(b, "BM=64 BN=128 MODE=fast");
    avoctl_fmt_knobs(s, b, 10); /* cut, still terminated */
    assert_string_equal(b, "BM=64");
    json_decref(s);
    avoctl_fmt_knobs(NULL, b, sizeof b);
    assert_string_equal(b, "");
}

static void event_line(const char *json, const char *unit, const char *want)
{
    json_error_t je;
    json_t *ev = json_loads(json, 0, &je);
    char line[512];
    assert_non_null(ev);
    avoctl_fmt_event(ev, unit, line, sizeof line);
    assert_string_equal(line, want);
    json_decref(ev);
}

static void test_fmt_events(void **state)
{
    (void)state;
    event_line("{\"id\":5,\"job\":7,\"kind\":\"evaluation_finished\",\"at\":\"2024-05-01T12:03:04Z\","
               "\"data\":{\"candidate\":45,\"outcome\":\"ok\",\"aggregate\":9.81}}",
               "GFLOP/s", "[12:03:04] evaluation_finished cand 45 ok 9.81 GFLOP/s");
    event_line("{\"kind\":\"evaluation_finished\",\"data\":{\"candidate\":46,\"outcome\":"
               "\"compile_error\",\"aggregate\":0,\"detail\":\"x.c:3: error: bad\\nmore\"}}",
               NULL, "evaluation_finished cand 46 compile_error: x.c:3: error: bad");
    event_line("{\"kind\":\"committed\",\"at\":\"2024-05-01T12:03:05Z\",\"data\":{\"candidate\":45,"
               "\"parent\":41,\"aggregate\":9.81}}",
               NULL, "[12:03:05] committed cand 45 (parent 41) 9.81");
    event_line("{\"kind\":\"new_best\",\"data\":{\"candidate\":45,\"aggregate\":9.81,\"speedup\":3.1}}", NULL,
               "new best 9.81 (x3.10 over seed), cand 45");
    event_line("{\"kind\":\"job_finished\",\"job\":7,\"data\":{\"state\":\"succeeded\",\"reason\":"
               "\"budget exhausted\",\"best\":{\"candidate\":55,\"aggregate\":9.8},\"seed\":"
               "{\"candidate\":41,\"aggregate\":3.1},\"speedup\":3.16}}",
               "GFLOP/s",
               "job 7 finished: succeeded (budget exhausted); best 9.8 GFLOP/s (cand 55) vs seed "
               "3.1 GFLOP/s (cand 41); speedup x3.16");
    event_line("{\"kind\":\"job_finished\",\"job\":8,\"data\":{\"state\":\"failed\",\"reason\":null,"
               "\"best\":null,\"seed\":null,\"speedup\":null}}",
               NULL, "job 8 finished: failed; no valid evaluation");
    event_line("{\"kind\":\"job_started\",\"job\":7,\"data\":{}}", NULL, "job 7 started");
    /* say why (sql/023_why.sql, agent.c): the detail, agent steps, provider retries */
    event_line("{\"kind\":\"detail\",\"job\":7,\"data\":{\"detail\":\"queued: no live worker for sm_90 / H200\"}}",
               NULL, "now queued: no live worker for sm_90 / H200");
    event_line("{\"kind\":\"agent_step_started\",\"data\":{\"step\":4,\"island\":1}}", NULL,
               "agent step 4 started island 1");
    event_line("{\"kind\":\"agent_step_ended\",\"data\":{\"step\":4,\"island\":1,\"state\":\"committed\","
               "\"reason\":\"commit\",\"turns\":1,\"evaluations\":2}}",
               NULL, "agent step 4 committed island 1 after 1 turn, 2 evaluations: commit");
    event_line("{\"kind\":\"llm_retry\",\"data\":{\"step\":4,\"provider\":\"claude\",\"attempt\":2,"
               "\"max_retries\":5,\"wait_s\":2.5,\"status\":529,\"message\":\"Overloaded\"}}",
               NULL,
               "provider claude: attempt 2 failed (HTTP 529): Overloaded; retrying in 2.5 s (2 of 5 retries), "
               "agent step 4");
    event_line("{\"kind\":\"llm_retry\",\"data\":{\"provider\":\"p\",\"attempt\":1,\"max_retries\":2,"
               "\"wait_s\":1,\"error\":\"Timeout was reached\"}}",
               NULL, "provider p: attempt 1 failed: Timeout was reached; retrying in 1.0 s (1 of 2 retries)");
    /* the commit rule and the job's final measurement (sql/012_paired.sql) */
    event_line("{\"kind\":\"not_significant\",\"data\":{\"candidate\":12,\"island\":0,\"against\":9,"
               "\"ratio\":1.003,\"low\":0.996,\"ci\":[0.996,1.011],\"min_gain\":0.005,\"confidence\":0.95,"
               "\"reason\":\"not a significant gain\"}}",
               NULL,
               "not_significant cand 12 island 0 x1.0030 vs cand 9 [0.9960, 1.0110], low 0.9960 needs > "
               "1.0050: not a significant gain");
    /* a pairing that failed: no gain shown, the against named */
    event_line("{\"kind\":\"pairing_failed\",\"data\":{\"candidate\":14,\"island\":1,\"against\":9,"
               "\"reason\":\"the paired measurement failed (the against on config a, call 12: crash): no gain "
               "shown\"}}",
               NULL,
               "pairing_failed cand 14 island 1 vs cand 9: the paired measurement failed (the against on config a, "
               "call 12: crash): no gain shown");
    /* a best that keeps failing as the against (sql/026_recheck.sql): queued alone, kept or retired */
    event_line("{\"kind\":\"best_recheck\",\"data\":{\"candidate\":9,\"island\":1,\"pairing_failures\":3,"
               "\"last_reason\":\"the paired measurement failed (the against crashed): no gain shown\"}}",
               NULL,
               "best_recheck cand 9 island 1: 3 pairings against it failed in a row, evaluated again alone (last: "
               "the paired measurement failed (the against crashed): no gain shown)");
    event_line("{\"kind\":\"best_rechecked\",\"data\":{\"candidate\":9,\"outcome\":\"ok\",\"aggregate\":7.1}}", NULL,
               "best_rechecked cand 9: ok alone, kept");
    event_line("{\"kind\":\"best_rechecked\",\"data\":{\"candidate\":9,\"outcome\":\"crash\",\"inconclusive\":"
               "\"the worker running it was lost 3 times (lease expired)\"}}",
               NULL,
               "best_rechecked cand 9: crash alone, kept (no verdict: the worker running it was lost 3 times (lease "
               "expired))");
    event_line("{\"kind\":\"best_retired\",\"data\":{\"candidate\":9,\"reason\":\"re-checked alone: wrong_result: "
               "config a: max abs error 3\",\"replaced_by\":4,\"islands\":[0,1],\"best_candidate\":4}}",
               NULL,
               "best_retired cand 9: re-checked alone: wrong_result: config a: max abs error 3; replaced by cand 4; "
               "job best cand 4");
    /* screening (sql/013_screen.sql): the event, and the evaluation with no full score */
    event_line("{\"kind\":\"screened_out\",\"data\":{\"candidate\":13,\"island\":1,\"against\":9,"
               "\"ratio\":0.93,\"low\":0.915,\"ci\":[0.91,0.95],\"confidence\":0.95,\"configs\":[\"a\",\"b\"]}}",
               NULL,
               "screened_out cand 13 island 1 x0.9300 vs cand 9 (95% [0.9100, 0.9500]) on 2 screen configs: "
               "slower beyond noise, not timed on the rest");
    event_line("{\"kind\":\"candidate_evaluated\",\"data\":{\"candidate\":13,\"outcome\":\"ok\","
               "\"aggregate\":null,\"detail\":\"screened out: 0.93 x the against's speed\"}}",
               NULL, "candidate_evaluated cand 13 ok: screened out: 0.93 x the against's speed");
    event_line("{\"kind\":\"final_measurement\",\"data\":{\"status\":\"started\",\"candidate\":55,"
               "\"against\":41,\"evaluation\":90}}",
               NULL, "finishing: measuring the best (cand 55) paired against the seed (cand 41)");
    event_line("{\"kind\":\"final_measurement\",\"data\":{\"status\":\"finished\",\"speedup\":{\"ratio\":1.46,"
               "\"low\":1.41,\"ci\":[1.4,1.52],\"confidence\":0.95,\"paired\":true}}}",
               NULL, "final measurement: speedup x1.46 [1.400, 1.520] (95% interval, paired)");
    event_line("{\"kind\":\"job_finished\",\"job\":7,\"data\":{\"state\":\"succeeded\",\"reason\":\"r\","
               "\"best\":null,\"seed\":null,\"speedup\":1.5,\"speedup_detail\":{\"ratio\":1.5,\"paired\":false,"
               "\"reason\":\"the final evaluation has no paired measurement\"}}}",
               NULL,
               "job 7 finished: succeeded (r); best - vs seed -; speedup x1.50 (unpaired: the final "
               "evaluation has no paired measurement)");
    event_line("{\"kind\":\"job_finished\",\"job\":7,\"data\":{\"state\":\"succeeded\",\"reason\":\"r\","
               "\"best\":null,\"seed\":null,\"speedup\":1,\"speedup_detail\":{\"ratio\":1,\"paired\":false,"
               "\"note\":\"no version beat the seed\"}}}",
               NULL, "job 7 finished: succeeded (r); best - vs seed -; speedup x1.00 (no version beat the seed)");
    event_line("{\"kind\":\"migrated\",\"data\":{\"from\":1}}", NULL, "migrated {\"from\":1}");
}

/* The evolution engine's events (sql/004_evolution.sql, evolve.c): one line
 * each, with the island wherever the event names one. */
static void test_fmt_events_islands(void **state)
{
    (void)state;
    event_line("{\"kind\":\"candidate_evaluated\",\"at\":\"2026-12-02T15:05:16.195+00:00\",\"data\":"
               "{\"candidate\":45,\"island\":1,\"outcome\":\"ok\",\"aggregate\":9.81,"
               "\"detail\":\"4 configs\",\"knobs\":{\"BM\":64,\"BN\":128}}}",
               "GFLOP/s", "[15:05:16] candidate_evaluated cand 45 island 1 ok 9.81 GFLOP/s [BM=64 BN=128]");
    event_line("{\"kind\":\"candidate_evaluated\",\"data\":{\"candidate\":46,\"island\":0,\"outcome\":"
               "\"wrong_result\",\"aggregate\":0,\"detail\":\"max_abs 3 > 1e-3\\nmore\",\"knobs\":{}}}",
               "GFLOP/s", "candidate_evaluated cand 46 island 0 wrong_result: max_abs 3 > 1e-3");
    event_line("{\"kind\":\"committed\",\"data\":{\"candidate\":45,\"parent\":41,\"island\":2,"
               "\"aggregate\":9.81}}",
               NULL, "committed cand 45 (parent 41) island 2 9.81");
    event_line("{\"kind\":\"committed\",\"data\":{\"candidate\":1,\"parent\":null,\"island\":0,"
               "\"aggregate\":1.5}}",
               NULL, "committed cand 1 island 0 1.5");
    event_line("{\"kind\":\"new_best\",\"data\":{\"candidate\":45,\"island\":2,\"aggregate\":9.81,"
               "\"speedup\":3.1}}",
               NULL, "new best 9.81 (x3.10 over seed), cand 45 island 2");
    event_line("{\"kind\":\"island_migrated\",\"data\":{\"island\":1,\"from\":0,\"candidate\":4,"
               "\"aggregate\":16.07}}",
               "GFLOP/s", "island_migrated island 1 adopted cand 4 (16.07 GFLOP/s) from island 0");
    event_line("{\"kind\":\"stagnation\",\"data\":{\"island\":1,\"evaluations_without_commit\":4,"
               "\"level\":2,\"action\":\"island restarted\"}}",
               NULL, "stagnation island 1: 4 evaluations without a commit, level 2: island restarted");
    event_line("{\"kind\":\"budget_reached\",\"data\":{\"budget\":\"evaluations\",\"used\":16.0,"
               "\"limit\":16.0}}",
               NULL, "budget_reached evaluations: 16 of 16");
    event_line("{\"kind\":\"budget_reached\",\"data\":{\"budget\":\"gpu_seconds\",\"used\":3601.5,"
               "\"limit\":3600}}",
               NULL, "budget_reached gpu_seconds: 3602 of 3600");
    event_line("{\"kind\":\"job_submitted\",\"job\":9,\"data\":{\"seed\":{\"candidate\":5}}}", NULL,
               "job 9 submitted (seed: cand 5)");
    event_line("{\"kind\":\"job_submitted\",\"job\":9,\"data\":{\"seed\":{\"file\":\"my.c\"}}}", NULL,
               "job 9 submitted (seed: my.c)");
}

/* ---- job spec --------------------------------------------------------- */

static void assert_json(const json_t *v, const char *want)
{
    char *got = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    assert_string_equal(got, want);
    free(got);
}

static void test_spec_from_flags(void **state)
{
    (void)state;
    json_t *spec = NULL;
    char err[256];
    avoctl_spec_flags f = {.problem = "cpu/sgemm",
                           .operator_name = "tune",
                           .evaluations = "30",
                           .islands = "2",
                           .wall = "600",
                           .epsilon = "0.05",
                           .priority = "-1"};
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"budget\":{\"evaluations\":30,\"wall_seconds\":600},\"epsilon\":0.05,"
                      "\"islands\":2,\"operator\":\"tune\",\"priority\":-1,\"problem\":\"cpu/sgemm\"}");
    json_decref(spec);

    /* Unset fields are omitted, budget included. */
    spec = NULL;
    avoctl_spec_flags g = {.problem = "cpu/sgemm"};
    assert_int_equal(avoctl_spec_build(&g, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"problem\":\"cpu/sgemm\"}");
    json_decref(spec);

    spec = NULL;
    avoctl_spec_flags h = {.problem = "p", .wall = "1.5"};
    assert_int_equal(avoctl_spec_build(&h, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"budget\":{\"wall_seconds\":1.5},\"problem\":\"p\"}");
    json_decref(spec);
}

static void test_spec_evolution_flags(void **state)
{
    (void)state;
    json_t *spec = NULL;
    char err[256];
    avoctl_spec_flags f = {.problem = "gemm_bf16",
                           .evaluations = "100",
                           .gpu_seconds = "3600",
                           .energy_joules = "2.5e5",
                           .target_score = "750.5",
                           .patience = "8",
                           .stagnation_limit = "40",
                           .migrate_every = "3",
                           .islands = "4",
                           .seed_candidate = "55"};
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"budget\":{\"energy_joules\":250000,\"evaluations\":100,\"gpu_seconds\":3600},"
                      "\"islands\":4,\"migrate_every\":3,\"problem\":\"gemm_bf16\",\"seed\":{\"candidate\":55},"
                      "\"stagnation\":{\"limit\":40,\"patience\":8},\"target_score\":750.5}");
    json_decref(spec);

    /* One stagnation flag alone makes a one-field object. */
    spec = NULL;
    avoctl_spec_flags g = {.problem = "p", .stagnation_limit = "12"};
    assert_int_equal(avoctl_spec_build(&g, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"problem\":\"p\",\"stagnation\":{\"limit\":12}}");
    json_decref(spec);

    /* A named seed, alone or beside a transferred candidate. */
    spec = NULL;
    avoctl_spec_flags h = {.problem = "gemm_bf16", .seed_name = "sm90"};
    assert_int_equal(avoctl_spec_build(&h, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"problem\":\"gemm_bf16\",\"seed\":{\"name\":\"sm90\"}}");
    json_decref(spec);
    spec = NULL;
    avoctl_spec_flags k = {.seed_candidate = "7", .seed_name = "sm90"};
    assert_int_equal(avoctl_spec_build(&k, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"seed\":{\"candidate\":7,\"name\":\"sm90\"}}");
    json_decref(spec);

    /* The commit rule's flags, merged into a spec file's commit. */
    json_error_t je;
    spec = json_loads("{\"problem\":\"p\",\"commit\":{\"min_gain\":0.1}}", 0, &je);
    avoctl_spec_flags c = {.confidence = "0.99"};
    assert_int_equal(avoctl_spec_build(&c, &spec, err, sizeof err), 0);
    assert_json(spec, "{\"commit\":{\"confidence\":0.99,\"min_gain\":0.1},\"problem\":\"p\"}");
    avoctl_spec_flags m = {.min_gain = "0.005"};
    assert_int_equal(avoctl_spec_build(&m, &spec, err, sizeof err), 0);
    assert_json(json_object_get(spec, "commit"), "{\"confidence\":0.99,\"min_gain\":0.005}");
    json_decref(spec);
    spec = NULL;
    avoctl_spec_flags bad = {.problem = "p", .min_gain = "1"};
    assert_int_equal(avoctl_spec_build(&bad, &spec, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--min-gain: must be in [0, 1)"));
    avoctl_spec_flags bad2 = {.problem = "p", .confidence = "0"};
    assert_int_equal(avoctl_spec_build(&bad2, &spec, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--confidence: must be in (0, 1)"));
    avoctl_spec_flags bad3 = {.problem = "p", .confidence = "1.5"};
    assert_int_equal(avoctl_spec_build(&bad3, &spec, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--confidence"));
    assert_null(spec);
}

/* --seed FILE sends the file's name and text; the text is what is on disk,
 * byte for byte (tabs, no final newline). */
static void test_spec_seed_file(void **state)
{
    (void)state;
    char path[] = "/tmp/avoctl-seed-XXXXXX.c";
    const char *text = "/* my seed */\nvoid sgemm(void) {\n\treturn; /* \xc3\xa9 */\n}";
    int fd = mkstemps(path, 2);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);

    json_t *spec = NULL;
    char err[256];
    avoctl_spec_flags f = {.problem = "cpu/sgemm", .seed_file = path};
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), 0);
    const json_t *seed = json_object_get(spec, "seed");
    assert_int_equal(json_object_size(seed), 2);
    assert_string_equal(json_string_value(json_object_get(seed, "file")), strrchr(path, '/') + 1);
    assert_string_equal(json_string_value(json_object_get(seed, "source")), text);
    json_decref(spec);

    /* Into a spec file: its seed knobs stay, its transfer seed goes. */
    json_error_t je;
    spec = json_loads("{\"problem\":\"cpu/sgemm\",\"seed\":{\"candidate\":3,\"knobs\":{\"BM\":64}}}", 0, &je);
    avoctl_spec_flags g = {.seed_file = path};
    assert_int_equal(avoctl_spec_build(&g, &spec, err, sizeof err), 0);
    seed = json_object_get(spec, "seed");
    assert_null(json_object_get(seed, "candidate"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(seed, "knobs"), "BM")), 64);
    assert_string_equal(json_string_value(json_object_get(seed, "source")), text);
    /* ...and the other way round. */
    avoctl_spec_flags h = {.seed_candidate = "9"};
    assert_int_equal(avoctl_spec_build(&h, &spec, err, sizeof err), 0);
    assert_json(json_object_get(spec, "seed"), "{\"candidate\":9,\"knobs\":{\"BM\":64}}");
    json_decref(spec);

    /* Unreadable or unusable files: a clear message naming the file, and
     * not -EINVAL (that one is a usage error with a usage hint). */
    spec = NULL;
    unlink(path);
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), -ENOENT);
    assert_null(spec);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "No such file"));

    memcpy(path + strlen(path) - 8, "XXXXXX.c", 8);
    fd = mkstemps(path, 2);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), -ENODATA);
    assert_non_null(strstr(err, "empty"));
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "\xff\xfe", 2), 2);
    close(fd);
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), -EILSEQ);
    assert_non_null(strstr(err, "UTF-8"));
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "a\0b", 3), 3);
    close(fd);
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), -EILSEQ);
    assert_non_null(strstr(err, "NUL"));
    assert_null(spec);
    unlink(path);

    avoctl_spec_flags d = {.problem = "p", .seed_file = "/tmp"};
    assert_int_equal(avoctl_spec_build(&d, &spec, err, sizeof err), -EISDIR);
    assert_null(spec);
}

static void test_spec_merge_into_file(void **state)
{
    (void)state;
    json_error_t je;
    json_t *spec = json_loads("{\"problem\":\"cpu/sgemm\",\"operator\":\"agent\","
                              "\"budget\":{\"evaluations\":10,\"tokens\":5000}}",
                              0, &je);
    json_t *orig = spec;
    char err[256];
    avoctl_spec_flags f = {.evaluations = "50", .priority = "3"};
    assert_int_equal(avoctl_spec_build(&f, &spec, err, sizeof err), 0);
    assert_ptr_equal(spec, orig);
    assert_json(spec, "{\"budget\":{\"evaluations\":50,\"tokens\":5000},\"operator\":\"agent\","
                      "\"priority\":3,\"problem\":\"cpu/sgemm\"}");
    json_decref(spec);
}

static void test_spec_errors(void **state)
{
    (void)state;
    char err[256];
    struct {
        avoctl_spec_flags f;
        const char *needle;
    } cases[] = {
        {{.problem = "p", .evaluations = "0"}, "--evaluations"},
        {{.problem = "p", .evaluations = "ten"}, "--evaluations"},
        {{.problem = "p", .islands = "-1"}, "--islands"},
        {{.problem = "p", .wall = "0"}, "--wall"},
        {{.problem = "p", .epsilon = "1.5"}, "--epsilon"},
        {{.problem = "p", .priority = "high"}, "--priority"},
        {{.problem = ""}, "--problem"},
        {{.problem = "p", .seed_file = "x.c", .seed_candidate = "3"}, "--seed-candidate"},
        {{.problem = "p", .seed_file = ""}, "--seed"},
        {{.problem = "p", .seed_candidate = "0"}, "--seed-candidate"},
        {{.problem = "p", .target_score = "0"}, "--target-score"},
        {{.problem = "p", .patience = "0"}, "--patience"},
        {{.problem = "p", .stagnation_limit = "many"}, "--stagnation-limit"},
        {{.problem = "p", .gpu_seconds = "-1"}, "--gpu-seconds"},
        {{.problem = "p", .energy_joules = "1J"}, "--energy-joules"},
        {{.problem = "p", .migrate_every = "0"}, "--migrate-every"},
        {{.problem = "p", .seed_name = ""}, "--seed-name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *spec = NULL;
        assert_int_equal(avoctl_spec_build(&cases[i].f, &spec, err, sizeof err), -EINVAL);
        assert_null(spec);
        assert_non_null(strstr(err, cases[i].needle));
    }
    json_t *arr = json_array();
    avoctl_spec_flags f = {.problem = "p"};
    assert_int_equal(avoctl_spec_build(&f, &arr, err, sizeof err), -EINVAL);
    json_decref(arr);
}

/* ---- lineage, report, show -------------------------------------------- */

/* What a renderer writes to a FILE*, as a string. */
#define CAPTURE(text, call)                                                                                            \
    do {                                                                                                               \
        size_t cap_len_ = 0;                                                                                           \
        FILE *cap_f_ = open_memstream(&(text), &cap_len_);                                                             \
        assert_non_null(cap_f_);                                                                                       \
        assert_int_equal((call(cap_f_)), 0);                                                                           \
        fclose(cap_f_);                                                                                                \
    } while (0)

/* Two islands from the seed; island 0 has an attempt before its next
 * commit (9) and one after its last (6); island 1 ends in two attempts
 * (a compile error and one still queued). Out of id order on purpose. */
static const char *const LINEAGE =
    "{\"job\":7,\"state\":\"succeeded\",\"seed\":1,\"best\":5,\"unit\":\"GFLOP/s\",\"candidates\":["
    "{\"id\":1,\"parent\":null,\"parents\":[],\"island\":0,\"operator\":\"seed\",\"committed\":true,"
    "\"outcome\":\"ok\",\"aggregate\":2.0,\"knobs\":{\"BM\":256,\"BN\":256}},"
    "{\"id\":2,\"parent\":1,\"island\":0,\"committed\":true,\"outcome\":\"ok\",\"aggregate\":4.0,"
    "\"knobs\":{\"BM\":128,\"BN\":256}},"
    "{\"id\":3,\"parent\":1,\"island\":1,\"committed\":true,\"outcome\":\"ok\",\"aggregate\":3.0,"
    "\"knobs\":{\"BM\":64,\"BN\":256}},"
    "{\"id\":5,\"parent\":3,\"island\":1,\"committed\":true,\"outcome\":\"ok\",\"aggregate\":8.0,"
    "\"knobs\":{\"BM\":16,\"BN\":64}},"
    "{\"id\":4,\"parent\":2,\"island\":0,\"committed\":true,\"outcome\":\"ok\",\"aggregate\":5.0,"
    "\"knobs\":{\"BM\":32,\"BN\":256}},"
    "{\"id\":8,\"parent\":5,\"island\":1,\"committed\":false,\"outcome\":null,\"aggregate\":null,"
    "\"knobs\":{\"BM\":4,\"BN\":64}},"
    "{\"id\":7,\"parent\":5,\"island\":1,\"committed\":false,\"outcome\":\"compile_error\","
    "\"aggregate\":0,\"knobs\":{\"BM\":8,\"BN\":64}},"
    "{\"id\":6,\"parent\":4,\"island\":0,\"committed\":false,\"outcome\":\"ok\",\"aggregate\":4.5,"
    "\"knobs\":{\"BM\":256,\"BN\":16}},"
    "{\"id\":9,\"parent\":2,\"island\":0,\"committed\":false,\"outcome\":\"wrong_result\","
    "\"aggregate\":0,\"knobs\":{\"BM\":2,\"BN\":256}}]}";

static json_t *lineage_json;
static int lineage_all;
static size_t lineage_width;

static int print_lineage(FILE *f)
{
    return avoctl_lineage_print(lineage_json, lineage_all, lineage_width, f);
}

static void test_lineage_tree(void **state)
{
    (void)state;
    json_error_t je;
    char *text = NULL;
    lineage_json = json_loads(LINEAGE, 0, &je);
    assert_non_null(lineage_json);

    lineage_all = 0;
    lineage_width = 0;
    CAPTURE(text, print_lineage);
    assert_string_equal(text, "job 7 succeeded: 5 committed of 9 candidates; best cand 5, x4.00 over seed cand 1"
                              " (--all shows the 4 attempts)\n"
                              "\n"
                              "CANDIDATE    PARENT  ISLAND  GFLOP/s  SPEEDUP  KNOBS\n"
                              "1 (seed)          -       0        2    x1.00  BM=256 BN=256\n"
                              "+- 2              1       0        4    x2.00  BM=128 BN=256\n"
                              "|  4              2       0        5    x2.50  BM=32 BN=256\n"
                              "`- 3              1       1        3    x1.50  BM=64 BN=256\n"
                              "   5 (best)       3       1        8    x4.00  BM=16 BN=64\n");
    free(text);

    lineage_all = 1;
    CAPTURE(text, print_lineage);
    assert_string_equal(text, "job 7 succeeded: 5 committed of 9 candidates; best cand 5, x4.00 over seed cand 1\n"
                              "\n"
                              "CANDIDATE    PARENT  ISLAND  GFLOP/s  SPEEDUP  OUTCOME        KNOBS\n"
                              "1 (seed)          -       0        2    x1.00  committed      BM=256 BN=256\n"
                              "+- 2              1       0        4    x2.00  committed      BM=128 BN=256\n"
                              "|  +- 9           2       0        -        -  wrong_result   BM=2 BN=256\n"
                              "|  4              2       0        5    x2.50  committed      BM=32 BN=256\n"
                              "|  `- 6           4       0      4.5    x2.25  not committed  BM=256 BN=16\n"
                              "`- 3              1       1        3    x1.50  committed      BM=64 BN=256\n"
                              "   5 (best)       3       1        8    x4.00  committed      BM=16 BN=64\n"
                              "   +- 7           5       1        -        -  compile_error  BM=8 BN=64\n"
                              "   `- 8           5       1        -        -  pending        BM=4 BN=64\n");
    free(text);

    /* A narrow terminal cuts the knobs, nothing else (13 -> 12 columns). */
    lineage_all = 0;
    lineage_width = 59;
    CAPTURE(text, print_lineage);
    assert_non_null(strstr(text, "\n1 (seed)          -       0        2    x1.00  BM=256 BN...\n"));
    assert_non_null(strstr(text, "\n   5 (best)       3       1        8    x4.00  BM=16 BN=64\n"));
    free(text);
    json_decref(lineage_json);
}

static void test_lineage_edges(void **state)
{
    (void)state;
    json_error_t je;
    char *text = NULL;

    /* A chain: one indentation for any length; a candidate whose parent is
     * not in the job (a transferred seed's origin) is a root. */
    lineage_json = json_loads("{\"job\":2,\"state\":\"running\",\"seed\":10,\"best\":12,\"unit\":null,"
                              "\"candidates\":[{\"id\":10,\"parent\":3,\"committed\":true,\"outcome\":\"ok\","
                              "\"aggregate\":1,\"island\":0},{\"id\":11,\"parent\":10,\"committed\":true,"
                              "\"outcome\":\"ok\",\"aggregate\":2,\"island\":0},{\"id\":12,\"parent\":11,"
                              "\"committed\":true,\"outcome\":\"ok\",\"aggregate\":3,\"island\":0}]}",
                              0, &je);
    assert_non_null(lineage_json);
    lineage_all = 0;
    lineage_width = 0;
    CAPTURE(text, print_lineage);
    assert_string_equal(text, "job 2 running: 3 committed of 3 candidates; best cand 12, x3.00 over seed cand 10\n"
                              "\n"
                              "CANDIDATE  PARENT  ISLAND  SCORE  SPEEDUP  KNOBS\n"
                              "10 (seed)       3       0      1    x1.00  -\n"
                              "11             10       0      2    x2.00  -\n"
                              "12 (best)      11       0      3    x3.00  -\n");
    free(text);
    json_decref(lineage_json);

    lineage_json = json_loads("{\"job\":3,\"state\":\"queued\",\"seed\":null,\"best\":null,"
                              "\"candidates\":[]}",
                              0, &je);
    CAPTURE(text, print_lineage);
    assert_string_equal(text, "job 3 queued: no candidates yet\n");
    free(text);
    json_decref(lineage_json);

    lineage_json = json_loads("{\"error\":{}}", 0, &je);
    assert_int_equal(avoctl_lineage_print(lineage_json, 0, 0, stdout), -EINVAL);
    json_decref(lineage_json);
}

static const char *const REPORT =
    "{\"job\":{\"id\":1,\"problem\":\"cpu/sgemm\",\"operator\":\"tune\",\"target\":\"cpu\","
    "\"state\":\"succeeded\",\"reason\":\"evaluation budget reached\",\"unit\":\"GFLOP/s\","
    "\"spec\":{\"budget\":{\"evaluations\":16,\"wall_seconds\":900}},\"speedup\":4.0,\"commits\":6,"
    "\"accounting\":{\"energy_j\":0,\"cpu_seconds\":45.21,\"gpu_seconds\":0,\"wall_seconds\":45.97},"
    "\"evaluations\":{\"budget\":16,\"done\":16,\"ok\":13,"
    "\"by_outcome\":{\"wrong_result\":2,\"ok\":13,\"compile_error\":1}},"
    "\"islands\":[{\"idx\":0,\"best\":8.0,\"best_candidate\":5,\"commits\":4,\"evaluations\":9,"
    "\"migrations\":1},{\"idx\":1,\"best\":8.0,\"best_candidate\":5,\"commits\":2,\"evaluations\":7,"
    "\"migrations\":0}]},"
    "\"seed\":{\"id\":1,\"island\":0,\"aggregate\":2.0,\"unit\":\"GFLOP/s\"},"
    "\"best\":{\"id\":5,\"island\":1,\"aggregate\":8.0,\"unit\":\"GFLOP/s\"},"
    "\"configs\":[{\"config\":\"128\",\"seed\":2.5,\"best\":10.0,\"speedup\":4.0},"
    "{\"config\":\"384x320|288\",\"seed\":1.6,\"best\":6.4,\"speedup\":4.0},"
    "{\"config\":\"zero\",\"seed\":0,\"best\":1.0,\"speedup\":null}]}";

static json_t *report_json;

static int print_report(FILE *f)
{
    return avoctl_report_print(report_json, 0, f);
}

static int print_markdown(FILE *f)
{
    return avoctl_report_markdown(report_json, f);
}

static void test_report(void **state)
{
    (void)state;
    json_error_t je;
    char *text = NULL;
    report_json = json_loads(REPORT, 0, &je);
    assert_non_null(report_json);

    CAPTURE(text, print_report);
    assert_string_equal(text, "job 1: cpu/sgemm (tune, cpu), succeeded: evaluation budget reached\n"
                              "\n"
                              "CONFIG       SEED (GFLOP/s)  BEST (GFLOP/s)  SPEEDUP\n"
                              "128                     2.5              10    x4.00\n"
                              "384x320|288             1.6             6.4    x4.00\n"
                              "zero                      0               1        -\n"
                              "aggregate                 2               8    x4.00\n"
                              "\n"
                              "seed         cand 1: 2 GFLOP/s\n"
                              "best         cand 5: 8 GFLOP/s (island 1)\n"
                              "speedup      x4.00\n"
                              "evaluations  16 of 16: 13 ok, 2 wrong_result, 1 compile_error\n"
                              "commits      6\n"
                              "islands      2\n"
                              "wall         45.97 s (budget 900 s)\n"
                              "GPU          0 s\n"
                              "CPU          45.21 s\n"
                              "energy       0 J\n"
                              "\n"
                              "ISLAND  BEST  CANDIDATE  COMMITS  EVALUATIONS  MIGRATIONS\n"
                              "     0     8          5        4            9           1\n"
                              "     1     8          5        2            7           0\n");
    free(text);

    CAPTURE(text, print_markdown);
    assert_string_equal(text, "# Job 1: cpu/sgemm (tune, cpu), succeeded: evaluation budget reached\n"
                              "\n"
                              "## Seed against best, per configuration\n"
                              "\n"
                              "| config | seed (GFLOP/s) | best (GFLOP/s) | speedup |\n"
                              "|---|---:|---:|---:|\n"
                              "| 128 | 2.5 | 10 | x4.00 |\n"
                              "| 384x320\\|288 | 1.6 | 6.4 | x4.00 |\n"
                              "| zero | 0 | 1 | - |\n"
                              "| **aggregate** | 2 | 8 | x4.00 |\n"
                              "\n"
                              "## Totals\n"
                              "\n"
                              "| | |\n"
                              "|---|---|\n"
                              "| seed | cand 1: 2 GFLOP/s |\n"
                              "| best | cand 5: 8 GFLOP/s (island 1) |\n"
                              "| speedup | x4.00 |\n"
                              "| evaluations | 16 of 16: 13 ok, 2 wrong_result, 1 compile_error |\n"
                              "| commits | 6 |\n"
                              "| islands | 2 |\n"
                              "| wall | 45.97 s (budget 900 s) |\n"
                              "| GPU | 0 s |\n"
                              "| CPU | 45.21 s |\n"
                              "| energy | 0 J |\n"
                              "\n"
                              "## Islands\n"
                              "\n"
                              "| island | best | candidate | commits | evaluations | migrations |\n"
                              "|---:|---:|---:|---:|---:|---:|\n"
                              "| 0 | 8 | 5 | 4 | 9 | 1 |\n"
                              "| 1 | 8 | 5 | 2 | 7 | 0 |\n");
    free(text);
    json_decref(report_json);

    report_json = json_loads("{\"job\":null}", 0, &je);
    assert_int_equal(avoctl_report_print(report_json, 0, stdout), -EINVAL);
    assert_int_equal(avoctl_report_markdown(report_json, stdout), -EINVAL);
    json_decref(report_json);
}

/* A CUDA candidate as avo_candidate_json builds it: ptxas registers and
 * spills, CUPTI counters per kernel, NVML energy. */
static const char *const CANDIDATE =
    "{\"id\":42,\"job\":3,\"island\":1,\"parent\":40,\"parents\":[40,37],\"operator\":\"tune\","
    "\"committed\":true,\"outcome\":\"ok\",\"aggregate\":612.5,\"unit\":\"TFLOP/s\","
    "\"knobs\":{\"BM\":128,\"STAGES\":4},\"created_at\":\"2026-12-02T15:05:23.5+00:00\",\"notes\":null,"
    "\"worker\":{\"id\":2,\"host\":\"gpu1\",\"target\":\"sm_90a\",\"devices\":["
    "{\"kind\":\"cpu\",\"model\":\"Xeon\",\"cores\":16},{\"kind\":\"gpu\",\"index\":0,"
    "\"name\":\"NVIDIA H200\",\"arch\":\"sm_90\"}]},"
    "\"cost\":{\"cpu_s\":11.5,\"gpu_s\":3.25,\"energy_j\":812.5},\"energy_mj\":812500,"
    "\"compile\":{\"cached\":true,\"seconds\":0.002,\"log\":\"\",\"ptxas\":[{\"kernel\":\"gemm\","
    "\"registers\":168,\"spill_store_bytes\":0,\"spill_load_bytes\":8,\"smem_bytes\":98304}]},"
    "\"counters\":{\"available\":false,\"reason\":\"no PMU\",\"task_clock\":true},"
    "\"configs\":[{\"name\":\"4096\",\"score\":612.5,\"median_s\":0.000224,\"runs\":40,\"rse\":0.004,"
    "\"baseline\":{\"tflops\":500,\"vs_baseline\":1.225},"
    "\"counters\":{\"available\":true,\"source\":\"CUPTI\",\"kernels\":[{\"range\":\"0\",\"metrics\":{"
    "\"gpu__time_duration.sum\":224000,\"sm__throughput.avg.pct_of_peak_sustained_elapsed\":71.5,"
    "\"dram__throughput.avg.pct_of_peak_sustained_elapsed\":12.25}}]}}],"
    "\"diff\":\"--- a/candidate-40\\n+++ b/candidate-42\\n@@ -1 +1 @@\\n-#define STAGES 3\\n+#define STAGES 4\\n\","
    "\"source\":\"#define STAGES 4\\n__global__ void gemm() {}\"}";

static json_t *show_json;
static int show_source;

static int print_show(FILE *f)
{
    return avoctl_show_print(show_json, show_source, 0, f);
}

/* A retired best (sql/026): why, under its outcome. */
static void test_show_retired(void **state)
{
    (void)state;
    char *text = NULL;
    show_json = json_loads(CANDIDATE, 0, NULL);
    assert_non_null(show_json);
    show_source = 0;
    json_object_set_new(show_json, "retired", json_string("re-checked alone: wrong_result: config 4096: max abs 3"));
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "outcome      ok, committed\nretired      re-checked alone: wrong_result: config "
                                 "4096: max abs 3\naggregate"));
    free(text);
    json_decref(show_json);
    show_json = NULL;
}

static void test_show(void **state)
{
    (void)state;
    json_error_t je;
    char *text = NULL;
    show_json = json_loads(CANDIDATE, 0, &je);
    assert_non_null(show_json);

    show_source = 0;
    CAPTURE(text, print_show);
    assert_string_equal(text, "candidate    42 (job 3, island 1)\n"
                              "parent       40\n"
                              "derived from 40, 37\n"
                              "operator     tune\n"
                              "outcome      ok, committed\n"
                              "aggregate    612.5 TFLOP/s\n"
                              "knobs        BM=128 STAGES=4\n"
                              "worker       2 on gpu1 (sm_90a): Xeon, 16 cores; GPU 0 NVIDIA H200 (sm_90)\n"
                              "cost         CPU 11.5 s, GPU 3.25 s, energy 812.5 J\n"
                              "created      2026-12-02 15:05\n"
                              "\n"
                              "CONFIG  SCORE (TFLOP/s)  MEDIAN  RUNS   RSE  VS_BASELINE\n"
                              "4096              612.5  224 us    40  0.4%        x1.23\n"
                              "\n"
                              "compile      2 ms (cached)\n"
                              "ptxas        168 registers, spills 0 B stored / 8 B loaded, 98304 B smem: gemm\n"
                              "counters     CUPTI, per configuration and kernel (below)\n"
                              "energy       812.5 J (NVML, whole evaluation)\n"
                              "\n"
                              "CONFIG  RANGE    TIME   SM%  DRAM%\n"
                              "4096    0      224 us  71.5  12.25\n"
                              "\n"
                              "--- a/candidate-40\n"
                              "+++ b/candidate-42\n"
                              "@@ -1 +1 @@\n"
                              "-#define STAGES 3\n"
                              "+#define STAGES 4\n");
    free(text);

    /* --source: the source instead of the diff, newline-terminated. */
    show_source = 1;
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "\n\n#define STAGES 4\n__global__ void gemm() {}\n"));
    assert_null(strstr(text, "+++"));
    free(text);

    /* A CPU candidate: perf's availability, and only the measured
     * counters as columns. */
    json_t *cfg = json_array_get(json_object_get(show_json, "configs"), 0);
    json_object_set_new(cfg, "counters", json_pack("{s:n,s:n,s:f}", "ipc", "cycles", "task_clock_s", 0.0025));
    json_object_del(cfg, "baseline");
    show_source = 0;
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "\ncounters     not available (no PMU); task clock only\n"));
    assert_non_null(strstr(text, "\nCONFIG  TASK_CLOCK\n4096        2.5 ms\n"));
    assert_null(strstr(text, "VS_BASELINE"));
    free(text);

    /* Its latest profile task (issue 20, point 5): why and in which state,
     * then its result's counters in the same line and table. */
    json_t *prof = json_loads(
        "{\"id\":9,\"why\":\"new_best\",\"state\":\"done\",\"attempts\":2,\"config\":null,"
        "\"result\":{\"outcome\":\"ok\",\"detail\":\"1 configs profiled\",\"mode\":\"profile\","
        "\"counters\":{\"available\":true,\"events\":[\"cycles\"]},"
        "\"configs\":[{\"name\":\"4096\",\"calls\":2,\"counters\":{\"available\":true,\"ipc\":1.5,"
        "\"cycles\":2000,\"reason\":null}}]}}",
        0, NULL);
    assert_non_null(prof);
    json_object_set_new(show_json, "profile", prof);
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "\nprofile      9 (new_best, done, attempt 2), the configurations counters.configs "
                                 "lists\noutcome      ok: 1 configs profiled\ncounters     available\n"));
    assert_non_null(strstr(text, "\nCONFIG  IPC  CYCLES\n4096    1.5    2000\n"));
    free(text);
    /* Queued: no result yet, the task line alone. */
    json_object_set_new(prof, "state", json_string("queued"));
    json_object_set_new(prof, "config", json_string("4096"));
    json_object_set_new(prof, "result", json_null());
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "\nprofile      9 (new_best, queued, attempt 2), configuration 4096\n"));
    assert_null(strstr(text, "outcome      ok: 1"));
    free(text);
    json_object_del(show_json, "profile");

    /* A seed: no parent, no diff. */
    json_object_set_new(show_json, "parent", json_null());
    json_object_del(show_json, "diff");
    show_source = 0;
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "parent       - (a seed)\n"));
    assert_non_null(strstr(text, "a seed has no parent to diff against"));
    free(text);
    json_decref(show_json);
}

/* ---- AVO_HOME and routes ---------------------------------------------- */

/* Issue 20 point 8: a configuration timed over its rse target is marked
 * in show (with its figure, why it stopped, the host's load and clock
 * gap), lineage, report and the watch line; one within it is not. */
static void test_noise_marks(void **state)
{
    (void)state;
    json_error_t je;
    char *text = NULL;
    show_json = json_loads(
        "{\"id\":9,\"job\":2,\"parent\":null,\"operator\":\"seed\",\"outcome\":\"ok\",\"committed\":true,"
        "\"aggregate\":10,\"unit\":\"GFLOP/s\",\"noisy_configs\":1,\"configs\":["
        "{\"name\":\"128\",\"score\":9,\"median_s\":0.001,\"runs\":5,\"rse\":0.031,\"rse_target\":0.005,"
        "\"noisy\":true,\"stopped_by\":\"max_seconds\"},"
        "{\"name\":\"256\",\"score\":11,\"median_s\":0.002,\"runs\":9,\"rse\":0.004,\"rse_target\":0.005,"
        "\"noisy\":false,\"stopped_by\":\"rse\"}],"
        "\"load\":{\"load1_start\":1.5,\"load1_end\":2.25,\"cpus\":2},"
        "\"clock_gap\":{\"wall_s\":0.5,\"task_clock_s\":0.4,\"gap_s\":0.1,\"off_cpu_fraction\":0.2,\"note\":null}}",
        0, &je);
    assert_non_null(show_json);
    show_source = 0;
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "128                   9    1 ms     5  3.1% noisy\n"));
    assert_non_null(strstr(text, "256                  11    2 ms     9        0.4%\n"));
    assert_non_null(strstr(text, "noisy        1 of 2 configurations: 128 (noisy: rse 3.1% > 0.5%, stopped by "
                                 "max_seconds)\n"));
    assert_non_null(strstr(text, "host load    1.5 at start, 2.25 at end (1-minute average; 2 CPUs)\n"));
    assert_non_null(strstr(text, "off CPU      20.0% of the timed calls' 500 ms (task clock 400 ms)\n"));
    free(text);
    json_decref(show_json);
    /* No control group: the note, never a figure. */
    show_json = json_loads("{\"id\":9,\"clock_gap\":{\"wall_s\":null,\"note\":\"not measured: no control group\"}}", 0,
                           &je);
    CAPTURE(text, print_show);
    assert_non_null(strstr(text, "off CPU      not measured: no control group\n"));
    assert_null(strstr(text, "noisy"));
    free(text);
    json_decref(show_json);
    show_json = NULL;

    event_line("{\"kind\":\"candidate_evaluated\",\"data\":{\"candidate\":45,\"outcome\":\"ok\",\"aggregate\":9.81,"
               "\"noisy\":2}}",
               "GFLOP/s", "candidate_evaluated cand 45 ok 9.81 GFLOP/s (noisy: 2 configs)");
    event_line("{\"kind\":\"candidate_evaluated\",\"data\":{\"candidate\":45,\"outcome\":\"ok\",\"aggregate\":9.81,"
               "\"noisy\":0}}",
               "GFLOP/s", "candidate_evaluated cand 45 ok 9.81 GFLOP/s");

    lineage_json = json_loads("{\"job\":7,\"state\":\"running\",\"seed\":1,\"best\":2,\"candidates\":["
                              "{\"id\":1,\"parent\":null,\"committed\":true,\"outcome\":\"ok\",\"aggregate\":2.0,"
                              "\"noisy\":0},"
                              "{\"id\":2,\"parent\":1,\"committed\":true,\"outcome\":\"ok\",\"aggregate\":4.0,"
                              "\"noisy\":3}]}",
                              0, &je);
    lineage_all = 0;
    lineage_width = 0;
    CAPTURE(text, print_lineage);
    assert_non_null(strstr(text, "4 (noisy 3)"));
    assert_null(strstr(text, "2 (noisy"));
    free(text);
    json_decref(lineage_json);
    lineage_json = NULL;

    report_json = json_loads(
        "{\"job\":{\"id\":1,\"unit\":\"GFLOP/s\"},\"seed\":{\"id\":1,\"aggregate\":2,\"noisy_configs\":1},"
        "\"best\":{\"id\":2,\"aggregate\":4,\"noisy_configs\":0},\"configs\":["
        "{\"config\":\"128\",\"seed\":2,\"best\":4,\"speedup\":2,\"seed_rse\":0.031,\"best_rse\":0.002,"
        "\"rse_target\":0.005,\"seed_noisy\":true,\"best_noisy\":false}]}",
        0, &je);
    CAPTURE(text, print_report);
    assert_non_null(strstr(text, "2 noisy (rse 3.1%)"));
    assert_non_null(strstr(text, "noisy        seed 1 of 1, best none over the rse target 0.5%\n"));
    free(text);
    json_decref(report_json);
    report_json = NULL;
}

static void test_avo_home(void **state)
{
    (void)state;
    char out[4096];
    setenv("AVO_HOME", "/srv/avo", 1);
    assert_int_equal(avo_home_default(out, sizeof out), 0);
    assert_string_equal(out, "/srv/avo");
    assert_int_equal(avo_home_path(AVO_SOCKET_NAME, out, sizeof out), 0);
    assert_string_equal(out, "/srv/avo/avod.sock");
    assert_int_equal(avo_home_default(out, 4), -ENAMETOOLONG);

    setenv("AVO_HOME", "", 1); /* empty counts as unset */
    setenv("XDG_STATE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(avo_home_default(out, sizeof out), 0);
    if (geteuid() == 0) {
        assert_string_equal(out, "/var/lib/avo");
    } else {
        assert_string_equal(out, "/xdg/avo");
        unsetenv("XDG_STATE_HOME");
        assert_int_equal(avo_home_default(out, sizeof out), 0);
        assert_string_equal(out, "/home/u/.local/state/avo");
    }
    unsetenv("AVO_HOME");
}

static void test_route_path(void **state)
{
    (void)state;
    char p[128];
    assert_int_equal(avoctl_http_route_path(AVO_ROUTE_JOB_EVENTS, 7, "after=12", p, sizeof p), 0);
    assert_string_equal(p, "/v1/jobs/7/events?after=12");
    assert_int_equal(avoctl_http_route_path(AVO_ROUTE_JOB_LIST, 0, "", p, sizeof p), 0);
    assert_string_equal(p, "/v1/jobs");
    assert_int_equal(avoctl_http_route_path(AVO_ROUTE_JOB_CANCEL, 3, NULL, p, sizeof p), 0);
    assert_string_equal(p, "/v1/jobs/3/cancel");
    assert_int_equal(avoctl_http_route_path(AVO_ROUTE_JOB_CANCEL, 3, NULL, p, 8), -ENAMETOOLONG);
    /* What the client builds is what the daemon's matcher accepts. */
    int64_t id = 0;
    assert_int_equal(avoctl_http_route_path(AVO_ROUTE_JOB_BEST, 42, NULL, p, sizeof p), 0);
    assert_int_equal(avo_routes_match("GET", p, &id), AVO_ROUTE_JOB_BEST);
    assert_int_equal(id, 42);
    /* A problem's name keeps its slashes; anything odd is escaped. */
    assert_int_equal(avoctl_http_route_path_name(AVO_ROUTE_PROBLEM, "cpu/sgemm", p, sizeof p), 0);
    assert_string_equal(p, "/v1/problems/cpu/sgemm");
    assert_int_equal(avo_routes_match("GET", p, &id), AVO_ROUTE_PROBLEM);
    assert_int_equal(avoctl_http_route_path_name(AVO_ROUTE_PROBLEM, "a b?", p, sizeof p), 0);
    assert_string_equal(p, "/v1/problems/a%20b%3F");
    assert_int_equal(avoctl_http_route_path_name(AVO_ROUTE_PROBLEM, "cpu/sgemm", p, 16), -ENAMETOOLONG);
    /* The routes lineage, report, show and diff use. */
    assert_int_equal(avoctl_http_route_path(AVO_ROUTE_CANDIDATE_DIFF, 5, "to=10", p, sizeof p), 0);
    assert_string_equal(p, "/v1/candidates/5/diff?to=10");
    static const avo_route_id ids[] = {AVO_ROUTE_JOB_LINEAGE, AVO_ROUTE_JOB_REPORT, AVO_ROUTE_CANDIDATE,
                                       AVO_ROUTE_CANDIDATE_DIFF};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        assert_int_equal(avoctl_http_route_path(ids[i], 9, NULL, p, sizeof p), 0);
        assert_int_equal(avo_routes_match("GET", p, &id), ids[i]);
        assert_int_equal(id, 9);
    }
}

/* "Did you mean": Damerau-Levenshtein, a swap of neighbours costs one. */
static void test_suggest(void **state)
{
    (void)state;
    static const char *const cmds[] = {"submit", "status", "watch", "list", "lineage", "best"};
    assert_int_equal(avo_suggest_distance("sumbit", "submit"), 1);
    assert_int_equal(avo_suggest_distance("", "abc"), 3);
    assert_int_equal(avo_suggest_distance("kitten", "sitting"), 3);
    assert_string_equal(avo_suggest("sumbit", cmds, 6), "submit");
    assert_string_equal(avo_suggest("wacth", cmds, 6), "watch");
    assert_string_equal(avo_suggest("lst", cmds, 6), "list");
    assert_string_equal(avo_suggest("linea", cmds, 6), "lineage"); /* an abbreviation */
    assert_null(avo_suggest("frobnicate", cmds, 6));
    assert_null(avo_suggest("xy", cmds, 6));
    char *argv[] = {"avoctl", "--jsno", "list"};
    avoctl_globals g;
    char err[256];
    assert_int_equal(avoctl_args_globals(3, argv, &g, err, sizeof err), -EINVAL);
    assert_string_equal(err, "unknown global option '--jsno'; did you mean '--json'?");
}

static void test_plural_duration_eta(void **state)
{
    (void)state;
    char buf[64];
    avoctl_fmt_count(1, "evaluation", buf, sizeof buf);
    assert_string_equal(buf, "1 evaluation");
    avoctl_fmt_count(2, "evaluation", buf, sizeof buf);
    assert_string_equal(buf, "2 evaluations");
    avoctl_fmt_count(0, "island", buf, sizeof buf);
    assert_string_equal(buf, "0 islands");
    avoctl_fmt_duration(41.2, buf, sizeof buf);
    assert_string_equal(buf, "41 s");
    avoctl_fmt_duration(192, buf, sizeof buf);
    assert_string_equal(buf, "3 min 12 s");
    avoctl_fmt_duration(7500, buf, sizeof buf);
    assert_string_equal(buf, "2 h 05 min");
    double left;
    /* 4 of 16 in 60 s: 12 more at 15 s each */
    assert_int_equal(avoctl_fmt_eta_seconds(60, 4, 16, 0, &left), 0);
    assert_true(left > 179.9 && left < 180.1);
    /* a wall budget that ends first wins */
    assert_int_equal(avoctl_fmt_eta_seconds(60, 4, 16, 100, &left), 0);
    assert_true(left > 39.9 && left < 40.1);
    /* nothing done and no wall budget: no rate, no ETA */
    assert_int_equal(avoctl_fmt_eta_seconds(60, 0, 16, 0, &left), -1);
    avoctl_fmt_eta(60, 0, 16, 0, buf, sizeof buf);
    assert_string_equal(buf, "ETA unknown");
    avoctl_fmt_eta(60, 4, 16, 0, buf, sizeof buf);
    assert_string_equal(buf, "ETA 3 min 0 s");
}

/* A failed check zeroes a score: it must not read as "0 GFLOP/s". */
static void test_failed_score(void **state)
{
    (void)state;
    char buf[128];
    json_t *s = json_loads("{\"candidate\":3,\"aggregate\":0,\"outcome\":\"compile_error\"}", 0, NULL);
    avoctl_fmt_score(s, "GFLOP/s", buf, sizeof buf);
    assert_string_equal(buf, "failed (compile_error, cand 3)");
    json_decref(s);
    s = json_loads("{\"candidate\":3,\"aggregate\":9.5,\"outcome\":\"ok\"}", 0, NULL);
    avoctl_fmt_score(s, "GFLOP/s", buf, sizeof buf);
    assert_string_equal(buf, "9.5 GFLOP/s (cand 3)");
    json_decref(s);
    avoctl_fmt_color_set(1);
    assert_string_equal(avoctl_fmt_color_fail(), "\033[31m");
    avoctl_fmt_color_set(0);
    assert_string_equal(avoctl_fmt_color_fail(), "");
    assert_string_equal(avoctl_fmt_color_off(), "");
}

static void write_cfg(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_config(void **state)
{
    (void)state;
    char path[] = "/tmp/avo-test-config-XXXXXX", err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    avoctl_context c;
    write_cfg(path, "# mine\ncurrent = lab\n\n[context lab]\nsocket = /run/avo/avod.sock\n"
                    "[context prod]\nurl = http://gpu-head:7460\ntoken_file = /etc/avo/t\n");
    assert_int_equal(avoctl_config_load(path, NULL, &c, err, sizeof err), 1);
    assert_string_equal(c.name, "lab");
    assert_string_equal(c.socket, "/run/avo/avod.sock");
    assert_int_equal(avoctl_config_load(path, "prod", &c, err, sizeof err), 1);
    assert_string_equal(c.url, "http://gpu-head:7460");
    assert_string_equal(c.token_file, "/etc/avo/t");
    assert_int_equal(avoctl_config_load(path, "prd", &c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ": no context 'prd' (contexts: lab, prod); did you mean 'prod'?"));
    write_cfg(path, "[context lab]\nsocket = /s\nurl = http://x:1\n");
    assert_int_equal(avoctl_config_load(path, "lab", &c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ":3: context 'lab' has both url and socket"));
    write_cfg(path, "[context lab]\nsocket /s\n");
    assert_int_equal(avoctl_config_load(path, NULL, &c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ":2: expected KEY = VALUE"));
    write_cfg(path, "[contxt lab]\n");
    assert_int_equal(avoctl_config_load(path, NULL, &c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ":1: expected a section like [context NAME]"));
    write_cfg(path, "[context a]\nurl = http://x:1\n");
    assert_int_equal(avoctl_config_load(path, NULL, &c, err, sizeof err), 0); /* no current: none applies */
    unlink(path);
    assert_int_equal(avoctl_config_load(path, NULL, &c, err, sizeof err), 0); /* no file, none asked for */
    assert_int_equal(avoctl_config_load(path, "a", &c, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_whole),
        cmocka_unit_test(test_sse_split_everywhere),
        cmocka_unit_test(test_sse_crlf_split_between_chunks),
        cmocka_unit_test(test_sse_incomplete_event_waits),
        cmocka_unit_test(test_sse_rules),
        cmocka_unit_test(test_sse_stop_and_limit),
        cmocka_unit_test(test_globals),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_fmt_values),
        cmocka_unit_test(test_table_fit),
        cmocka_unit_test(test_fmt_events),
        cmocka_unit_test(test_fmt_events_islands),
        cmocka_unit_test(test_spec_from_flags),
        cmocka_unit_test(test_spec_evolution_flags),
        cmocka_unit_test(test_spec_seed_file),
        cmocka_unit_test(test_spec_merge_into_file),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_lineage_tree),
        cmocka_unit_test(test_lineage_edges),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_show_retired),
        cmocka_unit_test(test_noise_marks),
        cmocka_unit_test(test_avo_home),
        cmocka_unit_test(test_route_path),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_plural_duration_eta),
        cmocka_unit_test(test_failed_score),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
