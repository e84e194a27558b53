/* `avoctl problem diff`: a job's pinned package against the disk, for a person (pindiff.h). */
#include "pindiff.h"

#include <errno.h>
#include <string.h>

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

int avoctl_pindiff_print(const json_t *body, FILE *out)
{
    if (!json_is_object(body))
        return -EINVAL;
    const char *problem = str(body, "problem"), *dir = str(body, "dir");
    fprintf(out, "job %lld: problem %s (%s)\n", (long long)json_integer_value(json_object_get(body, "job")),
            problem ? problem : "?", dir && *dir ? dir : "directory not found");
    fprintf(out, "pinned   %s\non disk  %s\n", str(body, "pinned") ? str(body, "pinned") : "?",
            str(body, "disk") ? str(body, "disk") : "?");
    if (str(body, "disk_error"))
        fprintf(out, "on disk the package does not load: %s\n", str(body, "disk_error"));
    const json_t *changes = json_object_get(body, "changes");
    if (json_is_true(json_object_get(body, "same")) && !json_array_size(changes)) {
        fprintf(out, "the package on disk is the version the job pinned\n");
        return ferror(out) ? -EIO : 0;
    }
    fprintf(out, "\n%zu file(s) differ:\n", json_array_size(changes));
    size_t i;
    json_t *c;
    json_array_foreach(changes, i, c)
    {
        const char *p = str(c, "pinned"), *d = str(c, "disk");
        fprintf(out, "  %-8s %-24s pinned %.12s  on disk %.12s\n", str(c, "change") ? str(c, "change") : "?",
                str(c, "file") ? str(c, "file") : "?", p ? p : "-", d ? d : "(unreadable or absent)");
    }
    json_array_foreach(json_object_get(body, "diffs"), i, c)
    {
        const char *d = str(c, "diff");
        fprintf(out, "\n%s", d ? d : "");
        if (d && *d && d[strlen(d) - 1] != '\n')
            fputc('\n', out);
    }
    return ferror(out) ? -EIO : 0;
}
