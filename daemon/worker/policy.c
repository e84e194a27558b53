/* The candidate policy: only documented instructions, no embedded binaries, module loading or file inclusion, checked on the source, the kept .s/.ptx and the object (policy.h). */
#include "policy.h"

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "avo_file.h"
#include "avo_utf8.h"
/* Generated at build time by daemon/worker/gen_ptx_opcodes.sh from the
 * installed toolkit: AVO_PTX_ISA, AVO_PTX_TOOLKIT, avo_ptx_opcodes[]
 * (sorted, NULL-terminated). */
#include "ptx_opcodes.h"

/* ---- findings --------------------------------------------------------------- */

/* The line `line` (1-based) of text, trimmed, into out. */
static void copy_line(const char *text, size_t len, int line, char *out, size_t outlen)
{
    size_t i = 0;
    for (int l = 1; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    size_t e = i;
    while (e < len && text[e] != '\n' && text[e] != '\r')
        e++;
    while (e > i && (text[e - 1] == ' ' || text[e - 1] == '\t'))
        e--;
    size_t n = e - i < outlen - 1 ? e - i : outlen - 1;
    memcpy(out, text + i, n);
    out[n] = 0;
    for (char *s = out; *s; s++)
        if ((unsigned char)*s < 0x20)
            *s = ' ';
    avo_utf8_scrub(out);
}

static void add(avo_policy_findings *f, int rule, const char *file, const char *text, size_t len, int line,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void add(avo_policy_findings *f, int rule, const char *file, const char *text, size_t len, int line,
                const char *fmt, ...)
{
    if (f->found[rule])
        return; /* the first of each rule is the evidence */
    avo_policy_violation *v = &f->v[rule];
    memset(v, 0, sizeof *v);
    f->found[rule] = 1;
    v->rule = rule;
    snprintf(v->file, sizeof v->file, "%s", file);
    v->line = line;
    if (text && line > 0)
        copy_line(text, len, line, v->text, sizeof v->text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->why, sizeof v->why, fmt, ap);
    va_end(ap);
    avo_utf8_scrub(v->why);
}

const avo_policy_violation *avo_policy_first(const avo_policy_findings *f, unsigned relax)
{
    for (int r = 0; r < AVO_POLICY_NRULES; r++)
        if (f->found[r] && !(relax & (1u << r)))
            return &f->v[r];
    return NULL;
}

void avo_policy_detail(const avo_policy_violation *v, char *out, size_t outlen)
{
    char where[96];
    if (v->line > 0)
        snprintf(where, sizeof where, "%s line %d", v->file, v->line);
    else
        snprintf(where, sizeof where, "%s", v->file);
    snprintf(out, outlen, "%s: %s%s%s%s: %s", avo_policy_rules_name(v->rule), where, v->text[0] ? ": `" : "", v->text,
             v->text[0] ? "`" : "", v->why);
}

json_t *avo_policy_json(const avo_policy_violation *v, unsigned relax)
{
    json_t *relaxed = json_array();
    for (int r = 0; r < AVO_POLICY_NRULES; r++)
        if (relax & (1u << r))
            json_array_append_new(relaxed, json_string(avo_policy_rules_name(r)));
    return json_pack("{s:s, s:s, s:o, s:s, s:s, s:o, s:s, s:s}", "rule", avo_policy_rules_name(v->rule), "file",
                     v->file, "line", v->line > 0 ? json_integer(v->line) : json_null(), "text", v->text, "why", v->why,
                     "relaxed", relaxed, "ptx_isa", AVO_PTX_ISA, "toolkit", AVO_PTX_TOOLKIT);
}

/* ---- names ------------------------------------------------------------------ */

/* Functions that load code at run time: exact names, and families by
 * prefix (cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx,
 * cuModuleLoadFatBinary, ...). A candidate has no use for any of them:
 * what it may link is the problem's flags' business. */
static const char *const loader_exact[] = {"dlopen",
                                           "dlmopen",
                                           "__libc_dlopen_mode",
                                           "cuLinkCreate",
                                           "cuLinkCreate_v2",
                                           "cuLinkComplete",
                                           "cudaLibraryLoadData",
                                           "cudaLibraryLoadFromFile",
                                           "__cudaRegisterFatBinary",
                                           NULL};
static const char *const loader_prefix[] = {"cuModuleLoad", "cuLibraryLoad", "cudaLibraryLoad", "cuLinkAdd", "nvrtc",
                                            "nvJitLink",    "nvPTXCompiler", "nvFatbin",        NULL};
/* Symbol lookups whose name must be a literal, so the name can be checked
 * (a name built at run time could be any loader): which argument. */
static const struct {
    const char *name;
    int prefix;
    int arg;
} lookups[] = {{"dlsym", 0, 1}, {"dlvsym", 0, 1}, {"cudaGetDriverEntryPoint", 1, 0}, {"cuGetProcAddress", 1, 0}};

static int is_loader(const char *s, size_t n)
{
    for (const char *const *e = loader_exact; *e; e++)
        if (strlen(*e) == n && memcmp(*e, s, n) == 0)
            return 1;
    for (const char *const *p = loader_prefix; *p; p++)
        if (n >= strlen(*p) && memcmp(*p, s, strlen(*p)) == 0)
            return 1;
    return 0;
}

/* A loader's name anywhere in bytes (string literals, an object's data):
 * the name of the one found, or NULL. */
static const char *loader_in(const char *s, size_t n, size_t *at)
{
    const char *const *lists[] = {loader_exact, loader_prefix};
    for (int l = 0; l < 2; l++)
        for (const char *const *e = lists[l]; *e; e++) {
            const char *p = memmem(s, n, *e, strlen(*e));
            if (p) {
                if (at)
                    *at = (size_t)(p - s);
                return *e;
            }
        }
    return NULL;
}

/* The images a build could carry and load: an ELF (a cubin is one), a
 * fatbin (its header's magic, 0xBA55ED50), a fatbin wrapper (0x466243B1). */
static const char *image_in(const unsigned char *s, size_t n, size_t *at)
{
    static const unsigned char elf[] = {0x7f, 'E', 'L', 'F'}, fatbin[] = {0x50, 0xed, 0x55, 0xba},
                               wrapper[] = {0xb1, 0x43, 0x62, 0x46};
    const struct {
        const unsigned char *m;
        const char *what;
    } magic[] = {{elf, "an ELF image (a cubin is one)"}, {fatbin, "a fatbin image"}, {wrapper, "a fatbin wrapper"}};
    const char *what = NULL;
    size_t best = n;
    for (size_t k = 0; k < sizeof magic / sizeof magic[0]; k++) {
        const unsigned char *p = memmem(s, n, magic[k].m, 4);
        if (p && (size_t)(p - s) < best) {
            best = (size_t)(p - s);
            what = magic[k].what;
        }
    }
    if (at)
        *at = best;
    return what;
}

/* Assembler directives that read a file: in a string a candidate builds
 * for the assembler (".incbin \"/etc/shadow\""), case-insensitively. */
static const char *asm_inclusion_in(const char *s, size_t n, size_t *at)
{
    static const char *const dirs[] = {".incbin", ".include", NULL};
    for (const char *const *d = dirs; *d; d++) {
        const size_t dl = strlen(*d);
        for (size_t i = 0; i + dl <= n; i++)
            if (strncasecmp(s + i, *d, dl) == 0 && (i + dl == n || !isalnum((unsigned char)s[i + dl]))) {
                *at = i;
                return *d;
            }
    }
    return NULL;
}

/* ---- the source: logical text, then tokens ------------------------------------ */

/* Translation phases 1-2 as a compiler runs them: trigraphs (gcc reads
 * them under -std=c17) and line splices removed, each character keeping
 * the line of the file it came from. */
typedef struct {
    char *c;
    int *line;
    size_t n;
} logical;

static int make_logical(const char *src, size_t len, logical *L)
{
    L->c = malloc(len + 1);
    L->line = malloc((len + 1) * sizeof *L->line);
    L->n = 0;
    if (!L->c || !L->line)
        return -ENOMEM;
    static const char tri_from[] = "=/'()!<>-", tri_to[] = "#\\^[]|{}~";
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        char ch = src[i];
        int ln = line;
        if (ch == '?' && i + 2 < len && src[i + 1] == '?' && src[i + 2] && strchr(tri_from, src[i + 2])) {
            ch = tri_to[strchr(tri_from, src[i + 2]) - tri_from];
            i += 2;
        }
        if (ch == '\\') {
            /* a splice: backslash, optional blanks, newline */
            size_t j = i + 1;
            while (j < len && (src[j] == ' ' || src[j] == '\t' || src[j] == '\r'))
                j++;
            if (j < len && src[j] == '\n') {
                line++;
                i = j;
                continue;
            }
            /* ??/ followed by a newline is a splice too */
        }
        if (ch == '\n')
            line++;
        L->c[L->n] = ch;
        L->line[L->n++] = ln;
    }
    L->c[L->n] = 0;
    L->line[L->n] = line;
    return 0;
}

enum tok_kind { T_IDENT, T_NUMBER, T_STRING, T_CHAR, T_PUNCT, T_HASH };

typedef struct {
    enum tok_kind kind;
    size_t at, len; /* in the logical text */
    int line;
    int bol;   /* first token of its logical line */
    char *str; /* T_STRING: the decoded content, joined with adjacent literals */
    size_t slen;
    int *sline; /* T_STRING: the line each byte of str came from */
} token;

typedef struct {
    token *t;
    size_t n, cap;
} tokens;

static void free_tokens(tokens *T)
{
    for (size_t i = 0; i < T->n; i++) {
        free(T->t[i].str);
        free(T->t[i].sline);
    }
    free(T->t);
}

static int push(tokens *T, token t)
{
    if (T->n == T->cap) {
        size_t cap = T->cap ? 2 * T->cap : 256;
        token *nt = realloc(T->t, cap * sizeof *nt);
        if (!nt)
            return -ENOMEM;
        T->t = nt;
        T->cap = cap;
    }
    T->t[T->n++] = t;
    return 0;
}

/* Every byte of a fresh string token from its literal's line. */
static int string_lines(token *t)
{
    t->sline = malloc((t->slen + 1) * sizeof *t->sline);
    if (!t->sline)
        return -ENOMEM;
    for (size_t k = 0; k <= t->slen; k++)
        t->sline[k] = t->line;
    return 0;
}

static int ident_start(int c)
{
    return isalpha(c) || c == '_' || c == '$' || c >= 0x80;
}

static int ident_char(int c)
{
    return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}

/* Decode an ordinary string literal body [b, e) (escapes) onto out. */
static int decode_into(const char *b, const char *e, char **out, size_t *olen)
{
    char *o = realloc(*out, *olen + (size_t)(e - b) + 1);
    if (!o)
        return -ENOMEM;
    *out = o;
    size_t n = *olen;
    for (const char *s = b; s < e; s++) {
        if (*s != '\\' || s + 1 >= e) {
            o[n++] = *s;
            continue;
        }
        s++;
        unsigned v = 0;
        int k = 0;
        switch (*s) {
        case 'n':
            o[n++] = '\n';
            break;
        case 't':
            o[n++] = '\t';
            break;
        case 'r':
            o[n++] = '\r';
            break;
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
            while (k < 3 && s < e && *s >= '0' && *s <= '7') {
                v = v * 8 + (unsigned)(*s - '0');
                s++;
                k++;
            }
            s--;
            o[n++] = (char)v;
            break;
        case 'x':
            s++;
            while (s < e && isxdigit((unsigned char)*s)) {
                v = v * 16 +
                    (unsigned)(isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10));
                s++;
            }
            s--;
            o[n++] = (char)v;
            break;
        default:
            o[n++] = *s;
            break;
        }
    }
    o[n] = 0;
    *olen = n;
    return 0;
}

