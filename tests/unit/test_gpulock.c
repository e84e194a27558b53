/* The host's per-GPU timing lock (daemon/worker/gpulock) and the GPU a
 * worker takes from CUDA_VISIBLE_DEVICES (daemon/worker/devices). Another
 * process holds the lock through a pipe-driven child, so every wait is
 * decided by the test's own steps, never by a clock. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/worker/devices.h"
#include "daemon/worker/gpulock.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/avo-gpulock-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/avo-gpu-GPU-test.lock", dir);
    unlink(path);
    return rmdir(dir);
}

/* A child that takes the lock, says so on *ready, and keeps it until the
 * parent writes to *release (or, with die, exits at once holding it). */
typedef struct {
    pid_t pid;
    int ready, release;
} holder;

static holder hold(int die)
{
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(a[0]);
        close(b[1]);
        char err[200];
        double w;
        int fd = avo_gpulock_take(dir, "GPU-test", NULL, NULL, &w, err, sizeof err);
        char c = fd >= 0 ? 'y' : 'n';
        if (write(a[1], &c, 1) != 1 || die)
            _exit(0);
        if (read(b[0], &c, 1) < 0)
            _exit(1);
        avo_gpulock_release(fd);
        _exit(0);
    }
    close(a[1]);
    close(b[0]);
    holder h = {pid, a[0], b[1]};
    char c = 0;
    assert_int_equal(read(h.ready, &c, 1), 1);
    assert_int_equal(c, 'y');
    return h;
}

static void reap(holder *h)
{
    int st;
    close(h->release);
    close(h->ready);
    assert_int_equal(waitpid(h->pid, &st, 0), h->pid);
}

typedef struct {
    int polls, release_after, cancel_after;
    holder *h;
} poller;

static int poll_cb(void *arg)
{
    poller *p = arg;
    p->polls++;
    if (p->release_after && p->polls == p->release_after) {
        char c = 'r';
        assert_int_equal(write(p->h->release, &c, 1), 1);
    }
    return p->cancel_after && p->polls >= p->cancel_after;
}

static void test_free_lock(void **state)
{
    (void)state;
    char err[200];
    double w = -1;
    poller p = {0};
    int fd = avo_gpulock_take(dir, "GPU-test", poll_cb, &p, &w, err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(p.polls, 0);
    assert_true(w >= 0);
    /* never handed to what the harness runs */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    avo_gpulock_release(fd);
}

static void test_waits_for_holder(void **state)
{
    (void)state;
    holder h = hold(0);
    poller p = {.release_after = 3, .h = &h};
    char err[200];
    double w;
    int fd = avo_gpulock_take(dir, "GPU-test", poll_cb, &p, &w, err, sizeof err);
    assert_true(fd >= 0);
    /* it polled while the child held the lock and got it only after the
     * release the third poll asked for */
    assert_true(p.polls >= 3);
    assert_true(w > 0);
    avo_gpulock_release(fd);
    reap(&h);
}

static void test_cancel_while_waiting(void **state)
{
    (void)state;
    holder h = hold(0);
    poller p = {.cancel_after = 2, .h = &h};
    char err[200] = "";
    double w;
    int fd = avo_gpulock_take(dir, "GPU-test", poll_cb, &p, &w, err, sizeof err);
    assert_int_equal(fd, -ECANCELED);
    assert_int_equal(p.polls, 2);
    assert_non_null(strstr(err, "GPU-test"));
    reap(&h);
}

static void test_dead_holder(void **state)
{
    (void)state;
    holder h = hold(1); /* exits holding it: the kernel drops the lock */
    int st;
    assert_int_equal(waitpid(h.pid, &st, 0), h.pid);
    close(h.release);
    close(h.ready);
    poller p = {0};
    char err[200];
    double w;
    int fd = avo_gpulock_take(dir, "GPU-test", poll_cb, &p, &w, err, sizeof err);
    assert_true(fd >= 0);
    assert_int_equal(p.polls, 0);
    avo_gpulock_release(fd);
}

static void test_bad_names(void **state)
{
    (void)state;
    char err[200];
    double w;
    assert_int_equal(avo_gpulock_take(dir, "../x", NULL, NULL, &w, err, sizeof err), -EINVAL);
    assert_int_equal(avo_gpulock_take(dir, "a/b", NULL, NULL, &w, err, sizeof err), -EINVAL);
    assert_int_equal(avo_gpulock_take("/nonexistent-avo-dir", "GPU-x", NULL, NULL, &w, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent-avo-dir"));
}

/* Names planted in a world-writable lock directory are refused, at once
 * (a FIFO would block a plain open forever), naming why. */
static void test_planted(void **state)
{
    (void)state;
    char path[256], err[300];
    double w;
    snprintf(path, sizeof path, "%s/avo-gpu-GPU-test.lock", dir);
    unlink(path); /* the file the tests before made */
    assert_int_equal(mkfifo(path, 0666), 0);
    assert_int_equal(avo_gpulock_check(dir, "GPU-test", err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(avo_gpulock_take(dir, "GPU-test", NULL, NULL, &w, err, sizeof err), -EPERM);
    unlink(path);
    if (geteuid() != 0)
        return; /* only root can make a file of the sandbox user's */
    int fd = open(path, O_RDONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, 65534, 65534), 0);
    close(fd);
    assert_int_equal(avo_gpulock_check(dir, "GPU-test", err, sizeof err), -EPERM);
    assert_non_null(strstr(err, "sandbox user"));
    unlink(path);
    assert_int_equal(avo_gpulock_check(dir, "GPU-test", err, sizeof err), 0);
}

static void test_visible_index(void **state)
{
    (void)state;
    assert_int_equal(avo_devices_visible_index(NULL), 0);
    assert_int_equal(avo_devices_visible_index(""), 0);
    assert_int_equal(avo_devices_visible_index("3"), 3);
    assert_int_equal(avo_devices_visible_index("2,0,1"), 2); /* CUDA's device 0 is the first entry */
    assert_int_equal(avo_devices_visible_index("1x"), -EINVAL);
    assert_int_equal(avo_devices_visible_index("gpu0"), -EINVAL);
    /* no GPU here has it (none at all without NVML) */
    assert_int_equal(avo_devices_visible_index("GPU-00000000-dead-beef"), -ENODEV);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_lock),
        cmocka_unit_test(test_waits_for_holder),
        cmocka_unit_test(test_cancel_while_waiting),
        cmocka_unit_test(test_dead_holder),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_planted),
        cmocka_unit_test(test_visible_index),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
