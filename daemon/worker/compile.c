/* Compiles a candidate into a shared object through a content-addressed cache (compile.h). */
#include "compile.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "avo_file.h"
#include "avo_hash.h"
#include "avo_log.h"
#include "avo_utf8.h"
#include "cpulease.h"
#include "sandbox.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_small(const char *path, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(cap + 1);
    size_t n = b ? fread(b, 1, cap, f) : 0;
    fclose(f);
    if (b)
        b[n] = 0;
    return b;
}

/* One entry is enough: a process uses one compiler. */
static pthread_mutex_t ident_lock = PTHREAD_MUTEX_INITIALIZER;
static char ident_cc[256];
static char ident_line[512];

int avo_compile_identity(const char *cc, char *out, size_t outlen)
{
    int rc = 0;
    pthread_mutex_lock(&ident_lock);
    if (ident_line[0] && strcmp(ident_cc, cc) == 0) {
        snprintf(out, outlen, "%s", ident_line);
        goto cleanup;
    }
    char *argv[] = {(char *)cc, "--version", NULL};
    avo_sandbox_opts so = {.argv = argv, .cwd = "/", .timeout_s = 30, .out_cap = 4096, .keep_head = 1};
    avo_sandbox_confine(&so, NULL);
    avo_sandbox_result sr;
    char err[256];
    if ((rc = avo_sandbox_run(&so, &sr, err, sizeof err)))
        goto cleanup;
    if (!sr.exited || sr.exit_code != 0 || !sr.out_len) {
        avo_sandbox_result_free(&sr);
        rc = -EIO;
        goto cleanup;
    }
    /* cc's first line carries its version; nvcc's come last. Keep them all,
     * one line. */
    for (char *q = sr.out; *q; q++)
        if (*q == '\n')
            *q = ' ';
    snprintf(ident_cc, sizeof ident_cc, "%s", cc);
    snprintf(ident_line, sizeof ident_line, "%s", sr.out);
    snprintf(out, outlen, "%s", ident_line);
    avo_sandbox_result_free(&sr);
cleanup:
    pthread_mutex_unlock(&ident_lock);
    return rc;
}

/* The target: machine, any -m flags, and for -march=native what "native"
 * means here (the CPU's model and feature flags), so a cache shared between
 * hosts never hands one CPU's object to another. */
static void target_id(const avo_problem *p, const char *gpu_arch, char *out, size_t outlen)
{
    struct utsname u;
    int native = 0;
    size_t n = 0;
    if (uname(&u) == 0)
        n += (size_t)snprintf(out + n, outlen - n, "%s", u.machine);
    if (gpu_arch)
        n += (size_t)snprintf(out + n, outlen - n, " cuda:%s", gpu_arch);
    for (int i = 0; i < p->ncflags && n < outlen; i++) {
        if (strncmp(p->cflags[i], "-m", 2) == 0)
            n += (size_t)snprintf(out + n, outlen - n, " %s", p->cflags[i]);
        if (strstr(p->cflags[i], "=native"))
            native = 1;
    }
    if (!native || n >= outlen)
        return;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[8192];
    int seen_model = 0, seen_flags = 0;
    while (fgets(line, sizeof line, f) && !(seen_model && seen_flags) && n < outlen) {
        if (!seen_model && strncmp(line, "model name", 10) == 0) {
            seen_model = 1;
            n += (size_t)snprintf(out + n, outlen - n, " | %s", line);
        } else if (!seen_flags && strncmp(line, "flags", 5) == 0) {
            seen_flags = 1;
            n += (size_t)snprintf(out + n, outlen - n, " | %s", line);
        }
    }
    fclose(f);
}

/* Intermediates kept for the policy checks: the assembler's input (gcc's
 * -save-temps; for nvcc, the host compiler's) and nvcc's PTX (-keep).
 * Neither changes the code generated: the same object with and without
 * (gcc), the same cicc and ptxas command lines but for file names (nvcc
 * --dryrun; tests/integration/test_policy.sh compares them). */
static const char *const keep_c[] = {"-save-temps", NULL};
static const char *const keep_cuda[] = {"-keep", "-Xcompiler=-save-temps", NULL};

/* The file the compile kept: <work>/<pattern> for the first pattern that
 * exists, as out ("" when none). */
