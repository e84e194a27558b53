/* The host's harness CPU leases (daemon/worker/cpulease): the highest free
 * CPU first, a distinct one per holder, none when all are held, released
 * with the holder's death, and the CPUs a worker's compiles keep to. The
 * CPU sets are made up: a lease is a name in a directory, not a CPU. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/worker/cpulease.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/avo-cpulease-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[256];
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "%s/avo-harness-cpu-%d.lock", dir, i);
        unlink(path);
    }
    return rmdir(dir);
}

static cpu_set_t cpus(const char *list)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (const char *c = list; *c; c++)
        if (*c >= '0' && *c <= '9')
            CPU_SET(*c - '0', &s);
    return s;
}

static int only(const cpu_set_t *s, const char *list)
{
    cpu_set_t want = cpus(list);
    return CPU_EQUAL(s, &want);
}

/* Each holder gets its own CPU, highest first; a released one is taken
 * again first. */
static void test_distinct(void **state)
{
    (void)state;
    cpu_set_t all = cpus("0123");
    char err[300];
    int a, b, c;
    int fa = avo_cpulease_take(dir, &all, &a, err, sizeof err);
    int fb = avo_cpulease_take(dir, &all, &b, err, sizeof err);
    assert_true(fa >= 0 && fb >= 0);
    assert_int_equal(a, 3);
    assert_int_equal(b, 2);
    avo_cpulease_release(fa);
    int fc = avo_cpulease_take(dir, &all, &c, err, sizeof err);
    assert_true(fc >= 0);
    assert_int_equal(c, 3);
    avo_cpulease_release(fb);
    avo_cpulease_release(fc);
}

/* Every CPU held: -EBUSY, saying so; the CPUs a worker keeps its own
 * threads on never come out empty. */
static void test_all_held_and_free_set(void **state)
{
    (void)state;
    cpu_set_t two = cpus("23"), all = cpus("0123"), out;
    char err[300];
    int a, b, c;
    int fa = avo_cpulease_take(dir, &two, &a, err, sizeof err);
    int fb = avo_cpulease_take(dir, &two, &b, err, sizeof err);
    assert_true(fa >= 0 && fb >= 0);
    assert_int_equal(avo_cpulease_take(dir, &two, &c, err, sizeof err), -EBUSY);
    assert_int_equal(c, -1);
    assert_non_null(strstr(err, "leased by another worker's harness"));
    /* 3 (own) and 2 held: the others */
    assert_int_equal(avo_cpulease_free_set(dir, &all, 3, &out), 2);
    assert_true(only(&out, "01"));
    /* all held: everything but its own */
    assert_int_equal(avo_cpulease_free_set(dir, &two, 3, &out), 1);
    assert_true(only(&out, "2"));
    /* a single CPU, its own: that one rather than none */
    cpu_set_t three = cpus("3");
    assert_int_equal(avo_cpulease_free_set(dir, &three, 3, &out), 1);
    assert_true(only(&out, "3"));
    avo_cpulease_release(fb);
    assert_int_equal(avo_cpulease_free_set(dir, &all, 3, &out), 3);
    assert_true(only(&out, "012"));
    avo_cpulease_release(fa);
    assert_int_equal(avo_cpulease_free_set(dir, &all, -1, &out), 4);
}

/* A lease held by a process that dies is free again at once. */
static void test_dead_holder(void **state)
{
    (void)state;
    cpu_set_t one = cpus("5");
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
        char err[300], c;
        int cpu;
        int fd = avo_cpulease_take(dir, &one, &cpu, err, sizeof err);
        c = fd >= 0 && cpu == 5 ? 'y' : 'n';
        if (write(p[1], &c, 1) != 1)
            _exit(1);
        pause(); /* holds it until killed */
        _exit(0);
    }
    close(p[1]);
    char c = 0, err[300];
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    int cpu;
    assert_int_equal(avo_cpulease_take(dir, &one, &cpu, err, sizeof err), -EBUSY);
    cpu_set_t out, two = cpus("45");
    assert_int_equal(avo_cpulease_free_set(dir, &two, -1, &out), 1);
    assert_true(only(&out, "4"));
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(p[0]);
    int fd = avo_cpulease_take(dir, &one, &cpu, err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(cpu, 5);
    avo_cpulease_release(fd);
}

/* A FIFO planted under a lease's name (the directory is world-writable)
 * is refused at once, naming why; a missing directory names itself. */
static void test_planted(void **state)
{
    (void)state;
    char path[256], err[300];
    snprintf(path, sizeof path, "%s/avo-harness-cpu-6.lock", dir);
    assert_int_equal(mkfifo(path, 0666), 0);
    cpu_set_t one = cpus("6");
    int cpu;
    assert_int_equal(avo_cpulease_take(dir, &one, &cpu, err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "not a regular file"));
    assert_non_null(strstr(err, "CPU lease"));
    unlink(path);
    assert_int_equal(avo_cpulease_take("/nonexistent-avo-dir", &one, &cpu, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent-avo-dir"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct),
        cmocka_unit_test(test_all_held_and_free_set),
        cmocka_unit_test(test_dead_holder),
        cmocka_unit_test(test_planted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
