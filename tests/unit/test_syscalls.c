/* The runners' system-call filter (daemon/harness/syscalls), CPU and GPU
 * profiles: in a child process (a filter cannot be undone), what a kernel
 * (and on a GPU the CUDA runtime) needs still works and what the filter
 * refuses is refused with EPERM. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/harness/syscalls.h"

static void *thread_fn(void *arg)
{
    *(int *)arg = 42;
    return NULL;
}

/* The child's exit status: 0, or the number of the first check that failed. */
static int child_checks(int keep)
{
    int fail = 0, n = 0;
    char err[200];
    int extra = open("/dev/null", O_RDONLY); /* as a candidate's constructor would */
#define CHECK(cond) (n++, fail = fail ? fail : (cond) ? 0 : n)
    CHECK(avo_syscalls_confine(keep, keep, NULL, err, sizeof err) == 0);
    CHECK(extra < 0 || fcntl(extra, F_GETFD) < 0); /* what the load opened: closed */
    CHECK(write(keep, "x", 1) == 1);               /* the protocol's pipe: kept */
    CHECK(open("/dev/null", O_RDONLY) < 0 && errno == EPERM);
    CHECK(socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM);
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    CHECK(p < 0 && errno == EPERM);
    CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 && errno == EPERM);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CHECK(sched_setaffinity(0, sizeof set, &set) != 0 && errno == EPERM);
    /* what a kernel needs */
    void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED && (memset(m, 1, 1 << 20), munmap(m, 1 << 20) == 0));
    int v = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_fn, &v) == 0 && pthread_join(t, NULL) == 0 && v == 42);
    void *big = malloc(64 << 20);
    CHECK(big != NULL);
    free(big);
#undef CHECK
    return fail;
}

/* The GPU profile: the runtime's descriptors (a device node, and any
 * descriptor open before the load) stay, what the load opened goes, files
 * may be opened (device nodes, libraries) but not created. */
static int child_checks_gpu(int keep)
{
    int fail = 0, n = 0;
    char err[200];
    int dev = open("/dev/null", O_RDWR); /* the runtime's, before the load */
    avo_fdset before;
    avo_syscalls_fdset_snapshot(&before);
    int file = open("/proc/self/status", O_RDONLY); /* the load's */
    int late_dev = open("/dev/zero", O_RDONLY);     /* a device node the load opened */
    char tmpl[] = "/tmp/avo-test-syscalls-XXXXXX";
#define CHECK(cond) (n++, fail = fail ? fail : (cond) ? 0 : n)
    CHECK(avo_syscalls_confine(keep, keep, &before, err, sizeof err) == 0);
    CHECK(fcntl(dev, F_GETFD) >= 0 && write(keep, "x", 1) == 1);
    CHECK(fcntl(late_dev, F_GETFD) >= 0);
    CHECK(fcntl(file, F_GETFD) < 0);
    int r = open("/dev/null", O_RDWR | O_CLOEXEC);
    CHECK(r >= 0);
    close(r);
    CHECK(open(tmpl, O_RDWR | O_CREAT, 0600) < 0 && errno == EPERM);
    CHECK(mkstemp(tmpl) < 0 && errno == EPERM);
    CHECK(open("/tmp", O_RDWR | O_TMPFILE, 0600) < 0 && errno == EPERM);
    CHECK(socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM);
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    CHECK(p < 0 && errno == EPERM);
    CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 && errno == EPERM);
    int v = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_fn, &v) == 0 && pthread_join(t, NULL) == 0 && v == 42);
#undef CHECK
    return fail;
}

static void run_child(int (*checks)(int))
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    /* The kept descriptor at a number above the one the child opens. */
    int keep = fcntl(p[1], F_DUPFD, 20);
    assert_true(keep >= 20);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(checks(keep));
    close(keep);
    close(p[1]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st))
        print_error("check %d in the child failed\n", WEXITSTATUS(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'x');
    close(p[0]);
}

static void test_filter(void **state)
{
    (void)state;
    run_child(child_checks);
}

static void test_filter_gpu(void **state)
{
    (void)state;
    run_child(child_checks_gpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filter),
        cmocka_unit_test(test_filter_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
