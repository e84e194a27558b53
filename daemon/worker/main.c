/* avo-worker: evaluates candidates for one GPU (or the CPU). Three modes:
 *   avo-worker [options]                      claim work from PostgreSQL
 *   avo-worker eval <problem-dir> <file>      evaluate one file, no database
 *   avo-worker check <problem-dir>            check a problem package, no database */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "avo_config.h"
#include "avo_home.h"
#include "avo_jobspec.h"
#include "avo_log.h"
#include "avo_paths.h"
#include "avo_version.h"
#include "check.h"
#include "devices.h"
#include "evaluate.h"
#include "cpulease.h"
#include "gpulock.h"
#include "queue.h"
#include "toolchain.h"

typedef struct {
    char config[AVO_CFG_STRLEN];
    char home[AVO_CFG_STRLEN];
    char db[AVO_CFG_STRLEN];
    char kernels[AVO_CFG_STRLEN];
    char target[AVO_CFG_STRLEN];
    char harness[AVO_CFG_STRLEN];
    char cache[AVO_CFG_STRLEN];
    char scratch[AVO_CFG_STRLEN];
    char log_level[AVO_CFG_STRLEN];
    char toolchain_file[AVO_CFG_STRLEN];
    long long gpu;
    long long prefetch;
    long long serve;
    long long serve_slots;
    double lease;
    double timeout;
    long long poll_ms;
    long long max_evals;
    long long ref_cache_mb;
    char gpu_lock_dir[AVO_CFG_STRLEN];
    long long harness_cpu;
} worker_settings;

#define ROW(name, type, field, dflt, env, lo, hi, help)                                                                \
    {                                                                                                                  \
        name, type, offsetof(worker_settings, field), dflt, env, lo, hi, help                                          \
    }
static const avo_cfg_row worker_rows[] = {
    ROW("config", AVO_CFG_STR, config, NULL, "AVO_WORKER_CONFIG", 1, 0, "config file"),
    ROW("home", AVO_CFG_STR, home, NULL, "AVO_HOME", 1, 0, "avod's state directory (to find the database)"),
    ROW("db", AVO_CFG_STR, db, NULL, "AVO_DB", 1, 0, "PostgreSQL connection string (default: <home>/avod.dsn)"),
    ROW("kernels", AVO_CFG_STR, kernels, NULL, "AVO_KERNELS", 1, 0, "problem packages root"),
    ROW("target", AVO_CFG_STR, target, "cpu", "AVO_TARGET", 1, 0,
        "what this worker evaluates: cpu, gpu (its GPU's sm_XY), or sm_XY"),
    ROW("gpu", AVO_CFG_INT, gpu, "-1", NULL, -1, 64,
        "NVML index of this worker's GPU (default: CUDA_VISIBLE_DEVICES if one index, else 0)"),
    ROW("gpu-lock-dir", AVO_CFG_STR, gpu_lock_dir, NULL, "AVO_GPU_LOCK_DIR", 1, 0,
        "directory of the host's per-GPU timing locks, shared by every worker of the host (default /run/lock)"),
    ROW("harness-cpu", AVO_CFG_INT, harness_cpu, "-1", "AVO_HARNESS_CPU", -1, CPU_SETSIZE - 1,
        "the CPU this worker's harnesses time on, assigned to them alone (a worker per CPU); -1 = lease the highest "
        "CPU no other worker of the host has leased (in --gpu-lock-dir) and keep this worker's compiles off the "
        "leased ones"),
    ROW("harness", AVO_CFG_STR, harness, NULL, NULL, 1, 0, "avo-harness binary (default: beside avo-worker)"),
    ROW("cache", AVO_CFG_STR, cache, NULL, NULL, 1, 0, "compile cache directory (default <home>/cache)"),
    ROW("scratch", AVO_CFG_STR, scratch, NULL, "TMPDIR", 1, 0, "scratch root for candidate runs (default /tmp)"),
    ROW("toolchain-file", AVO_CFG_STR, toolchain_file, NULL, "AVO_TOOLCHAIN_FILE", 1, 0,
        "JSON object replacing parts of the probed toolchain record (tests and operators only: it changes which "
        "jobs' work this worker claims; docs/evaluation.md)"),
    ROW("log-level", AVO_CFG_STR, log_level, "info", "AVO_LOG_LEVEL", 1, 0, "error, warn, info or debug"),
    ROW("lease", AVO_CFG_DOUBLE, lease, "60", NULL, 2, 3600, "lease on a claimed evaluation, seconds"),
    ROW("timeout", AVO_CFG_DOUBLE, timeout, "300", NULL, 1, 86400, "wall-clock limit per evaluation, seconds"),
    ROW("poll-ms", AVO_CFG_INT, poll_ms, "2000", NULL, 10, 60000, "polling interval when no NOTIFY arrives"),
    ROW("prefetch", AVO_CFG_INT, prefetch, "-1", NULL, -1, AVO_PREFETCH_MAX,
        "claim up to N evaluations ahead and compile them side by side while one runs: N (0 = off), or -1 = 2 on "
        "GPU targets, 0 on the CPU (compiling on the CPU would disturb CPU timing)"),
    ROW("serve", AVO_CFG_INT, serve, "-1", NULL, -1, 1,
        "keep one checker (avo-harness --serve) for a job's evaluations on this worker, so they pay its start (GPU "
        "context, reference validation) once: 1, 0 = a fresh checker each, -1 = 1 on GPU targets, 0 on the CPU"),
    ROW("serve-slots", AVO_CFG_INT, serve_slots, "4", NULL, 1, AVO_SERVED_SLOTS_MAX,
        "with --serve: checkers kept at once, one per job (a campaign's jobs take turns on a worker; each holds "
        "a GPU context and its job's device tensors), the least recently used replaced"),
    ROW("ref-cache-mb", AVO_CFG_INT, ref_cache_mb, "8192", NULL, 0, 1099511627775LL,
        "budget of the reference cache (<cache>/ref: the reference's outputs on each job's warm-up input sets, "
        "least recently used evicted after each evaluation), MB; 0 = off"),
    ROW("max-evals", AVO_CFG_INT, max_evals, "0", NULL, 0, 1000000000, "exit after this many evaluations (0 = never)"),
};
#undef ROW
#define NROWS ((int)(sizeof worker_rows / sizeof worker_rows[0]))

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    /* First signal drains (finish the evaluation in hand); a second one
     * kills the harness and leaves. */
    stop_flag++;
}

