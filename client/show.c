/* `avoctl show` and `avoctl profile`: one candidate for a person (show.h). */
#include "show.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "fmt.h"
#include "toolchain.h"

static void kv(FILE *out, const char *key, const char *val)
{
    fprintf(out, "%-12s %s\n", key, val && *val ? val : "-");
}

/* A duration in the unit that keeps it short: "114.2 us", "1.04 ms". */
static void fmt_seconds(const json_t *v, char *buf, size_t len)
{
    char n[32];
    double s = json_number_value(v);
    if (!json_is_number(v)) {
        snprintf(buf, len, "-");
        return;
    }
    static const struct {
        double scale;
        const char *unit;
    } units[] = {{1, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}};
    size_t i = 0;
    while (i + 1 < sizeof units / sizeof units[0] && fabs(s) < units[i].scale && s != 0)
        i++;
    avoctl_fmt_num(s / units[i].scale, n, sizeof n);
    snprintf(buf, len, "%s %s", n, units[i].unit);
}

/* Append to buf, keeping it terminated when it is full. */
static void cat(char *buf, size_t len, const char *s)
{
    size_t used = strnlen(buf, len);
    if (used + 1 < len)
        snprintf(buf + used, len - used, "%s", s);
}

static void ids_line(const json_t *arr, char *buf, size_t len)
{
    size_t i;
    json_t *v;
    char n[32];
    buf[0] = 0;
    json_array_foreach(arr, i, v)
    {
        avoctl_fmt_field(v, n, sizeof n);
        if (i)
            cat(buf, len, ", ");
        cat(buf, len, n);
    }
}

/* "1 on vm (cpu): AMD EPYC, 2 cores; GPU 0 NVIDIA H200 (sm_90)" */
static void worker_line(const json_t *w, char *buf, size_t len)
{
    char id[32], part[512];
    size_t i;
    json_t *d;
    if (!json_is_object(w)) {
        snprintf(buf, len, "-");
        return;
    }
    avoctl_fmt_field(json_object_get(w, "id"), id, sizeof id);
    snprintf(buf, len, "%s on %s (%s)", id, avoctl_fmt_str(w, "host") ? avoctl_fmt_str(w, "host") : "?",
             avoctl_fmt_str(w, "target") ? avoctl_fmt_str(w, "target") : "?");
    int first = 1;
    json_array_foreach(json_object_get(w, "devices"), i, d)
    {
        const char *kind = avoctl_fmt_str(d, "kind");
        if (kind && strcmp(kind, "cpu") == 0) {
            char cores[32];
            avoctl_fmt_field(json_object_get(d, "cores"), cores, sizeof cores);
            snprintf(part, sizeof part, "%s, %s cores", avoctl_fmt_str(d, "model") ? avoctl_fmt_str(d, "model") : "CPU",
                     cores);
        } else if (kind && strcmp(kind, "gpu") == 0) {
            char idx[32];
            avoctl_fmt_field(json_object_get(d, "index"), idx, sizeof idx);
            snprintf(part, sizeof part, "GPU %s %s (%s)", idx,
                     avoctl_fmt_str(d, "name") ? avoctl_fmt_str(d, "name") : "?",
                     avoctl_fmt_str(d, "arch") ? avoctl_fmt_str(d, "arch") : "?");
        } else {
            continue; /* probes that found nothing */
        }
        cat(buf, len, first ? ": " : "; ");
        cat(buf, len, part);
        first = 0;
    }
}

static void cost_line(const json_t *c, char *buf, size_t len)
{
    char cpu[32], gpu[32], e[32];
    if (!json_is_object(c)) {
        snprintf(buf, len, "-");
        return;
    }
    avoctl_fmt_field(json_object_get(c, "cpu_s"), cpu, sizeof cpu);
    avoctl_fmt_field(json_object_get(c, "gpu_s"), gpu, sizeof gpu);
    avoctl_fmt_field(json_object_get(c, "energy_j"), e, sizeof e);
    snprintf(buf, len, "CPU %s s, GPU %s s, energy %s J", cpu, gpu, e);
}