/* Past blanks and comments from i, *bol set at each newline. Returns where
 * the next token begins (L->n at the end). */
static size_t skip_space(const logical *L, size_t i, int *bol)
{
    const char *c = L->c;
    size_t n = L->n;
    while (i < n) {
        unsigned char ch = (unsigned char)c[i];
        if (ch == '\n') {
            *bol = 1;
            i++;
        } else if (isspace(ch)) {
            i++;
        } else if (ch == '/' && i + 1 < n && c[i + 1] == '/') {
            while (i < n && c[i] != '\n')
                i++;
        } else if (ch == '/' && i + 1 < n && c[i + 1] == '*') {
            const char *e = strstr(c + i + 2, "*/");
            i = e ? (size_t)(e - c) + 2 : n;
        } else {
            break;
        }
    }
    return i;
}

/* A string token of its own pushed; on failure its buffers freed. */
static int push_string(tokens *T, token *t)
{
    if (string_lines(t) || push(T, *t)) {
        free(t->str);
        free(t->sline);
        return -ENOMEM;
    }
    return 0;
}

/* R"delim( ... )delim" (C++), its quote at j: the token t begins at its
 * prefix. Sets *next past it. */
/* Where a raw string's '(' is, its quote at j: after a delimiter of at
 * most 16 characters. 0 when there is none within them (or the text ends):
 * no raw string, and the caller reads an ordinary literal, so the text
 * after it is still scanned as code (a compiler refuses such a literal). */
