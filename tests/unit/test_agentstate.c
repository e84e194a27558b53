/* The agent step's one state (daemon/avod/agent_internal.h): every move the
 * documented table allows succeeds, every other is refused and leaves the
 * state as it was, and a callback in a state it does not allow is refused
 * (logged, not a crash) while what it brought back is still settled. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/agent_internal.h"

/* The transitions as agent_internal.h's comment writes them down. */
static int allowed(agent_state from, agent_state to)
{
    switch (from) {
    case AGENT_STARTING:
        return to == AGENT_SUPERVISING || to == AGENT_TURN || to == AGENT_ENDED;
    case AGENT_SUPERVISING:
        return to == AGENT_TURN || to == AGENT_ENDED;
    case AGENT_TURN:
        return to == AGENT_TOOLS || to == AGENT_COMPACTING || to == AGENT_TURN || to == AGENT_ENDED;
    case AGENT_COMPACTING:
        return to == AGENT_TOOLS || to == AGENT_TURN || to == AGENT_ENDED;
    case AGENT_TOOLS:
        return to == AGENT_TURN || to == AGENT_ENDED;
    default:
        return 0;
    }
}

static void test_moves(void **state)
{
    (void)state;
    int refused = 0;
    for (int from = 0; from < AGENT_NSTATES; from++)
        for (int to = 0; to < AGENT_NSTATES; to++) {
            step s;
            memset(&s, 0, sizeof s);
            s.state = (agent_state)from;
            const int rc = agent_move(&s, (agent_state)to, "test_moves");
            if (allowed((agent_state)from, (agent_state)to)) {
                if (rc != 0 || s.state != (agent_state)to)
                    fail_msg("%s -> %s: refused (%d)", agent_state_name(from), agent_state_name(to), rc);
            } else {
                if (rc != -EPROTO || s.state != (agent_state)from)
                    fail_msg("%s -> %s: allowed (%d)", agent_state_name(from), agent_state_name(to), rc);
                refused++;
            }
        }
    assert_true(refused > 0);
    /* nothing leaves ENDED */
    step s;
    memset(&s, 0, sizeof s);
    s.state = AGENT_ENDED;
    assert_int_equal(agent_move(&s, AGENT_TURN, "test_moves"), -EPROTO);
    assert_int_equal(s.state, AGENT_ENDED);
    assert_string_equal(agent_state_name((agent_state)99), "invalid");
}

static void test_expect(void **state)
{
    (void)state;
    step s;
    memset(&s, 0, sizeof s);
    s.state = AGENT_TURN;
    assert_int_equal(agent_expect(&s, AGENT_IN(AGENT_TURN), "t"), 1);
    /* a tool's callback while a provider call is out: refused */
    assert_int_equal(agent_expect(&s, AGENT_IN(AGENT_TOOLS), "t"), 0);
    assert_int_equal(s.state, AGENT_TURN);
    /* a late arrival after the end: stop, silently or not, never go on */
    s.state = AGENT_ENDED;
    assert_int_equal(agent_expect(&s, AGENT_IN(AGENT_TOOLS) | AGENT_IN(AGENT_ENDED), "t"), 0);
    assert_int_equal(agent_expect(&s, AGENT_IN(AGENT_TOOLS), "t"), 0);
    s.state = (agent_state)42;
    assert_int_equal(agent_expect(&s, ~0u, "t"), 0);
}

static void test_arrive(void **state)
{
    (void)state;
    avo_agent *a = calloc(1, sizeof *a);
    step *s = calloc(1, sizeof *s);
    assert_non_null(a);
    assert_non_null(s);
    s->a = a;
    avo_list_init(&a->steps);
    avo_list_push(&a->steps, &s->link);
    s->state = AGENT_TOOLS;
    s->pending = 3;
    assert_int_equal(agent_arrive(s, AGENT_IN(AGENT_TOOLS), "t"), 1);
    assert_int_equal(s->pending, 2);
    /* refused, but what came back is settled */
    assert_int_equal(agent_arrive(s, AGENT_IN(AGENT_STARTING), "t"), 0);
    assert_int_equal(s->pending, 1);
    assert_ptr_equal(avo_list_first(&a->steps), &s->link);
    /* the last arrival of an ended step frees it */
    s->state = AGENT_ENDED;
    assert_int_equal(agent_arrive(s, AGENT_IN(AGENT_TOOLS), "t"), 0);
    assert_true(avo_list_empty(&a->steps));
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moves),
        cmocka_unit_test(test_expect),
        cmocka_unit_test(test_arrive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