static void header(const json_t *c, FILE *out)
{
    char buf[2048], a[64], b[64];
    const json_t *parents = json_object_get(c, "parents");
    const char *outcome = avoctl_fmt_str(c, "outcome");

    avoctl_fmt_field(json_object_get(c, "id"), a, sizeof a);
    avoctl_fmt_field(json_object_get(c, "job"), b, sizeof b);
    snprintf(buf, sizeof buf, "%s (job %s", a, b);
    if (json_is_integer(json_object_get(c, "island"))) {
        avoctl_fmt_field(json_object_get(c, "island"), a, sizeof a);
        cat(buf, sizeof buf, ", island ");
        cat(buf, sizeof buf, a);
    }
    cat(buf, sizeof buf, ")");
    kv(out, "candidate", buf);
    avoctl_fmt_field(json_object_get(c, "parent"), buf, sizeof buf);
    kv(out, "parent", json_is_null(json_object_get(c, "parent")) ? "- (a seed)" : buf);
    /* The other candidates the operator drew on, when it names them. */
    if (json_array_size(parents)) {
        ids_line(parents, buf, sizeof buf);
        kv(out, "derived from", buf);
    }
    kv(out, "operator", avoctl_fmt_str(c, "operator"));
    const json_t *screen = json_object_get(c, "screen");
    snprintf(buf, sizeof buf, "%s%s%s", outcome ? outcome : "pending",
             json_is_true(json_object_get(screen, "screened_out")) ? ", screened out" : "",
             json_is_true(json_object_get(c, "committed")) ? ", committed"
             : outcome                                     ? ", not committed"
                                                           : "");
    kv(out, "outcome", buf);
    if (outcome && strcmp(outcome, "ok") != 0 && avoctl_fmt_str(c, "detail"))
        kv(out, "detail", avoctl_fmt_str(c, "detail"));
    /* A best that failed when it was evaluated again alone (sql/026): no
     * longer any island's best. */
    if (avoctl_fmt_str(c, "retired"))
        kv(out, "retired", avoctl_fmt_str(c, "retired"));
    snprintf(buf, sizeof buf, "-");
    if (json_is_number(json_object_get(c, "aggregate"))) {
        avoctl_fmt_num(json_number_value(json_object_get(c, "aggregate")), buf, sizeof buf);
        if (avoctl_fmt_str(c, "unit")) {
            cat(buf, sizeof buf, " ");
            cat(buf, sizeof buf, avoctl_fmt_str(c, "unit"));
        }
    }
    kv(out, "aggregate", buf);
    /* The screen: what stopped it and by how much, or that it passed. */
    if (json_is_true(json_object_get(screen, "screened_out"))) {
        char part[160] = "", num[64];
        avoctl_fmt_screen(screen, buf, sizeof buf);
        cat(buf, sizeof buf, ": slower than the island's best beyond noise, not timed on the other configurations");
        if (json_is_number(json_object_get(screen, "aggregate"))) {
            avoctl_fmt_num(json_number_value(json_object_get(screen, "aggregate")), num, sizeof num);
            snprintf(part, sizeof part, "; partial aggregate %s%s%s over the screen's configurations", num,
                     avoctl_fmt_str(c, "unit") ? " " : "", avoctl_fmt_str(c, "unit") ? avoctl_fmt_str(c, "unit") : "");
            cat(buf, sizeof buf, part);
        }
        kv(out, "screen", buf);
    } else if (json_is_object(screen) && json_is_number(json_object_get(screen, "ratio"))) {
        snprintf(buf, sizeof buf, "passed (x%.4f on %zu configs), then timed on every configuration",
                 json_number_value(json_object_get(screen, "ratio")),
                 json_array_size(json_object_get(screen, "configs")));
        kv(out, "screen", buf);
    } else if (avoctl_fmt_str(screen, "error")) {
        snprintf(buf, sizeof buf, "not decided (%s), timed on every configuration", avoctl_fmt_str(screen, "error"));
        kv(out, "screen", buf);
    }
    avoctl_fmt_knobs(json_object_get(c, "knobs"), buf, sizeof buf);
    kv(out, "knobs", buf);
    worker_line(json_object_get(c, "worker"), buf, sizeof buf);
    kv(out, "worker", buf);
    /* Which compiler, driver and GPU produced these figures (sql/019): a
     * score is only comparable with one made on the same toolchain. */
    const json_t *tc = json_object_get(c, "toolchain");
    if (json_is_object(tc) || json_is_string(tc)) {
        avoctl_toolchain_label(tc, buf, sizeof buf);
        kv(out, "toolchain", json_is_string(tc) ? "unrecorded (a result from before toolchains were recorded)" : buf);
    }
    cost_line(json_object_get(c, "cost"), buf, sizeof buf);
    kv(out, "cost", buf);
    avoctl_fmt_time(avoctl_fmt_str(c, "created_at"), 1, buf, sizeof buf);
    kv(out, "created", buf);
    if (avoctl_fmt_str(c, "notes"))
        kv(out, "notes", avoctl_fmt_str(c, "notes"));
}