static size_t raw_open(const logical *L, size_t j)
{
    size_t d = j + 1;
    while (d < L->n && L->c[d] != '(' && d - j <= 17)
        d++;
    return d < L->n && L->c[d] == '(' ? d : 0;
}

/* A raw string, its quote at j and its '(' at d (raw_open). */
static int lex_raw_string(const logical *L, size_t j, size_t d, token t, tokens *T, size_t *next)
{
    const char *c = L->c;
    size_t n = L->n;
    char close[20];
    int cl = snprintf(close, sizeof close, ")%.*s\"", (int)(d - j - 1), c + j + 1);
    const char *body = c + d + 1, *e = d < n ? memmem(body, n - (d + 1), close, (size_t)cl) : NULL;
    const char *end = e ? e : c + n;
    t.kind = T_STRING;
    t.str = malloc((size_t)(end - body) + 1);
    if (!t.str)
        return -ENOMEM;
    memcpy(t.str, body, (size_t)(end - body));
    t.slen = (size_t)(end - body);
    t.str[t.slen] = 0;
    *next = e ? (size_t)(e - c) + (size_t)cl : n;
    t.len = *next - t.at;
    return push_string(T, &t);
}

/* An identifier at i, or a literal's prefix (u8 u U L; R raw in CUDA).
 * Returns 1 when it pushed an identifier or a raw string (*next past it),
 * 0 when an ordinary literal follows the prefix (*next at its quote). */
static int lex_ident(const logical *L, size_t i, int cuda, token t, tokens *T, size_t *next)
{
    const char *c = L->c;
    size_t n = L->n, j = i;
    while (j < n && ident_char((unsigned char)c[j]))
        j++;
    /* string prefixes: u8 u U L, raw (C++) with R */
    size_t pl = j - i;
    int is_prefix = j < n && (c[j] == '"' || c[j] == '\'') &&
                    ((pl == 1 && strchr("uUL", c[i])) || (pl == 2 && !strncmp(c + i, "u8", 2)) ||
                     (cuda && c[j - 1] == 'R' &&
                      (pl == 1 || (pl == 2 && strchr("uUL", c[i])) || (pl == 3 && !strncmp(c + i, "u8", 2)))));
    if (!is_prefix) {
        t.kind = T_IDENT;
        t.len = pl;
        *next = j;
        return push(T, t) ? -ENOMEM : 1;
    }
    size_t d;
    if (cuda && c[j - 1] == 'R' && c[j] == '"' && (d = raw_open(L, j)))
        return lex_raw_string(L, j, d, t, T, next) ? -ENOMEM : 1;
    *next = j; /* the quote follows: an ordinary literal with a prefix */
    return 0;
}

/* A string or character literal, its quote at i (the token t may begin at
 * a prefix). Sets *next past it. */
static int lex_quoted(const logical *L, size_t i, token t, tokens *T, size_t *next)
{
    const char *c = L->c;
    size_t n = L->n, j = i + 1;
    const char q = c[i];
    while (j < n && c[j] != q && c[j] != '\n') {
        if (c[j] == '\\' && j + 1 < n)
            j++;
        j++;
    }
    t.kind = q == '"' ? T_STRING : T_CHAR;
    if (t.kind == T_STRING && decode_into(c + i + 1, c + j, &t.str, &t.slen))
        return -ENOMEM;
    *next = j < n ? j + 1 : n;
    t.len = *next - t.at;
    if (t.kind == T_STRING)
        return push_string(T, &t);
    return push(T, t);
}

