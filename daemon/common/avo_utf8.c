/* Untrusted text made valid UTF-8 for JSON and jsonb (avo_utf8.h). */
#include "avo_utf8.h"

#include <string.h>

/* Length of the well-formed sequence at p (1-4), or 0 if it is not one
 * (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). */
static size_t seq_len(const unsigned char *p)
{
    const unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, min = 0x10000;
    else
        return 0;
    unsigned cp = c & (0xFF >> (n + 1));
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

size_t avo_utf8_scrub(char *s)
{
    size_t replaced = 0;
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t n = seq_len(p);
        if (n) {
            p += n;
        } else {
            *p++ = '?';
            replaced++;
        }
    }
    return replaced;
}

size_t avo_utf8_cut(const char *s, size_t max)
{
    size_t len = strnlen(s, max);
    if (len < max)
        return len;
    /* Back off continuation bytes to the start of the last character, and
     * drop that character if it does not fit whole. */
    size_t start = len;
    while (start > 0 && ((unsigned char)s[start - 1] & 0xC0) == 0x80)
        start--;
    if (start > 0 && ((unsigned char)s[start - 1] & 0x80)) {
        size_t n = seq_len((const unsigned char *)s + start - 1);
        if (n == 0 || start - 1 + n > max)
            return start - 1;
    }
    return len;
}