/* Per configuration: the score and how steady its timing was. Falls back
 * to "scores" when the full result is absent. */
static int scores_table(const json_t *c, size_t width, FILE *out)
{
    const json_t *configs = json_object_get(c, "configs");
    const char *unit = avoctl_fmt_str(c, "unit");
    avoctl_table *t = NULL;
    char sh[64];
    size_t i;
    json_t *row;
    int rc;

    if (!json_array_size(configs))
        configs = json_object_get(c, "scores");
    if (!json_array_size(configs))
        return 0;
    /* The problem's baseline (cuBLAS for gemm_bf16), timed in the same
     * evaluation: the column appears when any configuration has one. */
    int baseline = 0;
    json_array_foreach(configs, i, row)
        baseline |= json_is_number(json_object_get(json_object_get(row, "baseline"), "vs_baseline"));
    snprintf(sh, sizeof sh, unit ? "SCORE (%s)" : "SCORE", unit);
    const char *hdr[] = {"CONFIG", sh, "MEDIAN", "RUNS", "RSE", "VS_BASELINE"};
    if ((rc = avoctl_table_new(&t, baseline ? 6 : 5, hdr, 0x3e)) < 0)
        return rc;
    avoctl_table_fit(t, width, 0, 12);
    json_array_foreach(configs, i, row)
    {
        char score[64], med[64], runs[32], rse[32] = "-", vs[32];
        const char *name = avoctl_fmt_str(row, "name") ? avoctl_fmt_str(row, "name") : avoctl_fmt_str(row, "config");
        avoctl_fmt_field(json_object_get(row, "score"), score, sizeof score);
        fmt_seconds(json_object_get(row, "median_s"), med, sizeof med);
        avoctl_fmt_field(json_object_get(row, "runs"), runs, sizeof runs);
        if (json_is_number(json_object_get(row, "rse")))
            snprintf(rse, sizeof rse, "%.1f%%%s", 100 * json_number_value(json_object_get(row, "rse")),
                     json_is_true(json_object_get(row, "noisy")) ? " noisy" : "");
        avoctl_fmt_speedup(json_object_get(json_object_get(row, "baseline"), "vs_baseline"), vs, sizeof vs);
        const char *cells[] = {name, score, med, runs, rse, vs};
        if ((rc = avoctl_table_add(t, cells)) < 0)
            goto cleanup;
    }
cleanup:
    return avoctl_table_print_free(t, rc, out);
}

static void compile_report(const json_t *c, FILE *out)
{
    const json_t *co = json_object_get(c, "compile");
    char buf[1024], secs[64];
    size_t i;
    json_t *k;

    if (!json_is_object(co))
        return;
    fmt_seconds(json_object_get(co, "seconds"), secs, sizeof secs);
    snprintf(buf, sizeof buf, "%s%s", secs, json_is_true(json_object_get(co, "cached")) ? " (cached)" : "");
    kv(out, "compile", buf);
    /* What nvcc's ptxas said per kernel: registers and spills decide
     * occupancy, the first thing to look at in a slow CUDA candidate. */
    json_array_foreach(json_object_get(co, "ptxas"), i, k)
    {
        char regs[32], st[32], ld[32], smem[32];
        avoctl_fmt_field(json_object_get(k, "registers"), regs, sizeof regs);
        avoctl_fmt_field(json_object_get(k, "spill_store_bytes"), st, sizeof st);
        avoctl_fmt_field(json_object_get(k, "spill_load_bytes"), ld, sizeof ld);
        avoctl_fmt_field(json_object_get(k, "smem_bytes"), smem, sizeof smem);
        /* The (mangled, long) name last, so the figures line up. */
        snprintf(buf, sizeof buf, "%s registers, spills %s B stored / %s B loaded, %s B smem: %s", regs, st, ld, smem,
                 avoctl_fmt_str(k, "kernel") ? avoctl_fmt_str(k, "kernel") : "?");
        kv(out, "ptxas", buf);
    }
}

