/* Where the project's data lives relative to the running binary: in a build
 * tree (build/bin/X -> ../../kernels) or an installation (PREFIX/bin/X ->
 * PREFIX/share/avo/kernels). */
#ifndef AVO_PATHS_H
#define AVO_PATHS_H

#include <stddef.h>

/* Directory of /proc/self/exe. */
int avo_paths_exe_dir(char *out, size_t len);
/* The compile cache and the avo-worker that avod runs for compile checks
 * (submission seed checks, the agent's compile tool): <home>/cache/seed-check
 * and avo-worker beside the running binary ("" when it cannot be found). */
void avo_paths_compile_check(const char *home, char *cache, size_t cachelen, char *worker, size_t workerlen);
/* Find a data directory ("kernels", "sql"). Returns 0 or -2 if not found
 * (out then holds the installed location that was tried). */
int avo_paths_data(const char *what, char *out, size_t len);

#endif
