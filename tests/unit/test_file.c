/* The one mkdir -p, atomic write and path join of the code base
 * (avo_file.c, avo_paths.c): what they make, what they refuse, and that a
 * failure names its cause. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/common/avo_file.h"
#include "daemon/common/avo_paths.h"

static char root[64];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/avo-test-file.XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Temporary files of ours left in a directory (".NAME.tmp.PID.K"). */
static int leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d)))
        n += strstr(de->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_mkdirs(void **state)
{
    (void)state;
    char p[PATH_MAX], failed[PATH_MAX];
    snprintf(p, sizeof p, "%s/a/b/c", root);
    assert_int_equal(avo_file_mkdirs(p, 0700, failed, sizeof failed), 0);
    assert_true(is_dir(p));
    /* all there already: still success; a trailing slash too */
    assert_int_equal(avo_file_mkdirs(p, 0700, NULL, 0), 0);
    snprintf(p, sizeof p, "%s/a/b/d/", root);
    assert_int_equal(avo_file_mkdirs(p, 0700, NULL, 0), 0);
    assert_true(is_dir(p));
    /* the mode of what it made (umask permitting 0700) */
    struct stat st;
    snprintf(p, sizeof p, "%s/a", root);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
}

static void test_mkdirs_refuses(void **state)
{
    (void)state;
    char p[PATH_MAX], file[PATH_MAX], failed[PATH_MAX];
    snprintf(file, sizeof file, "%s/plain", root);
    assert_int_equal(avo_file_write_atomic(file, "x", 1, 0600), 0);
    /* a file where a directory should be, at the end or on the way */
    assert_int_equal(avo_file_mkdirs(file, 0700, failed, sizeof failed), -ENOTDIR);
    assert_string_equal(failed, file);
    snprintf(p, sizeof p, "%s/plain/under", root);
    assert_int_equal(avo_file_mkdirs(p, 0700, failed, sizeof failed), -ENOTDIR);
    assert_string_equal(failed, file);
    /* nothing, and too long */
    assert_int_equal(avo_file_mkdirs("", 0700, NULL, 0), -ENOENT);
    char *huge = malloc(PATH_MAX + 10);
    assert_non_null(huge);
    memset(huge, 'a', PATH_MAX + 9);
    huge[0] = '/';
    huge[PATH_MAX + 9] = 0;
    assert_int_equal(avo_file_mkdirs(huge, 0700, NULL, 0), -ENAMETOOLONG);
    free(huge);
}

static void test_write_atomic(void **state)
{
    (void)state;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/summary.json", root);
    assert_int_equal(avo_file_write_atomic(p, "{\"a\": 1}\n", 9, 0640), 0);
    size_t len = 0;
    char *back = avo_file_read(p, &len);
    assert_non_null(back);
    assert_int_equal(len, 9);
    assert_string_equal(back, "{\"a\": 1}\n");
    free(back);
    /* a second write replaces the whole file, shorter or not */
    assert_int_equal(avo_file_write_atomic(p, "{}", 2, 0640), 0);
    back = avo_file_read(p, &len);
    assert_non_null(back);
    assert_string_equal(back, "{}");
    free(back);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640 & ~0022 & 0777);
    /* no temporary file left behind */
    assert_int_equal(leftovers(root), 0);
    /* the rename fails (a directory is there): the cause, and the
     * temporary file goes */
    snprintf(p, sizeof p, "%s/a", root);
    assert_int_equal(avo_file_write_atomic(p, "x", 1, 0600), -EISDIR);
    assert_int_equal(leftovers(root), 0);
    /* a directory that does not exist: the cause, and nothing made */
    snprintf(p, sizeof p, "%s/missing/summary.json", root);
    assert_int_equal(avo_file_write_atomic(p, "x", 1, 0600), -ENOENT);
    assert_int_not_equal(access(p, F_OK), 0);
}

static void test_copy_atomic(void **state)
{
    (void)state;
    char from[PATH_MAX], to[PATH_MAX], link[PATH_MAX], dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/copies", root);
    assert_int_equal(avo_file_mkdirs(dir, 0700, NULL, 0), 0);
    assert_int_equal(avo_paths_join(from, sizeof from, dir, "from.so"), 0);
    assert_int_equal(avo_paths_join(to, sizeof to, dir, "to.so"), 0);
    /* larger than one read buffer, with NUL bytes */
    size_t n = 200000;
    char *data = malloc(n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)(i * 7);
    assert_int_equal(avo_file_write_atomic(from, data, n, 0600), 0);
    assert_int_equal(avo_file_copy_atomic(from, to, 0644), 0);
    size_t len = 0;
    char *back = avo_file_read(to, &len);
    assert_non_null(back);
    assert_int_equal(len, n);
    assert_memory_equal(back, data, n);
    free(back);
    free(data);
    /* a symbolic link is not followed, a directory is no file */
    assert_int_equal(avo_paths_join(link, sizeof link, dir, "link.so"), 0);
    assert_int_equal(symlink(from, link), 0);
    assert_int_equal(avo_file_copy_atomic(link, to, 0644), -ELOOP);
    assert_int_equal(avo_file_copy_atomic(dir, to, 0644), -EINVAL);
    assert_int_equal(leftovers(dir), 0);
}

static void test_join(void **state)
{
    (void)state;
    char out[PATH_MAX];
    assert_int_equal(avo_paths_join(out, sizeof out, "/var/lib/avo", "avod.dsn"), 0);
    assert_string_equal(out, "/var/lib/avo/avod.dsn");
    assert_int_equal(avo_paths_join(out, sizeof out, "/var/lib/avo/", "avod.dsn"), 0);
    assert_string_equal(out, "/var/lib/avo/avod.dsn");
    assert_int_equal(avo_paths_join(out, sizeof out, "", "rel"), 0);
    assert_string_equal(out, "rel");
    /* too long: refused, and no truncated path that names another file */
    char small[12];
    assert_int_equal(avo_paths_join(small, sizeof small, "/var/lib", "avo.dsn"), -ENAMETOOLONG);
    assert_string_equal(small, "");
    assert_int_equal(avo_paths_join(small, sizeof small, "/var/lib", "ab"), 0);
    assert_string_equal(small, "/var/lib/ab");
}

int main(void)
{
    umask(0022);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkdirs),      cmocka_unit_test(test_mkdirs_refuses), cmocka_unit_test(test_write_atomic),
        cmocka_unit_test(test_copy_atomic), cmocka_unit_test(test_join),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