/* Where the pp-number at i ends: digits, letters, dots, exponents' signs,
 * C23/C++14 digit separators. */
static size_t number_end(const logical *L, size_t i)
{
    const char *c = L->c;
    size_t n = L->n, j = i + 1;
    while (j < n) {
        if (ident_char((unsigned char)c[j]) || c[j] == '.')
            j++;
        else if ((c[j] == '+' || c[j] == '-') && strchr("eEpP", c[j - 1]))
            j++;
        else if (c[j] == '\'' && j + 1 < n && isalnum((unsigned char)c[j + 1]))
            j++;
        else
            break;
    }
    return j;
}

/* The length of the # or %: at i; ## and %:%: are pasting, not a directive. */
static size_t hash_len(const logical *L, size_t i)
{
    const char *c = L->c;
    size_t n = L->n, len = c[i] == '#' ? 1 : 2;
    if (i + len < n && (c[i + len] == '#' || (c[i + len] == '%' && i + len + 1 < n && c[i + len + 1] == ':')))
        len *= 2;
    return len;
}

/* Phase 6: adjacent string literals are one (".inc" "bin"), each byte
 * keeping its line. */
static int join_strings(tokens *T)
{
    size_t w = 0;
    for (size_t r = 0; r < T->n; r++) {
        if (w > 0 && T->t[r].kind == T_STRING && T->t[w - 1].kind == T_STRING) {
            token *a = &T->t[w - 1], *b = &T->t[r];
            char *s = realloc(a->str, a->slen + b->slen + 1);
            if (!s)
                return -ENOMEM;
            a->str = s;
            int *sl = realloc(a->sline, (a->slen + b->slen + 1) * sizeof *sl);
            if (!sl)
                return -ENOMEM;
            a->sline = sl;
            memcpy(s + a->slen, b->str, b->slen + 1);
            memcpy(sl + a->slen, b->sline, (b->slen + 1) * sizeof *sl);
            a->slen += b->slen;
            a->len = b->at + b->len - a->at;
            free(b->str);
            free(b->sline);
            b->str = NULL;
            b->sline = NULL;
            continue;
        }
        T->t[w++] = T->t[r];
    }
    T->n = w;
    return 0;
}

/* Tokens of the logical text: comments dropped, literals (with their
 * prefixes, raw strings included) kept whole, adjacent string literals
 * joined as phase 6 joins them. */
static int tokenize(const logical *L, int cuda, tokens *T)
{
    const char *c = L->c;
    size_t n = L->n, i = 0;
    int bol = 1;
    while ((i = skip_space(L, i, &bol)) < n) {
        unsigned char ch = (unsigned char)c[i];
        token t = {.at = i, .line = L->line[i], .bol = bol};
        bol = 0;
        if (ident_start(ch)) {
            int r = lex_ident(L, i, cuda, t, T, &i);
            if (r < 0)
                return r;
            if (r)
                continue;
            ch = (unsigned char)c[i];
        }
        if (ch == '"' || ch == '\'') {
            if (lex_quoted(L, i, t, T, &i))
                return -ENOMEM;
            continue;
        }
        if (isdigit(ch) || (ch == '.' && i + 1 < n && isdigit((unsigned char)c[i + 1]))) {
            t.kind = T_NUMBER;
            t.len = number_end(L, i) - i;
        } else if (ch == '#' || (ch == '%' && i + 1 < n && c[i + 1] == ':')) {
            t.kind = T_HASH;
            t.len = hash_len(L, i);
        } else {
            t.kind = T_PUNCT;
            t.len = 1;
        }
        if (push(T, t))
            return -ENOMEM;
        i += t.len;
    }
    return join_strings(T);
}

static int tok_is(const logical *L, const token *t, const char *s)
{
    return t->len == strlen(s) && memcmp(L->c + t->at, s, t->len) == 0;
}

/* Whether an included path reaches outside the system's include paths:
 * absolute, from the home directory, or through a parent directory. */
static int host_path(const char *p, size_t n)
{
    if (n && (p[0] == '/' || p[0] == '~'))
        return 1;
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '.' && p[i + 1] == '.')
            return 1;
    return 0;
}

/* The operand of an include-like directive or operator, from the logical
 * text at `at` up to the end of its line: 0 = a system or local header,
 * 1 = a host path, 2 = computed (a macro: the file it names is unknown). */
static int include_operand(const logical *L, size_t at, char close_paren)
{
    const char *c = L->c;
    size_t i = at;
    while (i < L->n && (c[i] == ' ' || c[i] == '\t' || (close_paren && c[i] == '(')))
        i++;
    if (i >= L->n || (c[i] != '<' && c[i] != '"'))
        return 2;
    char q = c[i] == '<' ? '>' : '"';
    size_t j = i + 1;
    while (j < L->n && c[j] != q && c[j] != '\n')
        j++;
    if (j >= L->n || c[j] != q)
        return 2;
    return host_path(c + i + 1, j - i - 1) ? 1 : 0;
}

/* Integer literal value (decimal, hex, octal), -1 when not one. */
static long long int_value(const logical *L, const token *t)
{
    char buf[32];
    if (t->kind == T_CHAR && t->len >= 3 && L->c[t->at] == '\'') {
        /* a one-character literal ('E', '\x7f', '\177'): its value */
        char *v = NULL;
        size_t n = 0;
        long long r = -1;
        if (decode_into(L->c + t->at + 1, L->c + t->at + t->len - 1, &v, &n) == 0 && n == 1)
            r = (unsigned char)v[0];
        free(v);
        return r;
    }
    if (t->kind != T_NUMBER || t->len >= sizeof buf)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < t->len; i++)
        if (L->c[t->at + i] != '\'')
            buf[k++] = L->c[t->at + i];
    buf[k] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    while (*end && strchr("uUlL", *end))
        end++;
    return errno || *end ? -1 : (long long)v;
}

