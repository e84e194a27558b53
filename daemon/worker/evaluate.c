/* Evaluates one candidate: compile, run avo-harness sandboxed, classify; also `avo-worker eval` (evaluate.h). */
#include "evaluate.h"

#include "avo_file.h"
#include "avo_log.h"
#include "avo_nvml.h"
#include "avo_paths.h"
#include "avo_phases.h"
#include "devices.h"
#include "gpulock.h"
#include "avo_utf8.h"
#include "policy.h"
#include "ptxas.h"
#include "daemon/harness/tensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compile.h"
#include "refstore.h"
#include "daemon/harness/harness.h"
#include "sandbox.h"
#include "served.h"

#define DEFAULT_TIMEOUT_S 120.0

/* The worker's state directory, out of sight of everything it runs. */
/* At most this many of a package's files that are links are exposed to
 * the harness's sandbox (each is a mount there). */
#define PACKAGE_LINKS_MAX 8

/* The package directory's entries that are symbolic links, as paths in it
 * (the sandbox exposes what they point to), and for a link to a link the
 * directory of each link on the way (the final target alone would leave the
 * chain broken where its middle lies under a private directory such as
 * /tmp); how many. */
static int package_links(const char *dir, char out[][PATH_MAX])
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && n < PACKAGE_LINKS_MAX && (e = readdir(d))) {
        struct stat st;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
            continue;
        memcpy(out[n++], path, sizeof path);
        char cur[PATH_MAX], next[PATH_MAX], t[PATH_MAX];
        memcpy(cur, path, sizeof cur);
        for (int hop = 0; hop < 8 && n < PACKAGE_LINKS_MAX; hop++) {
            const ssize_t k = readlink(cur, t, sizeof t - 1);
            if (k <= 0)
                break;
            t[k] = 0;
            const char *slash = strrchr(cur, '/');
            if (t[0] == '/' || !slash)
                snprintf(next, sizeof next, "%s", t);
            else if (snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, t) >= (int)sizeof next)
                break;
            if (lstat(next, &st) != 0 || !S_ISLNK(st.st_mode))
                break;
            memcpy(out[n], next, sizeof next);
            char *ns = strrchr(out[n], '/');
            if (ns && ns != out[n])
                *ns = 0; /* the middle link's directory */
            n++;
            memcpy(cur, next, sizeof cur);
        }
    }
    if (d)
        closedir(d);
    return n;
}

static const char *state_dir(const avo_evaluate_opts *o)
{
    return o->state_dir && *o->state_dir ? o->state_dir : getenv("AVO_HOME");
}

static const char *gpu_lock_dir(const avo_evaluate_opts *o)
{
    return o->gpu_lock_dir && *o->gpu_lock_dir ? o->gpu_lock_dir : avo_gpulock_default_dir();
}

/* What untrusted code run for an evaluation must not see, as a sandbox's
 * hide list (out holds 4): the compile cache and the worker's state, and
 * the host's GPU locks, which a candidate could otherwise flock from a
 * helper to stall every GPU evaluation of the host, or (the default
 * /run/lock is world-writable) plant before a worker makes them
 * (tests/hostile/gpu_lock.c). Unset entries are left out rather than
 * ending the list early. */
static const char *const *hidden_dirs(const avo_evaluate_opts *o, const char *out[4])
{
    const char *all[] = {o->cache_dir, state_dir(o), gpu_lock_dir(o)};
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (all[i] && *all[i])
            out[n++] = all[i];
    out[n] = NULL;
    return out;
}

/* The vendor library a cuda problem's trusted objects link with: the
 * baseline times cuBLAS, the reference (run in the checker only) does its
 * fp32 products with it. A candidate is never linked with it
 * (docs/problems.md). Flags are part of the compile cache key. */
static const char *const *trusted_libs(int cuda)
{
    static const char *const cublas[] = {"-lcublas", "-lcublasLt", NULL};
    return cuda ? cublas : NULL;
}

static const char *const outcomes[] = {"ok",           "compile_error",   "crash",     "timeout",
                                       "wrong_result", "cheat_suspected", "cancelled", NULL};

static int known_outcome(const char *s)
{
    for (const char *const *o = outcomes; *o; o++)
        if (strcmp(*o, s) == 0)
            return 1;
    return 0;
}

/* The daemon stores detail as one line of evidence. */
static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t')
            *s = ' ';
}

/* The last non-empty line of a capture, for a crash's detail (the
 * candidate's bytes: made valid UTF-8 for the JSON it lands in). */
static void last_line(const char *text, char *out, size_t outlen)
{
    out[0] = 0;
    if (!text)
        return;
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        n--;
    size_t b = n;
    while (b && text[b - 1] != '\n')
        b--;
    snprintf(out, outlen, "%.*s", (int)(n - b), text + b);
    one_line(out);
    avo_utf8_scrub(out);
}

/* First compiler line that names an error, else the first line. */
static void first_error(const char *log, char *out, size_t outlen)
{
    const char *s = log, *pick = NULL;
    while (s && *s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (!pick && n)
            pick = s;
        if (memmem(s, n, "error", 5)) {
            pick = s;
            break;
        }
        s = e ? e + 1 : NULL;
    }
    if (!pick) {
        snprintf(out, outlen, "compilation failed");
        return;
    }
    size_t n = strcspn(pick, "\n");
    snprintf(out, outlen, "%.*s", (int)n, pick);
}

static json_t *base_result(const avo_problem *p, const char *outcome, const char *detail, uint64_t seed)
{
    char d[1024];
    snprintf(d, sizeof d, "%s", detail);
    one_line(d);
    avo_utf8_scrub(d);
    return json_pack("{s:s, s:s, s:f, s:s, s:[], s:I}", "outcome", outcome, "detail", d, "aggregate", 0.0, "unit",
                     p->unit, "configs", "rng_seed", (json_int_t)seed);
}

static json_t *compile_json(const avo_compile_result *c, int cuda)
{
    json_t *j = json_pack("{s:b, s:f, s:s}", "cached", c->cached, "seconds", c->seconds, "log", c->log ? c->log : "");
    /* Registers, shared memory, spills: what the agent reads before editing. */
    if (j && cuda)
        json_object_set_new(j, "ptxas", avo_ptxas_parse(c->log ? c->log : ""));
    return j;
}

/* The worker GPU's architecture for nvcc: sm_XY, with the arch-specific
 * suffix on 9.0 and later so wgmma, setmaxnreg and friends are available. */
static int detect_gpu_arch(int index, char *out, size_t len, char *err, size_t errlen)
{
    char nerr[256];
    int n = avo_nvml_open(nerr, sizeof nerr);
    if (n <= 0) {
        snprintf(err, errlen, "no GPU to compile for: %s", n < 0 ? nerr : "NVML sees no device");
        if (n == 0)
            avo_nvml_close();
        return -ENODEV;
    }
    avo_gpu_info g;
    int rc = avo_nvml_device(index, &g);
    avo_nvml_close();
    if (rc) {
        snprintf(err, errlen, "NVML has no GPU %d", index);
        return -ENODEV;
    }
    snprintf(out, len, "sm_%d%d%s", g.cc_major, g.cc_minor, g.cc_major >= 9 ? "a" : "");
    return 0;
}

/* NVML's total-energy counter, millijoules; -1 when unavailable. */
static long long energy_mj(int index)
{
    char nerr[64];
    uint64_t mj = 0;
    int n = avo_nvml_open(nerr, sizeof nerr);
    int ok = n > index && avo_nvml_energy_mj(index, &mj) == 0;
    if (n >= 0)
        avo_nvml_close();
    return ok ? (long long)mj : -1;
}

static json_t *sandbox_json(avo_sandbox_result *s)
{
    /* The candidate's own bytes: JSON strings must be UTF-8. */
    if (s->out)
        avo_utf8_scrub(s->out);
    if (s->err)
        avo_utf8_scrub(s->err);
    json_t *sig = json_null();
    if (s->signal) {
        char name[32];
        const char *abbrev = sigabbrev_np(s->signal);
        if (abbrev)
            snprintf(name, sizeof name, "SIG%s", abbrev);
        else
            snprintf(name, sizeof name, "%d", s->signal);
        sig = json_string(name);
    }
    return json_pack("{s:f, s:o, s:o, s:b, s:o, s:s, s:s, s:{s:b, s:b, s:b, s:o, s:o, s:o, s:o}}", "wall_s", s->wall_s,
                     "exit", s->exited ? json_integer(s->exit_code) : json_null(), "signal", sig, "netns", s->netns,
                     "netns_note", s->netns_note[0] ? json_string(s->netns_note) : json_null(), "stdout_tail",
                     s->out ? s->out : "", "stderr_tail", s->err ? s->err : "", "isolation", "pidns", s->pidns,
                     "mountns", s->mountns, "userns", s->userns, "note",
                     s->isolate_note[0] ? json_string(s->isolate_note) : json_null(), "cgroup",
                     s->cgroup_kind[0] ? json_string(s->cgroup_kind) : json_null(), "pids_max",
                     s->pids_limit ? json_integer(s->pids_limit) : json_null(), "cgroup_note",
                     s->cgroup_note[0] ? json_string(s->cgroup_note) : json_null());
}

/* Seconds since the epoch: the GPU lock's hold, comparable across workers. */
static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The host's 1-minute load average, -1 when /proc/loadavg cannot be read:
 * with the CPU count beside it, a loaded host explains a noisy timing. */
static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* The CPU the harness was told to time on and how (cpulease.h): "alone"
 * (--harness-cpu), "leased", or null: the highest it may use. */
static json_t *harness_cpu_json(void)
{
    const char *alone = getenv("AVO_HARNESS_CPU"), *pin = getenv("AVO_HARNESS_PIN");
    const char *v = alone && *alone ? alone : pin && *pin ? pin : NULL;
    if (!v)
        return json_null();
    return json_pack("{s:i,s:s}", "cpu", atoi(v), "how", v == alone ? "alone" : "leased");
}

static json_t *load_json(double start, double end)
{
    return json_pack("{s:o,s:o,s:I,s:o}", "load1_start", start >= 0 ? json_real(start) : json_null(), "load1_end",
                     end >= 0 ? json_real(end) : json_null(), "cpus", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN),
                     "harness_cpu", harness_cpu_json());
}

/* Enforce the rule the daemon relies on: not ok means no score at all. */
static void zero_scores(json_t *res)
{
    json_object_set_new(res, "aggregate", json_real(0));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(res, "configs"), i, c) json_object_set_new(c, "score", json_real(0));
}

