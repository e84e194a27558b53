/* Unified diffs between two candidate sources (libgit2's diff engine): the
 * lineage stores each candidate's diff against its parent, and
 * `avoctl diff A B` asks for any two. */
#ifndef AVO_SRCDIFF_H
#define AVO_SRCDIFF_H

/* *out: a malloc'd unified diff (3 lines of context) with a/NAME_A and
 * b/NAME_B headers; "" when the texts are equal. Returns 0 or a negative
 * int (-12 out of memory, -5 the diff engine failed). */
int avo_srcdiff(const char *a, const char *name_a, const char *b, const char *name_b, char **out);

#endif
