/* The teams table of `avoctl teams` (teams.h). */
#include "teams.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

/* "jobs 2, in flight 4, 1 h/day, 5 h/week" from a quota object; "none". */
static void fmt_limits(const json_t *q, char *buf, size_t len)
{
    static const struct {
        const char *field, *label;
        int seconds;
    } f[] = {
        {"jobs", "jobs", 0}, {"evals_in_flight", "in flight", 0}, {"gpu_s_day", "/day", 1}, {"gpu_s_week", "/week", 1}};
    buf[0] = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const json_t *v = json_object_get(q, f[i].field);
        if (!json_is_number(v))
            continue;
        char n[48];
        size_t used = strlen(buf);
        if (f[i].seconds) {
            avoctl_fmt_duration(json_number_value(v), n, sizeof n);
            snprintf(buf + used, len - used, "%s%s%s", used ? ", " : "", n, f[i].label);
        } else {
            snprintf(buf + used, len - used, "%s%s %lld", used ? ", " : "", f[i].label,
                     (long long)json_number_value(v));
        }
    }
    if (!buf[0])
        snprintf(buf, len, "none");
}

int avoctl_teams_print(const json_t *body, FILE *out)
{
    static const char *const hdr[] = {"TEAM", "LIMITS", "SHARE", "TODAY", "WEEK", "RUNNING", "JOBS", "LOAD", "BLOCKED"};
    avoctl_table *t = NULL;
    if (avoctl_table_new(&t, 9, hdr, 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 7) < 0)
        return -ENOMEM;
    size_t i;
    json_t *tm;
    int rc = 0;
    json_array_foreach(json_object_get(body, "teams"), i, tm)
    {
        const char *name = avoctl_fmt_str(tm, "team");
        const json_t *q = json_object_get(tm, "quota");
        char limits[160], share[32], today[48], week[48], running[32], jobs[48], load[48];
        fmt_limits(q, limits, sizeof limits);
        const char *line = avoctl_fmt_str(tm, "quota_line");
        if (line && !strcmp(line, "*")) {
            size_t used = strlen(limits);
            snprintf(limits + used, sizeof limits - used, " (*)");
        }
        avoctl_fmt_num(json_is_number(json_object_get(q, "share")) ? json_number_value(json_object_get(q, "share")) : 1,
                       share, sizeof share);
        avoctl_fmt_duration(json_number_value(json_object_get(tm, "used_today_s")), today, sizeof today);
        avoctl_fmt_duration(json_number_value(json_object_get(tm, "used_week_s")), week, sizeof week);
        avoctl_fmt_field(json_object_get(tm, "running"), running, sizeof running);
        snprintf(jobs, sizeof jobs, "%lld run, %lld queued",
                 (long long)json_integer_value(json_object_get(tm, "jobs_running")),
                 (long long)json_integer_value(json_object_get(tm, "jobs_queued")));
        avoctl_fmt_num(json_number_value(json_object_get(tm, "load")), load, sizeof load);
        const char *row[] = {name && *name ? name : "- (no team)",
                             limits,
                             share,
                             today,
                             week,
                             running,
                             jobs,
                             load,
                             avoctl_fmt_str(tm, "blocked") ? avoctl_fmt_str(tm, "blocked") : "-"};
        if (avoctl_table_add(t, row) < 0) {
            rc = -ENOMEM;
            goto cleanup;
        }
    }
    if (avoctl_table_rows(t) == 0)
        fputs("no teams have used a device or have a quota yet\n", out);
    else
        avoctl_table_print(t, out);
    char hl[48];
    avoctl_fmt_duration(json_number_value(json_object_get(body, "half_life_s")), hl, sizeof hl);
    fprintf(out,
            "fair share: the team with the lowest LOAD (device-seconds, halved every %s, over SHARE) is served "
            "first\n",
            hl);
cleanup:
    avoctl_table_free(t);
    return rc;
}
