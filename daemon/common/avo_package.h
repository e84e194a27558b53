/* A problem package's content, as a job pins it (docs/jobs.md, "Pinned
 * problems"): a manifest {"FILE": "sha256 hex", ...} of problem.json and
 * every file it names (reference, baseline, the default seed and every
 * named seed), each read through its links as the worker reads it, and
 * the package hash, one sha256 over the manifest. avod computes both at
 * submission and keeps them with the job; a worker compares the files it
 * evaluates with against them before it evaluates anything. */
#ifndef AVO_PACKAGE_H
#define AVO_PACKAGE_H

#include <stddef.h>
#include <jansson.h>

#include "avo_hash.h"

/* At most this many files in a package (problem.json, reference,
 * baseline and the seeds "seeds" may name). */
#define AVO_PACKAGE_MAX_FILES 40

/* The file names a parsed problem.json gives, problem.json first, each
 * once; how many (at most max). Pure: names are not checked here (the
 * problem loader refuses names that leave the directory). */
int avo_package_files(const json_t *problem_json, const char **names, int max);

/* The manifest of the package in dir whose parsed problem.json is
 * problem_json. strict: a file that cannot be read (absent, not a regular
 * file, unreadable) fails it with -errno and "cannot read PATH: reason" in
 * err; lenient (strict 0): that file's entry is JSON null. *files is the
 * caller's. */
int avo_package_manifest(const char *dir, const json_t *problem_json, int strict, json_t **files, char *err,
                         size_t errlen);

/* The package hash of a manifest: sha256 over "NAME SHA256\n" lines in
 * byte order of NAME (a null entry hashes as "NAME -"). Pure. */
int avo_package_hash(const json_t *files, char out[AVO_SHA256_HEX]);

/* The files whose entries differ between two manifests (either may lack
 * a file, or hold null for it), in byte order of name:
 * [{"file", "pinned", "disk", "change": "changed"|"added"|"removed"}].
 * Pure; NULL only when out of memory. */
json_t *avo_package_changes(const json_t *pinned, const json_t *disk);

/* The first of the files a worker evaluates with (problem.json, the
 * reference, the baseline: names) whose entry in disk is not the one in
 * pinned; NULL when all agree. Pure. */
const char *avo_package_first_change(const json_t *pinned, const json_t *disk, const char *const *names);

#endif