static void kept_file(const char *work, const char *out_name, const char *name, const char *ext, char *out,
                      size_t outlen)
{
    char base[256];
    snprintf(base, sizeof base, "%s", name);
    char *dot = strrchr(base, '.');
    if (dot)
        *dot = 0;
    /* gcc names its temporaries after the output (avo-out.so-cand.s), nvcc
     * and its host compiler after the source (cand.ptx, cand.s) */
    snprintf(out, outlen, "%s/%s-%s%s", work, out_name, base, ext);
    if (access(out, R_OK) == 0)
        return;
    snprintf(out, outlen, "%s/%s%s", work, base, ext);
    if (access(out, R_OK) != 0)
        out[0] = 0;
}

/* The compiler's log beside its object in the cache. Losing it costs a
 * message on a later cache hit, not a result: warned, not failed. */
static void keep_log(const char *path, const char *log)
{
    int rc = avo_file_write_atomic(path, log, strlen(log), 0600);
    if (rc)
        avo_warn("compile", "cannot keep the compile log %s: %s", path, strerror(-rc));
}

/* The kept file `from` into the cache as `to` (its path into r_path), or
 * nothing when the compile kept none. */
static int keep_in_cache(const char *from, const char *to, char *r_path, size_t r_len)
{
    r_path[0] = 0;
    if (!from[0])
        return 0;
    int rc = avo_file_copy_atomic(from, to, 0644);
    if (rc)
        return rc;
    snprintf(r_path, r_len, "%s", to);
    return 0;
}

/* The compile's kept .s (and .ptx) into the cache at asmpath (ptxpath). */
static int store_kept(const char *work, const char *out_name, const char *name, int cuda, const char *asmpath,
                      const char *ptxpath, avo_compile_result *r)
{
    char from[PATH_MAX];
    kept_file(work, out_name, name, ".s", from, sizeof from);
    int rc = keep_in_cache(from, asmpath, r->asm_path, sizeof r->asm_path);
    if (!rc && cuda) {
        kept_file(work, out_name, name, ".ptx", from, sizeof from);
        rc = keep_in_cache(from, ptxpath, r->ptx_path, sizeof r->ptx_path);
    }
    return rc;
}

static int cache_key(const avo_problem *p, const char *gpu_arch, const char *const *extra, const char *ident,
                     const char *src, size_t len, char key[65])
{
    char target[10240];
    target_id(p, gpu_arch, target, sizeof target);
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f)
        return -ENOMEM;
    /* NUL separators keep field boundaries unambiguous. */
    /* v2: compiles run confined since; a v1 entry's log may hold what an
     * unconfined compiler read from the host (an #include of a host file).
     * v3: the compile keeps its intermediates (the flags below) and the
     * entry holds them beside the object, for the policy checks. */
    fprintf(f, "avo-compile-v3%c%s%c%s%c", 0, ident, 0, target, 0);
    for (int i = 0; i < p->ncflags; i++)
        fprintf(f, "%s%c", p->cflags[i], 0);
    for (int i = 0; extra && extra[i]; i++)
        fprintf(f, "%s%c", extra[i], 0);
    for (const char *const *k = gpu_arch ? keep_cuda : keep_c; *k; k++)
        fprintf(f, "%s%c", *k, 0);
    fprintf(f, "-shared%c-fPIC%c%c", 0, 0, 0);
    fwrite(src, 1, len, f);
    if (fclose(f)) {
        free(buf);
        return -ENOMEM;
    }
    int rc = avo_hash_sha256_hex(buf, blen, key);
    free(buf);
    return rc;
}

/* One compile's state, shared by its phases: the compiler, the cache
 * entry's paths (named by the key) and the scratch directory's files. */
typedef struct {
    const avo_compile_opts *o;
    const avo_problem *p;
    const char *name;
    avo_compile_result *r;
    int cuda;
    const char *cc;
    char gencode[128];
    double start;
    char ident[512];
    /* The object goes in by avo_file_copy_atomic: readers never see a
     * half-written one, and concurrent compiles of one key both succeed. */
    char cache[PATH_MAX], path[PATH_MAX], logpath[PATH_MAX], failpath[PATH_MAX], srcpath[PATH_MAX];
    char asmpath[PATH_MAX], ptxpath[PATH_MAX], outpath[PATH_MAX];
} compile_job;

/* The object's name in the scratch directory. */
static const char out_name[] = "avo-out.so";

