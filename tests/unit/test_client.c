/* Unit tests for avoctl's modules: SSE parsing, argument parsing, tables and
 * event lines, job spec building, AVO_HOME resolution and route paths. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "avo_home.h"
#include "client/args.h"
#include "client/format.h"
#include "client/http.h"
#include "client/spec.h"
#include "client/sse.h"

/* ---- SSE -------------------------------------------------------------- */

typedef struct {
    int n;
    char id[8][32];
    char event[8][32];
    char data[8][256];
    int stop_after;      /* return 1 from the callback after this many events */
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

static const char *const STREAM =
    "id: 1\nevent: job_started\ndata: {\"id\":1,\"kind\":\"job_started\"}\n\n"
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
    assert_int_equal(avoctl_globals_parse(7, v1, &g, err, sizeof err), 4);
    assert_true(g.json);
    assert_string_equal(g.socket, "/tmp/s");

    char *v2[] = {"avoctl", "--socket=/x", "-h"};
    assert_int_equal(avoctl_globals_parse(3, v2, &g, err, sizeof err), 3);
    assert_string_equal(g.socket, "/x");
    assert_true(g.help);
    assert_false(g.json);

    char *v3[] = {"avoctl", "--socket"};
    assert_int_equal(avoctl_globals_parse(2, v3, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--socket"));

    char *v4[] = {"avoctl", "--jsn", "list"};
    assert_int_equal(avoctl_globals_parse(3, v4, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "'--jsn'"));

    char *v5[] = {"avoctl", "--version"};
    assert_int_equal(avoctl_globals_parse(2, v5, &g, err, sizeof err), 2);
    assert_true(g.version);
}

static const avoctl_opt opts[] = {
    {"problem", 0, 1, "P", ""},
    {"priority", 0, 1, "N", ""},
    {"watch", 'w', 0, NULL, ""},
    {"output", 'o', 1, "FILE", ""},
    {NULL, 0, 0, NULL, NULL},
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
    assert_string_equal(err, "unknown option '--problme'");

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
    assert_int_equal(avoctl_parse_i64("JOB", "42", 1, INT64_MAX, &i, err, sizeof err), 0);
    assert_int_equal(i, 42);
    assert_int_equal(avoctl_parse_i64("JOB", "0", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_string_equal(err, "JOB: expected an integer >= 1, got '0'");
    assert_int_equal(avoctl_parse_i64("JOB", "7x", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_parse_i64("JOB", "", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_parse_i64("JOB", "99999999999999999999", 1, INT64_MAX, &i, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_parse_double("--epsilon", "0.05", 0, 1, &d, err, sizeof err), 0);
    assert_true(d == 0.05);
    assert_int_equal(avoctl_parse_double("--epsilon", "2", 0, 1, &d, err, sizeof err), -EINVAL);
    assert_int_equal(avoctl_parse_double("--epsilon", "nan", 0, 1, &d, err, sizeof err), -EINVAL);
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
    assert_string_equal(text,
                        "ID  STATE        BEST\n"
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
    event_line("{\"kind\":\"new_best\",\"data\":{\"candidate\":45,\"aggregate\":9.81,\"speedup\":3.1}}",
               NULL, "new best 9.81 (x3.10 over seed), cand 45");
    event_line("{\"kind\":\"job_finished\",\"job\":7,\"data\":{\"state\":\"succeeded\",\"reason\":"
               "\"budget exhausted\",\"best\":{\"candidate\":55,\"aggregate\":9.8},\"seed\":"
               "{\"candidate\":41,\"aggregate\":3.1},\"speedup\":3.16}}",
               "GFLOP/s",
               "job 7 finished: succeeded (budget exhausted); best 9.8 GFLOP/s (cand 55) vs seed "
               "3.1 GFLOP/s (cand 41); speedup x3.16");
    event_line("{\"kind\":\"job_finished\",\"job\":8,\"data\":{\"state\":\"failed\",\"reason\":null,"
               "\"best\":null,\"seed\":null,\"speedup\":null}}",
               NULL, "job 8 finished: failed; best - vs seed -; speedup -");
    event_line("{\"kind\":\"job_started\",\"job\":7,\"data\":{}}", NULL, "job 7 started");
    event_line("{\"kind\":\"migrated\",\"data\":{\"from\":1}}", NULL, "migrated {\"from\":1}");
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
    avoctl_spec_flags f = {.problem = "cpu/sgemm", .operator_name = "tune", .evaluations = "30",
                           .islands = "2", .wall = "600", .epsilon = "0.05", .priority = "-1"};
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

/* ---- AVO_HOME and routes ---------------------------------------------- */

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
    assert_int_equal(avoctl_route_path(AVO_ROUTE_JOB_EVENTS, 7, "after=12", p, sizeof p), 0);
    assert_string_equal(p, "/v1/jobs/7/events?after=12");
    assert_int_equal(avoctl_route_path(AVO_ROUTE_JOB_LIST, 0, "", p, sizeof p), 0);
    assert_string_equal(p, "/v1/jobs");
    assert_int_equal(avoctl_route_path(AVO_ROUTE_JOB_CANCEL, 3, NULL, p, sizeof p), 0);
    assert_string_equal(p, "/v1/jobs/3/cancel");
    assert_int_equal(avoctl_route_path(AVO_ROUTE_JOB_CANCEL, 3, NULL, p, 8), -ENAMETOOLONG);
    /* What the client builds is what the daemon's matcher accepts. */
    int64_t id = 0;
    assert_int_equal(avoctl_route_path(AVO_ROUTE_JOB_BEST, 42, NULL, p, sizeof p), 0);
    assert_int_equal(avo_route_match("GET", p, &id), AVO_ROUTE_JOB_BEST);
    assert_int_equal(id, 42);
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
        cmocka_unit_test(test_fmt_events),
        cmocka_unit_test(test_spec_from_flags),
        cmocka_unit_test(test_spec_merge_into_file),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_avo_home),
        cmocka_unit_test(test_route_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
