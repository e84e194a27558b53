/* avoctl's aligned tables: cells of UTF-8 text, right-aligned number
 * columns, one column that gives way to fit the terminal (table.h). */
#include "table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct avoctl_table {
    size_t ncols;
    size_t nrows; /* including the header row */
    size_t cap;
    unsigned right_mask;
    char **cells;     /* nrows * ncols, row-major */
    size_t fit_width; /* 0: no limit */
    size_t fit_col;
    size_t fit_min;
};

static int grow(avoctl_table *t)
{
    if (t->nrows < t->cap)
        return 0;
    size_t cap = t->cap ? t->cap * 2 : 16;
    char **c = realloc(t->cells, cap * t->ncols * sizeof *c);
    if (!c)
        return -ENOMEM;
    t->cells = c;
    t->cap = cap;
    return 0;
}

int avoctl_table_add(avoctl_table *t, const char *const *cells)
{
    if (grow(t) < 0)
        return -ENOMEM;
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        row[i] = strdup(cells[i] && *cells[i] ? cells[i] : "-");
        if (!row[i]) {
            while (i--)
                free(row[i]);
            return -ENOMEM;
        }
    }
    t->nrows++;
    return 0;
}

int avoctl_table_new(avoctl_table **out, size_t ncols, const char *const *headers, unsigned right_mask)
{
    avoctl_table *t = calloc(1, sizeof *t);
    if (!t || ncols == 0)
        goto fail;
    t->ncols = ncols;
    t->right_mask = right_mask;
    if (avoctl_table_add(t, headers) < 0)
        goto fail;
    *out = t;
    return 0;
fail:
    avoctl_table_free(t);
    return ncols ? -ENOMEM : -EINVAL;
}

size_t avoctl_table_rows(const avoctl_table *t)
{
    return t->nrows - 1;
}

/* Display width in columns: UTF-8 continuation bytes take no room. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

/* Bytes of s that fill at most cols display columns, cut at a character
 * boundary. */
static size_t prefix_bytes(const char *s, size_t cols)
{
    size_t i = 0, w = 0;
    while (s[i]) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (w == cols)
                break;
            w++;
        }
        i++;
    }
    return i;
}

void avoctl_table_fit(avoctl_table *t, size_t cols, size_t col, size_t min_col)
{
    t->fit_width = col < t->ncols ? cols : 0;
    t->fit_col = col;
    t->fit_min = min_col;
}

size_t avoctl_table_term_width(FILE *out)
{
    struct winsize ws;
    if (!isatty(fileno(out)) || ioctl(fileno(out), TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
        return 0;
    return ws.ws_col;
}

int avoctl_table_print(const avoctl_table *t, FILE *out)
{
    size_t *w = calloc(t->ncols, sizeof *w);
    if (!w)
        return -ENOMEM;
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t cw = width(t->cells[r * t->ncols + c]);
            if (cw > w[c])
                w[c] = cw;
        }
    if (t->fit_width) {
        size_t total = 2 * (t->ncols - 1);
        for (size_t c = 0; c < t->ncols; c++)
            total += w[c];
        size_t fc = t->fit_col;
        if (total > t->fit_width) {
            size_t over = total - t->fit_width;
            size_t want = over < w[fc] ? w[fc] - over : 0;
            if (want < t->fit_min)
                want = t->fit_min;
            if (want < w[fc])
                w[fc] = want;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t sw = width(s);
            int last = c + 1 == t->ncols;
            if (c)
                fputs("  ", out);
            if (sw > w[c]) {
                /* Only the fitted column can be narrower than its text. */
                size_t keep = w[c] > 3 ? w[c] - 3 : w[c];
                fprintf(out, "%.*s%s", (int)prefix_bytes(s, keep), s, w[c] > 3 ? "..." : "");
                continue;
            }
            int pad = (int)(w[c] - sw);
            if (t->right_mask & (1u << c))
                fprintf(out, "%*s%s", pad, "", s);
            else
                fprintf(out, "%s%*s", s, last ? 0 : pad, "");
        }
        fputc('\n', out);
    }
    free(w);
    return ferror(out) ? -EIO : 0;
}

void avoctl_table_free(avoctl_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

int avoctl_table_print_free(avoctl_table *t, int rc, FILE *out)
{
    if (rc >= 0) {
        fputc('\n', out);
        rc = avoctl_table_print(t, out);
    }
    avoctl_table_free(t);
    return rc;
}