/* Accept the harness's JSON only if it is well-formed and consistent. */
static json_t *parse_harness_result(const avo_problem *p, const avo_sandbox_result *s, int profile, char *why,
                                    size_t wl)
{
    if (!s->result || !s->result_len) {
        snprintf(why, wl, "no result");
        return NULL;
    }
    if (s->result_truncated) {
        snprintf(why, wl, "result larger than the 1 MiB cap");
        return NULL;
    }
    json_error_t je;
    json_t *r = json_loads(s->result, 0, &je);
    if (!r) {
        snprintf(why, wl, "malformed result (%s)", je.text);
        return NULL;
    }
    json_t *o = json_object_get(r, "outcome"), *cf = json_object_get(r, "configs");
    if (!json_is_object(r) || !json_is_string(o) || !known_outcome(json_string_value(o)) || !json_is_array(cf)) {
        snprintf(why, wl, "result without a valid outcome or configs");
        json_decref(r);
        return NULL;
    }
    if (profile) {
        /* No score to check: a profile run's configs carry counters only. */
        json_object_set_new(r, "aggregate", json_null());
    } else if (strcmp(json_string_value(o), "ok") == 0) {
        json_t *ag = json_object_get(r, "aggregate");
        if (!json_is_number(ag) || !(json_number_value(ag) > 0) || (int)json_array_size(cf) != p->nconfigs) {
            snprintf(why, wl, "ok result without a positive aggregate for every config");
            json_decref(r);
            return NULL;
        }
    } else {
        zero_scores(r);
    }
    if (!json_is_string(json_object_get(r, "detail")))
        json_object_set_new(r, "detail", json_string(""));
    json_object_set_new(r, "unit", json_string(p->unit));
    return r;
}

static int mkscratch(const char *root, char *out, size_t outlen, char *err, size_t errlen)
{
    if (snprintf(out, outlen, "%s/avo-eval-XXXXXX", root) >= (int)outlen) {
        snprintf(err, errlen, "scratch root path too long");
        return -ENAMETOOLONG;
    }
    if (!mkdtemp(out)) {
        int e = errno;
        snprintf(err, errlen, "cannot create a scratch dir under %s: %s", root, strerror(e));
        return -e;
    }
    /* Traversable (not listable) by the sandbox user, who compiles in a
     * subdirectory it is given. */
    chmod(out, 0711);
    return 0;
}

/* Bytes of config c's tensors, each padded by `pad` (alignment slack). */
static double config_bytes(const avo_problem *p, int c, double pad)
{
    double cfg = 0;
    for (int t = 0; t < p->ntensors; t++) {
        int64_t n = 0;
        if (avo_problem_tensor_elems(p, c, t, &n, NULL, 0) == 0)
            cfg += (double)n * (double)avo_problem_dtype_size(p->tensors[t].dtype) + pad;
    }
    return cfg;
}

/* Address space for the harness (and its runner, which inherits it): 4 GiB,
 * more when the tensors need it, so a big problem is not mistaken for a
 * crashing candidate. The harness holds three copies of the largest config
 * (the shared region, its pristine inputs, the reference's run); the sum
 * below over every config is looser than that, kept from when reference
 * outputs were kept for every set. */
static unsigned long long harness_as(const avo_problem *p)
{
    double need = 0;
    for (int c = 0; c < p->nconfigs; c++) {
        double cfg = config_bytes(p, c, 0);
        need += cfg * (p->check_input_sets + 1) + 4 * cfg;
    }
    need += 1.0 * (1ull << 30);
    double as = need > 4.0 * (1ull << 30) ? need : 4.0 * (1ull << 30);
    return (unsigned long long)as;
}

/* RLIMIT_CPU counts every thread of a process, and the harness fills and
 * compares tensors on all the CPUs it was given (daemon/harness/tensors.c):
 * a limit of the wall timeout killed large evaluations (attention, 16 CPUs)
 * after a quarter of it. The wall clock stays the real bound. */
static double harness_cpu_s(double timeout)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    /* The harness's passes use at most AVO_TENSORS_MAX_THREADS besides its
     * own; the runner sets its candidate back to timeout + 5 s. */
    n = n < 1 ? 1 : n > AVO_TENSORS_MAX_THREADS + 1 ? AVO_TENSORS_MAX_THREADS + 1 : n;
    return (timeout + 5) * n;
}

/* RLIMIT_FSIZE also caps the harness's shared tensor region (a memfd), so
 * it grows with the largest configuration. */
static unsigned long long harness_fsize(const avo_problem *p)
{
    double big = 0;
    for (int c = 0; c < p->nconfigs; c++) {
        double cfg = config_bytes(p, c, 64);
        if (cfg > big)
            big = cfg;
    }
    /* CUDA: the counters report besides the tensors (the region holds one
     * config's tensors now; room for two is kept from when timing rotated
     * two input sets). */
    if (strcmp(p->backend, "cuda") == 0)
        big = (p->check_input_sets > 1 ? 2 : 1) * big + (1 << 20);
    return (unsigned long long)(big + (64ull << 20));
}

/* What every compile needs first: the target architecture for a CUDA
 * problem (given, or read from this worker's GPU), a cache, and a fresh
 * scratch directory. */
static int compile_setup(const avo_evaluate_opts *o, int cuda, char *arch, size_t archlen, char *scratch,
                         size_t scratchlen, char *err, size_t errlen)
{
    int rc;
    if (cuda) {
        if (o->gpu_arch)
            snprintf(arch, archlen, "%s", o->gpu_arch);
        else if ((rc = detect_gpu_arch(o->gpu_index, arch, archlen, err, errlen)))
            return rc;
    }
    if (!o->cache_dir) {
        snprintf(err, errlen, "no compile cache directory");
        return -EINVAL;
    }
    return mkscratch(o->scratch_root ? o->scratch_root : "/tmp", scratch, scratchlen, err, errlen);
}

/* The result's "paired" (docs/evaluation.md, "Paired measurement"): the
 * harness's, or {"error"} when the against did not compile; "against" the
 * against's candidate id where the worker has one. A candidate that failed
 * has none: nothing to compare. */
static void paired_result(json_t *res, const avo_evaluate_opts *o, const char *against_note)
{
    if (!o->against_src)
        return;
    if (strcmp(json_string_value(json_object_get(res, "outcome")) ?: "", "ok") != 0) {
        json_object_del(res, "paired");
        return;
    }
    json_t *pj = json_object_get(res, "paired");
    if (against_note[0] || !json_is_object(pj)) {
        pj = json_pack("{s:s}", "error", against_note[0] ? against_note : "the harness made no paired measurement");
        json_object_set_new(res, "paired", pj);
    }
    if (pj && o->against_id > 0)
        json_object_set_new(pj, "against", json_integer(o->against_id));
}

/* The result's "phases" (docs/evaluation.md): the worker's own (ph), its
 * "total" from t_start to now, which compiles were cache hits, and the
 * harness's own phases (what it wrote as "phases") nested as "harness". */
static void attach_phases(json_t *res, const avo_phases *ph, double t_start, const avo_compile_result *ref,
                          const avo_compile_result *cand, const avo_compile_result *base,
                          const avo_compile_result *against)
{
    json_t *j = avo_phases_json(ph), *hits = json_object();
    if (!j || !hits) {
        json_decref(j);
        json_decref(hits);
        return;
    }
    json_object_set_new(j, "total", json_real(avo_phases_now() - t_start));
    const avo_compile_result *c[] = {ref, cand, base, against};
    const char *name[] = {"reference", "candidate", "baseline", "against"};
    for (int i = 0; i < 4; i++)
        if (c[i] && c[i]->log) /* it ran (a hit or a compile) */
            json_object_set_new(hits, name[i], json_boolean(c[i]->cached));
    json_object_set_new(j, "cache_hits", hits);
    json_t *h = json_object_get(res, "phases");
    if (json_is_object(h))
        json_object_set(j, "harness", h);
    json_object_set_new(res, "phases", j);
}

/* A file the compile kept, read for the policy checks; NULL when it kept
 * none or it cannot be read (then that check has nothing to look at). */
static char *read_kept(const char *path, size_t *len)
{
    *len = 0;
    return path && path[0] ? avo_file_read(path, len) : NULL;
}

/* The policy checks after the compile (docs/evaluation.md, "Policy"):
 * what it kept (the assembler's input, the PTX) and, when it built one,
 * the object. Adds to f; 0 or a negative int with err. */