/* The compiler for the problem's backend and, for CUDA, its -gencode. */
static int compile_target(compile_job *j, char *err, size_t errlen)
{
    const avo_compile_opts *o = j->o;
    j->cuda = strcmp(j->p->backend, "cuda") == 0;
    j->cc = j->cuda ? (o->nvcc ? o->nvcc : "nvcc") : o->cc ? o->cc : "cc";
    if (j->cuda) {
        /* "sm_90a" -> compute_90a / sm_90a: the arch-specific target keeps
         * wgmma and setmaxnreg available on Hopper. */
        if (!o->gpu_arch || strncmp(o->gpu_arch, "sm_", 3) != 0) {
            snprintf(err, errlen, "CUDA compile without a GPU architecture (sm_XX)");
            return -EINVAL;
        }
        snprintf(j->gencode, sizeof j->gencode, "-gencode=arch=compute_%s,code=%s", o->gpu_arch + 3, o->gpu_arch);
    }
    return 0;
}

/* The compiler's identity and the cache's object directory, as j->cache. */
static int open_cache(compile_job *j, char *err, size_t errlen)
{
    int rc;
    if ((rc = avo_compile_identity(j->cc, j->ident, sizeof j->ident))) {
        snprintf(err, errlen, "cannot run '%s --version' (is %s installed?)", j->cc,
                 j->cuda ? "the CUDA toolkit" : "a C compiler");
        return rc;
    }
    if ((rc = avo_file_mkdirs(j->o->cache_dir, 0700, NULL, 0)) || !realpath(j->o->cache_dir, j->cache)) {
        rc = rc ? rc : -errno;
        snprintf(err, errlen, "cannot create the compile cache %s: %s", j->o->cache_dir, strerror(-rc));
        return rc;
    }
    /* Objects live in <cache>/obj, mode 0700 whatever the cache root's mode:
     * the runner (uid nobody under a root worker) must not be able to find
     * and load the reference object, or any other cached candidate. */
    size_t cl = strlen(j->cache);
    if (cl + 5 >= sizeof j->cache) {
        snprintf(err, errlen, "compile cache path too long");
        return -ENAMETOOLONG;
    }
    memcpy(j->cache + cl, "/obj", 5);
    if ((mkdir(j->cache, 0700) != 0 && errno != EEXIST) || chmod(j->cache, 0700) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s", j->cache, strerror(errno));
        return rc;
    }
    return 0;
}

/* The key and the paths of its cache entry. */
static int entry_paths(compile_job *j, const char *src, size_t len, char *err, size_t errlen)
{
    avo_compile_result *r = j->r;
    int rc;
    if ((rc = cache_key(j->p, j->cuda ? j->o->gpu_arch : NULL, j->o->extra, j->ident, src, len, r->key))) {
        snprintf(err, errlen, "cannot hash the source");
        return rc;
    }
    snprintf(j->path, sizeof j->path, "%s/%s.so", j->cache, r->key);
    snprintf(j->logpath, sizeof j->logpath, "%s/%s.log", j->cache, r->key);
    snprintf(j->failpath, sizeof j->failpath, "%s/%s.fail", j->cache, r->key);
    snprintf(r->so_path, sizeof r->so_path, "%s", j->path);
    snprintf(j->asmpath, sizeof j->asmpath, "%s/%s.s", j->cache, r->key);
    snprintf(j->ptxpath, sizeof j->ptxpath, "%s/%s.ptx", j->cache, r->key);
    return 0;
}

/* A cache hit fills r: 1, or -ENOMEM; 0 on a miss. */
static int cache_hit(compile_job *j)
{
    avo_compile_result *r = j->r;
    /* A hit needs what the policy checks read: an object whose kept files
     * are gone is compiled again. */
    const int kept = access(j->asmpath, R_OK) == 0 && (!j->cuda || access(j->ptxpath, R_OK) == 0);
    if (!((access(j->path, R_OK) == 0 && kept) || access(j->failpath, R_OK) == 0))
        return 0;
    if (access(j->asmpath, R_OK) == 0)
        snprintf(r->asm_path, sizeof r->asm_path, "%s", j->asmpath);
    if (j->cuda && access(j->ptxpath, R_OK) == 0)
        snprintf(r->ptx_path, sizeof r->ptx_path, "%s", j->ptxpath);
    r->cached = 1;
    r->ok = access(j->path, R_OK) == 0;
    r->failed_kept = !r->ok;
    r->log = read_small(r->ok ? j->logpath : j->failpath, AVO_COMPILE_LOG_CAP);
    if (!r->log)
        r->log = strdup("");
    r->seconds = now() - j->start;
    return r->log ? 1 : -ENOMEM;
}

