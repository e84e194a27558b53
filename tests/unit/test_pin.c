/* A job's pinned package: the manifest and its hash (avo_package), the pin
 * made at submission and its diff against the disk (daemon/avod/pin). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/common/avo_package.h"
#include "daemon/common/avo_file.h"
#include "daemon/avod/pin.h"

static void test_files(void **state)
{
    (void)state;
    json_t *pj = json_loads("{\"reference\": \"ref.c\", \"seed\": \"seed.c\", \"baseline\": \"base.c\","
                            " \"seeds\": {\"a\": {\"file\": \"seed_a.c\"}, \"b\": {\"file\": \"seed.c\"}}}",
                            0, NULL);
    const char *names[AVO_PACKAGE_MAX_FILES];
    int n = avo_package_files(pj, names, AVO_PACKAGE_MAX_FILES);
    assert_int_equal(n, 5); /* seed.c once */
    assert_string_equal(names[0], "problem.json");
    assert_string_equal(names[1], "ref.c");
    assert_string_equal(names[2], "base.c");
    assert_string_equal(names[3], "seed.c");
    assert_string_equal(names[4], "seed_a.c");
    assert_int_equal(avo_package_files(pj, names, 2), 2);
    json_decref(pj);
}

static void test_hash(void **state)
{
    (void)state;
    json_t *a = json_pack("{s:s,s:s}", "problem.json", "11", "seed.c", "22");
    json_t *b = json_pack("{s:s,s:s}", "seed.c", "22", "problem.json", "11");
    char ha[AVO_SHA256_HEX], hb[AVO_SHA256_HEX];
    assert_int_equal(avo_package_hash(a, ha), 0);
    assert_int_equal(avo_package_hash(b, hb), 0);
    assert_string_equal(ha, hb); /* the order of the object is not the package's */
    json_object_set_new(b, "seed.c", json_string("23"));
    assert_int_equal(avo_package_hash(b, hb), 0);
    assert_string_not_equal(ha, hb);
    json_object_set_new(b, "seed.c", json_null());
    assert_int_equal(avo_package_hash(b, hb), 0);
    assert_string_not_equal(ha, hb);
    json_decref(a);
    json_decref(b);
}

static void test_changes(void **state)
{
    (void)state;
    json_t *pinned = json_pack("{s:s,s:s,s:s}", "problem.json", "1", "seed.c", "2", "ref.c", "3");
    json_t *disk = json_pack("{s:s,s:s,s:n,s:s}", "problem.json", "1", "seed.c", "9", "ref.c", "base.c", "4");
    json_t *c = avo_package_changes(pinned, disk);
    assert_int_equal(json_array_size(c), 3);
    /* byte order of name */
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "file")), "base.c");
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "change")), "added");
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 1), "file")), "ref.c");
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 1), "change")), "removed");
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 2), "file")), "seed.c");
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 2), "change")), "changed");
    json_decref(c);
    c = avo_package_changes(pinned, pinned);
    assert_int_equal(json_array_size(c), 0);
    json_decref(c);

    /* what a worker compares: not the seeds */
    const char *const used[] = {"problem.json", "ref.c", "", NULL};
    json_object_set_new(disk, "ref.c", json_string("3"));
    assert_null(avo_package_first_change(pinned, disk, used));
    json_object_set_new(disk, "ref.c", json_string("5"));
    assert_string_equal(avo_package_first_change(pinned, disk, used), "ref.c");
    json_object_del(disk, "problem.json");
    assert_string_equal(avo_package_first_change(pinned, disk, used), "problem.json");
    json_decref(pinned);
    json_decref(disk);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A copy of kernels/cpu/sgemm in a temporary directory. */
static void copy_sgemm(char *dir)
{
    strcpy(dir, "/tmp/avo-test-pin-XXXXXX");
    assert_non_null(mkdtemp(dir));
    static const char *const files[] = {"problem.json", "reference.c", "seed.c"};
    for (int i = 0; i < 3; i++) {
        char src[300];
        snprintf(src, sizeof src, "kernels/cpu/sgemm/%s", files[i]);
        char *t = avo_file_read(src, NULL);
        assert_non_null(t);
        write_file(dir, files[i], t);
        free(t);
    }
}

