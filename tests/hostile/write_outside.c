/* Hostile: tries to leave traces outside its scratch directory: creates
 * /tmp/avo-hostile-escape-<pid>, writes into $HOME (the sandbox points HOME
 * at the scratch dir; a leaked worker environment would not) and into the
 * invoking user's real home from the password database. What succeeded is
 * printed on stderr (and so lands in the result's stderr_tail); a test can
 * also look for the files. It then returns without writing C, so whatever
 * the sandbox allows, the evaluation must not be ok.
 * Expected: wrong_result (the poisoned output is seen). */
#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void try_write(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        fprintf(stderr, "write_outside: %s: blocked\n", path);
        return;
    }
    static const char msg[] = "written by tests/hostile/write_outside.c\n";
    ssize_t n = write(fd, msg, sizeof msg - 1);
    close(fd);
    fprintf(stderr, "write_outside: %s: %s\n", path, n == (ssize_t)sizeof msg - 1 ? "WRITTEN" : "created, write failed");
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    char path[4096];
    snprintf(path, sizeof path, "/tmp/avo-hostile-escape-%ld", (long)getpid());
    try_write(path);
    const char *home = getenv("HOME");
    if (home) {
        snprintf(path, sizeof path, "%s/.avo-hostile-escape-%ld", home, (long)getpid());
        try_write(path);
    }
    const struct passwd *pw = getpwuid(getuid());
    if (pw && pw->pw_dir && (!home || strcmp(pw->pw_dir, home) != 0)) {
        snprintf(path, sizeof path, "%s/.avo-hostile-escape-%ld", pw->pw_dir, (long)getpid());
        try_write(path);
    }
    return 0;
}