/* The scratch directory for the compiler: given to the sandbox user, with
 * the source written and no object or kept file of an earlier compile; and
 * the temporary name the object is copied to in the cache. */
static int prepare_work_dir(compile_job *j, const char *src, size_t len, char *err, size_t errlen)
{
    const avo_compile_opts *o = j->o;
    int rc;
    /* The compiler runs as nobody (under a root worker) in the sandbox: it
     * reads the source and writes the object in the scratch dir, nothing
     * else of the host's (an #include or .incbin of a host file fails), and
     * the object is copied into the cache here. */
    if (geteuid() == 0 && chown(o->work_dir, AVO_SANDBOX_UID, AVO_SANDBOX_UID) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot hand %s to the sandbox user: %s", o->work_dir, strerror(errno));
        return rc;
    }
    snprintf(j->srcpath, sizeof j->srcpath, "%s/%s", o->work_dir, j->name);
    if ((rc = avo_file_write_atomic(j->srcpath, src, len, 0644))) {
        snprintf(err, errlen, "cannot write %s: %s", j->srcpath, strerror(-rc));
        return rc;
    }
    snprintf(j->outpath, sizeof j->outpath, "%s/%s", o->work_dir, out_name);
    unlink(j->outpath);
    /* An earlier compile's kept files in this directory (the against is
     * compiled under the candidate's name) must not pass for this one's. */
    char stale[PATH_MAX];
    static const char *const kept_ext[] = {".s", ".ptx", NULL};
    for (const char *const *e = kept_ext; *e; e++)
        for (int k = 0; k < 2; k++) { /* the two names kept_file tries */
            kept_file(o->work_dir, out_name, j->name, *e, stale, sizeof stale);
            if (!stale[0] || unlink(stale) != 0)
                break;
        }
    return 0;
}

/* The compiler's command line (argv holds 48). */
static void compiler_argv(const compile_job *j, char **argv)
{
    const avo_problem *p = j->p;
    const avo_compile_opts *o = j->o;
    int argc = 0;
    argv[argc++] = (char *)j->cc;
    for (int i = 0; i < p->ncflags; i++)
        argv[argc++] = p->cflags[i];
    if (j->cuda) {
        argv[argc++] = (char *)j->gencode;
        argv[argc++] = "-Xptxas=-v";
        argv[argc++] = "-cudart=shared";
        argv[argc++] = "-Xcompiler=-fPIC";
    }
    for (const char *const *k = j->cuda ? keep_cuda : keep_c; *k; k++)
        argv[argc++] = (char *)*k;
    argv[argc++] = "-shared";
    if (!j->cuda)
        argv[argc++] = "-fPIC";
    for (int i = 0; o->extra && o->extra[i] && argc < 40; i++)
        argv[argc++] = (char *)o->extra[i];
    argv[argc++] = "-o";
    argv[argc++] = (char *)out_name;
    argv[argc++] = (char *)j->name;
    argv[argc] = NULL;
}

/* r->log from what the compiler printed, and how it ended. */
static int compile_log(avo_compile_result *r, const avo_sandbox_result *sr, double timeout_s)
{
    /* Compilers write diagnostics to stderr; keep stdout too, in case. */
    size_t loglen = sr->err_len + sr->out_len;
    if (loglen > AVO_COMPILE_LOG_CAP)
        loglen = AVO_COMPILE_LOG_CAP;
    r->log = malloc(loglen + 128);
    if (!r->log)
        return -ENOMEM;
    size_t n = (size_t)snprintf(r->log, loglen + 1, "%s%s", sr->err, sr->out);
    if (n > loglen)
        n = loglen;
    if (sr->timed_out)
        snprintf(r->log + n, 128, "%scompiler timed out after %.0f s", n ? "\n" : "", timeout_s);
    else if (sr->signal)
        snprintf(r->log + n, 128, "%scompiler killed by signal %d", n ? "\n" : "", sr->signal);
    /* Candidate-controlled bytes (its own #error text): JSON needs UTF-8. */
    avo_utf8_scrub(r->log);
    return 0;
}

/* The compile's outcome into the cache: its kept files, then the object
 * and its log, or a clean failure's log. */
