/* Unit tests for daemon/avod/ident.c: the permission rules (owner, team,
 * admin, jobs without owner), read access, token teams against the
 * configured teams, and principals from token attributes and unix peers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/avod/ident.h"

static avo_principal principal(const char *name, const char *team, int admin)
{
    avo_principal p = {.via = "token", .admin = admin};
    snprintf(p.name, sizeof p.name, "%s", name);
    snprintf(p.team, sizeof p.team, "%s", team);
    return p;
}

static void test_change_rules(void **state)
{
    (void)state;
    char rule[512];
    avo_principal alice = principal("alice", "ml", 0), bob = principal("bob", "ml", 0),
                  carol = principal("carol", "infra", 0), ops = principal("ops", "", 1),
                  nobody = principal("anonymous", "", 0);
    assert_int_equal(avo_ident_may_change(&alice, "alice", "ml", rule, sizeof rule), 1);
    assert_string_equal(rule, "owner");
    assert_int_equal(avo_ident_may_change(&bob, "alice", "ml", rule, sizeof rule), 1);
    assert_string_equal(rule, "team");
    assert_int_equal(avo_ident_may_change(&ops, "alice", "ml", rule, sizeof rule), 1);
    assert_string_equal(rule, "admin");
    assert_int_equal(avo_ident_may_change(&carol, NULL, NULL, rule, sizeof rule), 1);
    assert_string_equal(rule, "unowned");
    assert_int_equal(avo_ident_may_change(&carol, "alice", "ml", rule, sizeof rule), 0);
    assert_non_null(strstr(rule, "allowed to its owner (alice), members of its team (ml) and admins; you are carol "
                                 "(team infra)"));
    /* no team is not a team: two principals without one are not teammates */
    assert_int_equal(avo_ident_may_change(&nobody, "tom", NULL, rule, sizeof rule), 0);
    assert_non_null(strstr(rule, "members of its team (none)"));
    assert_int_equal(avo_ident_may_change(&nobody, "tom", "", rule, sizeof rule), 0);
}

static void test_read_access(void **state)
{
    (void)state;
    char rule[512], err[256];
    avo_ident *all = NULL, *team = NULL;
    avo_principal carol = principal("carol", "infra", 0), bob = principal("bob", "ml", 0);
    assert_int_equal(avo_ident_new(&all, "ml,infra", "", "all", err, sizeof err), 0);
    assert_int_equal(avo_ident_new(&team, "ml, infra", NULL, "team", err, sizeof err), 0);
    assert_int_equal(avo_ident_read_all(all), 1);
    assert_int_equal(avo_ident_read_all(team), 0);
    assert_int_equal(avo_ident_may_read(all, &carol, "alice", "ml", rule, sizeof rule), 1);
    assert_int_equal(avo_ident_may_read(team, &carol, "alice", "ml", rule, sizeof rule), 0);
    assert_non_null(strstr(rule, "read-access=team"));
    assert_int_equal(avo_ident_may_read(team, &bob, "alice", "ml", rule, sizeof rule), 1);
    avo_ident_free(all);
    avo_ident_free(team);
}

static void test_bad_settings(void **state)
{
    (void)state;
    char err[256];
    avo_ident *id = NULL;
    assert_int_equal(avo_ident_new(&id, "ml,ml", "", "all", err, sizeof err), -22);
    assert_non_null(strstr(err, "teams: 'ml' is named twice"));
    assert_int_equal(avo_ident_new(&id, "ml,a/b", "", "all", err, sizeof err), -22);
    assert_non_null(strstr(err, "teams: 'a/b' is not a team name"));
    assert_int_equal(avo_ident_new(&id, "ml", "no-such-group-avo-test", "all", err, sizeof err), -22);
    assert_non_null(strstr(err, "admin-group: there is no unix group 'no-such-group-avo-test'"));
    assert_int_equal(avo_ident_new(&id, "ml", "", "some", err, sizeof err), -22);
    assert_non_null(strstr(err, "read-access: 'some' is not one of all, team"));
}

static void test_token_teams(void **state)
{
    (void)state;
    char err[512];
    avo_ident *id = NULL;
    avo_token t[2] = {{.line = 2}, {.line = 5}};
    snprintf(t[0].team, sizeof t[0].team, "ml");
    snprintf(t[1].team, sizeof t[1].team, "mll");
    assert_int_equal(avo_ident_new(&id, "ml,infra", "", "all", err, sizeof err), 0);
    assert_int_equal(avo_ident_check_tokens(id, t, 1, "/etc/avo/tokens", err, sizeof err), 0);
    assert_int_equal(avo_ident_check_tokens(id, t, 2, "/etc/avo/tokens", err, sizeof err), -22);
    assert_non_null(strstr(err, "token file /etc/avo/tokens line 5: unknown team 'mll' (avod's teams: ml, infra)"));
    avo_ident_free(id);
}

static void test_resolve(void **state)
{
    (void)state;
    char err[256];
    avo_ident *id = NULL;
    avo_principal p;
    assert_int_equal(avo_ident_new(&id, "ml", "", "all", err, sizeof err), 0);
    avo_peer tcp = {.tcp = 1, .admin = 1};
    snprintf(tcp.principal, sizeof tcp.principal, "ops");
    avo_ident_resolve(id, &tcp, &p);
    assert_string_equal(p.name, "ops");
    assert_string_equal(p.via, "token");
    assert_int_equal(p.admin, 1);
    avo_peer bare = {.tcp = 1};
    avo_ident_resolve(id, &bare, &p);
    assert_string_equal(p.name, "anonymous");
    assert_string_equal(p.team, "");
    assert_int_equal(p.admin, 0);
    /* avod's own user is an admin (it could stop avod anyway) */
    avo_peer self = {.have_cred = 1, .uid = geteuid(), .gid = getegid()};
    avo_ident_resolve(id, &self, &p);
    assert_string_equal(p.via, "unix");
    assert_int_equal(p.admin, 1);
    avo_peer unknown = {0};
    avo_ident_resolve(id, &unknown, &p);
    assert_string_equal(p.name, "unknown");
    assert_int_equal(p.admin, 0);
    avo_ident_free(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_change_rules), cmocka_unit_test(test_read_access), cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_token_teams),  cmocka_unit_test(test_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
