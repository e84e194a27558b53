/* A problem package's manifest and hash, as a job pins it (avo_package.h). */
#include "avo_package.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "avo_file.h"
#include "avo_paths.h"

static int add_name(const char **names, int n, int max, const char *name)
{
    if (!name || !*name || n >= max)
        return n;
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return n;
    names[n] = name;
    return n + 1;
}

int avo_package_files(const json_t *problem_json, const char **names, int max)
{
    int n = add_name(names, 0, max, "problem.json");
    static const char *const top[] = {"reference", "baseline", "seed"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        n = add_name(names, n, max, json_string_value(json_object_get(problem_json, top[i])));
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(problem_json, "seeds"), k, v)
        n = add_name(names, n, max, json_string_value(json_object_get(v, "file")));
    return n;
}

/* One file's sha256, read through its links; -errno when it is not a
 * readable regular file (a FIFO would block the reader; a directory
 * passes access(2)). */
static int file_sha(const char *path, char out[AVO_SHA256_HEX])
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    size_t len = 0;
    char *data = avo_file_read(path, &len);
    if (!data)
        return -errno;
    int rc = avo_hash_sha256_hex(data, len, out);
    free(data);
    return rc < 0 ? -EIO : 0;
}

int avo_package_manifest(const char *dir, const json_t *problem_json, int strict, json_t **files, char *err,
                         size_t errlen)
{
    const char *names[AVO_PACKAGE_MAX_FILES];
    const int n = avo_package_files(problem_json, names, AVO_PACKAGE_MAX_FILES);
    json_t *m = json_object();
    int rc = m ? 0 : -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[PATH_MAX], sha[AVO_SHA256_HEX];
        if (avo_paths_join(path, sizeof path, dir, names[i]) < 0) {
            snprintf(err, errlen, "path too long: %.200s.../%.100s", dir, names[i]);
            rc = -ENAMETOOLONG;
            break;
        }
        int frc = file_sha(path, sha);
        if (frc == 0) {
            json_object_set_new(m, names[i], json_string(sha));
        } else if (!strict) {
            json_object_set_new(m, names[i], json_null());
        } else {
            snprintf(err, errlen, "cannot read %s: %s", path, frc == -EINVAL ? "not a regular file" : strerror(-frc));
            rc = frc;
        }
    }
    if (rc < 0) {
        json_decref(m);
        m = NULL;
    }
    *files = m;
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names of one or two manifests, sorted, each once; how many. */
static size_t sorted_names(const json_t *a, const json_t *b, const char **out, size_t max)
{
    size_t n = 0;
    const json_t *both[] = {a, b};
    for (int s = 0; s < 2; s++) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)both[s], k, v)
        {
            int seen = 0;
            for (size_t i = 0; i < n && !seen; i++)
                seen = !strcmp(out[i], k);
            if (!seen && n < max)
                out[n++] = k;
        }
    }
    qsort(out, n, sizeof *out, cmp_str);
    return n;
}

int avo_package_hash(const json_t *files, char out[AVO_SHA256_HEX])
{
    const char *names[AVO_PACKAGE_MAX_FILES * 2];
    const size_t n = sorted_names(files, NULL, names, sizeof names / sizeof names[0]);
    size_t cap = 1, len = 0;
    for (size_t i = 0; i < n; i++)
        cap += strlen(names[i]) + AVO_SHA256_HEX + 2;
    char *text = malloc(cap);
    if (!text)
        return -ENOMEM;
    text[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *sha = json_string_value(json_object_get(files, names[i]));
        len += (size_t)snprintf(text + len, cap - len, "%s %s\n", names[i], sha ? sha : "-");
    }
    int rc = avo_hash_sha256_hex(text, len, out);
    free(text);
    return rc < 0 ? -EIO : 0;
}

json_t *avo_package_changes(const json_t *pinned, const json_t *disk)
{
    const char *names[AVO_PACKAGE_MAX_FILES * 2];
    const size_t n = sorted_names(pinned, disk, names, sizeof names / sizeof names[0]);
    json_t *out = json_array();
    for (size_t i = 0; out && i < n; i++) {
        const char *p = json_string_value(json_object_get(pinned, names[i]));
        const char *d = json_string_value(json_object_get(disk, names[i]));
        if (p && d && !strcmp(p, d))
            continue;
        const char *change = !p ? "added" : !d ? "removed" : "changed";
        json_array_append_new(
            out, json_pack("{s:s,s:s?,s:s?,s:s}", "file", names[i], "pinned", p, "disk", d, "change", change));
    }
    return out;
}

const char *avo_package_first_change(const json_t *pinned, const json_t *disk, const char *const *names)
{
    for (; *names; names++) {
        if (!**names)
            continue;
        const char *p = json_string_value(json_object_get(pinned, *names));
        const char *d = json_string_value(json_object_get(disk, *names));
        if (!p || !d || strcmp(p, d))
            return *names;
    }
    return NULL;
}
