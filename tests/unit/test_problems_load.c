/* Every problem package under kernels/ loads: a problem.json anywhere in
 * the tree is found and given to avo_problem_load, and the failures are
 * listed together, one "FILE: FIELD: reason" line each, so a broken spec
 * is named in the test output rather than found by the first job that
 * uses it. Run from the repository root. */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "avo_problem.h"

static int found, failed;
static char failures[8192];

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    if (type != FTW_F || strcmp(path + ftw->base, "problem.json") != 0)
        return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", ftw->base > 0 ? ftw->base - 1 : 0, path);
    avo_problem p;
    char err[512] = "";
    found++;
    if (avo_problem_load(&p, dir, err, sizeof err) != 0) {
        failed++;
        size_t used = strlen(failures);
        snprintf(failures + used, sizeof failures - used, "\n  %s: %s", dir, err);
        return 0;
    }
    avo_problem_free(&p);
    return 0;
}

static void test_every_problem_loads(void **state)
{
    (void)state;
    found = failed = 0;
    failures[0] = 0;
    assert_int_equal(nftw("kernels", visit, 16, FTW_PHYS), 0);
    if (failed)
        fail_msg("%d of %d problem packages under kernels/ do not load:%s", failed, found, failures);
    /* sgemm, softmax and stencil2d at least: a walk that finds nothing must
     * not pass silently. */
    assert_true(found >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_problem_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