static int read_dsn(const char *home, char *out, size_t len)
{
    char path[PATH_MAX];
    int rc = avo_paths_join(path, sizeof path, home, "avod.dsn");
    if (rc < 0)
        return rc;
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    int ok = fgets(out, (int)len, f) != NULL;
    fclose(f);
    out[strcspn(out, "\n")] = 0;
    return ok && *out ? 0 : -5;
}

/* avo-worker eval, check, devices and toolchain: the modes without a
 * database. Returns their exit status, or -1 when argv names none of them. */
static int run_subcommand(int argc, char **argv)
{
    char err[1024];
    if (argc > 1 && !strcmp(argv[1], "eval"))
        return avo_evaluate_cli(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "check"))
        return avo_check_cli(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "devices")) {
        json_t *d = avo_devices_probe();
        json_dumpf(d, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(d);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "toolchain")) {
        /* avo-worker toolchain [TARGET [GPU]]: the record a worker of that
         * target would register (AVO_TOOLCHAIN_FILE applied) */
        json_t *tc = NULL;
        const avo_toolchain_opts to = {.target = argc > 2 ? argv[2] : "cpu",
                                       .gpu_index = argc > 3 ? atoi(argv[3]) : 0,
                                       .override_file = getenv("AVO_TOOLCHAIN_FILE")};
        if (avo_toolchain_probe(&to, &tc, err, sizeof err) < 0) {
            fprintf(stderr, "avo-worker: %s\n", err);
            return 1;
        }
        json_dumpf(tc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        putchar('\n');
        json_decref(tc);
        return 0;
    }
    return -1;
}

/* -h, --help and --version anywhere: returns 0 when one was answered, -1 when none is there. */
static int help_or_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            avo_config_usage(worker_rows, NROWS, "avo-worker",
                             "[options]\n       avo-worker eval <problem-dir> <candidate-file> [--json]\n       "
                             "avo-worker check <problem-dir> [--max-builds N] [--json]\n       avo-worker devices\n    "
                             "   avo-worker toolchain [TARGET [GPU]]");
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("avo-worker %s\n", AVO_VERSION);
            return 0;
        }
    }
    return -1;
}

/* Settings from the command line, the environment and the config file.
 * Returns 0, or the exit status (said on stderr). */
