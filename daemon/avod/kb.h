/* Knowledge-base documents cut into chunks for full-text search: a chunk is
 * a unit the agent can read in one tool answer and a search can rank on its
 * own. Pure: no I/O. */
#ifndef AVO_KB_H
#define AVO_KB_H

#include <jansson.h>
#include <stddef.h>

/* Largest document accepted (its JSON request must fit avod's body limit). */
#define AVO_KB_MAX_BYTES (512u * 1024u)
/* A chunk grows up to about this many bytes before it is cut. */
#define AVO_KB_CHUNK_BYTES 1800u

/* "markdown" (.md, .markdown), "source" (.c .h .cu .cuh .cc .cpp .hpp .py
 * .ptx .s), or "text". */
const char *avo_kb_kind(const char *name);

/* Cut text into [{"heading", "body"}]. Markdown: at headings, each chunk
 * titled by its heading path ("TMA > Boxes"), long sections further cut at
 * blank lines; text: paragraphs packed up to the chunk size; source: blocks
 * of lines cut at blank lines. A paragraph longer than a chunk is cut at
 * line ends. Refuses (-EINVAL, reason in err) text that is empty, larger
 * than AVO_KB_MAX_BYTES, not UTF-8, or has NUL bytes. *out is a new array. */
int avo_kb_chunk(const char *name, const char *text, size_t len, json_t **out, char *err, size_t errlen);

#endif