/* The compiler's output, when it is why the candidate failed. */
static void compile_log(const json_t *c, FILE *out)
{
    const char *outcome = avoctl_fmt_str(c, "outcome");
    const char *log = avoctl_fmt_str(json_object_get(c, "compile"), "log");
    if (outcome && strcmp(outcome, "compile_error") == 0 && log && *log)
        fprintf(out, "\ncompiler output:\n%s%s", log, log[strlen(log) - 1] == '\n' ? "" : "\n");
}

/* Columns for the per-configuration counters: CPU (perf) and GPU (CUPTI)
 * names, the GPU ones per kernel. */
static const struct {
    const char *key, *head;
    int seconds_scale; /* 0: a plain number; else 1 (s) or 9 (ns) */
} cpu_cols[] =
    {
        {"ipc", "IPC", 0},
        {"instructions", "INSTRUCTIONS", 0},
        {"cycles", "CYCLES", 0},
        {"cache_misses", "CACHE_MISSES", 0},
        {"task_clock_s", "TASK_CLOCK", 1},
},
  gpu_cols[] = {
      {"gpu__time_duration.sum", "TIME", 9},
      {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM%", 0},
      {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "MEM%", 0},
      {"dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM%", 0},
      {"sm__warps_active.avg.pct_of_peak_sustained_active", "WARPS%", 0},
      {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "TENSOR%", 0},
};
#define NCPU (sizeof cpu_cols / sizeof cpu_cols[0])
#define NGPU (sizeof gpu_cols / sizeof gpu_cols[0])

static void counter_cell(const json_t *v, int scale, char *buf, size_t len)
{
    if (scale && json_is_number(v)) {
        json_t *s = json_real(json_number_value(v) / (scale == 9 ? 1e9 : 1));
        fmt_seconds(s, buf, len);
        json_decref(s);
    } else {
        avoctl_fmt_field(v, buf, len);
    }
}

static void counters_line(const json_t *c, FILE *out)
{
    const json_t *top = json_object_get(c, "counters");
    char buf[1024];
    const char *reason = avoctl_fmt_str(top, "reason");
    size_t i;
    json_t *row;

    /* On a GPU the counters that matter are CUPTI's, per configuration;
     * the top-level object then only says whether perf worked on the host. */
    json_array_foreach(json_object_get(c, "configs"), i, row)
    {
        const json_t *ctr = json_object_get(row, "counters");
        if (json_is_array(json_object_get(ctr, "kernels"))) {
            snprintf(buf, sizeof buf, "%s, per configuration and kernel (below)",
                     avoctl_fmt_str(ctr, "source") ? avoctl_fmt_str(ctr, "source") : "CUPTI");
            kv(out, "counters", buf);
            return;
        }
    }
    if (!json_is_object(top))
        return;
    if (json_is_true(json_object_get(top, "available")))
        snprintf(buf, sizeof buf, "available");
    else
        snprintf(buf, sizeof buf, "not available%s%s%s", reason ? " (" : "", reason ? reason : "", reason ? ")" : "");
    if (json_is_true(json_object_get(top, "task_clock")) && !json_is_true(json_object_get(top, "available")))
        cat(buf, sizeof buf, "; task clock only");
    kv(out, "counters", buf);
}

/* Per configuration (and per kernel on a GPU): the counters that were
 * measured; a column nothing was measured for is left out. */
static int counters_table(const json_t *c, size_t width, FILE *out)
{
    const json_t *configs = json_object_get(c, "configs");
    avoctl_table *t = NULL;
    int gpu = 0, rc = 0;
    int used[NGPU > NCPU ? NGPU : NCPU] = {0};
    size_t i, j, k, nused = 0;
    json_t *row, *kern;

    json_array_foreach(configs, i, row)
    {
        const json_t *ctr = json_object_get(row, "counters");
        gpu |= json_is_array(json_object_get(ctr, "kernels"));
    }
    json_array_foreach(configs, i, row)
    {
        const json_t *ctr = json_object_get(row, "counters");
        if (!gpu) {
            for (k = 0; k < NCPU; k++)
                used[k] |= json_is_number(json_object_get(ctr, cpu_cols[k].key));
            continue;
        }
        json_array_foreach(json_object_get(ctr, "kernels"), j, kern) for (k = 0; k < NGPU; k++)
            used[k] |= json_is_number(json_object_get(json_object_get(kern, "metrics"), gpu_cols[k].key));
    }
    /* CUPTI's auto ranges are kernel launches, numbered, not named. */
    const char *hdr[2 + NGPU] = {"CONFIG", "RANGE"};
    size_t ncols = gpu ? 2 : 1;
    for (k = 0; k < (gpu ? NGPU : NCPU); k++)
        if (used[k]) {
            hdr[ncols++] = gpu ? gpu_cols[k].head : cpu_cols[k].head;
            nused++;
        }
    if (!nused)
        return 0;
    if ((rc = avoctl_table_new(&t, ncols, hdr, gpu ? ~3u : ~1u)) < 0)
        return rc;
    avoctl_table_fit(t, width, gpu ? 1 : 0, 12);
    json_array_foreach(configs, i, row)
    {
        const json_t *ctr = json_object_get(row, "counters");
        const json_t *kernels = json_object_get(ctr, "kernels");
        char cells[2 + NGPU][64];
        const char *cp[2 + NGPU];
        /* A CPU row is one "kernel": the counters object itself. */
        size_t nk = gpu ? json_array_size(kernels) : 1;
        for (j = 0; j < nk; j++) {
            const json_t *kj = json_array_get(kernels, j);
            const json_t *m = gpu ? json_object_get(kj, "metrics") : ctr;
            size_t n = 0;
            snprintf(cells[n++], sizeof cells[0], "%s",
                     avoctl_fmt_str(row, "name") ? avoctl_fmt_str(row, "name") : "?");
            if (gpu)
                snprintf(cells[n++], sizeof cells[0], "%s",
                         avoctl_fmt_str(kj, "range") ? avoctl_fmt_str(kj, "range") : "?");
            for (k = 0; k < (gpu ? NGPU : NCPU); k++) {
                if (!used[k])
                    continue;
                if (gpu)
                    counter_cell(json_object_get(m, gpu_cols[k].key), gpu_cols[k].seconds_scale, cells[n++], 64);
                else
                    counter_cell(json_object_get(m, cpu_cols[k].key), cpu_cols[k].seconds_scale, cells[n++], 64);
            }
            for (k = 0; k < ncols; k++)
                cp[k] = cells[k];
            if ((rc = avoctl_table_add(t, cp)) < 0)
                goto cleanup;
        }
    }
cleanup:
    return avoctl_table_print_free(t, rc, out);
}

static void energy_line(const json_t *c, FILE *out)
{
    const json_t *e = json_object_get(c, "energy_mj");
    char buf[64];
    if (json_is_number(e)) {
        avoctl_fmt_num(json_number_value(e) / 1000, buf, sizeof buf);
        cat(buf, sizeof buf, " J (NVML, whole evaluation)");
        kv(out, "energy", buf);
    } else {
        kv(out, "energy", "- (not measured on this target)");
    }
}

/* Which configurations ended over the rse target and why they stopped,
 * then what the host was doing: its load, and how long the runner waited
 * off a CPU during the timed calls. */
static void noise_lines(const json_t *c, FILE *out)
{
    const json_t *configs = json_object_get(c, "configs"), *load = json_object_get(c, "load");
    const json_t *gap = json_object_get(c, "clock_gap");
    char list[2048] = "", buf[2200], mark[96], a[64], b[64];
    size_t i, n = 0;
    json_t *row;

    json_array_foreach(configs, i, row)
    {
        if (!json_is_true(json_object_get(row, "noisy")))
            continue;
        avoctl_fmt_noisy(row, 1, mark, sizeof mark);
        const char *stop = avoctl_fmt_str(row, "stopped_by");
        char part[256];
        snprintf(part, sizeof part, "%s%s (%s, stopped by %s)", n++ ? "; " : "",
                 avoctl_fmt_str(row, "name") ? avoctl_fmt_str(row, "name") : "?", mark, stop ? stop : "?");
        cat(list, sizeof list, part);
    }
    if (n) {
        snprintf(buf, sizeof buf, "%zu of %zu configurations: %s", n, json_array_size(configs), list);
        kv(out, "noisy", buf);
    }
    if (json_is_object(load)) {
        avoctl_fmt_field(json_object_get(load, "load1_start"), a, sizeof a);
        avoctl_fmt_field(json_object_get(load, "load1_end"), b, sizeof b);
        char cpus[32];
        avoctl_fmt_field(json_object_get(load, "cpus"), cpus, sizeof cpus);
        snprintf(buf, sizeof buf, "%s at start, %s at end (1-minute average; %s CPUs)", a, b, cpus);
        kv(out, "host load", buf);
    }
    if (json_is_object(gap)) {
        if (avoctl_fmt_str(gap, "note")) {
            kv(out, "off CPU", avoctl_fmt_str(gap, "note"));
        } else {
            fmt_seconds(json_object_get(gap, "wall_s"), a, sizeof a);
            fmt_seconds(json_object_get(gap, "task_clock_s"), b, sizeof b);
            snprintf(buf, sizeof buf, "%.1f%% of the timed calls' %s (task clock %s)",
                     100 * json_number_value(json_object_get(gap, "off_cpu_fraction")), a, b);
            kv(out, "off CPU", buf);
        }
    }
}

int avoctl_show_profile(const json_t *prof, size_t width, FILE *out)
{
    char buf[1400];
    const json_t *res = json_object_get(prof, "result");
    if (!json_is_object(prof))
        return -EINVAL;
    snprintf(buf, sizeof buf, "%lld (%s, %s, attempt %lld), %s%s",
             (long long)json_integer_value(json_object_get(prof, "id")),
             avoctl_fmt_str(prof, "why") ? avoctl_fmt_str(prof, "why") : "?",
             avoctl_fmt_str(prof, "state") ? avoctl_fmt_str(prof, "state") : "?",
             (long long)json_integer_value(json_object_get(prof, "attempts")),
             avoctl_fmt_str(prof, "config") ? "configuration " : "the configurations counters.configs lists",
             avoctl_fmt_str(prof, "config") ? avoctl_fmt_str(prof, "config") : "");
    kv(out, "profile", buf);
    if (!json_is_object(res))
        return ferror(out) ? -EIO : 0;
    snprintf(buf, sizeof buf, "%s: %s", avoctl_fmt_str(res, "outcome") ? avoctl_fmt_str(res, "outcome") : "?",
             avoctl_fmt_str(res, "detail") ? avoctl_fmt_str(res, "detail") : "");
    kv(out, "outcome", buf);
    counters_line(res, out);
    int rc = counters_table(res, width, out);
    if (rc < 0)
        return rc;
    return ferror(out) ? -EIO : 0;
}

int avoctl_show_print(const json_t *c, int with_source, size_t width, FILE *out)
{
    int rc;

    if (!json_is_object(c))
        return -EINVAL;
    header(c, out);
    if ((rc = scores_table(c, width, out)) < 0)
        return rc;
    fputc('\n', out);
    compile_report(c, out);
    counters_line(c, out);
    energy_line(c, out);
    noise_lines(c, out);
    if ((rc = counters_table(c, width, out)) < 0)
        return rc;
    if (json_is_object(json_object_get(c, "profile"))) {
        /* Counters are a task of their own now: its latest one. */
        fputc('\n', out);
        if ((rc = avoctl_show_profile(json_object_get(c, "profile"), width, out)) < 0)
            return rc;
    }
    compile_log(c, out);

    fputc('\n', out);
    const char *text = avoctl_fmt_str(c, with_source ? "source" : "diff");
    if (text) {
        fputs(text, out);
        if (*text && text[strlen(text) - 1] != '\n')
            fputc('\n', out);
    } else if (with_source) {
        fprintf(out, "(avod sent no source)\n");
    } else if (json_is_integer(json_object_get(c, "parent"))) {
        fprintf(out, "(no diff against parent %lld)\n", (long long)json_integer_value(json_object_get(c, "parent")));
    } else {
        fprintf(out, "(a seed has no parent to diff against; --source prints its source)\n");
    }
    return ferror(out) ? -EIO : 0;
}