static int store_compile(compile_job *j, const avo_sandbox_result *sr, char *err, size_t errlen)
{
    avo_compile_result *r = j->r;
    int rc;
    /* What the compile kept goes into the cache first, also after a clean
     * failure: an assembler that stopped at `.incbin` of an unreadable file
     * left its input, and the policy check names the line. */
    if (sr->exited && !sr->timed_out && !sr->cancelled &&
        (rc = store_kept(j->o->work_dir, out_name, j->name, j->cuda, j->asmpath, j->ptxpath, r))) {
        snprintf(err, errlen, "cannot store the compile's kept files in %s: %s", j->cache, strerror(-rc));
        return rc;
    }
    if (sr->exited && sr->exit_code == 0 && access(j->outpath, R_OK) == 0) {
        /* A fresh file of ours (the compiler's output belongs to the sandbox
         * user). Objects are 0644 in a 0700 dir: only the worker reaches
         * them, and a disassembler it exposes one to can read it. */
        if ((rc = avo_file_copy_atomic(j->outpath, j->path, 0644))) {
            snprintf(err, errlen, "cannot store %s: %s", j->path, strerror(-rc));
            return rc;
        }
        r->ok = 1;
        keep_log(j->logpath, r->log);
    } else {
        /* Only a clean compiler verdict is cached; timeouts and signals may
         * be the machine's fault, not the source's. */
        if (sr->exited && sr->exit_code != 0 && !sr->timed_out && !sr->cancelled &&
            avo_compile_failure_cacheable(r->log)) {
            keep_log(j->failpath, r->log);
            r->failed_kept = 1;
        }
    }
    return 0;
}

int avo_compile(const avo_compile_opts *o, const avo_problem *p, const char *src, size_t len, const char *name,
                avo_compile_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    compile_job j = {.o = o, .p = p, .name = name, .r = r};
    char *argv[48];
    int rc;
    avo_sandbox_result sr = {0};

    if ((rc = compile_target(&j, err, errlen)))
        return rc;
    j.start = now();
    if ((rc = open_cache(&j, err, errlen)) || (rc = entry_paths(&j, src, len, err, errlen)))
        return rc;
    if ((rc = cache_hit(&j)))
        return rc > 0 ? 0 : rc;
    if (o->cache_only) {
        snprintf(err, errlen, "%s: not in the compile cache (a cache-only compile)", name);
        return -EAGAIN;
    }
    if ((rc = prepare_work_dir(&j, src, len, err, errlen)))
        return rc;
    compiler_argv(&j, argv);
    const char *hide[] = {j.cache, o->hide_dir, NULL};
    avo_sandbox_opts so = {.argv = argv,
                           .cwd = o->work_dir,
                           .timeout_s = o->timeout_s > 0 ? o->timeout_s : 120,
                           .no_as_limit = j.cuda,
                           .nproc = 0,
                           .out_cap = AVO_COMPILE_LOG_CAP,
                           .keep_head = 1,
                           .should_cancel = o->should_cancel,
                           .cancel_arg = o->cancel_arg};
    avo_sandbox_confine(&so, hide);
    /* A compile runs while a harness times (prefetch): off the CPUs the
     * host's harnesses time on. */
    avo_cpulease_keep_off();
    if ((rc = avo_sandbox_run(&so, &sr, err, errlen)))
        return rc;
    r->seconds = now() - j.start;
    r->timed_out = sr.timed_out;
    r->cancelled = sr.cancelled;
    if ((rc = compile_log(r, &sr, so.timeout_s)) == 0)
        rc = store_compile(&j, &sr, err, errlen);
    unlink(j.outpath);
    avo_sandbox_result_free(&sr);
    return rc;
}

int avo_compile_failure_cacheable(const char *log)
{
    /* What gcc, ld, nvcc and ptxas print when the system, not the source,
     * failed them (a scratch directory left read-only by the sandbox was
     * cached as a failed compile of the reference, and every later
     * evaluation failed with it). */
    static const char *const machine[] = {"Read-only file system",
                                          "No space left on device",
                                          "Disk quota exceeded",
                                          "Cannot allocate memory",
                                          "virtual memory exhausted",
                                          "out of memory",
                                          "ould not open output file",
                                          "cannot open output file",
                                          "Resource temporarily unavailable",
                                          NULL};
    for (const char *const *m = machine; *m; m++)
        if (log && strstr(log, *m))
            return 0;
    return 1;
}

void avo_compile_result_free(avo_compile_result *r)
{
    free(r->log);
    r->log = NULL;
}
