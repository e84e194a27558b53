/* avoctl's aligned tables. Everything writes to a FILE* given by the
 * caller so the unit tests can check the exact text. */
#ifndef AVOCTL_TABLE_H
#define AVOCTL_TABLE_H

#include <stddef.h>
#include <stdio.h>

typedef struct avoctl_table avoctl_table;

/* A table of ncols columns; bit i of right_mask right-aligns column i
 * (numbers). Returns 0 or -ENOMEM. */
int avoctl_table_new(avoctl_table **t, size_t ncols, const char *const *headers, unsigned right_mask);
/* Copy one row of ncols cells (NULL cells print as "-"). */
int avoctl_table_add(avoctl_table *t, const char *const *cells);
size_t avoctl_table_rows(const avoctl_table *t);
/* Let column col give way so that rows fit in cols display columns: its
 * cells are cut (ending in "...") down to what the other columns leave,
 * but never below min_col. cols 0 means no limit (output to a pipe must
 * not lose text). Only the last call counts. */
void avoctl_table_fit(avoctl_table *t, size_t cols, size_t col, size_t min_col);
/* Columns are separated by two spaces; the last column is not padded. */
int avoctl_table_print(const avoctl_table *t, FILE *out);
void avoctl_table_free(avoctl_table *t);
/* The end of a table built row by row: when rc (what building it came to)
 * is not negative, a blank line then the table; t is freed either way.
 * Returns rc, or avoctl_table_print's result. */
int avoctl_table_print_free(avoctl_table *t, int rc, FILE *out);

/* The terminal's width when out is one, else 0 (no limit). */
size_t avoctl_table_term_width(FILE *out);

#endif
