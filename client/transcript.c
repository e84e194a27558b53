/* `avoctl transcript`: an agent job's steps as a readable trajectory (transcript.h). */
#include "transcript.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* Lines of one message text shown when not --full, and their width. */
#define CUT_LINES 6
#define CUT_WIDTH 160

static void text_block(FILE *out, const char *indent, const char *text, int full)
{
    int lines = 0;
    for (const char *p = text ? text : ""; *p;) {
        size_t n = strcspn(p, "\n");
        if (!full && lines == CUT_LINES) {
            int more = 0;
            for (const char *q = p; *q; q++)
                more += *q == '\n';
            fprintf(out, "%s... (%d more lines; --full shows them)\n", indent, more + 1);
            return;
        }
        fprintf(out, "%s%.*s%s\n", indent, (int)(!full && n > CUT_WIDTH ? CUT_WIDTH : n), p,
                !full && n > CUT_WIDTH ? " ..." : "");
        lines++;
        p += n + (p[n] == '\n');
    }
}

static void message(FILE *out, const json_t *m, int full)
{
    const char *role = avoctl_fmt_str(m, "role");
    const char *text = avoctl_fmt_str(m, "text");
    if (role && !strcmp(role, "tool")) {
        fprintf(out, "    tool result%s:\n", json_is_true(json_object_get(m, "is_error")) ? " (error)" : "");
        text_block(out, "      | ", text, full);
        return;
    }
    if (role && !strcmp(role, "assistant")) {
        if (text && *text) {
            fprintf(out, "    assistant:\n");
            text_block(out, "      | ", text, full);
        }
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(m, "tool_calls"), i, c)
        {
            char *args = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
            const char *bad = avoctl_fmt_str(c, "arguments_error");
            size_t n = args ? strlen(args) : 0;
            fprintf(out, "    -> %s %.*s%s%s%s\n", avoctl_fmt_str(c, "name") ? avoctl_fmt_str(c, "name") : "?",
                    (int)(!full && n > CUT_WIDTH ? CUT_WIDTH : n), args ? args : "",
                    !full && n > CUT_WIDTH ? " ..." : "", bad ? " (arguments not JSON: " : "", bad ? bad : "");
            if (bad)
                fputs(")\n", out);
            free(args);
        }
        return;
    }
    fprintf(out, "    %s:\n", role ? role : "?");
    text_block(out, "      | ", text, full);
}

int avoctl_transcript_print(const json_t *t, int full, FILE *out)
{
    const json_t *steps = json_object_get(t, "steps");
    if (!json_is_array(steps))
        return -EINVAL;
    size_t i;
    json_t *s;
    json_array_foreach(steps, i, s)
    {
        long long in = json_integer_value(json_object_get(s, "in_tokens")),
                  outt = json_integer_value(json_object_get(s, "out_tokens"));
        char turns[48], evals[48];
        avoctl_fmt_count(json_integer_value(json_object_get(s, "turns")), "turn", turns, sizeof turns);
        avoctl_fmt_count(json_integer_value(json_object_get(s, "evaluations")), "evaluation", evals, sizeof evals);
        fprintf(out,
                "%sstep %lld (island %lld): %s after %s, %s, %lld tokens (%lld in, %lld "
                "out), $%.4f\n  %s\n",
                i ? "\n" : "", (long long)json_integer_value(json_object_get(s, "step")),
                (long long)json_integer_value(json_object_get(s, "island")),
                avoctl_fmt_str(s, "state") ? avoctl_fmt_str(s, "state") : "?", turns, evals, in + outt, in, outt,
                json_number_value(json_object_get(s, "cost_usd")),
                avoctl_fmt_str(s, "reason") ? avoctl_fmt_str(s, "reason") : "(running)");
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(s, "calls"), k, c)
        {
            fprintf(out, "  turn %lld: %s/%s, %lld + %lld tokens%s, %.2f s",
                    (long long)json_integer_value(json_object_get(c, "turn")),
                    avoctl_fmt_str(c, "provider") ? avoctl_fmt_str(c, "provider") : "?",
                    avoctl_fmt_str(c, "model") ? avoctl_fmt_str(c, "model") : "?",
                    (long long)json_integer_value(json_object_get(c, "in_tokens")),
                    (long long)json_integer_value(json_object_get(c, "out_tokens")),
                    json_integer_value(json_object_get(c, "cached_tokens")) > 0 ? " (some cached)" : "",
                    json_number_value(json_object_get(c, "latency_s")));
            long long att = json_integer_value(json_object_get(c, "attempts"));
            if (att > 1)
                fprintf(out, ", %lld attempts", att);
            if (json_is_true(json_object_get(c, "late")))
                fputs(", late (answered after its step ended)", out);
            fputc('\n', out);
            size_t m;
            json_t *msg;
            json_array_foreach(json_object_get(c, "request"), m, msg) message(out, msg, full);
            if (avoctl_fmt_str(c, "error"))
                fprintf(out, "    provider error: %s\n", avoctl_fmt_str(c, "error"));
            if (json_is_object(json_object_get(c, "response")))
                message(out, json_object_get(c, "response"), full);
            const char *stop = avoctl_fmt_str(c, "stop");
            if (stop && strcmp(stop, "tool_use") != 0 && strcmp(stop, "end") != 0)
                fprintf(out, "    (stopped: %s)\n", stop);
        }
    }
    if (json_array_size(steps) == 0)
        fprintf(out, "no agent steps (not an agent job, or none has started yet)\n");
    else
        fprintf(out, "\njob total: %lld tokens, $%.4f\n", (long long)json_integer_value(json_object_get(t, "tokens")),
                json_number_value(json_object_get(t, "cost_usd")));
    return ferror(out) ? -EIO : 0;
}
