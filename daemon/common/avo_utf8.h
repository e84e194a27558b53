/* Text from untrusted sources (program output, disassemblies, model
 * answers) becomes JSON strings, which must be valid UTF-8 (jansson refuses
 * anything else, and so does PostgreSQL's jsonb). */
#ifndef AVO_UTF8_H
#define AVO_UTF8_H

#include <stddef.h>

/* Replace every byte that is not part of a well-formed UTF-8 sequence with
 * '?', in place. Returns how many bytes were replaced. */
size_t avo_utf8_scrub(char *s);

/* The longest prefix of s, at most max bytes, that does not end inside a
 * multi-byte character. */
size_t avo_utf8_cut(const char *s, size_t max);

#endif