static int settings_load(worker_settings *s, int argc, char **argv)
{
    char err[1024];
    int nrest = 0;
    if (avo_config_load(worker_rows, NROWS, s, argc, argv, &nrest, err, sizeof err) < 0) {
        fprintf(stderr, "avo-worker: %s\n", err);
        return 2;
    }
    if (nrest > 1) {
        fprintf(stderr, "avo-worker: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (avo_log_set_level(s->log_level) < 0) {
        fprintf(stderr, "avo-worker: log-level: '%s' is not one of error, warn, info, debug\n", s->log_level);
        return 2;
    }
    return 0;
}

/* This worker's GPU index and target (gpu becomes the GPU's sm_XY).
 * Returns 0, or the exit status (said on stderr). */
static int resolve_target(worker_settings *s)
{
    if (s->gpu < 0) {
        /* The GPU the harness will see as CUDA device 0; an index or a
         * UUID, as CUDA reads the variable. A GPU worker cannot guess. */
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        int v = avo_devices_visible_index(cvd);
        if (v < 0 && strcmp(s->target, "cpu") != 0) {
            fprintf(stderr, "avo-worker: CUDA_VISIBLE_DEVICES='%s' %s; give --gpu INDEX\n", cvd ? cvd : "",
                    v == -ENODEV ? "names a GPU that NVML does not list on this host"
                                 : "is neither a GPU index nor a GPU UUID");
            return 2;
        }
        s->gpu = v < 0 ? 0 : v;
    }
    if (!strcmp(s->target, "gpu")) {
        /* The GPU decides: claims go by architecture (sm_90 for an H100/H200). */
        json_t *devs = avo_devices_probe();
        size_t i;
        json_t *d;
        s->target[0] = 0;
        json_array_foreach(devs, i, d)
        {
            if (json_integer_value(json_object_get(d, "index")) == s->gpu && json_is_string(json_object_get(d, "arch")))
                snprintf(s->target, sizeof s->target, "%s", json_string_value(json_object_get(d, "arch")));
        }
        json_decref(devs);
        if (!s->target[0]) {
            fprintf(stderr, "avo-worker: target gpu: no GPU %lld visible through NVML (see `avo-worker devices`)\n",
                    s->gpu);
            return 1;
        }
    } else if (!avo_jobspec_target_valid(s->target)) {
        fprintf(stderr, "avo-worker: target: '%s' is not cpu, gpu or sm_XY\n", s->target);
        return 2;
    }
    return 0;
}

/* The state directory and the database it names. Returns 0, or the exit
 * status (said on stderr). */
static int resolve_database(worker_settings *s)
{
    if (!*s->home && avo_home_default(s->home, sizeof s->home) < 0) {
        fprintf(stderr, "avo-worker: cannot determine the state directory; set AVO_HOME or pass --db\n");
        return 1;
    }
    if (!*s->db) {
        struct stat st;
        if (stat(s->home, &st) < 0) {
            fprintf(stderr, "avo-worker: no state directory %s: start avod first, set AVO_HOME, or pass --db\n",
                    s->home);
            return 1;
        }
        int rc = read_dsn(s->home, s->db, sizeof s->db);
        if (rc == -ENAMETOOLONG) {
            fprintf(stderr, "avo-worker: %s/avod.dsn: path too long; pass --db\n", s->home);
            return 1;
        }
        if (rc < 0) {
            fprintf(stderr, "avo-worker: %s/avod.dsn is missing: start avod first, or pass --db\n", s->home);
            return 1;
        }
    }
    return 0;
}

/* The problem packages, the harness, the compile cache and the scratch
 * root. Returns 0, or the exit status (said on stderr). */
static int resolve_paths(worker_settings *s)
{
    if (!*s->kernels && avo_paths_data("kernels", s->kernels, sizeof s->kernels) < 0) {
        fprintf(stderr, "avo-worker: no problem packages at %s; pass --kernels DIR\n", s->kernels);
        return 1;
    }
    if (!*s->harness) {
        char dir[PATH_MAX];
        if (avo_paths_exe_dir(dir, sizeof dir) < 0 ||
            avo_paths_join(s->harness, sizeof s->harness, dir, "avo-harness") < 0) {
            fprintf(stderr, "avo-worker: cannot locate avo-harness; pass --harness\n");
            return 1;
        }
    }
    if (access(s->harness, X_OK) < 0) {
        fprintf(stderr, "avo-worker: harness %s is not executable: %s\n", s->harness, strerror(errno));
        return 1;
    }
    if (!*s->cache) {
        if (strlen(s->home) + 7 >= sizeof s->cache) {
            fprintf(stderr, "avo-worker: state directory path too long\n");
            return 1;
        }
        strcat(strcpy(s->cache, s->home), "/cache");
    }
    if (!*s->scratch)
        strcpy(s->scratch, "/tmp");
    return 0;
}

static void install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* GPU work times under the host's lock of this GPU: a directory the
 * worker cannot use refuses it now, not each evaluation. Returns 0, or 2. */
static int check_gpu_lock(const worker_settings *s)
{
    if (strcmp(s->target, "cpu") == 0)
        return 0;
    char key[128], lerr[600];
    avo_gpulock_key((int)s->gpu, key, sizeof key);
    if (avo_gpulock_check(*s->gpu_lock_dir ? s->gpu_lock_dir : avo_gpulock_default_dir(), key, lerr, sizeof lerr) < 0) {
        fprintf(stderr, "avo-worker: %s\n", lerr);
        return 2;
    }
    return 0;
}

/* Where this worker's harnesses time: the operator's CPU (passed on as
 * AVO_HARNESS_CPU), else a CPU leased for the worker's lifetime (passed on
 * as AVO_HARNESS_PIN; cpulease.h), its own threads kept off the leased
 * ones. Without a lease the harness takes the highest CPU as before: a
 * worker is not refused for it. *lease: the lease's descriptor or -1. */
static void lease_harness_cpu(const worker_settings *s, int *lease)
{
    char v[24], err[PATH_MAX + 200];
    *lease = -1;
    unsetenv("AVO_HARNESS_PIN"); /* only this worker's own lease names one */
    if (s->harness_cpu >= 0) {
        snprintf(v, sizeof v, "%lld", s->harness_cpu);
        setenv("AVO_HARNESS_CPU", v, 1);
        avo_info("worker", "harnesses time on CPU %lld (--harness-cpu)", s->harness_cpu);
        return;
    }
    unsetenv("AVO_HARNESS_CPU");
    cpu_set_t base;
    if (getenv("AVO_NO_PIN") || sched_getaffinity(0, sizeof base, &base) != 0)
        return;
    const char *dir = *s->gpu_lock_dir ? s->gpu_lock_dir : avo_gpulock_default_dir();
    int cpu;
    *lease = avo_cpulease_take(dir, &base, &cpu, err, sizeof err);
    if (*lease < 0) {
        avo_warn("worker", "no harness CPU of its own, sharing the highest: %s", err);
        avo_cpulease_keep_off_init(dir, &base, -1);
        return;
    }
    snprintf(v, sizeof v, "%d", cpu);
    setenv("AVO_HARNESS_PIN", v, 1);
    avo_cpulease_keep_off_init(dir, &base, cpu);
    avo_cpulease_keep_off();
    avo_info("worker", "harnesses time on CPU %d (leased in %s)", cpu, dir);
}

/* Claim and evaluate until stopped. Returns the exit status. */
static int run_worker(worker_settings *s)
{
    avo_queue_opts o = {
        .dsn = s->db,
        .kernels = s->kernels,
        .target = s->target,
        .harness = s->harness,
        .cache_dir = s->cache,
        .state_dir = s->home,
        .scratch_root = s->scratch,
        .lease_s = s->lease,
        .timeout_s = s->timeout,
        .poll_ms = (int)s->poll_ms,
        .max_evals = (int)s->max_evals,
        .gpu_index = (int)s->gpu,
        .prefetch = s->prefetch < 0 ? (strncmp(s->target, "sm_", 3) == 0 ? 2 : 0) : (int)s->prefetch,
        .serve = s->serve < 0 ? strncmp(s->target, "sm_", 3) == 0 : (int)s->serve,
        .serve_slots = (int)s->serve_slots,
        .ref_cache_bytes = (uint64_t)s->ref_cache_mb << 20,
        .gpu_lock_dir = s->gpu_lock_dir,
        .toolchain_file = s->toolchain_file,
        .stop = &stop_flag,
    };
    avo_info("worker", "avo-worker %s starting (target %s, kernels %s)", AVO_VERSION, s->target, s->kernels);
    return avo_queue_run(&o) < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    worker_settings s;
    int rc = run_subcommand(argc, argv);
    if (rc >= 0)
        return rc;
    avo_log_init("avo-worker");
    if (help_or_version(argc, argv) == 0)
        return 0;
    if ((rc = settings_load(&s, argc, argv)) || (rc = resolve_target(&s)) || (rc = resolve_database(&s)) ||
        (rc = resolve_paths(&s)))
        return rc;
    install_signals();
    if ((rc = check_gpu_lock(&s)))
        return rc;
    int lease;
    lease_harness_cpu(&s, &lease);
    rc = run_worker(&s);
    avo_cpulease_release(lease);
    return rc;
}
