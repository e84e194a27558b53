/* Files for the small text files avo handles (sources, specs, migrations,
 * summaries): whole-file reads, `mkdir -p`, and writes that a reader never
 * sees half done. The one copy of each in the code base (issue 23). */
#ifndef AVO_FILE_H
#define AVO_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "avo_attr.h"

/* Returns a malloc'd buffer (caller frees) or NULL with errno set. Works on
 * pipes and /proc files too (no reliance on the file size). */
char *avo_file_read(const char *path, size_t *len);

/* All len bytes of buf to fd (a short write, or EINTR, goes on): 0, or a
 * negative errno (-EIO when write made no progress). */
int avo_file_write_all(int fd, const void *buf, size_t len);

/* mkdir -p: path and its missing parents, each made with mode (less the
 * umask). Returns 0 (also when it all exists) or a negative errno:
 * -ENOTDIR when path, or a part of it, exists and is no directory;
 * -ENAMETOOLONG past PATH_MAX. On failure, when failed is not NULL, it
 * names the part that could not be made. */
AVO_MUSTCHECK int avo_file_mkdirs(const char *path, mode_t mode, char *failed, size_t failedlen);

/* len bytes of data as the whole of path: written to a hidden temporary file beside it with
 * mode, flushed, then renamed over path, so a reader (or a crash) sees the
 * old file or the new one, never a part. Returns 0 or a negative errno
 * (the temporary file is removed). */
AVO_MUSTCHECK int avo_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* The same for a copy of the regular file from (not followed if it is a
 * symbolic link: -ELOOP; not a regular file: -EINVAL). */
AVO_MUSTCHECK int avo_file_copy_atomic(const char *from, const char *to, mode_t mode);

#endif
