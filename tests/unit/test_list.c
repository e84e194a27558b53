/* avo_list: order of push and append, idempotent removal, iteration that
 * removes the current node, and take (detach a whole list). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/common/avo_list.h"

typedef struct item {
    int v;
    avo_list link;
} item;

/* The values of the list, in order, as digits ("" when empty). */
static const char *values(const avo_list *head)
{
    static char buf[32];
    size_t n = 0;
    avo_list_each (node, head) {
        buf[n++] = (char)('0' + avo_list_entry(node, item, link)->v);
    }
    buf[n] = 0;
    return buf;
}

static void test_order(void **state)
{
    (void)state;
    avo_list head = AVO_LIST_INIT(head);
    item it[4] = {{.v = 1}, {.v = 2}, {.v = 3}, {.v = 4}};
    assert_true(avo_list_empty(&head));
    assert_null(avo_list_first(&head));
    avo_list_append(&head, &it[0].link);
    avo_list_append(&head, &it[1].link);
    avo_list_push(&head, &it[2].link);
    avo_list_append(&head, &it[3].link);
    assert_string_equal(values(&head), "3124");
    assert_ptr_equal(avo_list_first(&head), &it[2].link);
    assert_false(avo_list_empty(&head));
}

static void test_remove(void **state)
{
    (void)state;
    avo_list head;
    avo_list_init(&head);
    item it[3] = {{.v = 1}, {.v = 2}, {.v = 3}};
    /* a zeroed node is on no list: removing it changes nothing */
    assert_false(avo_list_linked(&it[0].link));
    avo_list_remove(&it[0].link);
    for (int i = 0; i < 3; i++)
        avo_list_append(&head, &it[i].link);
    assert_true(avo_list_linked(&it[1].link));
    avo_list_remove(&it[1].link);
    assert_false(avo_list_linked(&it[1].link));
    avo_list_remove(&it[1].link); /* twice: harmless */
    assert_string_equal(values(&head), "13");
    avo_list_remove(&it[0].link);
    avo_list_remove(&it[2].link);
    assert_true(avo_list_empty(&head));
    /* a head never initialised reads as empty (a close after a failed setup) */
    avo_list zero;
    memset(&zero, 0, sizeof zero);
    assert_true(avo_list_empty(&zero));
    assert_null(avo_list_first(&zero));
}

static void test_each_removes(void **state)
{
    (void)state;
    avo_list head = AVO_LIST_INIT(head);
    item it[5];
    for (int i = 0; i < 5; i++) {
        it[i] = (item){.v = i};
        avo_list_append(&head, &it[i].link);
    }
    /* the body removes the current node: the walk goes on to the next */
    int seen = 0;
    avo_list_each (node, &head) {
        item *x = avo_list_entry(node, item, link);
        seen++;
        if (x->v % 2 == 0)
            avo_list_remove(node);
    }
    assert_int_equal(seen, 5);
    assert_string_equal(values(&head), "13");
}

static void test_take(void **state)
{
    (void)state;
    avo_list head = AVO_LIST_INIT(head), detached;
    item it[3] = {{.v = 7}, {.v = 8}, {.v = 9}};
    avo_list_take(&detached, &head);
    assert_true(avo_list_empty(&detached));
    for (int i = 0; i < 3; i++)
        avo_list_append(&head, &it[i].link);
    avo_list_take(&detached, &head);
    assert_true(avo_list_empty(&head));
    assert_string_equal(values(&detached), "789");
    /* what is added to the source afterwards stays there */
    item late = {.v = 5};
    avo_list_append(&head, &late.link);
    assert_string_equal(values(&head), "5");
    assert_string_equal(values(&detached), "789");
    avo_list_remove(&it[0].link);
    assert_string_equal(values(&detached), "89");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_each_removes),
        cmocka_unit_test(test_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
