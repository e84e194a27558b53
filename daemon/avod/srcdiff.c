/* Unified diffs between two candidate sources, with libgit2 (srcdiff.h). */
#include "srcdiff.h"

#include <errno.h>
#include <git2.h>
#include <stdlib.h>
#include <string.h>

int avo_srcdiff(const char *a, const char *name_a, const char *b, const char *name_b, char **out)
{
    /* Reference-counted and thread-safe; taken once for the process. */
    static int initialised;
    git_patch *patch = NULL;
    git_buf buf = GIT_BUF_INIT;
    int rc = -EIO;

    *out = NULL;
    if (!initialised) {
        if (git_libgit2_init() < 0)
            return -EIO;
        initialised = 1;
    }
    git_diff_options opts;
    if (git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION) < 0)
        return -EIO;
    opts.context_lines = 3;
    /* Candidates are text even when a byte looks odd: never "Binary files differ". */
    opts.flags |= GIT_DIFF_FORCE_TEXT;
    if (git_patch_from_buffers(&patch, a, strlen(a), name_a, b, strlen(b), name_b, &opts) < 0)
        goto cleanup;
    if (!patch) { /* equal texts */
        rc = (*out = strdup("")) ? 0 : -12;
        goto cleanup;
    }
    if (git_patch_to_buf(&buf, patch) < 0)
        goto cleanup;
    *out = malloc(buf.size + 1);
    if (!*out) {
        rc = -ENOMEM;
        goto cleanup;
    }
    memcpy(*out, buf.ptr ? buf.ptr : "", buf.size);
    (*out)[buf.size] = '\0';
    rc = 0;
cleanup:
    git_buf_dispose(&buf);
    git_patch_free(patch);
    return rc;
}
