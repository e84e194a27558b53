/* A job's pinned problem package: made at submission, loaded back, diffed with the disk (pin.h). */
#include "pin.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avo_file.h"
#include "avo_hash.h"
#include "avo_package.h"
#include "avo_paths.h"
#include "srcdiff.h"

/* A file of the package as text; NULL with err naming the path. */
static char *read_text(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (avo_paths_join(path, sizeof path, dir, name) < 0) {
        snprintf(err, errlen, "path too long: %.200s.../%.100s", dir, name);
        errno = ENAMETOOLONG;
        return NULL;
    }
    size_t len = 0;
    char *t = avo_file_read(path, &len);
    if (!t)
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    else if (strlen(t) != len) {
        snprintf(err, errlen, "cannot read %s: it holds a NUL byte (not a text file)", path);
        free(t);
        t = NULL;
    }
    return t;
}

/* The manifest entry of a text as stored, so that the hash describes
 * exactly the bytes the job keeps (not a later read of the file). */
static int set_sha(json_t *files, const char *name, const char *text)
{
    char sha[AVO_SHA256_HEX];
    if (avo_hash_sha256_hex(text, strlen(text), sha) < 0)
        return -EIO;
    return json_object_set_new(files, name, json_string(sha)) ? -ENOMEM : 0;
}

json_t *avo_pin_make(const avo_problem *p, char *err, size_t errlen)
{
    json_t *files = NULL, *pin = NULL;
    char *pj = NULL, *seed = NULL;
    char hash[AVO_SHA256_HEX];
    if (avo_package_manifest(p->dir, p->json, 1, &files, err, errlen) < 0)
        goto cleanup;
    if (!(pj = read_text(p->dir, "problem.json", err, errlen)) || !(seed = read_text(p->dir, p->seed, err, errlen)))
        goto cleanup;
    if (set_sha(files, "problem.json", pj) < 0 || set_sha(files, p->seed, seed) < 0 ||
        avo_package_hash(files, hash) < 0) {
        snprintf(err, errlen, "cannot hash the package %s", p->dir);
        goto cleanup;
    }
    pin = json_pack("{s:s,s:O,s:s,s:s}", "hash", hash, "files", files, "problem_json", pj, "seed_text", seed);
    if (!pin)
        snprintf(err, errlen, "out of memory (or a file of %s is not UTF-8 text)", p->dir);
cleanup:
    json_decref(files);
    free(pj);
    free(seed);
    return pin;
}

int avo_pin_load(avo_problem *p, const char *dir, const char *problem_json, const char *seed_name, char *err,
                 size_t errlen)
{
    int rc = avo_problem_load_text(p, dir, problem_json, err, errlen);
    if (rc < 0)
        return rc;
    if ((rc = avo_problem_use_seed(p, seed_name, err, errlen)) < 0)
        avo_problem_free(p);
    return rc;
}

/* The seed file a pinned problem.json names for seed_name. */
static const char *seed_file(const json_t *pj, const char *seed_name)
{
    if (seed_name && *seed_name)
        return json_string_value(json_object_get(json_object_get(json_object_get(pj, "seeds"), seed_name), "file"));
    return json_string_value(json_object_get(pj, "seed"));
}

/* A unified diff of one pinned text against the file on disk (absent on
 * disk: against nothing), appended to diffs when they differ. */
static void add_diff(json_t *diffs, const char *dir, const char *name, const char *pinned)
{
    char why[600], *disk = dir[0] ? read_text(dir, name, why, sizeof why) : NULL, *d = NULL;
    if (avo_srcdiff(pinned, name, disk ? disk : "", name, &d) == 0 && d[0])
        json_array_append_new(diffs, json_pack("{s:s,s:s,s:b}", "file", name, "diff", d, "on_disk", disk != NULL));
    free(d);
    free(disk);
}

json_t *avo_pin_diff(const char *kernels_dir, const json_t *pin, char *err, size_t errlen)
{
    const char *name = json_string_value(json_object_get(pin, "problem"));
    const char *seed_name = json_string_value(json_object_get(pin, "seed_name"));
    const char *pj_text = json_string_value(json_object_get(pin, "problem_json"));
    const char *seed_text = json_string_value(json_object_get(pin, "seed_text"));
    const json_t *pinned = json_object_get(pin, "files");
    char dir[PATH_MAX] = "", why[1024] = "", hash[AVO_SHA256_HEX];
    avo_problem p;
    int loaded = 0;
    json_t *out = NULL, *disk = NULL, *pj = pj_text ? json_loads(pj_text, 0, NULL) : NULL;
    const char *phash = json_string_value(json_object_get(pin, "hash"));
    if (!name || !phash || !pj || !seed_text || !json_is_object(pinned)) {
        snprintf(err, errlen, "the job's pin is incomplete");
        goto cleanup;
    }
    if (avo_problem_resolve(kernels_dir, name, dir, sizeof dir, why, sizeof why) < 0)
        dir[0] = 0;
    else if (avo_problem_load(&p, dir, why, sizeof why) == 0)
        loaded = 1;
    /* Files a broken or vanished package no longer names are looked for
     * under the names the pin has. */
    if (dir[0] && avo_package_manifest(dir, loaded ? p.json : pj, 0, &disk, err, errlen) < 0)
        goto cleanup;
    if (!disk)
        disk = json_object();
    if (!disk || avo_package_hash(disk, hash) < 0) {
        snprintf(err, errlen, "out of memory");
        goto cleanup;
    }
    json_t *changes = avo_package_changes(pinned, disk), *diffs = json_array();
    out = json_pack("{s:O,s:s,s:s,s:s,s:s,s:b,s:o,s:o}", "job", json_object_get(pin, "job"), "problem", name, "dir",
                    dir, "pinned", phash, "disk", hash, "same", !strcmp(phash, hash) && !why[0], "changes", changes,
                    "diffs", diffs);
    if (!out) {
        snprintf(err, errlen, "out of memory");
        goto cleanup;
    }
    if (why[0])
        json_object_set_new(out, "disk_error", json_string(why));
    const char *sf = seed_file(pj, seed_name);
    size_t i;
    json_t *c;
    json_array_foreach(changes, i, c)
    {
        const char *f = json_string_value(json_object_get(c, "file"));
        if (!strcmp(f, "problem.json"))
            add_diff(diffs, dir, f, pj_text);
        else if (sf && !strcmp(f, sf))
            add_diff(diffs, dir, f, seed_text);
    }
cleanup:
    if (loaded)
        avo_problem_free(&p);
    json_decref(disk);
    json_decref(pj);
    return out;
}
