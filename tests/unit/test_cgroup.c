/* avo_cgroup on the host it runs on: a group is created beside ours, a
 * child process joins it, freezing stops its CPU use (and a process it
 * forked after setsid, which a SIGSTOP of the child would not), thawing
 * lets it run, a kill ends all of them and destroy leaves no directory;
 * a sweep removes the groups of a process that is gone.
 * Where the host gives this process no writable group (not root, no
 * delegation) the tests say so and pass: the harness then reports the
 * fallback, which test_hostile.sh exercises. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "avo_cgroup.h"

/* Every group a test made, destroyed by the teardown even when an
 * assertion failed half-way (its spinning processes must not outlive it). */
static avo_cgroup *made[4];

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        if (made[i]) {
            avo_cgroup_destroy(made[i]);
            made[i] = NULL;
        }
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    unsetenv("AVO_CGROUP");
    return 0;
}

static void track(avo_cgroup *cg)
{
    for (int i = 0; i < 4; i++)
        if (!made[i]) {
            made[i] = cg;
            return;
        }
}

/* A child that joins cg and spins, with a grandchild that leaves its
 * session and spins too. */
static pid_t spinner(const avo_cgroup *cg)
{
    pid_t p = fork();
    if (p == 0) {
        if (avo_cgroup_join(cg) != 0)
            _exit(3);
        if (fork() == 0) {
            setsid();
            for (;;)
                ;
        }
        for (;;)
            ;
    }
    return p;
}

static int have_groups(void)
{
    static avo_cgroup cg;
    char why[300];
    if (avo_cgroup_create(&cg, "avo-test-probe", 0, why, sizeof why) != 0) {
        print_message("# no control group here (%s): checked the fallback's report only\n", why);
        return 0;
    }
    avo_cgroup_destroy(&cg);
    return 1;
}

static void test_freeze_counts_and_kills_a_tree(void **state)
{
    (void)state;
    if (!have_groups())
        return;
    static avo_cgroup cg;
    char why[300];
    char name[64];
    snprintf(name, sizeof name, "avo-test-%d", (int)getpid());
    assert_int_equal(avo_cgroup_create(&cg, name, 64, why, sizeof why), 0);
    track(&cg);
    assert_true(cg.freezer >= 0);
    char path[1100];
    snprintf(path, sizeof path, "%s", cg.path[cg.freezer]);
    pid_t p = spinner(&cg);
    assert_true(p > 0);
    /* Both processes arrive in the group. */
    for (int i = 0; i < 200 && avo_cgroup_nprocs(&cg) < 2; i++)
        usleep(5000);
    assert_int_equal(avo_cgroup_nprocs(&cg), 2);
    usleep(50000);
    assert_int_equal(avo_cgroup_freeze(&cg, 1, 2.0), 0);
    double c1 = avo_cgroup_cpu_s(&cg);
    usleep(100000);
    double c2 = avo_cgroup_cpu_s(&cg);
    if (c1 >= 0) {
        /* Frozen: not a microsecond more, though two processes were spinning. */
        assert_true(c2 == c1);
        assert_int_equal(avo_cgroup_freeze(&cg, 0, 0), 0);
        usleep(100000);
        double c3 = avo_cgroup_cpu_s(&cg);
        assert_true(c3 - c2 > 0.02);
    } else {
        assert_int_equal(avo_cgroup_freeze(&cg, 0, 0), 0);
    }
    avo_cgroup_kill(&cg);
    int st = 0;
    assert_int_equal(waitpid(p, &st, 0), p);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    avo_cgroup_destroy(&cg);
    struct stat sb;
    assert_int_equal(stat(path, &sb), -1);
    assert_int_equal(errno, ENOENT);
}

/* A child group (the runner's inside the evaluation's) freezes on its own:
 * the parent's members keep running; destroying the parent removes both. */
static void test_child_group(void **state)
{
    (void)state;
    if (!have_groups())
        return;
    static avo_cgroup cg, child;
    char why[300];
    assert_int_equal(avo_cgroup_create(&cg, "avo-test-parent", 0, why, sizeof why), 0);
    track(&cg);
    assert_int_equal(avo_cgroup_create_child(&cg, "runner", &child, why, sizeof why), 0);
    track(&child);
    char cpath[1100];
    snprintf(cpath, sizeof cpath, "%s", child.path[child.freezer]);
    pid_t inner = spinner(&child), outer = spinner(&cg);
    for (int i = 0; i < 200 && (avo_cgroup_nprocs(&child) < 2 || avo_cgroup_nprocs(&cg) < 2); i++)
        usleep(5000);
    assert_int_equal(avo_cgroup_freeze(&child, 1, 2.0), 0);
    double a1 = avo_cgroup_cpu_s(&child), b1 = avo_cgroup_cpu_s(&cg);
    usleep(100000);
    double a2 = avo_cgroup_cpu_s(&child), b2 = avo_cgroup_cpu_s(&cg);
    if (a1 >= 0) {
        assert_true(a2 == a1);
        assert_true(b2 - b1 > 0.02); /* the parent's own members ran */
    }
    /* Destroying the parent alone (as the worker does after a killed
     * harness) kills and removes the child group too. */
    avo_cgroup_destroy(&cg);
    waitpid(inner, NULL, 0);
    waitpid(outer, NULL, 0);
    struct stat sb;
    assert_int_equal(stat(cpath, &sb), -1);
    /* The child's descriptors still open: closing them is harmless. */
    avo_cgroup_destroy(&child);
}