static int policy_after_compile(const avo_compile_result *c, const char *src, size_t len, const char *name,
                                avo_policy_findings *f, char *err, size_t errlen)
{
    size_t n, asm_len;
    char *text, *asm_text = read_kept(c->asm_path, &asm_len);
    if (asm_text)
        avo_policy_scan_asm(asm_text, asm_len, "cand.s", f);
    if ((text = read_kept(c->ptx_path, &n))) {
        avo_policy_scan_ptx(text, n, "cand.ptx", f);
        free(text);
    }
    int rc = c->ok ? avo_policy_scan_object(c->so_path, src, len, name, asm_text, asm_len, f) : 0;
    free(asm_text);
    if (rc == -ENOEXEC) {
        /* not an object we can read: refused rather than run unread */
        snprintf(err, errlen, "the candidate's object is not a 64-bit ELF the policy check can read");
        return rc;
    }
    if (rc) {
        snprintf(err, errlen, "cannot read the candidate's object for the policy check: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

/* The result of a candidate the policy refuses: never compiled further,
 * never run, never scored. */
static json_t *policy_result(const avo_problem *p, const avo_policy_violation *v, uint64_t seed)
{
    char detail[1024];
    avo_policy_detail(v, detail, sizeof detail);
    json_t *res = base_result(p, "policy_violation", detail, seed);
    if (res)
        json_object_set_new(res, "policy", avo_policy_json(v, p->policy_relax));
    return res;
}

/* One evaluation's state, shared by its phases; avo_evaluate_candidate owns
 * what it holds and frees it. */
typedef struct {
    const avo_evaluate_opts *o;
    const avo_problem *p;
    int cuda;
    double timeout;
    const char *src;
    size_t len;
    char *err;
    size_t errlen;
    uint64_t seed, job_seed;
    /* Where the evaluation's wall time goes (result "phases"). */
    avo_phases ph;
    double t_start, t;
    char scratch[PATH_MAX], srcdir[PATH_MAX], rundir[PATH_MAX], harness[PATH_MAX], arch[32];
    const char *cand_name;
    avo_policy_findings pf;
    avo_compile_opts co;
    avo_compile_result ref, cand, base, against;
    char *ref_src, *base_src;
    char base_note[600], against_note[700], cache_note[300];
    /* The harness's command line, the descriptors it is given (pass; slot:
     * each object's place among them) and its sandbox. */
    char deadarg[32], seedline[48], confarg[32], fdname[4][32], cachefd[16], cachemax[32];
    char *argv[24];
    int pass[5], npass, slot[4], refcache_fd;
    const char *hidebuf[4];
    char links[PACKAGE_LINKS_MAX][PATH_MAX];
    const char *expose[PACKAGE_LINKS_MAX + 2];
    avo_sandbox_opts so;
    /* On the worker's kept checker (served.h): its start (command line
     * before and after "--serve FD", descriptors: the reference's, the
     * cache's), this evaluation's request and the objects it attaches. */
    int serve;
    char key[65], request[768];
    char *sargv[6], *stail[6];
    int spass[2], req_fds[3], nreq;
    avo_served_start sst;
    int gpu_lock;
    char lock_key[128];
    double lock_waited, lock_from, lock_to;
    long long e0, e1;
    avo_sandbox_result sr;
    json_t *res;
} cand_eval;

/* What a phase of the evaluation returns besides a negative int (an error,
 * with e->err): go on, or the result is made (e->res; NULL when out of
 * memory). */
enum { EVAL_NEXT = 0, EVAL_DONE = 1 };

static int eval_done(cand_eval *e, json_t *res)
{
    e->res = res;
    return EVAL_DONE;
}

/* The evaluation's seed, and the job's seed for its warm-up input sets. */
static void eval_seeds(cand_eval *e)
{
    const avo_evaluate_opts *o = e->o;
    uint64_t seed = o->rng_seed;
    if (!seed) {
        if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
            seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)time(NULL);
    }
    seed &= INT64_MAX; /* JSON integers are signed 64-bit */
    if (!seed)
        seed = 1;
    /* The job's seed makes the warm-up calls' input sets (the same in every
     * evaluation of the job); without a job, one of this evaluation's own.
     * Secret: it goes on the harness's stdin and nowhere else, not even
     * the result (docs/evaluation.md, "Input sets"). */
    uint64_t job_seed = o->job_seed & INT64_MAX;
    if (!job_seed && (getrandom(&job_seed, sizeof job_seed, 0) != (ssize_t)sizeof job_seed || !(job_seed &= INT64_MAX)))
        job_seed = seed ^ 0x5bd1e995u;
    e->seed = seed;
    e->job_seed = job_seed;
}

/* A CUDA problem runs in avo-harness-cuda beside the plain harness. */
static int find_harness(cand_eval *e)
{
    const avo_evaluate_opts *o = e->o;
    char hpath[PATH_MAX + 8];
    snprintf(hpath, sizeof hpath, "%s%s", o->harness_path ? o->harness_path : "", e->cuda ? "-cuda" : "");
    if (!o->harness_path || !realpath(hpath, e->harness) || access(e->harness, X_OK) != 0) {
        snprintf(e->err, e->errlen,
                 "harness not found or not executable: %s (build it with `make all`%s, or pass --harness)", hpath,
                 e->cuda ? " on a machine with nvcc" : "");
        return -ENOENT;
    }
    return 0;
}

/* The scratch directory's src (the compiles') and run (the harness's). */
static int make_scratch_dirs(cand_eval *e)
{
    int rc;
    if ((rc = avo_paths_join(e->srcdir, sizeof e->srcdir, e->scratch, "src")) ||
        (rc = avo_paths_join(e->rundir, sizeof e->rundir, e->scratch, "run")) ||
        (rc = avo_file_mkdirs(e->srcdir, 0700, NULL, 0)) || (rc = avo_file_mkdirs(e->rundir, 0700, NULL, 0)))
        snprintf(e->err, e->errlen, "cannot create scratch dirs in %s: %s", e->scratch, strerror(-rc));
    return rc;
}

/* The policy on the source first: a candidate that names a host file or a
 * loader is refused before any compiler reads it. */
static int check_source_policy(cand_eval *e)
{
    int rc;
    if ((rc = avo_policy_scan_source(e->src, e->len, e->cand_name, e->cuda, &e->pf))) {
        snprintf(e->err, e->errlen, "cannot check the candidate's source: %s", strerror(-rc));
        return rc;
    }
    const avo_policy_violation *pv = avo_policy_first(&e->pf, e->p->policy_relax);
    avo_phases_lap(&e->ph, "policy_source", &e->t);
    return pv ? eval_done(e, policy_result(e->p, pv, e->seed)) : EVAL_NEXT;
}

/* The reference, trusted: linked with the vendor library. One that does
 * not compile is the package's fault, an error rather than a result. */
static int compile_reference(cand_eval *e)
{
    const avo_problem *p = e->p;
    char refpath[PATH_MAX];
    size_t ref_len = 0;
    int rc;
    if ((rc = avo_paths_join(refpath, sizeof refpath, p->dir, p->reference))) {
        snprintf(e->err, e->errlen, "the reference's path is too long: %s/%s", p->dir, p->reference);
        return rc;
    }
    if (!(e->ref_src = avo_file_read(refpath, &ref_len))) {
        rc = -errno ? -errno : -EIO;
        snprintf(e->err, e->errlen, "cannot read the reference %s: %s", refpath, strerror(errno));
        return rc;
    }
    avo_compile_opts ro = e->co;
    ro.extra = trusted_libs(e->cuda);
    rc = avo_compile(&ro, p, e->ref_src, ref_len, p->reference, &e->ref, e->err, e->errlen);
    avo_phases_lap(&e->ph, "compile_reference", &e->t);
    if (rc)
        return rc;
    if (e->ref.ok)
        return EVAL_NEXT;
    if (e->ref.cancelled)
        return eval_done(e, base_result(p, "cancelled", "cancelled while compiling the reference", e->seed));
    char line[512];
    first_error(e->ref.log, line, sizeof line);
    snprintf(e->err, e->errlen, "the reference %s does not compile: %s", refpath, line);
    return -EINVAL;
}

/* The result of a candidate that did not compile: cancelled, past the
 * timeout, or the compiler's first error. */
static json_t *compile_failure_result(const cand_eval *e)
{
    char line[600];
    json_t *res;
    if (e->cand.cancelled) {
        res = base_result(e->p, "cancelled", "cancelled while compiling", e->seed);
    } else if (e->cand.timed_out) {
        snprintf(line, sizeof line, "the compiler ran past the %.0f s timeout", e->timeout);
        res = base_result(e->p, "timeout", line, e->seed);
    } else {
        first_error(e->cand.log, line, sizeof line);
        res = base_result(e->p, "compile_error", line, e->seed);
    }
    if (res)
        json_object_set_new(res, "compile", compile_json(&e->cand, e->cuda));
    return res;
}

static int compile_candidate(cand_eval *e)
{
    int rc = avo_compile(&e->co, e->p, e->src, e->len, e->cand_name, &e->cand, e->err, e->errlen);
    avo_phases_lap(&e->ph, "compile_candidate", &e->t);
    if (rc)
        return rc;
    /* Then what the compile kept and built, also when it failed: a PTX
     * instruction ptxas refuses, or an assembler stopped at `.incbin`, is
     * named as the policy names it, with its line. */
    if (!e->cand.timed_out && !e->cand.cancelled) {
        if ((rc = policy_after_compile(&e->cand, e->src, e->len, e->cand_name, &e->pf, e->err, e->errlen)))
            return rc;
        avo_phases_lap(&e->ph, "policy_build", &e->t);
        const avo_policy_violation *pv = avo_policy_first(&e->pf, e->p->policy_relax);
        if (pv) {
            json_t *res = policy_result(e->p, pv, e->seed);
            if (res)
                json_object_set_new(res, "compile", compile_json(&e->cand, e->cuda));
            return eval_done(e, res);
        }
    }
    return e->cand.ok ? EVAL_NEXT : eval_done(e, compile_failure_result(e));
}

/* The vendor baseline (cuBLAS for gemm): compiled like the reference,
 * linked with its library, timed by the harness in a runner of its own.
 * A baseline that does not build costs the comparison, not the result. */
static int compile_baseline(cand_eval *e)
{
    const avo_problem *p = e->p;
    if (!p->baseline[0] || e->o->profile)
        return EVAL_NEXT;
    avo_compile_opts bo = e->co;
    bo.extra = trusted_libs(e->cuda);
    char bpath[PATH_MAX];
    size_t blen = 0;
    if (avo_paths_join(bpath, sizeof bpath, p->dir, p->baseline))
        snprintf(e->base_note, sizeof e->base_note, "the baseline's path is too long");
    else if (!(e->base_src = avo_file_read(bpath, &blen)))
        snprintf(e->base_note, sizeof e->base_note, "cannot read %.560s", bpath);
    else if (avo_compile(&bo, p, e->base_src, blen, p->baseline, &e->base, e->err, e->errlen) < 0)
        snprintf(e->base_note, sizeof e->base_note, "cannot compile: %s", e->err);
    else if (!e->base.ok)
        first_error(e->base.log, e->base_note, sizeof e->base_note);
    avo_phases_lap(&e->ph, "compile_baseline", &e->t);
    return EVAL_NEXT;
}

/* The against (paired measurement): compiled exactly as the candidate,
 * so usually a cache hit. Its failure is not the candidate's: the
 * candidate is evaluated unpaired and paired.error says why. */
static int compile_against(cand_eval *e)
{
    const avo_evaluate_opts *o = e->o;
    if (!o->against_src)
        return EVAL_NEXT;
    if (avo_compile(&e->co, e->p, o->against_src, o->against_len, e->cand_name, &e->against, e->err, e->errlen) < 0) {
        snprintf(e->against_note, sizeof e->against_note, "the against cannot be compiled: %.600s", e->err);
    } else if (!e->against.ok) {
        char line[600];
        if (e->against.timed_out)
            snprintf(line, sizeof line, "the compiler ran past the %.0f s timeout", e->timeout);
        else
            first_error(e->against.log, line, sizeof line);
        snprintf(e->against_note, sizeof e->against_note, "the against does not compile: %s", line);
    }
    avo_phases_lap(&e->ph, "compile_against", &e->t);
    return EVAL_NEXT;
}

/* The objects go to the harness as descriptors (fds 5, 6, then the
 * baseline's and the against's where they exist): the cache stays out
 * of its sight. */
static int pass_objects(cand_eval *e)
{
    const char *objs[4] = {e->cand.so_path, e->ref.so_path, e->base.ok ? e->base.so_path : NULL,
                           e->against.ok ? e->against.so_path : NULL};
    for (int i = 0; i < 4; i++) {
        if (!objs[i])
            continue;
        if ((e->pass[e->npass] = open(objs[i], O_RDONLY | O_CLOEXEC)) < 0) {
            int rc = -errno;
            snprintf(e->err, e->errlen, "cannot open the compiled objects: %s", strerror(errno));
            return rc;
        }
        snprintf(e->fdname[i], sizeof e->fdname[i], "/proc/self/fd/%d", 5 + e->npass);
        e->slot[i] = e->npass++;
    }
    return 0;
}

/* The passed descriptors closed (once: the harness has its own). */
static void close_passed(cand_eval *e)
{
    for (int i = 0; i < e->npass; i++)
        close(e->pass[i]);
    e->npass = 0;
}

/* The reference cache (daemon/worker/refstore.h): the job's, so only
 * with its seed; a descriptor after the objects', never a path. Its
 * arguments at argv[argc]; the new argc. */
static int pass_ref_cache(cand_eval *e, int argc)
{
    const avo_evaluate_opts *o = e->o;
    if (!(o->ref_cache_bytes && o->job_seed && o->cache_dir && !o->profile))
        return argc;
    int cfd = avo_refstore_open(o->cache_dir, e->cache_note, sizeof e->cache_note);
    if (cfd < 0)
        return argc;
    e->pass[e->npass] = e->refcache_fd = cfd;
    snprintf(e->cachefd, sizeof e->cachefd, "%d", 5 + e->npass++);
    snprintf(e->cachemax, sizeof e->cachemax, "%llu", (unsigned long long)o->ref_cache_bytes);
    e->argv[argc++] = "--ref-cache-fd";
    e->argv[argc++] = e->cachefd;
    e->argv[argc++] = "--ref-cache-max";
    e->argv[argc++] = e->cachemax;
    return argc;
}

/* The harness's command line. The seed goes on its stdin: nothing the
 * runner could read (argv, environment, files) holds it. */
static void harness_argv(cand_eval *e)
{
    const avo_evaluate_opts *o = e->o;
    snprintf(e->seedline, sizeof e->seedline, "%llu %llu\n", (unsigned long long)e->seed,
             (unsigned long long)e->job_seed);
    snprintf(e->confarg, sizeof e->confarg, "%.17g", o->confidence > 0 ? o->confidence : 0.95);
    /* The harness's own deadline comes a little before ours, so a hung
     * candidate is reported by the checker (which kills the runner) with
     * the evidence; our group kill stays the backstop. */
    const double timeout = e->timeout;
    double margin = timeout * 0.1 < 0.25 ? 0.25 : timeout * 0.1 > 2 ? 2 : timeout * 0.1;
    snprintf(e->deadarg, sizeof e->deadarg, "%.3f", timeout - margin > 0.1 ? timeout - margin : 0.1);
    char **argv = e->argv;
    int argc = 0;
    argv[argc++] = e->harness;
    argv[argc++] = (char *)e->p->dir;
    argv[argc++] = e->fdname[0];
    argv[argc++] = e->fdname[1];
    argv[argc++] = "--seed-stdin";
    argv[argc++] = "--deadline";
    argv[argc++] = e->deadarg;
    if (e->slot[2] >= 0) {
        argv[argc++] = "--baseline";
        argv[argc++] = e->fdname[2];
    }
    if (e->slot[3] >= 0) {
        argv[argc++] = "--against";
        argv[argc++] = e->fdname[3];
        argv[argc++] = "--confidence";
        argv[argc++] = e->confarg;
        if (o->screen)
            argv[argc++] = "--screen";
    }
    if (o->profile) {
        argv[argc++] = "--profile";
        if (o->profile_config) {
            argv[argc++] = "--config";
            argv[argc++] = (char *)o->profile_config;
        }
    } else if (o->counters) {
        argv[argc++] = "--counters";
    }
    argc = pass_ref_cache(e, argc);
    argv[argc] = NULL;
}

/* The harness's sandbox: confined, its descriptors passed, the package in
 * view. */
static void harness_sandbox(cand_eval *e)
{
    const avo_evaluate_opts *o = e->o;
    const avo_problem *p = e->p;
    const char *const *hide = hidden_dirs(o, e->hidebuf);
    /* The package's files may be links out of its directory (the test
     * fixtures link to kernels/ and to each other): their targets are
     * exposed too. */
    e->expose[0] = p->dir;
    const int nlinks = package_links(p->dir, e->links);
    for (int i = 0; i < nlinks; i++)
        e->expose[i + 1] = e->links[i];
    e->so = (avo_sandbox_opts){.argv = e->argv,
                               .cwd = e->rundir,
                               .timeout_s = e->timeout,
                               .cpu_s = harness_cpu_s(e->timeout),
                               .as_bytes = harness_as(p),
                               .fsize_bytes = harness_fsize(p),
                               .no_as_limit = e->cuda,
                               .nproc = 64,
                               /* The checker holds its own GPU context (many
                                * device fds) while it starts the baseline's
                                * runner; the runner sets the candidate's own
                                * limit back to 64. */
                               .nofile = 1024,
                               .result_fd = 1,
                               .stdin_data = e->seedline,
                               .pass_fds = e->pass,
                               .npass = e->npass,
                               .expose = e->expose,
                               .cgroup_rw = 1,
                               .pids_max = AVO_EVAL_PIDS_MAX,
                               .should_cancel = o->should_cancel,
                               .cancel_arg = o->cancel_arg};
    avo_sandbox_confine(&e->so, hide);
    /* The checker stays root (it freezes its runner through the control
     * group and starts it in namespaces of its own); the runner drops to
     * nobody itself. */
    e->so.drop_uid = 0;
}

/* The kept checker's start and this evaluation's request: the same
 * sandbox as a fresh checker's, the reference (and the reference cache)
 * its own descriptors, the rest of the command line in the request. */
static void prepare_served(cand_eval *e)
{
    const avo_evaluate_opts *o = e->o;
    int n = 0, argc = 0, t = 0;
    e->spass[n++] = e->pass[e->slot[1]];
    e->sargv[argc++] = e->harness;
    e->sargv[argc++] = (char *)e->p->dir;
    e->sargv[argc++] = "-";
    e->sargv[argc++] = "/proc/self/fd/5";
    e->sargv[argc] = NULL;
    if (e->refcache_fd >= 0) {
        snprintf(e->cachefd, sizeof e->cachefd, "%d", 5 + n);
        e->spass[n++] = e->refcache_fd;
        e->stail[t++] = "--ref-cache-fd";
        e->stail[t++] = e->cachefd;
        e->stail[t++] = "--ref-cache-max";
        e->stail[t++] = e->cachemax;
    }
    e->stail[t] = NULL;
    avo_served_key(e->key, e->harness, e->p->dir, e->ref.so_path, e->job_seed, o->cache_dir, o->ref_cache_bytes);
    e->sst = (avo_served_start){
        .key = e->key, .scratch_root = o->scratch_root ? o->scratch_root : "/tmp", .so = e->so, .argv_tail = e->stail};
    e->sst.so.argv = e->sargv;
    e->sst.so.pass_fds = e->spass;
    e->sst.so.npass = n;
    e->sst.so.cpu_s = harness_cpu_s(e->timeout) * AVO_SERVED_MAX_EVALS;
    /* The objects it is asked about, in the request's order. */
    static const char *const role[3] = {"candidate", "against", "baseline"};
    const int slots[3] = {e->slot[0], e->slot[3], e->slot[2]};
    char names[64] = "";
    e->nreq = 0;
    for (int i = 0; i < 3; i++)
        if (slots[i] >= 0) {
            e->req_fds[e->nreq++] = e->pass[slots[i]];
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"", e->nreq > 1 ? "," : "", role[i]);
        }
    snprintf(e->request, sizeof e->request,
             "{\"seed\":%llu,\"job_seed\":%llu,\"deadline\":%s,\"confidence\":%s,\"screen\":%s,"
             "\"counters\":%s,\"objects\":[%s]}",
             (unsigned long long)e->seed, (unsigned long long)e->job_seed, e->deadarg, e->confarg,
             o->screen && e->slot[3] >= 0 ? "true" : "false", o->counters ? "true" : "false", names);
    e->serve = 1;
}

static int prepare_harness(cand_eval *e)
{
    int rc;
    if ((rc = pass_objects(e)))
        return rc;
    harness_argv(e);
    harness_sandbox(e);
    /* A job's evaluation (its seed given, not a profile) on the kept
     * checker where the worker keeps one. */
    if (e->o->served && e->o->job_seed && !e->o->profile && e->slot[1] >= 0)
        prepare_served(e);
    avo_phases_lap(&e->ph, "setup", &e->t);
    return EVAL_NEXT;
}

/* The GPU is this harness's alone while it runs (gpulock.h): a second
 * worker on the same GPU waits here, its lease renewed by should_cancel,
 * instead of timing beside this one. */
static int take_gpu_lock(cand_eval *e)
{
    if (!e->cuda)
        return EVAL_NEXT;
    const avo_evaluate_opts *o = e->o;
    avo_gpulock_key(o->gpu_index, e->lock_key, sizeof e->lock_key);
    e->gpu_lock = avo_gpulock_take(gpu_lock_dir(o), e->lock_key, o->should_cancel, o->cancel_arg, &e->lock_waited,
                                   e->err, e->errlen);
    avo_phases_lap(&e->ph, "gpu_lock_wait", &e->t);
    if (e->gpu_lock == -ECANCELED)
        return eval_done(e, base_result(e->p, "cancelled", e->err, e->seed));
    if (e->gpu_lock < 0)
        return e->gpu_lock;
    e->lock_from = wall_now();
    return EVAL_NEXT;
}

/* The cache's budget, least recently used first, while no harness of
 * this worker's runs (another worker on the same cache may be reading:
 * it has its files open, or finds one gone and recomputes). */
static void evict_ref_cache(const cand_eval *e)
{
    if (e->refcache_fd < 0)
        return;
    uint64_t freed = 0, kept = 0;
    int ev = avo_refstore_evict(e->refcache_fd, e->o->ref_cache_bytes, &freed, &kept);
    if (ev > 0)
        avo_info("worker", "reference cache: %d file(s) evicted (%.1f MB), %.1f MB kept", ev, freed / 1e6, kept / 1e6);
    else if (ev < 0)
        avo_warn("worker", "reference cache: eviction failed: %s", strerror(-ev));
}

/* The harness run in its sandbox, with the GPU's energy counter read
 * around it; the GPU lock and the descriptors are given back after. */
static int run_harness(cand_eval *e)
{
    const int gpu = e->o->gpu_index;
    e->e0 = e->cuda ? energy_mj(gpu) : -1;
    if (e->cuda)
        avo_phases_lap(&e->ph, "energy", &e->t);
    int started = 0;
    int rc = e->serve ? avo_served_eval(e->o->served, &e->sst, e->request, e->req_fds, e->nreq, e->timeout,
                                        e->o->should_cancel, e->o->cancel_arg, &e->sr, &started, e->err, e->errlen)
                      : avo_sandbox_run(&e->so, &e->sr, e->err, e->errlen);
    explicit_bzero(e->seedline, sizeof e->seedline);
    explicit_bzero(e->request, sizeof e->request);
    e->job_seed = 0;
    avo_phases_lap(&e->ph, "harness_process", &e->t);
    e->lock_to = e->gpu_lock >= 0 ? wall_now() : 0;
    avo_gpulock_release(e->gpu_lock);
    e->gpu_lock = -1;
    evict_ref_cache(e);
    close_passed(e);
    if (rc)
        return rc;
    e->e1 = e->cuda ? energy_mj(gpu) : -1;
    if (e->cuda)
        avo_phases_lap(&e->ph, "energy", &e->t);
    return EVAL_NEXT;
}

/* The verdict on the harness's run: cancelled, past the timeout, killed,
 * its own result, or a crash that says why it gave none. */
static json_t *harness_verdict(const cand_eval *e)
{
    const avo_problem *p = e->p;
    const avo_sandbox_result *sr = &e->sr;
    char why[512], tail[512], detail[1200];
    json_t *res;
    if (sr->cancelled) {
        snprintf(detail, sizeof detail, "cancelled after %.1f s", sr->wall_s);
        return base_result(p, "cancelled", detail, e->seed);
    }
    if (sr->timed_out) {
        snprintf(detail, sizeof detail, "no result within the %.0f s wall-clock limit; process group killed",
                 e->timeout);
        return base_result(p, "timeout", detail, e->seed);
    }
    if (sr->signal) {
        const char *ab = sigabbrev_np(sr->signal);
        last_line(sr->err, tail, sizeof tail);
        snprintf(detail, sizeof detail, "harness killed by SIG%s (%s)%s%s", ab ? ab : "?", strsignal(sr->signal),
                 tail[0] ? ": " : "", tail);
        return base_result(p, "crash", detail, e->seed);
    }
    if (sr->exited && sr->exit_code == 0 && (res = parse_harness_result(p, sr, e->o->profile, why, sizeof why)))
        return res; /* the harness's own verdict */
    last_line(sr->err, tail, sizeof tail);
    if (sr->exited && sr->exit_code == AVO_HARNESS_EXIT_REFERENCE) {
        /* Not the candidate's fault, but never a score: crash, with the
         * reason first so the daemon and a reader can tell. */
        const char *r = strstr(tail, "reference invalid: ");
        snprintf(detail, sizeof detail, "%s", r ? r : "reference invalid: (no message)");
    } else if (sr->exited && sr->exit_code == 0) {
        snprintf(detail, sizeof detail, "harness exited 0 with %s", why);
    } else {
        snprintf(detail, sizeof detail, "harness exited with code %d without a result%s%s", sr->exit_code,
                 tail[0] ? ": " : "", tail);
    }
    return base_result(p, "crash", detail, e->seed);
}

/* What the result says besides the verdict: the baseline's failure, the
 * energy, the target, the seed, the compile, the sandbox, the reference
 * cache, the GPU lock and the pairing. */
static void annotate_result(cand_eval *e, json_t *res)
{
    const avo_evaluate_opts *o = e->o;
    if (e->p->baseline[0] && !e->base.ok && !o->profile)
        json_object_set_new(res, "baseline_error", json_string(e->base_note[0] ? e->base_note : "baseline not built"));
    /* Energy of the whole evaluation (checks, timing, the reference) on
     * this GPU, from NVML's total-energy counter. */
    json_object_set_new(res, "energy_mj", e->e0 >= 0 && e->e1 >= e->e0 ? json_integer(e->e1 - e->e0) : json_null());
    if (e->cuda)
        json_object_set_new(res, "gpu_arch", json_string(e->arch));
    json_object_set_new(res, "rng_seed", json_integer((json_int_t)e->seed));
    json_object_set_new(res, "compile", compile_json(&e->cand, e->cuda));
    json_object_set_new(res, "sandbox", sandbox_json(&e->sr));
    if (e->cache_note[0])
        json_object_set_new(res, "reference_cache_error", json_string(e->cache_note));
    if (e->lock_key[0])
        json_object_set_new(res, "gpu_lock",
                            json_pack("{s:s,s:f,s:f,s:f}", "gpu", e->lock_key, "waited_s", e->lock_waited, "held_from",
                                      e->lock_from, "held_to", e->lock_to));
    paired_result(res, o, e->against_note);
}

static int classify_result(cand_eval *e)
{
    json_t *res = harness_verdict(e);
    if (res)
        annotate_result(e, res);
    return eval_done(e, res);
}

/* The evaluation after its setup, phase by phase, until one makes the
 * result or fails. */
static int (*const eval_phases[])(cand_eval *) = {
    check_source_policy, compile_reference, compile_candidate, compile_baseline, compile_against,
    prepare_harness,     take_gpu_lock,     run_harness,       classify_result,
};

int avo_evaluate_candidate(const avo_evaluate_opts *o, const avo_problem *p, const char *src, size_t len,
                           json_t **result, char *err, size_t errlen)
{
    const int cuda = strcmp(p->backend, "cuda") == 0;
    cand_eval e = {.o = o,
                   .p = p,
                   .src = src,
                   .len = len,
                   .err = err,
                   .errlen = errlen,
                   .cuda = cuda,
                   .timeout = o->timeout_s > 0 ? o->timeout_s : DEFAULT_TIMEOUT_S,
                   .cand_name = cuda ? "cand.cu" : "cand.c",
                   .pass = {-1, -1, -1, -1, -1},
                   .slot = {-1, -1, -1, -1},
                   .refcache_fd = -1,
                   .gpu_lock = -1};
    e.t_start = e.t = avo_phases_now();
    int rc = 0;
    *result = NULL;
    const double load_start = load1();
    /* One NVML for the evaluation's reads (architecture, lock key, energy
     * twice): a worker that holds none would load and initialise it for
     * each. */
    char nerr[128];
    const int nvml_held = cuda && avo_nvml_open(nerr, sizeof nerr) >= 0;
    eval_seeds(&e);
    if ((rc = find_harness(&e)) ||
        (rc = compile_setup(o, cuda, e.arch, sizeof e.arch, e.scratch, sizeof e.scratch, err, errlen))) {
        if (nvml_held)
            avo_nvml_close();
        return rc;
    }
    if ((rc = make_scratch_dirs(&e)))
        goto cleanup;
    avo_phases_lap(&e.ph, "setup", &e.t);
    e.co = (avo_compile_opts){.cc = o->cc,
                              .nvcc = o->nvcc,
                              .gpu_arch = cuda ? e.arch : NULL,
                              .cache_dir = o->cache_dir,
                              .work_dir = e.srcdir,
                              .timeout_s = e.timeout,
                              .hide_dir = state_dir(o),
                              .should_cancel = o->should_cancel,
                              .cancel_arg = o->cancel_arg,
                              .cache_only = o->compile_only};
    for (size_t i = 0; i < sizeof eval_phases / sizeof *eval_phases && rc == EVAL_NEXT; i++) {
        if (o->compile_only && eval_phases[i] == compile_baseline)
            break;
        rc = eval_phases[i](&e);
    }
    if (rc < 0)
        goto cleanup;
    if (rc == EVAL_NEXT) /* compile_only, and it did not end there */
        goto cleanup;
    rc = 0;
    if (!e.res) {
        snprintf(err, errlen, "out of memory building the result");
        rc = -ENOMEM;
        goto cleanup;
    }
    if (!json_object_get(e.res, "compile"))
        json_object_set_new(e.res, "compile", json_null());
    if (!json_object_get(e.res, "sandbox"))
        json_object_set_new(e.res, "sandbox", json_null());
    json_object_set_new(e.res, "load", load_json(load_start, load1()));
    *result = e.res;
    e.res = NULL;
    avo_phases_lap(&e.ph, "result", &e.t);

cleanup:
    avo_gpulock_release(e.gpu_lock);
    if (nvml_held)
        avo_nvml_close();
    close_passed(&e);
    json_decref(e.res);
    free(e.ref_src);
    avo_sandbox_result_free(&e.sr);
    if (e.scratch[0])
        avo_sandbox_rmtree(e.scratch);
    if (*result) {
        avo_phases_lap(&e.ph, "cleanup", &e.t);
        attach_phases(*result, &e.ph, e.t_start, &e.ref, &e.cand, p->baseline[0] ? &e.base : NULL,
                      o->against_src ? &e.against : NULL);
    }
    avo_compile_result_free(&e.ref);
    avo_compile_result_free(&e.cand);
    avo_compile_result_free(&e.base);
    avo_compile_result_free(&e.against);
    free(e.base_src);
    return rc;
}

int avo_evaluate_precompile(const avo_evaluate_opts *o, const avo_problem *p, const char *src, size_t len,
                            int *ends_early, char *err, size_t errlen)
{
    int rc, early = 0;
    if (!ends_early)
        ends_early = &early;
    *ends_early = 0;
    char scratch[PATH_MAX] = "", arch[32] = "";
    const int cuda = strcmp(p->backend, "cuda") == 0;
    avo_compile_result ref = {0}, cand = {0}, against = {0};
    char *ref_src = NULL;
    if (cuda) {
        if (o->gpu_arch)
            snprintf(arch, sizeof arch, "%s", o->gpu_arch);
        else if ((rc = detect_gpu_arch(o->gpu_index, arch, sizeof arch, err, errlen)))
            return rc;
    }
    /* A source the policy refuses is never compiled: its evaluation ends
     * at the same check, before any compile. */
    avo_policy_findings pf = {0};
    if (avo_policy_scan_source(src, len, cuda ? "cand.cu" : "cand.c", cuda, &pf) == 0 &&
        avo_policy_first(&pf, p->policy_relax)) {
        *ends_early = 1;
        return 0;
    }
    if ((rc = mkscratch(o->scratch_root ? o->scratch_root : "/tmp", scratch, sizeof scratch, err, errlen)))
        return rc;
    /* Exactly the options avo_evaluate_candidate compiles with, so its compiles
     * become cache hits. */
    avo_compile_opts co = {.cc = o->cc,
                           .nvcc = o->nvcc,
                           .gpu_arch = cuda ? arch : NULL,
                           .cache_dir = o->cache_dir,
                           .work_dir = scratch,
                           .hide_dir = state_dir(o),
                           .timeout_s = o->timeout_s > 0 ? o->timeout_s : DEFAULT_TIMEOUT_S};
    char refpath[PATH_MAX];
    size_t ref_len = 0;
    if ((rc = avo_paths_join(refpath, sizeof refpath, p->dir, p->reference)))
        snprintf(err, errlen, "the reference's path is too long: %s/%s", p->dir, p->reference);
    avo_compile_opts ro = co;
    ro.extra = trusted_libs(cuda);
    if (!rc && (ref_src = avo_file_read(refpath, &ref_len)))
        rc = avo_compile(&ro, p, ref_src, ref_len, p->reference, &ref, err, errlen);
    if (rc == 0)
        rc = avo_compile(&co, p, src, len, cuda ? "cand.cu" : "cand.c", &cand, err, errlen);
    /* Only a verdict the cache keeps: a timeout or a signal may be the
     * machine's, and its evaluation compiles again in turn. */
    if (rc == 0 && !cand.ok && cand.failed_kept)
        *ends_early = 1;
    /* The against (paired): compiled as the candidate, as there. */
    if (rc == 0 && o->against_src)
        rc = avo_compile(&co, p, o->against_src, o->against_len, cuda ? "cand.cu" : "cand.c", &against, err, errlen);
    free(ref_src);
    avo_compile_result_free(&ref);
    avo_compile_result_free(&cand);
    avo_compile_result_free(&against);
    avo_sandbox_rmtree(scratch);
    return rc;
}

/* ---- avo-worker eval ---------------------------------------------------- */

/* The disassembler for a compiled candidate: cuobjdump -sass beside nvcc
 * (SASS of every kernel) or objdump -d for a C object. Run in the sandbox
 * like the compiler (it parses an untrusted file). Returns a new object
 * {"tool", "text"} or {"tool", "error"}. */
static json_t *disassemble(const avo_evaluate_opts *o, int cuda, const char *obj, const char *scratch, double timeout)
{
    /* cuobjdump writes temporary files (into TMPDIR, the sandbox's working
     * directory): one of its own, writable by the sandbox user. */
    char work[PATH_MAX];
    if (snprintf(work, sizeof work, "%s/disasm", scratch) >= (int)sizeof work || mkdir(work, 0700) != 0 ||
        (geteuid() == 0 && chown(work, AVO_SANDBOX_UID, AVO_SANDBOX_UID) != 0))
        return json_pack("{s:s,s:s++}", "tool", cuda ? "cuobjdump" : "objdump", "error",
                         "cannot make the disassembler's working directory: ", strerror(errno), "");
    char tool[4200] = "objdump";
    if (cuda) {
        const char *nvcc = o->nvcc ? o->nvcc : "nvcc";
        const char *slash = strrchr(nvcc, '/');
        if (slash)
            snprintf(tool, sizeof tool, "%.*s/cuobjdump", (int)(slash - nvcc), nvcc);
        else
            snprintf(tool, sizeof tool, "cuobjdump");
    }
    char *const argv_cuda[] = {tool, "-sass", (char *)obj, NULL};
    char *const argv_c[] = {tool, "-d", "--no-show-raw-insn", "-C", (char *)obj, NULL};
    /* It parses an untrusted file: confined like the compiler, with only
     * that file of the cache in view. */
    const char *hidebuf[4], *const *hide = hidden_dirs(o, hidebuf);
    const char *expose[] = {obj, NULL};
    avo_sandbox_opts so = {.argv = cuda ? argv_cuda : argv_c,
                           .cwd = work,
                           .timeout_s = timeout,
                           .out_cap = AVO_DISASM_CAP,
                           .keep_head = 1,
                           .expose = expose};
    avo_sandbox_confine(&so, hide);
    avo_sandbox_result sr;
    char err[256];
    json_t *r;
    if (avo_sandbox_run(&so, &sr, err, sizeof err))
        return json_pack("{s:s,s:s++}", "tool", tool, "error", err, " on this host",
                         cuda ? " (cuobjdump ships with the CUDA toolkit, beside nvcc)" : " (objdump: binutils)");
    if (sr.out)
        avo_utf8_scrub(sr.out);
    if (sr.err)
        avo_utf8_scrub(sr.err);
    if (sr.exited && sr.exit_code == 0)
        r = json_pack("{s:s,s:s,s:b}", "tool", tool, "text", sr.out, "truncated", sr.out_len >= AVO_DISASM_CAP);
    else
        r = json_pack("{s:s,s:s++}", "tool", tool, "error", "the disassembler failed: ", sr.err_len ? sr.err : "",
                      sr.timed_out ? " (timed out)" : "");
    avo_sandbox_result_free(&sr);
    return r;
}

int avo_evaluate_compile_only(const avo_evaluate_opts *o, const avo_problem *p, const char *src, size_t len,
                              json_t **result, char *err, size_t errlen)
{
    int rc;
    char scratch[PATH_MAX] = "", arch[32] = "";
    avo_compile_result cand = {0};
    const int cuda = strcmp(p->backend, "cuda") == 0;
    const double timeout = o->timeout_s > 0 ? o->timeout_s : DEFAULT_TIMEOUT_S;
    const double t_start = avo_phases_now();
    double t = t_start;
    avo_phases ph = {0};
    *result = NULL;
    if ((rc = compile_setup(o, cuda, arch, sizeof arch, scratch, sizeof scratch, err, errlen)))
        return rc;
    avo_phases_lap(&ph, "setup", &t);
    /* The policy, as an evaluation applies it (the agent's compile tool
     * hears of a violation before it spends an evaluation). */
    const char *cand_name = o->src_name && *o->src_name && !strchr(o->src_name, '/') ? o->src_name
                            : cuda                                                   ? "cand.cu"
                                                                                     : "cand.c";
    avo_policy_findings pf = {0};
    const avo_policy_violation *pv = NULL;
    if ((rc = avo_policy_scan_source(src, len, cand_name, cuda, &pf))) {
        snprintf(err, errlen, "cannot check the candidate's source: %s", strerror(-rc));
        goto cleanup;
    }
    pv = o->trusted ? NULL : avo_policy_first(&pf, p->policy_relax);
    if (!pv) {
        /* The reference and baseline are trusted: linked with the vendor
         * libraries and not held to the candidate policy, as an
         * evaluation compiles them. */
        avo_compile_opts co = {.cc = o->cc,
                               .nvcc = o->nvcc,
                               .gpu_arch = cuda ? arch : NULL,
                               .extra = o->trusted ? trusted_libs(cuda) : NULL,
                               .cache_dir = o->cache_dir,
                               .work_dir = scratch,
                               .hide_dir = state_dir(o),
                               .timeout_s = timeout};
        rc = avo_compile(&co, p, src, len, cand_name, &cand, err, errlen);
        avo_phases_lap(&ph, "compile_candidate", &t);
        if (rc)
            goto cleanup;
        if (!o->trusted && !cand.timed_out && !cand.cancelled &&
            (rc = policy_after_compile(&cand, src, len, cand_name, &pf, err, errlen)))
            goto cleanup;
        pv = o->trusted ? NULL : avo_policy_first(&pf, p->policy_relax);
    }
    if (pv) {
        char detail[1024];
        avo_policy_detail(pv, detail, sizeof detail);
        *result = json_pack("{s:s,s:s,s:o,s:o}", "outcome", "policy_violation", "detail", detail, "policy",
                            avo_policy_json(pv, p->policy_relax), "compile",
                            cand.log ? compile_json(&cand, cuda) : json_null());
        rc = *result ? 0 : -ENOMEM;
        goto cleanup;
    }
    char line[600] = "";
    if (cand.timed_out)
        snprintf(line, sizeof line, "the compiler ran past the %.0f s timeout", timeout);
    else if (!cand.ok)
        first_error(cand.log, line, sizeof line);
    *result = json_pack("{s:s,s:s,s:o}", "outcome",
                        cand.ok          ? "ok"
                        : cand.timed_out ? "timeout"
                                         : "compile_error",
                        "detail", cand.ok ? "compiles" : line, "compile", compile_json(&cand, cuda));
    if (!*result)
        rc = -ENOMEM;
    else if (o->disassemble && cand.ok) {
        json_object_set_new(*result, "disassembly", disassemble(o, cuda, cand.so_path, scratch, timeout));
        avo_phases_lap(&ph, "disassembly", &t);
    }
cleanup:
    avo_sandbox_rmtree(scratch);
    if (*result) {
        avo_phases_lap(&ph, "cleanup", &t);
        attach_phases(*result, &ph, t_start, NULL, &cand, NULL, NULL);
    }
    avo_compile_result_free(&cand);
    return rc;
}

/* The program's source as prog.c or prog.cu in the scratch directory. */
static int write_program(const char *scratch, int cuda, const char *src, size_t len, char *err, size_t errlen)
{
    char file[PATH_MAX];
    int rc = avo_paths_join(file, sizeof file, scratch, cuda ? "prog.cu" : "prog.c");
    if (!rc)
        rc = avo_file_write_atomic(file, src, len, 0644);
    if (rc)
        snprintf(err, errlen, "cannot write %s in %s: %s", cuda ? "prog.cu" : "prog.c", scratch, strerror(-rc));
    return rc;
}

/* The program compiled in the scratch directory, as a candidate is: by
 * nobody, confined. cr holds the compiler's run; a compile that failed is
 * its *result. */
static int compile_program(const avo_evaluate_opts *o, int cuda, const char *arch, const char *scratch,
                           avo_sandbox_result *cr, json_t **result, char *err, size_t errlen)
{
    char gencode[128] = "";
    if (cuda)
        snprintf(gencode, sizeof gencode, "-gencode=arch=compute_%s,code=%s", arch + 3, arch);
    char *const cc_argv[] = {(char *)(o->cc ? o->cc : "cc"),
                             "-O2",
                             "-march=native",
                             "-std=gnu17",
                             "-o",
                             "prog",
                             "prog.c",
                             "-lm",
                             "-lpthread",
                             NULL};
    char *const nvcc_argv[] = {
        (char *)(o->nvcc ? o->nvcc : "nvcc"), "-O3", "-std=c++17", gencode, "-o", "prog", "prog.cu", NULL};
    const char *hidebuf[4], *const *hide = hidden_dirs(o, hidebuf);
    int rc;
    /* The compiler, as for candidates: nobody, in a scratch dir given to it. */
    if (geteuid() == 0 && chown(scratch, AVO_SANDBOX_UID, AVO_SANDBOX_UID) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot hand the scratch dir to the sandbox user: %s", strerror(errno));
        return rc;
    }
    avo_sandbox_opts co = {.argv = cuda ? nvcc_argv : cc_argv,
                           .cwd = scratch,
                           .timeout_s = 120,
                           .no_as_limit = cuda,
                           .out_cap = AVO_COMPILE_LOG_CAP,
                           .keep_head = 1};
    avo_sandbox_confine(&co, hide);
    if ((rc = avo_sandbox_run(&co, cr, err, errlen)))
        return rc;
    if (cr->err)
        avo_utf8_scrub(cr->err);
    if (cr->out)
        avo_utf8_scrub(cr->out);
    if (!cr->exited || cr->exit_code != 0)
        *result = json_pack("{s:s,s:s++}", "outcome", cr->timed_out ? "timeout" : "compile_error", "compile_log",
                            cr->err ? cr->err : "", cr->out ? cr->out : "",
                            cr->timed_out ? "\n(compiler timed out)" : "");
    return 0;
}

/* The compiled program run, fully isolated; its run (or a refusal, or a
 * cancel while it waited for the GPU) is *result. */
static int run_program(const avo_evaluate_opts *o, int cuda, const char *scratch, const avo_sandbox_result *cr,
                       avo_sandbox_result *rr, json_t **result, char *err, size_t errlen)
{
    /* Code an agent wrote runs only fully isolated: as nobody (the worker
     * must be root to switch to it) and in a network namespace of its own.
     * Without either, it is not run at all. */
    if (geteuid() != 0) {
        *result = json_pack("{s:s,s:s}", "outcome", "refused", "detail",
                            "microbenchmarks run only on workers started as root (they run each program as nobody "
                            "without network); this worker cannot drop privileges");
        return 0;
    }
    const char *hidebuf[4], *const *hide = hidden_dirs(o, hidebuf);
    /* The program runs confined too, in a PID namespace and control group
     * of its own: nothing it starts outlives it. */
    char *const run_argv[] = {"./prog", NULL};
    avo_sandbox_opts ro = {.argv = run_argv,
                           .cwd = scratch,
                           .timeout_s = AVO_PROGRAM_TIMEOUT_S,
                           .no_as_limit = cuda,
                           .netns_required = 1,
                           .out_cap = AVO_PROGRAM_OUT_CAP,
                           .keep_head = 1,
                           .pids_max = 256,
                           .should_cancel = o->should_cancel,
                           .cancel_arg = o->cancel_arg};
    avo_sandbox_confine(&ro, hide);
    /* A CUDA program runs on the GPU that the host's workers time on:
     * alone there, as an evaluation's harness (gpulock.h). */
    int gpu_lock = -1, rc;
    if (cuda) {
        char key[128];
        double waited;
        avo_gpulock_key(o->gpu_index, key, sizeof key);
        gpu_lock = avo_gpulock_take(gpu_lock_dir(o), key, o->should_cancel, o->cancel_arg, &waited, err, errlen);
        if (gpu_lock == -ECANCELED) {
            *result = json_pack("{s:s,s:s}", "outcome", "cancelled", "detail", err);
            return 0;
        }
        if ((rc = gpu_lock) < 0)
            return rc;
    }
    rc = avo_sandbox_run(&ro, rr, err, errlen);
    avo_gpulock_release(gpu_lock);
    if (rc)
        return rc;
    const char *outcome = rr->timed_out ? "timeout" : rr->signal ? "crash" : "ran";
    /* Its output is untrusted bytes; JSON needs UTF-8. */
    if (rr->out)
        avo_utf8_scrub(rr->out);
    if (rr->err)
        avo_utf8_scrub(rr->err);
    *result = json_pack("{s:s,s:i,s:i,s:s,s:s,s:f,s:s}", "outcome", outcome, "exit_code",
                        rr->exited ? rr->exit_code : -1, "signal", rr->signal, "stdout", rr->out ? rr->out : "",
                        "stderr", rr->err ? rr->err : "", "wall_s", rr->wall_s, "compile_log", cr->err ? cr->err : "");
    return 0;
}

int avo_evaluate_program(const avo_evaluate_opts *o, const char *language, const char *src, size_t len, json_t **result,
                         char *err, size_t errlen)
{
    const int cuda = strcmp(language, "cuda") == 0;
    char scratch[PATH_MAX] = "", arch[32] = "";
    avo_sandbox_result cr = {0}, rr = {0};
    int rc;
    *result = NULL;
    if (!cuda && strcmp(language, "c") != 0) {
        snprintf(err, errlen, "language must be c or cuda, not %s", language);
        return -EINVAL;
    }
    if ((rc = compile_setup(o, cuda, arch, sizeof arch, scratch, sizeof scratch, err, errlen)))
        return rc;
    if ((rc = write_program(scratch, cuda, src, len, err, errlen)))
        goto cleanup;
    /* A compile that failed, a refusal or a cancel is the result; a
     * program that ran is too. */
    if ((rc = compile_program(o, cuda, arch, scratch, &cr, result, err, errlen)))
        goto cleanup;
    if (!(cr.exited && cr.exit_code == 0))
        goto done;
    if ((rc = run_program(o, cuda, scratch, &cr, &rr, result, err, errlen)))
        goto cleanup;
done:
    if (!*result) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
cleanup:
    avo_sandbox_result_free(&cr);
    avo_sandbox_result_free(&rr);
    avo_sandbox_rmtree(scratch);
    return rc;
}

int avo_evaluate_default_cache(char *out, size_t outlen)
{
    const char *h = getenv("AVO_HOME"), *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (h && *h)
        return snprintf(out, outlen, "%s/cache", h) < (int)outlen ? 0 : -ENAMETOOLONG;
    if (x && *x)
        return snprintf(out, outlen, "%s/avo", x) < (int)outlen ? 0 : -ENAMETOOLONG;
    if (home && *home)
        return snprintf(out, outlen, "%s/.cache/avo", home) < (int)outlen ? 0 : -ENAMETOOLONG;
    return -ENOENT;
}

int avo_evaluate_default_harness(char *out, size_t outlen)
{
    char exe[PATH_MAX];
    int rc = avo_paths_exe_dir(exe, sizeof exe);
    return rc ? rc : avo_paths_join(out, outlen, exe, "avo-harness");
}

static void print_human(const json_t *r)
{
    const char *outcome = json_string_value(json_object_get(r, "outcome"));
    const char *unit = json_string_value(json_object_get(r, "unit"));
    printf("outcome    %s\n", outcome ? outcome : "?");
    printf("detail     %s\n", json_string_value(json_object_get(r, "detail")));
    json_t *cf = json_object_get(r, "configs");
    if (json_is_string(json_object_get(r, "mode"))) {
        /* A profile run: its counters per config, as the worker stores them. */
        size_t i;
        json_t *c;
        json_array_foreach(cf, i, c)
        {
            char *t = json_dumps(json_object_get(c, "counters"), JSON_COMPACT);
            printf("%-16s %s\n", json_string_value(json_object_get(c, "name")), t ? t : "null");
            free(t);
        }
    } else if (json_array_size(cf)) {
        printf("\n%-16s %12s %11s %11s %6s %7s %10s\n", "config", unit ? unit : "score", "median ms", "min ms", "runs",
               "rse", "rel_l2");
        size_t i;
        json_t *c;
        json_array_foreach(cf, i, c)
        {
            printf("%-16s %12.3f %11.4f %11.4f %6lld %6.2f%% %10.2e%s\n", json_string_value(json_object_get(c, "name")),
                   json_number_value(json_object_get(c, "score")),
                   json_number_value(json_object_get(c, "median_s")) * 1e3,
                   json_number_value(json_object_get(c, "min_s")) * 1e3,
                   (long long)json_integer_value(json_object_get(c, "runs")),
                   json_number_value(json_object_get(c, "rse")) * 100,
                   json_number_value(json_object_get(json_object_get(c, "check"), "rel_l2")),
                   json_is_true(json_object_get(c, "noisy")) ? "  noisy" : "");
        }
        printf("\n");
    }
    if (json_is_number(json_object_get(r, "aggregate"))) /* not after --compile-only */
        printf("aggregate  %.3f %s (geometric mean over configs)\n", json_number_value(json_object_get(r, "aggregate")),
               unit ? unit : "");
    json_t *pj = json_object_get(r, "paired");
    if (json_is_string(json_object_get(pj, "error")))
        printf("paired     not measured: %s\n", json_string_value(json_object_get(pj, "error")));
    else if (json_is_object(pj))
        printf("paired     %.4f x the against's speed, %.0f%% interval [%.4f, %.4f], lower bound %.4f\n",
               json_number_value(json_object_get(pj, "ratio")),
               json_number_value(json_object_get(pj, "confidence")) * 100,
               json_number_value(json_array_get(json_object_get(pj, "ci"), 0)),
               json_number_value(json_array_get(json_object_get(pj, "ci"), 1)),
               json_number_value(json_object_get(pj, "low")));
    json_t *sj = json_object_get(r, "screen");
    if (json_is_string(json_object_get(sj, "error")))
        printf("screen     not decided: %s\n", json_string_value(json_object_get(sj, "error")));
    else if (json_is_object(sj))
        printf("screen     %s: %.4f x the against's speed on %zu configs, %.0f%% interval [%.4f, %.4f]%s\n",
               json_is_true(json_object_get(sj, "screened_out")) ? "screened out" : "passed",
               json_number_value(json_object_get(sj, "ratio")), json_array_size(json_object_get(sj, "configs")),
               json_number_value(json_object_get(sj, "confidence")) * 100,
               json_number_value(json_array_get(json_object_get(sj, "ci"), 0)),
               json_number_value(json_array_get(json_object_get(sj, "ci"), 1)),
               json_is_true(json_object_get(sj, "screened_out")) ? " (scores and aggregate: the screen's configs only)"
                                                                 : "");
    if (json_is_integer(json_object_get(r, "rng_seed")))
        printf("rng_seed   %lld\n", (long long)json_integer_value(json_object_get(r, "rng_seed")));
    json_t *co = json_object_get(r, "compile");
    if (json_is_object(co))
        printf("compile    %.2f s%s\n", json_number_value(json_object_get(co, "seconds")),
               json_is_true(json_object_get(co, "cached")) ? " (cached)" : "");
    json_t *sb = json_object_get(r, "sandbox");
    if (json_is_object(sb)) {
        printf("harness    %.2f s wall, netns %s%s%s\n", json_number_value(json_object_get(sb, "wall_s")),
               json_is_true(json_object_get(sb, "netns")) ? "on" : "off",
               json_is_string(json_object_get(sb, "netns_note")) ? ": " : "",
               json_is_string(json_object_get(sb, "netns_note")) ? json_string_value(json_object_get(sb, "netns_note"))
                                                                 : "");
    }
    if (outcome && strcmp(outcome, "compile_error") == 0 && json_is_object(co))
        printf("\ncompiler log:\n%s\n", json_string_value(json_object_get(co, "log")));
    if (outcome && strcmp(outcome, "crash") == 0 && json_is_object(sb)) {
        const char *t = json_string_value(json_object_get(sb, "stderr_tail"));
        if (t && *t)
            printf("\nstderr (tail):\n%s\n", t);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: avo-worker eval <problem-dir> <candidate-file> [--json] [--seed N] [--timeout S] "
                    "[--harness PATH] [--cache DIR] [--gpu-arch sm_XY] [--compile-only [--disassemble]] "
                    "[--against FILE [--confidence C] [--screen]] [--counters | --profile [--config NAME]] "
                    "[--job-seed-stdin] [--ref-cache-mb N] [--gpu-lock-dir DIR]\n");
    return 2;
}

/* The command line of avo-worker eval, parsed. */
typedef struct {
    const char *pos[2]; /* problem directory, candidate file */
    int npos, as_json, compile_only, ref_cache_given;
    const char *against_path;
    avo_evaluate_opts o;
    char cache[4096], harness[4096];
} eval_args;

/* The options that are a switch or take a string. Returns 1 when `a` is one
 * (*i moved past its value), 0 when it is not. */
static int eval_plain_option(eval_args *e, const char *a, const char *v, int *i)
{
    avo_evaluate_opts *o = &e->o;
    const char **value = NULL;
    if (strcmp(a, "--json") == 0)
        e->as_json = 1;
    else if (strcmp(a, "--compile-only") == 0)
        e->compile_only = 1;
    else if (strcmp(a, "--profile") == 0)
        o->profile = 1;
    else if (strcmp(a, "--counters") == 0)
        o->counters = 1;
    else if (strcmp(a, "--disassemble") == 0)
        o->disassemble = 1;
    else if (strcmp(a, "--screen") == 0)
        o->screen = 1;
    else if (!v)
        return 0;
    else if (strcmp(a, "--config") == 0)
        value = &o->profile_config;
    else if (strcmp(a, "--harness") == 0)
        value = &o->harness_path;
    else if (strcmp(a, "--cache") == 0)
        value = &o->cache_dir;
    else if (strcmp(a, "--gpu-arch") == 0)
        value = &o->gpu_arch;
    else if (strcmp(a, "--gpu-lock-dir") == 0)
        value = &o->gpu_lock_dir;
    else if (strcmp(a, "--against") == 0)
        value = &e->against_path;
    else
        return 0;
    if (value) {
        *value = v;
        (*i)++;
    }
    return 1;
}

/* --job-seed-stdin: the job's seed (the warm-up calls' sets) as a job would
 * give it: on stdin, never on the command line. */
static int eval_job_seed_stdin(avo_evaluate_opts *o)
{
    char line[64] = "", *end;
    ssize_t n = read(0, line, sizeof line - 1);
    line[n > 0 ? n : 0] = 0;
    errno = 0;
    o->job_seed = strtoull(line, &end, 10);
    if (n <= 0 || end == line || (*end && *end != '\n') || errno || !o->job_seed || o->job_seed > (uint64_t)INT64_MAX) {
        fprintf(stderr, "avo-worker eval: --job-seed-stdin wants an integer in [1, 2^63) on stdin\n");
        return -1;
    }
    explicit_bzero(line, sizeof line);
    return 1;
}

/* The options whose value is a number to check. Returns 1 when `a` is one
 * (*i moved past its value), 0 when it is not, -1 when its value is bad (said
 * on stderr). */
static int eval_number_option(eval_args *e, const char *a, const char *v, int *i)
{
    avo_evaluate_opts *o = &e->o;
    char *end;
    if (strcmp(a, "--job-seed-stdin") == 0)
        return eval_job_seed_stdin(o);
    if (!v)
        return 0;
    if (strcmp(a, "--seed") == 0) {
        errno = 0;
        o->rng_seed = strtoull(v, &end, 10);
        if (errno || *end || o->rng_seed > (uint64_t)INT64_MAX) {
            fprintf(stderr, "avo-worker eval: --seed wants an integer in [1, 2^63)\n");
            return -1;
        }
    } else if (strcmp(a, "--ref-cache-mb") == 0) {
        long long mb = 0;
        if (avo_refstore_parse_mb(v, &mb) != 0) {
            fprintf(stderr, "avo-worker eval: --ref-cache-mb wants an integer number of MB in [0, 2^40), got '%s'\n",
                    v);
            return -1;
        }
        o->ref_cache_bytes = (uint64_t)mb << 20;
        e->ref_cache_given = 1;
    } else if (strcmp(a, "--timeout") == 0) {
        o->timeout_s = strtod(v, &end);
        if (*end || !(o->timeout_s > 0)) {
            fprintf(stderr, "avo-worker eval: --timeout wants seconds > 0\n");
            return -1;
        }
    } else if (strcmp(a, "--confidence") == 0) {
        o->confidence = strtod(v, &end);
        if (*end || end == v || !(o->confidence > 0 && o->confidence < 1)) {
            fprintf(stderr, "avo-worker eval: --confidence wants a number in (0, 1), got '%s'\n", v);
            return -1;
        }
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* Returns 0, or the exit status when the command line is wrong. */
static int eval_parse_args(int argc, char **argv, eval_args *e)
{
    /* Accepts both argv = {"avo-worker", "eval", ...} and {"eval", ...}
     * so main() may pass its argv through or shift it first. */
    int i = 0;
    if (argc > 0 && strcmp(argv[0], "eval") == 0)
        i = 1;
    else if (argc > 1 && strcmp(argv[1], "eval") == 0)
        i = 2;
    else if (argc > 0)
        i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int got = eval_plain_option(e, a, v, &i);
        if (!got)
            got = eval_number_option(e, a, v, &i);
        if (got < 0)
            return 2;
        if (got)
            continue;
        if (a[0] == '-' || e->npos == 2) {
            fprintf(stderr, "avo-worker eval: unexpected argument '%s'\n", a);
            return usage();
        }
        e->pos[e->npos++] = a;
    }
    return e->npos != 2 ? usage() : 0;
}

/* The options that go together, and the defaults of those not given.
 * Returns 0, or 2 when they do not go together (said on stderr). */
static int eval_check_args(eval_args *e)
{
    avo_evaluate_opts *o = &e->o;
    /* The GPU the harness sees as CUDA device 0 (energy, arch, its lock). */
    const int gi = avo_devices_visible_index(getenv("CUDA_VISIBLE_DEVICES"));
    o->gpu_index = gi < 0 ? 0 : gi;
    /* The reference cache is the job's: by hand, only with a job seed. */
    if (!e->ref_cache_given)
        o->ref_cache_bytes = (uint64_t)AVO_REFSTORE_DEFAULT_MB << 20;
    if (o->screen && !e->against_path) {
        fprintf(stderr, "avo-worker eval: --screen goes with --against (the screen times paired)\n");
        return 2;
    }
    if (o->confidence > 0 && !e->against_path) {
        fprintf(stderr, "avo-worker eval: --confidence goes with --against\n");
        return 2;
    }
    if (e->against_path && (e->compile_only || o->profile)) {
        fprintf(stderr, "avo-worker eval: --against measures a run: not with %s\n",
                e->compile_only ? "--compile-only" : "--profile");
        return 2;
    }
    if ((o->profile_config && !o->profile) || (o->profile && (o->counters || e->compile_only))) {
        fprintf(stderr, "avo-worker eval: %s\n",
                o->profile_config ? "--config goes with --profile"
                                  : "--profile excludes --counters and --compile-only");
        return 2;
    }
    if (o->disassemble && !e->compile_only) {
        fprintf(stderr, "avo-worker eval: --disassemble goes with --compile-only\n");
        return 2;
    }
    if (!o->cache_dir) {
        if (avo_evaluate_default_cache(e->cache, sizeof e->cache)) {
            fprintf(stderr, "avo-worker eval: no cache directory (set AVO_HOME or HOME, or pass --cache)\n");
            return 2;
        }
        o->cache_dir = e->cache;
    }
    if (!o->harness_path && !e->compile_only) {
        if (avo_evaluate_default_harness(e->harness, sizeof e->harness)) {
            fprintf(stderr, "avo-worker eval: cannot locate avo-harness (pass --harness)\n");
            return 2;
        }
        o->harness_path = e->harness;
    }
    const char *tmp = getenv("TMPDIR");
    o->scratch_root = tmp && *tmp ? tmp : "/tmp";
    return 0;
}

/* Load the problem and the candidate, evaluate, print. Returns the exit
 * status: 0 when the outcome is ok, 1 when not, 2 when it could not run. */
static int eval_run(eval_args *e)
{
    avo_evaluate_opts *o = &e->o;
    char err[1024];
    avo_problem p;
    int loaded = 0, rc = 2;
    char *src = NULL, *against = NULL;
    json_t *res = NULL;
    if (avo_problem_load(&p, e->pos[0], err, sizeof err)) {
        fprintf(stderr, "avo-worker eval: %s\n", err);
        goto cleanup;
    }
    loaded = 1;
    size_t len = 0;
    if (!(src = avo_file_read(e->pos[1], &len))) {
        fprintf(stderr, "avo-worker eval: cannot read candidate %s: %s\n", e->pos[1], strerror(errno));
        goto cleanup;
    }
    if (e->against_path) {
        if (!(against = avo_file_read(e->against_path, &o->against_len))) {
            fprintf(stderr, "avo-worker eval: --against: cannot read %s: %s\n", e->against_path, strerror(errno));
            goto cleanup;
        }
        o->against_src = against;
    }
    if (e->compile_only ? avo_evaluate_compile_only(o, &p, src, len, &res, err, sizeof err)
                        : avo_evaluate_candidate(o, &p, src, len, &res, err, sizeof err)) {
        fprintf(stderr, "avo-worker eval: %s\n", err);
        goto cleanup;
    }
    if (e->as_json) {
        json_dumpf(res, stdout, JSON_INDENT(2));
        printf("\n");
    } else {
        print_human(res);
    }
    rc = strcmp(json_string_value(json_object_get(res, "outcome")), "ok") == 0 ? 0 : 1;

cleanup:
    json_decref(res);
    free(src);
    free(against);
    if (loaded)
        avo_problem_free(&p);
    return rc;
}

int avo_evaluate_cli(int argc, char **argv)
{
    eval_args e = {0};
    int rc = eval_parse_args(argc, argv, &e);
    if (rc == 0)
        rc = eval_check_args(&e);
    return rc ? rc : eval_run(&e);
}
