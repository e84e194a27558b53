/* The jobs of a worker's latest claims (daemon/worker/recentjobs.c), whose
 * work its next claims prefer: most recent first, a job claimed again moves
 * to the front, at most --serve-slots kept (the least recent dropped), none
 * with --serve off, one idle longer than a kept checker lives dropped; the
 * array literal PostgreSQL is given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/worker/recentjobs.h"

static const char *list(avo_recentjobs *r, double now, double idle)
{
    static char out[AVO_SERVED_SLOTS_MAX * 24 + 4];
    avo_recentjobs_array(r, now, idle, out, sizeof out);
    return out;
}

static void most_recent_first(void **state)
{
    (void)state;
    avo_recentjobs r = {0};
    assert_string_equal(list(&r, 0, 120), "{}");
    avo_recentjobs_note(&r, 7, 3, 1);
    avo_recentjobs_note(&r, 8, 3, 2);
    avo_recentjobs_note(&r, 9, 3, 3);
    assert_string_equal(list(&r, 4, 120), "{9,8,7}");
    /* Claimed again: to the front, not listed twice. */
    avo_recentjobs_note(&r, 7, 3, 5);
    assert_string_equal(list(&r, 6, 120), "{7,9,8}");
    avo_recentjobs_note(&r, 7, 3, 6);
    assert_string_equal(list(&r, 6, 120), "{7,9,8}");
}

static void cap_drops_least_recent(void **state)
{
    (void)state;
    avo_recentjobs r = {0};
    avo_recentjobs_note(&r, 1, 2, 1);
    avo_recentjobs_note(&r, 2, 2, 2);
    avo_recentjobs_note(&r, 3, 2, 3);
    assert_string_equal(list(&r, 4, 120), "{3,2}");
    /* --serve off (cap 0): nothing kept, and what was is let go. */
    avo_recentjobs_note(&r, 4, 0, 5);
    assert_string_equal(list(&r, 6, 120), "{}");
    /* A cap over the pool's maximum is the maximum. */
    avo_recentjobs s = {0};
    for (int j = 0; j < AVO_SERVED_SLOTS_MAX + 5; j++)
        avo_recentjobs_note(&s, 100 + j, 1000, j);
    assert_int_equal(s.n, AVO_SERVED_SLOTS_MAX);
    assert_int_equal(s.e[0].job, 100 + AVO_SERVED_SLOTS_MAX + 4);
    assert_int_equal(s.e[AVO_SERVED_SLOTS_MAX - 1].job, 105);
}

static void idle_ones_dropped(void **state)
{
    (void)state;
    avo_recentjobs r = {0};
    avo_recentjobs_note(&r, 1, 4, 0);
    avo_recentjobs_note(&r, 2, 4, 100);
    avo_recentjobs_note(&r, 3, 4, 200);
    /* At 230 with idle 120: job 1 (230 s idle) and 2 (130 s) are gone. */
    assert_string_equal(list(&r, 230, 120), "{3}");
    assert_int_equal(r.n, 1);
    /* Gone for good: claimed again later, it is the most recent. */
    avo_recentjobs_note(&r, 1, 4, 240);
    assert_string_equal(list(&r, 241, 120), "{1,3}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(most_recent_first),
        cmocka_unit_test(cap_drops_least_recent),
        cmocka_unit_test(idle_ones_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
