/* Knowledge-base chunking: markdown sections with heading paths, code
 * fences, paragraphs packed and long ones cut, and the refusals. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/kb.h"

static const char *heading(json_t *chunks, size_t i)
{
    return json_string_value(json_object_get(json_array_get(chunks, i), "heading"));
}
static const char *body(json_t *chunks, size_t i)
{
    return json_string_value(json_object_get(json_array_get(chunks, i), "body"));
}

static void test_kind(void **state)
{
    (void)state;
    assert_string_equal(avo_kb_kind("notes.md"), "markdown");
    assert_string_equal(avo_kb_kind("NOTES.MARKDOWN"), "markdown");
    assert_string_equal(avo_kb_kind("seed.cu"), "source");
    assert_string_equal(avo_kb_kind("x.ptx"), "source");
    assert_string_equal(avo_kb_kind("paper.txt"), "text");
    assert_string_equal(avo_kb_kind("README"), "text");
}

static void test_markdown(void **state)
{
    (void)state;
    const char *md = "Intro line.\n\n# TMA\n\nBoxes are tiles.\n\n## Maps\nEncoded on the host.\n"
                     "```sh\n# not a heading\n```\n\n### Strides ###\nMultiples of 16.\n\n# Banks\n32 of them.\n";
    json_t *c = NULL;
    char err[256];
    assert_int_equal(avo_kb_chunk("n.md", md, strlen(md), &c, err, sizeof err), 0);
    assert_int_equal(json_array_size(c), 5);
    assert_string_equal(heading(c, 0), "");
    assert_string_equal(body(c, 0), "Intro line.");
    assert_string_equal(heading(c, 1), "TMA");
    assert_string_equal(heading(c, 2), "TMA > Maps");
    /* a '#' line inside a code fence is text, not a heading */
    assert_string_equal(body(c, 2), "Encoded on the host.\n```sh\n# not a heading\n```");
    assert_string_equal(heading(c, 3), "TMA > Maps > Strides");
    assert_string_equal(heading(c, 4), "Banks"); /* a new level-1 heading resets the path */
    json_decref(c);

    /* the same text as plain text: no headings, paragraphs packed together */
    assert_int_equal(avo_kb_chunk("n.txt", md, strlen(md), &c, err, sizeof err), 0);
    assert_int_equal(json_array_size(c), 1);
    assert_string_equal(heading(c, 0), "");
    json_decref(c);
}

static void test_sizes(void **state)
{
    (void)state;
    /* 60 paragraphs of ~100 bytes: packed into chunks of at most the size */
    char *t = malloc(8000), *p = t;
    for (int i = 0; i < 60; i++)
        p += sprintf(p, "paragraph %02d %s\n\n", i,
                     "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt");
    json_t *c = NULL;
    char err[256];
    assert_int_equal(avo_kb_chunk("p.txt", t, strlen(t), &c, err, sizeof err), 0);
    assert_true(json_array_size(c) >= 3);
    size_t i;
    json_t *x;
    json_array_foreach(c, i, x)
    {
        size_t n = strlen(body(c, i));
        assert_true(n <= AVO_KB_CHUNK_BYTES);
    }
    assert_non_null(strstr(body(c, 0), "paragraph 00"));
    assert_non_null(strstr(body(c, json_array_size(c) - 1), "paragraph 59"));
    json_decref(c);
    free(t);

    /* one paragraph longer than a chunk is cut at line ends; a line of
     * multi-byte characters is never cut inside a character */
    t = malloc(20000);
    p = t;
    for (int i = 0; i < 100; i++)
        p += sprintf(p, "line %03d of one long paragraph without blank lines\n", i);
    for (int i = 0; i < 3000; i++)
        p += sprintf(p, "\xc3\xa9"); /* é */
    assert_int_equal(avo_kb_chunk("l.txt", t, strlen(t), &c, err, sizeof err), 0);
    assert_true(json_array_size(c) >= 4);
    assert_true(strncmp(body(c, 0), "line 000", 8) == 0);
    json_array_foreach(c, i, x)
    {
        assert_non_null(body(c, i)); /* valid UTF-8, or jansson would not have made the string */
        assert_true(strlen(body(c, i)) <= AVO_KB_CHUNK_BYTES + 1);
    }
    json_decref(c);
    free(t);
}

static void test_refusals(void **state)
{
    (void)state;
    json_t *c = NULL;
    char err[256];
    assert_int_equal(avo_kb_chunk("e.md", "", 0, &c, err, sizeof err), -EINVAL);
    assert_string_equal(err, "e.md: the file is empty");
    assert_int_equal(avo_kb_chunk("n.txt", "a\0b", 3, &c, err, sizeof err), -EINVAL);
    assert_string_equal(err, "n.txt: contains NUL bytes; not a text file?");
    assert_int_equal(avo_kb_chunk("l.txt", "caf\xe9", 4, &c, err, sizeof err), -EINVAL);
    assert_string_equal(err, "l.txt: not UTF-8 text");
    assert_int_equal(avo_kb_chunk("h.md", "# a\n\n## b\n", 10, &c, err, sizeof err), -EINVAL);
    assert_string_equal(err, "h.md: nothing but headings and blank lines");
    char *big = malloc(AVO_KB_MAX_BYTES + 2);
    memset(big, 'x', AVO_KB_MAX_BYTES + 1);
    big[AVO_KB_MAX_BYTES + 1] = 0;
    assert_int_equal(avo_kb_chunk("b.txt", big, AVO_KB_MAX_BYTES + 1, &c, err, sizeof err), -EINVAL);
    assert_string_equal(err, "b.txt: 524289 bytes is more than the 512 KiB a document may have; split it");
    free(big);
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind),
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