/* One source being scanned: its text, tokens and findings. */
typedef struct {
    const logical *L;
    const tokens *T;
    const char *src, *name;
    size_t len;
    avo_policy_findings *f;
} scan;

/* Whether token i is # or %: first on its line (not the pasting ## or
 * %:%:), followed on that line by a directive's name. */
static int is_directive(const scan *S, size_t i)
{
    const token *t = &S->T->t[i];
    const int hash = t->kind == T_HASH && (t->len == 1 || (t->len == 2 && S->L->c[t->at] == '%'));
    return hash && t->bol && i + 1 < S->T->n && S->T->t[i + 1].kind == T_IDENT && S->T->t[i + 1].line == t->line;
}

/* #include, #include_next, #import, #embed, #pragma dependency: the
 * directive at token i. */
static void scan_directive(const scan *S, size_t i)
{
    const logical *L = S->L;
    const token *t = &S->T->t[i], *d = &S->T->t[i + 1];
    if (tok_is(L, d, "include") || tok_is(L, d, "include_next") || tok_is(L, d, "import")) {
        int k = include_operand(L, d->at + d->len, 0);
        if (k == 1)
            add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line,
                "includes a file outside the system's headers (an absolute or parent path)");
        else if (k == 2)
            add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line,
                "a computed #include (a macro names the file: it cannot be checked)");
    } else if (tok_is(L, d, "embed")) {
        add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line, "#embed reads a file into the program");
    } else if (tok_is(L, d, "pragma")) {
        for (size_t k = i + 2; k < S->T->n && !S->T->t[k].bol; k++)
            if (tok_is(L, &S->T->t[k], "dependency") || tok_is(L, &S->T->t[k], "include_alias"))
                add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line,
                    "a pragma that reads or names a host file");
    }
}

/* A string literal (joined): assembler inclusion, loader names, images. */
static void scan_string(const scan *S, size_t i)
{
    const token *t = &S->T->t[i];
    /* the line of the literal where the match begins */
    const char *w;
    size_t at = 0;
    if ((w = asm_inclusion_in(t->str, t->slen, &at)))
        add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->sline[at],
            "the assembler directive %s reads a file into the object", w);
    if ((w = loader_in(t->str, t->slen, &at)))
        add(S->f, AVO_POLICY_MODULE_LOADING, S->name, S->src, S->len, t->sline[at],
            "names %s, which loads code at run time", w);
    if ((w = image_in((const unsigned char *)t->str, t->slen, &at)))
        add(S->f, AVO_POLICY_EMBEDDED_BINARIES, S->name, S->src, S->len, t->sline[at < t->slen ? at : 0],
            "a string holding %s", w);
    if (strstr(t->str, "dependency") && i >= 2 && tok_is(S->L, &S->T->t[i - 2], "_Pragma"))
        add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line,
            "a pragma that reads or names a host file");
}

/* A number or character: the magic of an image written as numbers: 0x7f,
 * 0x45, 0x4c, 0x46 ("\177ELF"), or one 32-bit word. */
static void scan_number(const scan *S, size_t i)
{
    const logical *L = S->L;
    const tokens *T = S->T;
    const token *t = &T->t[i];
    long long v = int_value(L, t);
    if (v == 0x464c457fLL || v == 0xba55ed50LL || v == 0x466243b1LL)
        add(S->f, AVO_POLICY_EMBEDDED_BINARIES, S->name, S->src, S->len, t->line,
            "the magic number of an ELF or fatbin image");
    static const long long elf[] = {0x7f, 0x45, 0x4c, 0x46}, fat[] = {0x50, 0xed, 0x55, 0xba};
    const long long *m[] = {elf, fat};
    for (int k = 0; k < 2; k++) {
        size_t j = i;
        int hit = 1;
        for (int b = 0; b < 4 && hit; b++, j += 2)
            hit = j < T->n && int_value(L, &T->t[j]) == m[k][b] &&
                  (b == 3 || (j + 1 < T->n && tok_is(L, &T->t[j + 1], ",")));
        if (hit)
            add(S->f, AVO_POLICY_EMBEDDED_BINARIES, S->name, S->src, S->len, t->line, "bytes beginning %s image",
                k ? "a fatbin" : "an ELF (cubin)");
    }
}

/* A call of lookups[k] at token i: the argument that names the symbol must
 * be one string literal. */
static void scan_lookup_call(const scan *S, size_t i, size_t k)
{
    const logical *L = S->L;
    const tokens *T = S->T;
    const token *t = &T->t[i];
    size_t j = i + 1;
    int ok = j < T->n && tok_is(L, &T->t[j], "(");
    int depth = 0, arg = 0;
    for (j++; ok && j < T->n && arg < lookups[k].arg; j++) {
        if (tok_is(L, &T->t[j], "(") || tok_is(L, &T->t[j], "[") || tok_is(L, &T->t[j], "{"))
            depth++;
        else if (tok_is(L, &T->t[j], ")") || tok_is(L, &T->t[j], "]") || tok_is(L, &T->t[j], "}")) {
            if (depth-- == 0)
                ok = 0;
        } else if (depth == 0 && tok_is(L, &T->t[j], ","))
            arg++;
    }
    ok = ok && j + 1 < T->n && T->t[j].kind == T_STRING &&
         (tok_is(L, &T->t[j + 1], ",") || tok_is(L, &T->t[j + 1], ")"));
    if (!ok)
        add(S->f, AVO_POLICY_MODULE_LOADING, S->name, S->src, S->len, t->line,
            "%.*s with a symbol name that is not a string literal (it could name a loader)", (int)t->len, L->c + t->at);
}

