/* The runner's system-call filter: no files, sockets, processes or kernel interfaces from a candidate's calls (syscalls.h). */
#include "syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Refused with EPERM on both runners: what makes a descriptor to something
 * outside the process (other than a file), starts a process, reaches
 * another process or a kernel interface that could carry state from one
 * call (or runner) to the next, or changes the file system. A kernel
 * computes on the memory it is given: none of it is needed in a call.
 * Allocation (mmap, brk, madvise), threads (clone with CLONE_THREAD),
 * futexes, clocks, ioctl, signals to itself and the protocol's read and
 * write stay. A name this architecture lacks is skipped. */
static const char *const denied[] = {
    "socket",
    "socketpair",
    "memfd_create",
    "memfd_secret",
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "inotify_init",
    "inotify_init1",
    "fanotify_init",
    "pidfd_open",
    "pidfd_getfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fork",
    "vfork",
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "mount",
    "umount2",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "pivot_root",
    "chroot",
    "setns",
    "unshare",
    "keyctl",
    "add_key",
    "request_key",
    "sched_setaffinity",
    "mknod",
    "mknodat",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "truncate",
    "chmod",
    "fchmodat",
    "chown",
    "lchown",
    "fchownat",
    "creat",
    "openat2",
    "open_by_handle_at",
    "name_to_handle_at",
};

/* The CPU runner also opens nothing. The CUDA runtime opens files in its
 * calls (device nodes, the profiler's libraries), so a GPU runner may open
 * what its uid and view allow, but create nothing (O_CREAT, O_TMPFILE: the
 * store that would outlive a call, /dev/shm filled for the next runner). */
static const char *const denied_open[] = {"open", "openat"};

static int deny(scmp_filter_ctx ctx, const char *name, char *err, size_t errlen)
{
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR || nr < 0)
        return 0;
    const int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc != 0)
        snprintf(err, errlen, "seccomp: rule for %s: %s", name, strerror(-rc));
    return rc;
}

/* open's flags are its second argument, openat's its third. */
static int deny_create(scmp_filter_ctx ctx, char *err, size_t errlen)
{
    static const struct {
        int nr;
        unsigned arg;
    } calls[] = {
#ifdef __NR_open
        {SCMP_SYS(open), 1},
#endif
        {SCMP_SYS(openat), 2},
    };
    /* The kernel's own O_TMPFILE bit (glibc's O_TMPFILE adds O_DIRECTORY,
     * which alone creates nothing). */
    static const scmp_datum_t bits[] = {O_CREAT, 020000000};
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        for (size_t b = 0; b < sizeof bits / sizeof *bits; b++) {
            const int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), calls[i].nr, 1,
                                            SCMP_CMP(calls[i].arg, SCMP_CMP_MASKED_EQ, bits[b], bits[b]));
            if (rc != 0) {
                snprintf(err, errlen, "seccomp: rule for creating files: %s", strerror(-rc));
                return rc;
            }
        }
    return 0;
}

/* A GPU runner keeps the descriptors the runtime holds (its device nodes,
 * opened before the load): what the load opened goes, unless it is a
 * device node (the runtime may open one on the candidate's behalf). */
static void close_opened_since(const avo_fdset *before)
{
    for (int fd = 3; fd < AVO_FDSET_MAX; fd++) {
        if (before->open[fd / 64] >> (fd % 64) & 1)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && !S_ISCHR(st.st_mode))
            close(fd);
    }
    close_range(AVO_FDSET_MAX, ~0u, 0);
}

void avo_syscalls_fdset_snapshot(avo_fdset *s)
{
    memset(s, 0, sizeof *s);
    for (int fd = 0; fd < AVO_FDSET_MAX; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            s->open[fd / 64] |= 1ull << (fd % 64);
}

int avo_syscalls_confine(int keep_lo, int keep_hi, const avo_fdset *gpu_before, char *err, size_t errlen)
{
    /* Descriptors the candidate's constructors opened would let its calls
     * read and write files without opening one. */
    if (gpu_before) {
        close_opened_since(gpu_before);
    } else {
        if (keep_lo > 3)
            close_range(3, (unsigned)keep_lo - 1, 0);
        close_range((unsigned)keep_hi + 1, ~0u, 0);
    }
    int rc = 0;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(err, errlen, "seccomp_init failed");
        return -ENOMEM;
    }
    /* Every thread: a thread its constructors started runs its code too. */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) != 0) {
        snprintf(err, errlen, "seccomp: thread sync: %s", strerror(-rc));
        goto cleanup;
    }
    /* A filter must not change how the code runs: kernels that turn on
     * the speculative-store-bypass mitigation for filtered tasks (the
     * "seccomp" default before Linux 5.16) would time candidates slower
     * than they run anywhere else. Where libseccomp or the kernel cannot
     * say so, the filter still goes on. */
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_SSB, 1);
    for (size_t i = 0; i < sizeof denied / sizeof *denied; i++)
        if ((rc = deny(ctx, denied[i], err, errlen)) != 0)
            goto cleanup;
    for (size_t i = 0; !gpu_before && i < sizeof denied_open / sizeof *denied_open; i++)
        if ((rc = deny(ctx, denied_open[i], err, errlen)) != 0)
            goto cleanup;
    if (gpu_before && (rc = deny_create(ctx, err, errlen)) != 0)
        goto cleanup;
    /* clone: threads only (a new process would escape the freeze between
     * calls where no control group holds it); clone3 hides its flags in
     * memory a filter cannot read: ENOSYS, so glibc falls back to clone. */
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                               SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0))) != 0 ||
        (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) != 0) {
        snprintf(err, errlen, "seccomp: rule for clone: %s", strerror(-rc));
        goto cleanup;
    }
    /* The runner is not dumpable (nothing of its uid may ptrace it or read
     * its memory); the candidate may not undo that. */
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1,
                               SCMP_A0(SCMP_CMP_EQ, PR_SET_DUMPABLE))) != 0) {
        snprintf(err, errlen, "seccomp: rule for prctl: %s", strerror(-rc));
        goto cleanup;
    }
    if ((rc = seccomp_load(ctx)) != 0)
        snprintf(err, errlen, "seccomp_load: %s", strerror(-rc));
cleanup:
    seccomp_release(ctx);
    return rc;
}