static void test_turned_off(void **state)
{
    (void)state;
    setenv("AVO_CGROUP", "none", 1);
    static avo_cgroup cg;
    char why[300] = "";
    assert_int_equal(avo_cgroup_create(&cg, "avo-test-off", 0, why, sizeof why), -ENOTSUP);
    assert_non_null(strstr(why, "AVO_CGROUP=none"));
    assert_int_equal(cg.freezer, -1);
    assert_int_equal(avo_cgroup_freeze(&cg, 1, 0.1), -ENOTSUP);
    avo_cgroup_destroy(&cg);
    unsetenv("AVO_CGROUP");
}

/* The v1 freezer where the host mounts one (the build machines do, beside
 * the unified hierarchy): same behaviour through freezer.state. */
static void test_v1_freezer(void **state)
{
    (void)state;
    setenv("AVO_CGROUP", "v1", 1);
    static avo_cgroup cg;
    char why[300];
    int rc = avo_cgroup_create(&cg, "avo-test-v1", 0, why, sizeof why);
    if (rc == 0)
        track(&cg);
    if (rc != 0 || cg.freezer != AVO_CG_FREEZER) {
        print_message("# no v1 freezer here: %s\n", why);
        avo_cgroup_destroy(&cg);
        unsetenv("AVO_CGROUP");
        return;
    }
    assert_string_equal(avo_cgroup_freezer_name(&cg), "cgroup1");
    pid_t p = spinner(&cg);
    for (int i = 0; i < 200 && avo_cgroup_nprocs(&cg) < 2; i++)
        usleep(5000);
    assert_int_equal(avo_cgroup_freeze(&cg, 1, 2.0), 0);
    double c1 = avo_cgroup_cpu_s(&cg);
    usleep(50000);
    if (c1 >= 0)
        assert_true(avo_cgroup_cpu_s(&cg) == c1);
    avo_cgroup_destroy(&cg);
    waitpid(p, NULL, 0);
    unsetenv("AVO_CGROUP");
}

/* Drop a group's descriptors and leave its directories, as a killed
 * process does. */
static void forget(avo_cgroup *cg)
{
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        if (cg->dir[h] >= 0)
            close(cg->dir[h]);
        if (cg->procs[h] >= 0)
            close(cg->procs[h]);
        cg->dir[h] = cg->procs[h] = -1;
    }
    cg->freezer = -1;
}

/* avo_cgroup_sweep: a group named for a pid that is gone (and the group
 * inside it) is removed; one named for a live pid, or not of the form
 * PREFIX-PID-N, stays. */
static void test_sweep_stale(void **state)
{
    (void)state;
    /* What an earlier failed run left (over a minute old by the next). */
    avo_cgroup_sweep("avotest");
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    waitpid(gone, NULL, 0);
    static avo_cgroup dead, inner, live, odd;
    char name[64], why[300];
    snprintf(name, sizeof name, "avotest-%d-1", (int)gone);
    if (avo_cgroup_create(&dead, name, 0, why, sizeof why) != 0) {
        print_message("# no writable control group here: %s\n", why);
        return;
    }
    snprintf(name, sizeof name, "avotest-runner-%d-1", (int)gone);
    assert_int_equal(avo_cgroup_create_child(&dead, name, &inner, why, sizeof why), 0);
    snprintf(name, sizeof name, "avotest-%d-2", (int)getpid());
    assert_int_equal(avo_cgroup_create(&live, name, 0, why, sizeof why), 0);
    track(&live);
    snprintf(name, sizeof name, "avotest-%d-x", (int)gone);
    assert_int_equal(avo_cgroup_create(&odd, name, 0, why, sizeof why), 0);
    track(&odd);
    char dpath[AVO_CG_NHIER][1024];
    int nh = 0;
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        snprintf(dpath[h], sizeof dpath[h], "%s", dead.dir[h] >= 0 ? dead.path[h] : "");
        nh += dead.dir[h] >= 0;
    }
    forget(&inner);
    forget(&dead);
    /* Under a minute old, a group may be a live process's that its child
     * has not joined yet: left alone. */
    assert_int_equal(avo_cgroup_sweep("avotest"), 0);
    const struct timespec old[2] = {{.tv_sec = time(NULL) - 120}, {.tv_sec = time(NULL) - 120}};
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        if (dpath[h][0])
            assert_int_equal(utimensat(AT_FDCWD, dpath[h], old, 0), 0);
        if (live.dir[h] >= 0)
            assert_int_equal(utimensat(AT_FDCWD, live.path[h], old, 0), 0);
        if (odd.dir[h] >= 0)
            assert_int_equal(utimensat(AT_FDCWD, odd.path[h], old, 0), 0);
    }
    assert_int_equal(avo_cgroup_sweep("avotest"), nh);
    struct stat sb;
    for (int h = 0; h < AVO_CG_NHIER; h++) {
        if (dpath[h][0])
            assert_int_equal(stat(dpath[h], &sb), -1);
        if (live.dir[h] >= 0)
            assert_int_equal(stat(live.path[h], &sb), 0);
        if (odd.dir[h] >= 0)
            assert_int_equal(stat(odd.path[h], &sb), 0);
    }
    /* Nothing left to remove: a second sweep removes none. */
    assert_int_equal(avo_cgroup_sweep("avotest"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_freeze_counts_and_kills_a_tree, teardown),
        cmocka_unit_test_teardown(test_child_group, teardown),
        cmocka_unit_test_teardown(test_turned_off, teardown),
        cmocka_unit_test_teardown(test_v1_freezer, teardown),
        cmocka_unit_test_teardown(test_sweep_stale, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
