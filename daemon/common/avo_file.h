/* Whole-file reads for the small text files avo handles (sources, specs,
 * migrations): NUL-terminated, length optional. */
#ifndef AVO_FILE_H
#define AVO_FILE_H

#include <stddef.h>

/* Returns a malloc'd buffer (caller frees) or NULL with errno set. Works on
 * pipes and /proc files too (no reliance on the file size). */
char *avo_file_read(const char *path, size_t *len);

#endif
