/* Knowledge-base documents cut into searchable chunks (kb.h). */
#include "kb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *avo_kb_kind(const char *name)
{
    static const char *const md[] = {".md", ".markdown", NULL};
    static const char *const src[] = {".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp", ".py", ".ptx", ".s", NULL};
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (!dot)
        return "text";
    for (int i = 0; md[i]; i++)
        if (!strcasecmp(dot, md[i]))
            return "markdown";
    for (int i = 0; src[i]; i++)
        if (!strcasecmp(dot, src[i]))
            return "source";
    return "text";
}

typedef struct {
    json_t *out;
    char heading[512];
    char *body; /* the chunk being filled */
    size_t len, cap;
    int oom;
} cutter;

static void append(cutter *c, const char *s, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        size_t cap = (c->len + n + 1) * 2;
        char *b = realloc(c->body, cap);
        if (!b) {
            c->oom = 1;
            return;
        }
        c->body = b;
        c->cap = cap;
    }
    memcpy(c->body + c->len, s, n);
    c->len += n;
    c->body[c->len] = 0;
}

static void flush(cutter *c)
{
    while (c->len && (c->body[c->len - 1] == '\n' || c->body[c->len - 1] == ' ' || c->body[c->len - 1] == '\t'))
        c->body[--c->len] = 0;
    size_t start = 0;
    while (start < c->len && c->body[start] == '\n')
        start++;
    if (c->len > start && json_array_append_new(c->out, json_pack("{s:s,s:s%}", "heading", c->heading, "body",
                                                                  c->body + start, c->len - start)) < 0)
        c->oom = 1;
    c->len = 0;
}

/* A paragraph (lines up to a blank line) joins the chunk unless that would
 * overflow it; one longer than a chunk is cut at line ends. */
static void add_paragraph(cutter *c, const char *p, size_t n)
{
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    if (!n)
        return;
    if (c->len && c->len + n + 1 > AVO_KB_CHUNK_BYTES)
        flush(c);
    while (n > AVO_KB_CHUNK_BYTES) {
        size_t cut = AVO_KB_CHUNK_BYTES;
        while (cut > 0 && p[cut - 1] != '\n')
            cut--;
        if (cut == 0)
            cut = AVO_KB_CHUNK_BYTES; /* one enormous line: cut anywhere */
        /* never inside a UTF-8 sequence */
        while (cut < n && ((unsigned char)p[cut] & 0xC0) == 0x80)
            cut++;
        append(c, p, cut);
        flush(c);
        p += cut;
        n -= cut;
    }
    if (c->len)
        append(c, "\n\n", 2);
    append(c, p, n);
}

/* "## Boxes" at level 2 under "# TMA" -> heading path "TMA > Boxes". */
static void set_heading(cutter *c, char stack[6][160], int level, const char *title, size_t n)
{
    while (n && (title[n - 1] == ' ' || title[n - 1] == '#' || title[n - 1] == '\r'))
        n--;
    snprintf(stack[level - 1], 160, "%.*s", (int)(n < 159 ? n : 159), title);
    for (int i = level; i < 6; i++)
        stack[i][0] = 0;
    c->heading[0] = 0;
    for (int i = 0; i < 6; i++) {
        if (!stack[i][0])
            continue;
        size_t l = strlen(c->heading);
        snprintf(c->heading + l, sizeof c->heading - l, "%s%s", l ? " > " : "", stack[i]);
    }
}

int avo_kb_chunk(const char *name, const char *text, size_t len, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!text || len == 0) {
        snprintf(err, errlen, "%s: the file is empty", name);
        return -EINVAL;
    }
    if (len > AVO_KB_MAX_BYTES) {
        snprintf(err, errlen, "%s: %zu bytes is more than the %u KiB a document may have; split it", name, len,
                 AVO_KB_MAX_BYTES / 1024);
        return -EINVAL;
    }
    if (memchr(text, 0, len)) {
        snprintf(err, errlen, "%s: contains NUL bytes; not a text file?", name);
        return -EINVAL;
    }
    json_t *probe = json_stringn(text, len); /* NULL unless valid UTF-8 */
    if (!probe) {
        snprintf(err, errlen, "%s: not UTF-8 text", name);
        return -EINVAL;
    }
    json_decref(probe);

    const int markdown = !strcmp(avo_kb_kind(name), "markdown");
    cutter c = {.out = json_array()};
    char stack[6][160] = {{0}};
    int fenced = 0;
    const char *para = NULL, *end = text + len;
    if (!c.out)
        return -ENOMEM;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *next = nl ? nl + 1 : end;
        size_t n = (size_t)((nl ? nl : end) - line);
        int blank = 1;
        for (size_t i = 0; i < n; i++)
            if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
                blank = 0;
        int level = 0;
        if (markdown && !fenced)
            while (level < (int)n && level < 7 && line[level] == '#')
                level++;
        const int heading = level >= 1 && level <= 6 && (size_t)level < n && line[level] == ' ';
        if (markdown && n >= 3 && !strncmp(line, "```", 3))
            fenced = !fenced;
        if (blank || heading) {
            if (para)
                add_paragraph(&c, para, (size_t)(line - para));
            para = NULL;
        }
        if (heading) {
            flush(&c);
            set_heading(&c, stack, level, line + level + 1, n - (size_t)level - 1);
        } else if (!blank && !para) {
            para = line;
        }
        line = next;
    }
    if (para)
        add_paragraph(&c, para, (size_t)(end - para));
    flush(&c);
    free(c.body);
    if (c.oom) {
        json_decref(c.out);
        return -ENOMEM;
    }
    if (json_array_size(c.out) == 0) {
        json_decref(c.out);
        snprintf(err, errlen, "%s: nothing but headings and blank lines", name);
        return -EINVAL;
    }
    *out = c.out;
    return 0;
}
