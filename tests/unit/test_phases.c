/* The phase table behind the result's "phases": phases exist from their
 * first use and add up, laps chain without gaps or overlaps, merging adds
 * by name, a full table drops new names rather than writing past its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/common/avo_phases.h"

static void test_add_and_json(void **state)
{
    (void)state;
    avo_phases ph = {0};
    avo_phases_add(&ph, "compile", 0.25);
    avo_phases_add(&ph, "calls", 1.0);
    char same[] = "compile"; /* another pointer, the same name */
    avo_phases_add(&ph, same, 0.5);
    assert_int_equal(ph.n, 2);
    assert_true(avo_phases_sum(&ph) == 1.75);
    json_t *j = avo_phases_json(&ph);
    assert_non_null(j);
    assert_int_equal(json_object_size(j), 2);
    assert_true(json_real_value(json_object_get(j, "compile")) == 0.75);
    assert_true(json_real_value(json_object_get(j, "calls")) == 1.0);
    assert_null(json_object_get(j, "baseline")); /* never happened: not reported */
    json_decref(j);
}

static void test_lap_chains(void **state)
{
    (void)state;
    avo_phases ph = {0};
    const double t0 = avo_phases_now();
    double t = t0;
    avo_phases_lap(&ph, "a", &t);
    for (volatile int i = 0; i < 100000; i++)
        ;
    avo_phases_lap(&ph, "b", &t);
    avo_phases_lap(&ph, "a", &t);
    assert_true(t >= t0);
    assert_true(ph.s[0] >= 0 && ph.s[1] > 0);
    /* Consecutive laps cover exactly the stretch from t0 to the last. */
    assert_true(avo_phases_sum(&ph) - (t - t0) < 1e-12 && (t - t0) - avo_phases_sum(&ph) < 1e-12);
}

static void test_merge_and_full(void **state)
{
    (void)state;
    avo_phases a = {0}, b = {0};
    avo_phases_add(&a, "inputs", 1);
    avo_phases_add(&b, "inputs", 2);
    avo_phases_add(&b, "checks", 3);
    avo_phases_merge(&a, &b);
    assert_int_equal(a.n, 2);
    assert_true(a.s[0] == 3 && a.s[1] == 3);
    static char names[AVO_PHASES_MAX + 3][8];
    avo_phases f = {0};
    for (int i = 0; i < AVO_PHASES_MAX + 3; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        avo_phases_add(&f, names[i], 1);
    }
    assert_int_equal(f.n, AVO_PHASES_MAX);
    avo_phases_add(&f, "p0", 1); /* a known name still adds */
    assert_true(f.s[0] == 2);
    assert_true(avo_phases_sum(&f) == AVO_PHASES_MAX + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_and_json),
        cmocka_unit_test(test_lap_chains),
        cmocka_unit_test(test_merge_and_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
