/* `avoctl problem new DIR --target cpu|cuda`: a new problem package that
 * passes `avoctl problem check` as written, to be edited into one's own
 * kernel (docs/problems.md, "Your own kernel"). The example is a row sum,
 * y[i] = sum over j of x[i][j] in float32, with two knobs and a
 * constraint, so every part of the format appears once. */
#ifndef AVOCTL_SCAFFOLD_H
#define AVOCTL_SCAFFOLD_H

#include <stddef.h>

/* Write problem.json, the reference, the seed (and, for cuda, a cuBLAS
 * baseline) into dir, creating it (and its parents). entry: the symbol the
 * seed exports, a C identifier of at most 63 characters; NULL derives one
 * from dir's last component. Refuses (-EEXIST) a dir that already holds any
 * of those files, -EINVAL a bad target or entry; err says why. On success
 * out_files gets the files written, comma-separated. */
int avoctl_scaffold(const char *dir, const char *target, const char *entry, char *out_files, size_t out_len, char *err,
                    size_t errlen);

#endif
