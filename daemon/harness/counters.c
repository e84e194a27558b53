/* Hardware counters and CPU time of the runner via perf_event_open (counters.h). */
#include "counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} events[AVO_CTR_N] = {
    [AVO_CTR_CYCLES] = {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    [AVO_CTR_INSTRUCTIONS] = {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    [AVO_CTR_CACHE_MISSES] = {"cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    [AVO_CTR_TASK_CLOCK] = {"task_clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
};

static int read_paranoid(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    int v = -99;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -99;
        fclose(f);
    }
    return v;
}

void avo_counters_open(avo_counters *c, pid_t pid)
{
    memset(c, 0, sizeof *c);
    c->paranoid = read_paranoid();
    c->hw = 1;
    for (int i = 0; i < AVO_CTR_N; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = events[i].type;
        a.config = events[i].config;
        a.disabled = 1;
        a.inherit = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        c->fd[i] = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (c->fd[i] < 0 && events[i].type == PERF_TYPE_HARDWARE && c->hw) {
            int e = errno;
            c->hw = 0;
            const char *hint = e == ENOENT || e == EOPNOTSUPP || e == ENODEV
                                   ? " (no hardware PMU exposed; common in VMs)"
                               : e == EACCES || e == EPERM ? " (perf_event_paranoid or missing CAP_PERFMON)"
                                                           : "";
            snprintf(c->reason, sizeof c->reason, "perf_event_open(%s): %s%s; perf_event_paranoid=%d", events[i].name,
                     strerror(e), hint, c->paranoid);
        }
    }
    if (!c->hw)
        for (int i = 0; i < AVO_CTR_N; i++)
            if (events[i].type == PERF_TYPE_HARDWARE && c->fd[i] >= 0) {
                close(c->fd[i]);
                c->fd[i] = -1;
            }
}

void avo_counters_start(avo_counters *c)
{
    for (int i = 0; i < AVO_CTR_N; i++)
        if (c->fd[i] >= 0) {
            ioctl(c->fd[i], PERF_EVENT_IOC_RESET, 0);
            ioctl(c->fd[i], PERF_EVENT_IOC_ENABLE, 0);
        }
}

void avo_counters_stop(avo_counters *c, avo_counter_values *v)
{
    memset(v, 0, sizeof *v);
    for (int i = 0; i < AVO_CTR_N; i++) {
        if (c->fd[i] < 0)
            continue;
        ioctl(c->fd[i], PERF_EVENT_IOC_DISABLE, 0);
        uint64_t buf[3];
        if (read(c->fd[i], buf, sizeof buf) != (ssize_t)sizeof buf)
            continue;
        /* Scale up when the PMU multiplexed the event. */
        v->value[i] = buf[2] > 0 && buf[2] < buf[1] ? (double)buf[0] * (double)buf[1] / (double)buf[2] : (double)buf[0];
        v->valid[i] = 1;
    }
}

void avo_counters_close(avo_counters *c)
{
    for (int i = 0; i < AVO_CTR_N; i++)
        if (c->fd[i] >= 0)
            close(c->fd[i]);
    memset(c->fd, 0xff, sizeof c->fd);
}

json_t *avo_counters_info_json(const avo_counters *c)
{
    json_t *ev = json_array();
    for (int i = 0; i < AVO_CTR_N; i++)
        if (c->fd[i] >= 0)
            json_array_append_new(ev, json_string(events[i].name));
    return json_pack("{s:b, s:o, s:i, s:o, s:b}", "available", c->hw, "reason",
                     c->hw ? json_null() : json_string(c->reason), "perf_event_paranoid", c->paranoid, "events", ev,
                     "task_clock", c->fd[AVO_CTR_TASK_CLOCK] >= 0);
}

static json_t *mean(const avo_counter_values *v, int i, int runs)
{
    return v->valid[i] && runs > 0 ? json_real(v->value[i] / runs) : json_null();
}

json_t *avo_counters_values_json(const avo_counters *c, const avo_counter_values *v, int runs)
{
    (void)c;
    int ipc = v->valid[AVO_CTR_CYCLES] && v->valid[AVO_CTR_INSTRUCTIONS] && v->value[AVO_CTR_CYCLES] > 0;
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:o}", "cycles", mean(v, AVO_CTR_CYCLES, runs), "instructions",
        mean(v, AVO_CTR_INSTRUCTIONS, runs), "cache_misses", mean(v, AVO_CTR_CACHE_MISSES, runs), "ipc",
        ipc ? json_real(v->value[AVO_CTR_INSTRUCTIONS] / v->value[AVO_CTR_CYCLES]) : json_null(), "task_clock_s",
        v->valid[AVO_CTR_TASK_CLOCK] && runs > 0 ? json_real(v->value[AVO_CTR_TASK_CLOCK] * 1e-9 / runs) : json_null());
}