static void remove_dir(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_manifest(void **state)
{
    (void)state;
    char dir[64], err[600] = "", path[300], ha[AVO_SHA256_HEX], hb[AVO_SHA256_HEX];
    copy_sgemm(dir);
    json_t *pj = json_pack("{s:s,s:s}", "reference", "reference.c", "seed", "seed.c"), *m = NULL, *m2 = NULL;
    assert_int_equal(avo_package_manifest(dir, pj, 1, &m, err, sizeof err), 0);
    assert_int_equal(json_object_size(m), 3);
    assert_int_equal(avo_package_hash(m, ha), 0);

    /* a link is read through, as the worker reads it */
    snprintf(path, sizeof path, "%s/seed.c", dir);
    char moved[320];
    snprintf(moved, sizeof moved, "%s/elsewhere.c", dir);
    assert_int_equal(rename(path, moved), 0);
    assert_int_equal(symlink("elsewhere.c", path), 0);
    assert_int_equal(avo_package_manifest(dir, pj, 1, &m2, err, sizeof err), 0);
    assert_int_equal(avo_package_hash(m2, hb), 0);
    assert_string_equal(ha, hb);
    json_decref(m2);

    /* unreadable: strict names the path, lenient keeps a null */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(avo_package_manifest(dir, pj, 1, &m2, err, sizeof err), -EISDIR);
    assert_null(m2);
    assert_non_null(strstr(err, path));
    assert_int_equal(avo_package_manifest(dir, pj, 0, &m2, err, sizeof err), 0);
    assert_true(json_is_null(json_object_get(m2, "seed.c")));
    json_decref(m2);
    json_decref(m);
    json_decref(pj);
    remove_dir(dir);
}

/* A package directory near PATH_MAX: its files' paths do not fit, and
 * that is the error (strict or not), not a manifest of truncated paths. */
static void test_manifest_long_path(void **state)
{
    (void)state;
    char dir[PATH_MAX], err[600] = "";
    memset(dir, 'd', sizeof dir - 8);
    dir[0] = '/';
    dir[sizeof dir - 8] = 0;
    json_t *pj = json_pack("{s:s,s:s}", "reference", "reference.c", "seed", "seed.c"), *m = NULL;
    for (int strict = 0; strict < 2; strict++) {
        assert_int_equal(avo_package_manifest(dir, pj, strict, &m, err, sizeof err), -ENAMETOOLONG);
        assert_null(m);
        assert_non_null(strstr(err, "path too long"));
    }
    json_decref(pj);
}

static void test_pin_and_diff(void **state)
{
    (void)state;
    char dir[64], err[600] = "", kernels[80];
    copy_sgemm(dir);
    avo_problem p;
    assert_int_equal(avo_problem_load(&p, dir, err, sizeof err), 0);
    json_t *pin = avo_pin_make(&p, err, sizeof err);
    assert_non_null(pin);
    avo_problem_free(&p);
    const char *seed = json_string_value(json_object_get(pin, "seed_text"));
    assert_non_null(strstr(seed, "sgemm"));

    /* The pinned text loads without the disk's problem.json. */
    const char *slash = strrchr(dir, '/');
    snprintf(kernels, sizeof kernels, "%.*s", (int)(slash - dir), dir);
    json_object_set_new(pin, "problem", json_string(slash + 1));
    json_object_set_new(pin, "job", json_integer(7));
    assert_int_equal(
        avo_pin_load(&p, dir, json_string_value(json_object_get(pin, "problem_json")), NULL, err, sizeof err), 0);
    assert_string_equal(p.seed, "seed.c");
    avo_problem_free(&p);

    json_t *d = avo_pin_diff(kernels, pin, err, sizeof err);
    assert_non_null(d);
    assert_true(json_is_true(json_object_get(d, "same")));
    assert_int_equal(json_array_size(json_object_get(d, "changes")), 0);
    json_decref(d);

    /* an edited seed: one change, a unified diff of it */
    char *edited = malloc(strlen(seed) + 64);
    sprintf(edited, "/* edited */\n%s", seed);
    write_file(dir, "seed.c", edited);
    free(edited);
    d = avo_pin_diff(kernels, pin, err, sizeof err);
    assert_non_null(d);
    assert_false(json_is_true(json_object_get(d, "same")));
    json_t *c = json_object_get(d, "changes");
    assert_int_equal(json_array_size(c), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "file")), "seed.c");
    const char *diff = json_string_value(json_object_get(json_array_get(json_object_get(d, "diffs"), 0), "diff"));
    assert_non_null(diff);
    assert_non_null(strstr(diff, "+/* edited */"));
    json_decref(d);
    json_decref(pin);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),    cmocka_unit_test(test_hash),         cmocka_unit_test(test_changes),
        cmocka_unit_test(test_manifest), cmocka_unit_test(test_pin_and_diff), cmocka_unit_test(test_manifest_long_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
