/* Toolchain constraints of a job (issue 21, point 2; docs/jobs.md,
 * "Toolchain"): {"nvcc": "13.0", "driver": ">=580", "gpu": "H200"}. Parsed
 * strictly here, at submission, so that what reaches the database (where
 * avo_toolchain_match, sql/018_toolchain.sql, matches them against the
 * workers' recorded toolchains at claim time) is only ever the canonical
 * form that SQL parses with one regular expression. Pure: JSON in, JSON
 * and text out. */
#ifndef AVO_TOOLCHAIN_H
#define AVO_TOOLCHAIN_H

#include <jansson.h>
#include <stddef.h>

/* The keys a constraint may name, NULL-terminated. Version keys (nvcc, cc,
 * driver, cuda_driver, cuda_runtime, avo) take version constraints; name
 * keys (gpu, cpu) take a non-empty text matched case-insensitively as a
 * substring of the worker's GPU or CPU model. */
extern const char *const avo_toolchain_keys[];

/* Whether key is a version key (1), a name key (0) or unknown (-1). */
int avo_toolchain_key_kind(const char *key);

/* One version constraint: OP VERSION, OP one of "", "=", ">=", "<=", ">",
 * "<"; VERSION 1 to 4 dot-separated decimal components of at most 9
 * digits. Blanks around and between are allowed. Writes the canonical
 * form ("13.0", ">=580", "<13.1"; "=" is dropped) into out. Returns 0 or
 * -EINVAL. */
int avo_toolchain_constraint_parse(const char *text, char *out, size_t outlen);

/* The "toolchain" member of a job spec: an object whose keys are in
 * avo_toolchain_keys and whose values are a constraint string or a
 * non-empty array of them (all must hold: [">=580", "<590"]). Returns 0
 * and a new canonical object in *out, or a negative int with
 * "toolchain.KEY: reason" in err. */
int avo_toolchain_parse(const json_t *in, json_t **out, char *err, size_t errlen);

/* The numeric version in a tool's banner line: the last token of 1 to 4
 * dot-separated numbers (one with a dot before one without: "13.2.1
 * 20230801" is 13.2.1), a leading 'V' or 'v' allowed and trailing
 * punctuation ignored ("cc (Debian 12.2.0-14) 12.2.0" -> "12.2.0";
 * "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0.88").
 * Returns 0, or -ENOENT with out empty. */
int avo_toolchain_banner_version(const char *line, char *out, size_t outlen);

#endif
