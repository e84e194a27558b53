/* UTF-8 hygiene for untrusted text: scrub invalid bytes, cut without
 * splitting a character. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/common/avo_utf8.h"

static void test_scrub(void **state)
{
    (void)state;
    char ok[] = "plain → ×2 — ≥ 😀";
    assert_int_equal(avo_utf8_scrub(ok), 0);
    assert_string_equal(ok, "plain → ×2 — ≥ 😀");
    char bad[] = "a\xff"
                 "b\xc3"
                 "c\xe2\x82"
                 "d\xc0\xaf"
                 "e\xed\xa0\x80"
                 "f";
    assert_int_equal(avo_utf8_scrub(bad), 1 + 1 + 2 + 2 + 3);
    assert_string_equal(bad, "a?b?c??d??e???f");
}

static void test_cut(void **state)
{
    (void)state;
    const char *s = "ab→cd"; /* → is 3 bytes: 2..4 */
    assert_int_equal(avo_utf8_cut(s, 2), 2);
    assert_int_equal(avo_utf8_cut(s, 3), 2); /* would split → */
    assert_int_equal(avo_utf8_cut(s, 4), 2);
    assert_int_equal(avo_utf8_cut(s, 5), 5);
    assert_int_equal(avo_utf8_cut(s, 100), strlen(s));
    assert_int_equal(avo_utf8_cut("😀", 3), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scrub),
        cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
