/* Parses the ptxas resource report into per-kernel data (ptxas.h). */
#include "ptxas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Find or add the entry for a kernel. */
static json_t *entry(json_t *arr, const char *kernel)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "kernel")), kernel))
            return e;
    }
    e = json_pack("{s:s,s:n,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "kernel", kernel, "target", "registers", 0, "barriers", 0,
                  "smem_bytes", 0, "cmem_bytes", 0, "stack_bytes", 0, "spill_store_bytes", 0, "spill_load_bytes", 0);
    json_array_append_new(arr, e);
    return e;
}

/* The number before a phrase, e.g. "128 registers" -> 128. */
static int number_before(const char *line, const char *phrase, long *out)
{
    const char *p = strstr(line, phrase);
    if (!p)
        return 0;
    while (p > line && p[-1] == ' ')
        p--;
    const char *q = p;
    while (q > line && q[-1] >= '0' && q[-1] <= '9')
        q--;
    if (q == p)
        return 0;
    *out = strtol(q, NULL, 10);
    return 1;
}

json_t *avo_ptxas_parse(const char *log)
{
    json_t *arr = json_array();
    json_t *cur = NULL;
    const char *line = log;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        char kernel[512], target[64];
        long v;
        if (sscanf(buf, "ptxas info : Compiling entry function '%511[^']' for '%63[^']'", kernel, target) == 2 ||
            sscanf(buf, "ptxas info    : Compiling entry function '%511[^']' for '%63[^']'", kernel, target) == 2) {
            cur = entry(arr, kernel);
            json_object_set_new(cur, "target", json_string(target));
        } else if (sscanf(buf, "ptxas info    : Function properties for %511s", kernel) == 1) {
            cur = entry(arr, kernel);
        } else if (cur) {
            if (number_before(buf, "bytes stack frame", &v))
                json_object_set_new(cur, "stack_bytes", json_integer(v));
            if (number_before(buf, "bytes spill stores", &v))
                json_object_set_new(cur, "spill_store_bytes", json_integer(v));
            if (number_before(buf, "bytes spill loads", &v))
                json_object_set_new(cur, "spill_load_bytes", json_integer(v));
            if (number_before(buf, "registers", &v))
                json_object_set_new(cur, "registers", json_integer(v));
            if (number_before(buf, "barriers", &v))
                json_object_set_new(cur, "barriers", json_integer(v));
            if (number_before(buf, "bytes smem", &v))
                json_object_set_new(cur, "smem_bytes", json_integer(v));
            const char *c = strstr(buf, "bytes cmem[0]");
            if (c && number_before(buf, "bytes cmem[0]", &v))
                json_object_set_new(cur, "cmem_bytes", json_integer(v));
        }
        line = nl ? nl + 1 : NULL;
    }
    return arr;
}