/* An identifier: loaders, include probes, stringized .incbin, symbol lookups. */
static void scan_ident(const scan *S, size_t i)
{
    const logical *L = S->L;
    const token *t = &S->T->t[i];
    const char *id = L->c + t->at;
    if (is_loader(id, t->len)) {
        add(S->f, AVO_POLICY_MODULE_LOADING, S->name, S->src, S->len, t->line, "%.*s loads code at run time",
            (int)t->len, id);
        return;
    }
    if (tok_is(L, t, "__has_include") || tok_is(L, t, "__has_include_next") || tok_is(L, t, "__has_embed")) {
        if (include_operand(L, t->at + t->len, ')') != 0)
            add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line,
                "probes a host file or a computed path");
        return;
    }
    if ((tok_is(L, t, "incbin") || tok_is(L, t, "include")) && i > 0 && tok_is(L, &S->T->t[i - 1], ".")) {
        /* stringized into an asm statement: S(.incbin "/etc/shadow") */
        add(S->f, AVO_POLICY_FILE_INCLUSION, S->name, S->src, S->len, t->line,
            "the assembler directive .%.*s reads a file into the object", (int)t->len, id);
        return;
    }
    for (size_t k = 0; k < sizeof lookups / sizeof lookups[0]; k++) {
        const size_t ln = strlen(lookups[k].name);
        if (lookups[k].prefix ? t->len >= ln && !memcmp(id, lookups[k].name, ln) : tok_is(L, t, lookups[k].name)) {
            scan_lookup_call(S, i, k);
            return;
        }
    }
}

int avo_policy_scan_source(const char *src, size_t len, const char *name, int cuda, avo_policy_findings *f)
{
    logical L = {0};
    tokens T = {0};
    int rc = make_logical(src, len, &L);
    if (rc || (rc = tokenize(&L, cuda, &T)))
        goto cleanup;
    const scan S = {&L, &T, src, name, len, f};
    for (size_t i = 0; i < T.n; i++) {
        const token *t = &T.t[i];
        if (is_directive(&S, i))
            scan_directive(&S, i++);
        else if (t->kind == T_STRING)
            scan_string(&S, i);
        else if (t->kind == T_NUMBER || t->kind == T_CHAR)
            scan_number(&S, i);
        else if (t->kind == T_IDENT)
            scan_ident(&S, i);
    }
cleanup:
    free_tokens(&T);
    free(L.c);
    free(L.line);
    return rc;
}

/* ---- the assembler's input ---------------------------------------------------- */

int avo_policy_scan_asm(const char *text, size_t len, const char *name, avo_policy_findings *f)
{
    int line = 1;
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        /* statements of the line: split at ';', comments from '#' */
        size_t s = i;
        while (s < e) {
            while (s < e && (text[s] == ' ' || text[s] == '\t' || text[s] == ';'))
                s++;
            if (s < e && text[s] == '#')
                break;
            if (s < e && text[s] == '.') {
                size_t k = s + 1;
                while (k < e && (isalnum((unsigned char)text[k]) || text[k] == '_'))
                    k++;
                if ((k - s == 7 && strncasecmp(text + s, ".incbin", 7) == 0) ||
                    (k - s == 8 && strncasecmp(text + s, ".include", 8) == 0))
                    add(f, AVO_POLICY_FILE_INCLUSION, name, text, len, line,
                        "the assembler directive %.*s reads a file into the object", (int)(k - s), text + s);
            }
            while (s < e && text[s] != ';') {
                if (text[s] == '"') {
                    for (s++; s < e && text[s] != '"'; s++)
                        if (text[s] == '\\')
                            s++;
                }
                s++;
            }
        }
        i = e + 1;
        line++;
    }
    return 0;
}

/* ---- PTX --------------------------------------------------------------------- */

