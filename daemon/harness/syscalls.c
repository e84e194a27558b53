/* The CPU runner's system-call filter: no files, sockets, processes or kernel interfaces from a candidate's calls (syscalls.h). */
#include "syscalls.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Refused with EPERM: what opens a file, makes a descriptor to something
 * outside the process, starts a process, reaches another process or a
 * kernel interface that could carry state from one call (or runner) to the
 * next. A kernel computes on the memory it is given: none of it is needed
 * in a call. Allocation (mmap, brk, madvise), threads (clone with
 * CLONE_THREAD), futexes, clocks, signals to itself and the protocol's
 * read and write stay. A name this architecture lacks is skipped. */
static const char *const denied[] = {
    "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at",
    "socket", "socketpair", "memfd_create", "memfd_secret", "userfaultfd", "perf_event_open", "bpf",
    "inotify_init", "inotify_init1", "fanotify_init", "pidfd_open", "pidfd_getfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "mount", "umount2", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree",
    "mount_setattr", "pivot_root", "chroot", "setns", "unshare",
    "keyctl", "add_key", "request_key",
    "sched_setaffinity",
    "mknod", "mknodat", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "rename",
    "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "truncate", "chmod", "fchmodat", "chown",
    "lchown", "fchownat",
};

int avo_syscalls_confine(int keep_lo, int keep_hi, char *err, size_t errlen)
{
    /* Descriptors the candidate's constructors opened would let its calls
     * read and write files without opening one. */
    if (keep_lo > 3)
        close_range(3, (unsigned)keep_lo - 1, 0);
    close_range((unsigned)keep_hi + 1, ~0u, 0);
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
    for (size_t i = 0; i < sizeof denied / sizeof *denied; i++) {
        const int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR || nr < 0)
            continue;
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) != 0) {
            snprintf(err, errlen, "seccomp: rule for %s: %s", denied[i], strerror(-rc));
            goto cleanup;
        }
    }
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