static int cmp_opcode(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int avo_policy_ptx_documented(const char *opcode)
{
    static size_t count;
    if (!count)
        while (avo_ptx_opcodes[count])
            count++;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", opcode);
    for (;;) {
        const char *key = buf;
        if (bsearch(&key, avo_ptx_opcodes, count, sizeof *avo_ptx_opcodes, cmp_opcode))
            return 1;
        char *dot = strrchr(buf, '.');
        if (!dot)
            return 0;
        *dot = 0;
    }
}

const char *avo_policy_ptx_isa(void)
{
    return AVO_PTX_ISA;
}

const char *avo_policy_ptx_toolkit(void)
{
    return AVO_PTX_TOOLKIT;
}

/* One statement of PTX [b, e) starting on `line`: its instruction, if it is
 * one, checked against the documented list. */
static void ptx_statement(const char *text, size_t len, const char *b, const char *e, int line, const char *name,
                          avo_policy_findings *f)
{
    for (;;) {
        while (b < e && isspace((unsigned char)*b)) {
            if (*b == '\n')
                line++;
            b++;
        }
        /* labels (`$L__BB0_2:`), then a guard predicate (`@!%p1`) */
        const char *k = b;
        while (k < e && (isalnum((unsigned char)*k) || *k == '_' || *k == '$' || *k == '%'))
            k++;
        const char *colon = k;
        while (colon < e && (*colon == ' ' || *colon == '\t'))
            colon++;
        /* `name:` and nvcc's `prototype_0 : .callprototype ...` */
        if (k > b && colon < e && *colon == ':' && (colon + 1 >= e || colon[1] != ':')) {
            b = colon + 1;
            continue;
        }
        if (b < e && *b == '@') {
            b++;
            while (b < e && !isspace((unsigned char)*b))
                b++;
            continue;
        }
        break;
    }
    if (b >= e || *b == '.' || !(isalpha((unsigned char)*b) || *b == '_'))
        return; /* a directive (.reg, .global, .pragma ...), or nothing */
    char op[128];
    size_t n = 0;
    while (b + n < e && n < sizeof op - 1 && (isalnum((unsigned char)b[n]) || strchr("_.:", b[n])))
        n++;
    memcpy(op, b, n);
    op[n] = 0;
    if (!avo_policy_ptx_documented(op)) {
        if (!AVO_PTX_ISA[0])
            add(f, AVO_POLICY_PTX_INSTRUCTIONS, name, text, len, line,
                "%s: this worker was built without a CUDA toolkit, so no PTX instruction is documented", op);
        else
            add(f, AVO_POLICY_PTX_INSTRUCTIONS, name, text, len, line,
                "%s is not an instruction of PTX ISA %s as the toolkit (%s) documents it", op, AVO_PTX_ISA,
                AVO_PTX_TOOLKIT);
    }
}

int avo_policy_scan_ptx(const char *text, size_t len, const char *name, avo_policy_findings *f)
{
    /* comments and strings blanked (newlines kept, so lines stay the
     * file's): a comment neither starts nor splits a statement */
    char *c = malloc(len + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c, text, len);
    c[len] = 0;
    for (size_t i = 0; i < len; i++) {
        if (c[i] == '/' && i + 1 < len && c[i + 1] == '/') {
            while (i < len && c[i] != '\n')
                c[i++] = ' ';
        } else if (c[i] == '/' && i + 1 < len && c[i + 1] == '*') {
            for (; i < len && !(c[i] == '*' && i + 1 < len && c[i + 1] == '/'); i++)
                if (c[i] != '\n')
                    c[i] = ' ';
            if (i + 1 < len)
                c[i] = c[i + 1] = ' ';
            i++;
        } else if (c[i] == '"') {
            for (c[i++] = ' '; i < len && c[i] != '"' && c[i] != '\n'; i++)
                c[i] = ' ';
            if (i < len && c[i] == '"')
                c[i] = ' ';
        }
    }
    const char *stmt = c;
    int line = 1, stmt_line = 1;
    for (const char *p = c; p < c + len; p++) {
        if (*p == '{') {
            /* Not a block: the operand of an instruction under way
             * (`mov.b64 {lo, hi}, %rd1;`), or an initializer (`= {1, 2}`,
             * `= {generic(f)}`): skipped whole, the statement goes on. */
            const char *q = p, *first = stmt;
            while (q > stmt && isspace((unsigned char)q[-1]))
                q--;
            while (first < q && isspace((unsigned char)*first))
                first++;
            const int operand = first < q && (isalpha((unsigned char)*first) || *first == '_' || *first == '@');
            if (operand || (q > stmt && q[-1] == '=')) {
                for (int depth = 0; p < c + len; p++) {
                    if (*p == '\n')
                        line++;
                    else if (*p == '{')
                        depth++;
                    else if (*p == '}' && --depth == 0)
                        break;
                }
                continue;
            }
        }
        if (*p == ';' || *p == '{' || *p == '}') {
            ptx_statement(text, len, stmt, p, stmt_line, name, f);
            stmt = p + 1;
            stmt_line = line;
        } else if (*p == '\n') {
            line++;
        }
    }
    ptx_statement(text, len, stmt, c + len, stmt_line, name, f);
    free(c);
    return 0;
}

/* ---- the object ---------------------------------------------------------------- */

/* The line of src where an identifier token (not a comment, not a
 * string) first spells ident; 0 if none. */
static int ident_line(const char *src, size_t len, const char *srcname, const char *ident)
{
    logical L = {0};
    tokens T = {0};
    int line = 0;
    const size_t sl = strlen(srcname);
    const int cuda = sl > 3 && !strcmp(srcname + sl - 3, ".cu");
    if (make_logical(src, len, &L) == 0 && tokenize(&L, cuda, &T) == 0)
        for (size_t i = 0; i < T.n && !line; i++)
            if (T.t[i].kind == T_IDENT && tok_is(&L, &T.t[i], ident))
                line = T.t[i].line;
    free_tokens(&T);
    free(L.c);
    free(L.line);
    return line;
}

/* The symbol of (symtab, strtab) that covers address a, or NULL. */
static const char *symbol_at(const unsigned char *img, size_t size, const Elf64_Shdr *sym, const Elf64_Shdr *str,
                             uint64_t a)
{
    if (!sym || !str || sym->sh_offset + sym->sh_size > size || str->sh_offset + str->sh_size > size ||
        sym->sh_entsize != sizeof(Elf64_Sym))
        return NULL;
    const Elf64_Sym *s = (const Elf64_Sym *)(img + sym->sh_offset);
    for (size_t k = 0; k < sym->sh_size / sizeof *s; k++)
        if (s[k].st_name && s[k].st_name < str->sh_size && s[k].st_shndx != SHN_UNDEF && a >= s[k].st_value &&
            (a < s[k].st_value + s[k].st_size || (s[k].st_size == 0 && a == s[k].st_value)))
            return (const char *)img + str->sh_offset + s[k].st_name;
    return NULL;
}

/* Sections nvcc fills with the candidate's own device code and its
 * registration: the one place an image belongs. */
static int device_code_section(const char *name)
{
    return !strcmp(name, ".nv_fatbin") || !strcmp(name, "__nv_relfatbin") || !strcmp(name, ".nvFatBinSegment") ||
           !strcmp(name, "__nv_module_id");
}

/* The first line of the assembler's input that names sym as a whole word
 * (`call dlopen@PLT`), 0 if none. */
static int asm_line(const char *text, size_t len, const char *sym)
{
    const size_t n = strlen(sym);
    int line = 1;
    for (size_t i = 0; text && n && i + n <= len; i++) {
        if (text[i] == '\n')
            line++;
        else if (!memcmp(text + i, sym, n) && (i == 0 || !ident_char((unsigned char)text[i - 1])) &&
                 (i + n == len || !ident_char((unsigned char)text[i + n])))
            return line;
    }
    return 0;
}

int avo_policy_scan_object(const char *path, const char *src, size_t srclen, const char *srcname, const char *asm_text,
                           size_t asm_len, avo_policy_findings *f)
{
    size_t size = 0;
    unsigned char *img = (unsigned char *)avo_file_read(path, &size);
    if (!img)
        return errno ? -errno : -EIO;
    int rc = -ENOEXEC;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size || eh->e_shstrndx >= eh->e_shnum)
        goto cleanup;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const Elf64_Shdr *names = &sh[eh->e_shstrndx];
    if (names->sh_offset + names->sh_size > size)
        goto cleanup;
    const Elf64_Shdr *symtab = NULL, *strtab = NULL, *dynsym = NULL, *dynstr = NULL;
    for (int k = 0; k < eh->e_shnum; k++) {
        if (sh[k].sh_name >= names->sh_size)
            goto cleanup;
        if (sh[k].sh_type == SHT_SYMTAB && sh[k].sh_link < eh->e_shnum) {
            symtab = &sh[k];
            strtab = &sh[sh[k].sh_link];
        } else if (sh[k].sh_type == SHT_DYNSYM && sh[k].sh_link < eh->e_shnum) {
            dynsym = &sh[k];
            dynstr = &sh[sh[k].sh_link];
        }
    }
    char why[200];
    /* imports */
    if (dynsym && dynstr && dynsym->sh_offset + dynsym->sh_size <= size &&
        dynstr->sh_offset + dynstr->sh_size <= size && dynsym->sh_entsize == sizeof(Elf64_Sym)) {
        const Elf64_Sym *s = (const Elf64_Sym *)(img + dynsym->sh_offset);
        for (size_t k = 0; k < dynsym->sh_size / sizeof *s; k++) {
            if (s[k].st_shndx != SHN_UNDEF || !s[k].st_name || s[k].st_name >= dynstr->sh_size)
                continue;
            const char *nm = (const char *)img + dynstr->sh_offset + s[k].st_name;
            /* nvcc's own registration of the candidate's device code
             * (__cudaRegisterFatBinary) is imported by every CUDA object;
             * the source check refuses the candidate naming it itself */
            if (!strncmp(nm, "__cuda", 6) || !is_loader(nm, strnlen(nm, dynstr->sh_size - s[k].st_name)))
                continue;
            snprintf(why, sizeof why, "the object imports %s, which loads code at run time", nm);
            int line = src ? ident_line(src, srclen, srcname, nm) : 0;
            if (line)
                add(f, AVO_POLICY_MODULE_LOADING, srcname, src, srclen, line, "%s", why);
            else if ((line = asm_line(asm_text, asm_len, nm)))
                add(f, AVO_POLICY_MODULE_LOADING, "cand.s", asm_text, asm_len, line,
                    "%s (no token of the source names it: a macro built the name)", why);
            else
                add(f, AVO_POLICY_MODULE_LOADING, "object", NULL, 0, 0, "%s", why);
        }
    }
    /* data: loader names and images outside the device-code sections */
    for (int k = 0; k < eh->e_shnum; k++) {
        const char *nm = (const char *)img + names->sh_offset + sh[k].sh_name;
        if (sh[k].sh_type != SHT_PROGBITS || !(sh[k].sh_flags & SHF_ALLOC) || (sh[k].sh_flags & SHF_EXECINSTR) ||
            device_code_section(nm) || sh[k].sh_offset + sh[k].sh_size > size)
            continue;
        const unsigned char *d = img + sh[k].sh_offset;
        const char *w;
        size_t at;
        if ((w = image_in(d, sh[k].sh_size, &at))) {
            const char *sym = symbol_at(img, size, symtab, strtab, sh[k].sh_addr + at);
            if (!sym)
                sym = symbol_at(img, size, dynsym, dynstr, sh[k].sh_addr + at);
            int line = src && sym ? ident_line(src, srclen, srcname, sym) : 0;
            add(f, AVO_POLICY_EMBEDDED_BINARIES, line ? srcname : "object", src, srclen, line, "%s in %s at +0x%zx%s%s",
                w, nm, at, sym ? ", symbol " : "", sym ? sym : "");
        }
        if ((w = loader_in((const char *)d, sh[k].sh_size, NULL))) {
            int line = src ? ident_line(src, srclen, srcname, w) : 0;
            add(f, AVO_POLICY_MODULE_LOADING, line ? srcname : "object", src, srclen, line,
                "the object's data (%s) names %s, which loads code at run time", nm, w);
        }
    }
    rc = 0;
cleanup:
    free(img);
    return rc;
}
