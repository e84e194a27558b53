/* Compiles a candidate into a shared object through a content-addressed cache (compile.h). */
#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "avo_hash.h"
#include "avo_utf8.h"
#include "sandbox.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int avo_mkdir_p(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int write_file(const char *path, const char *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    while (len) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno ? errno : EIO;
            close(fd);
            return -e;
        }
        data += w;
        len -= (size_t)w;
    }
    return close(fd) ? -errno : 0;
}

/* The compiled object into the cache (a fresh file of ours: the compiler's
 * output belongs to the sandbox user). Objects are 0644 in a 0700 dir: only
 * the worker reaches them, and a disassembler it exposes one to can read it. */
static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return -errno;
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return -e;
    }
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -EIO;
            break;
        }
    if (n < 0)
        rc = -errno;
    close(in);
    if (close(out) != 0 && !rc)
        rc = -errno;
    if (rc)
        unlink(to);
    return rc;
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

/* The kept file `from` into the cache as `to` (its path into r_path), or
 * nothing when the compile kept none. */
static int keep_in_cache(const char *from, const char *to, const char *tmp, char *r_path, size_t r_len)
{
    r_path[0] = 0;
    if (!from[0])
        return 0;
    int rc = copy_file(from, tmp);
    if (!rc && rename(tmp, to) != 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return rc;
    }
    snprintf(r_path, r_len, "%s", to);
    return 0;
}

/* The compile's kept .s (and .ptx) into the cache at asmpath (ptxpath). */
static int store_kept(const char *work, const char *out_name, const char *name, int cuda, const char *asmpath,
                      const char *ptxpath, const char *tmp, avo_compile_result *r)
{
    char from[4400], to_tmp[4500];
    snprintf(to_tmp, sizeof to_tmp, "%s.k", tmp);
    kept_file(work, out_name, name, ".s", from, sizeof from);
    int rc = keep_in_cache(from, asmpath, to_tmp, r->asm_path, sizeof r->asm_path);
    if (!rc && cuda) {
        kept_file(work, out_name, name, ".ptx", from, sizeof from);
        rc = keep_in_cache(from, ptxpath, to_tmp, r->ptx_path, sizeof r->ptx_path);
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

int avo_compile(const avo_compile_opts *o, const avo_problem *p, const char *src, size_t len, const char *name,
                avo_compile_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const int cuda = strcmp(p->backend, "cuda") == 0;
    const char *cc = cuda ? (o->nvcc ? o->nvcc : "nvcc") : o->cc ? o->cc : "cc";
    char gencode[128] = "";
    if (cuda) {
        /* "sm_90a" -> compute_90a / sm_90a: the arch-specific target keeps
         * wgmma and setmaxnreg available on Hopper. */
        if (!o->gpu_arch || strncmp(o->gpu_arch, "sm_", 3) != 0) {
            snprintf(err, errlen, "CUDA compile without a GPU architecture (sm_XX)");
            return -EINVAL;
        }
        snprintf(gencode, sizeof gencode, "-gencode=arch=compute_%s,code=%s", o->gpu_arch + 3, o->gpu_arch);
    }
    const double start = now();
    char ident[512], cache[4096], path[4300], logpath[4300], failpath[4300], tmp[4400], srcpath[4300];
    char *argv[48];
    int argc = 0, rc;
    avo_sandbox_result sr = {0};

    if ((rc = avo_compile_identity(cc, ident, sizeof ident))) {
        snprintf(err, errlen, "cannot run '%s --version' (is %s installed?)", cc,
                 cuda ? "the CUDA toolkit" : "a C compiler");
        return rc;
    }
    if ((rc = avo_file_mkdirs(o->cache_dir, 0700, NULL, 0)) || !realpath(o->cache_dir, cache)) {
        rc = rc ? rc : -errno;
        snprintf(err, errlen, "cannot create the compile cache %s: %s", o->cache_dir, strerror(-rc));
        return rc;
    }
    /* Objects live in <cache>/obj, mode 0700 whatever the cache root's mode:
     * the runner (uid nobody under a root worker) must not be able to find
     * and load the reference object, or any other cached candidate. */
    size_t cl = strlen(cache);
    if (cl + 5 >= sizeof cache) {
        snprintf(err, errlen, "compile cache path too long");
        return -ENAMETOOLONG;
    }
    memcpy(cache + cl, "/obj", 5);
    if ((mkdir(cache, 0700) != 0 && errno != EEXIST) || chmod(cache, 0700) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s", cache, strerror(errno));
        return rc;
    }
    if ((rc = cache_key(p, cuda ? o->gpu_arch : NULL, o->extra, ident, src, len, r->key))) {
        snprintf(err, errlen, "cannot hash the source");
        return rc;
    }
    snprintf(path, sizeof path, "%s/%s.so", cache, r->key);
    snprintf(logpath, sizeof logpath, "%s/%s.log", cache, r->key);
    snprintf(failpath, sizeof failpath, "%s/%s.fail", cache, r->key);
    snprintf(r->so_path, sizeof r->so_path, "%s", path);
    char asmpath[4300], ptxpath[4300];
    snprintf(asmpath, sizeof asmpath, "%s/%s.s", cache, r->key);
    snprintf(ptxpath, sizeof ptxpath, "%s/%s.ptx", cache, r->key);

    /* A hit needs what the policy checks read: an object whose kept files
     * are gone is compiled again. */
    const int kept = access(asmpath, R_OK) == 0 && (!cuda || access(ptxpath, R_OK) == 0);
    if ((access(path, R_OK) == 0 && kept) || access(failpath, R_OK) == 0) {
        if (access(asmpath, R_OK) == 0)
            snprintf(r->asm_path, sizeof r->asm_path, "%s", asmpath);
        if (cuda && access(ptxpath, R_OK) == 0)
            snprintf(r->ptx_path, sizeof r->ptx_path, "%s", ptxpath);
        r->cached = 1;
        r->ok = access(path, R_OK) == 0;
        r->log = read_small(r->ok ? logpath : failpath, AVO_COMPILE_LOG_CAP);
        if (!r->log)
            r->log = strdup("");
        r->seconds = now() - start;
        return r->log ? 0 : -ENOMEM;
    }

    /* The compiler runs as nobody (under a root worker) in the sandbox: it
     * reads the source and writes the object in the scratch dir, nothing
     * else of the host's (an #include or .incbin of a host file fails), and
     * the object is copied into the cache here. */
    if (geteuid() == 0 && chown(o->work_dir, AVO_SANDBOX_UID, AVO_SANDBOX_UID) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot hand %s to the sandbox user: %s", o->work_dir, strerror(errno));
        return rc;
    }
    snprintf(srcpath, sizeof srcpath, "%s/%s", o->work_dir, name);
    if ((rc = write_file(srcpath, src, len, 0644))) {
        snprintf(err, errlen, "cannot write %s: %s", srcpath, strerror(-rc));
        return rc;
    }
    static const char out_name[] = "avo-out.so";
    char outpath[4400];
    snprintf(outpath, sizeof outpath, "%s/%s", o->work_dir, out_name);
    unlink(outpath);
    /* An earlier compile's kept files in this directory (the against is
     * compiled under the candidate's name) must not pass for this one's. */
    char stale[4400];
    static const char *const kept_ext[] = {".s", ".ptx", NULL};
    for (const char *const *e = kept_ext; *e; e++)
        for (int k = 0; k < 2; k++) { /* the two names kept_file tries */
            kept_file(o->work_dir, out_name, name, *e, stale, sizeof stale);
            if (!stale[0] || unlink(stale) != 0)
                break;
        }
    /* Copied beside its final place and renamed: readers never see a
     * half-written object, and concurrent compiles of one key both succeed. */
    static unsigned counter;
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.%u.tmp", cache, r->key, (int)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    argv[argc++] = (char *)cc;
    for (int i = 0; i < p->ncflags; i++)
        argv[argc++] = p->cflags[i];
    if (cuda) {
        argv[argc++] = gencode;
        argv[argc++] = "-Xptxas=-v";
        argv[argc++] = "-cudart=shared";
        argv[argc++] = "-Xcompiler=-fPIC";
    }
    for (const char *const *k = cuda ? keep_cuda : keep_c; *k; k++)
        argv[argc++] = (char *)*k;
    argv[argc++] = "-shared";
    if (!cuda)
        argv[argc++] = "-fPIC";
    for (int i = 0; o->extra && o->extra[i] && argc < 40; i++)
        argv[argc++] = (char *)o->extra[i];
    argv[argc++] = "-o";
    argv[argc++] = (char *)out_name;
    argv[argc++] = (char *)name;
    argv[argc] = NULL;
    const char *hide[] = {cache, o->hide_dir, NULL};
    avo_sandbox_opts so = {.argv = argv,
                           .cwd = o->work_dir,
                           .timeout_s = o->timeout_s > 0 ? o->timeout_s : 120,
                           .no_as_limit = cuda,
                           .nproc = 0,
                           .out_cap = AVO_COMPILE_LOG_CAP,
                           .keep_head = 1,
                           .should_cancel = o->should_cancel,
                           .cancel_arg = o->cancel_arg};
    avo_sandbox_confine(&so, hide);
    if ((rc = avo_sandbox_run(&so, &sr, err, errlen)))
        return rc;
    r->seconds = now() - start;
    r->timed_out = sr.timed_out;
    r->cancelled = sr.cancelled;
    /* Compilers write diagnostics to stderr; keep stdout too, in case. */
    size_t loglen = sr.err_len + sr.out_len;
    if (loglen > AVO_COMPILE_LOG_CAP)
        loglen = AVO_COMPILE_LOG_CAP;
    r->log = malloc(loglen + 128);
    if (!r->log) {
        avo_sandbox_result_free(&sr);
        unlink(outpath);
        return -ENOMEM;
    }
    size_t n = (size_t)snprintf(r->log, loglen + 1, "%s%s", sr.err, sr.out);
    if (n > loglen)
        n = loglen;
    if (sr.timed_out)
        snprintf(r->log + n, 128, "%scompiler timed out after %.0f s", n ? "\n" : "", so.timeout_s);
    else if (sr.signal)
        snprintf(r->log + n, 128, "%scompiler killed by signal %d", n ? "\n" : "", sr.signal);
    /* Candidate-controlled bytes (its own #error text): JSON needs UTF-8. */
    avo_utf8_scrub(r->log);

    /* What the compile kept goes into the cache first, also after a clean
     * failure: an assembler that stopped at `.incbin` of an unreadable file
     * left its input, and the policy check names the line. */
    if (sr.exited && !sr.timed_out && !sr.cancelled &&
        (rc = store_kept(o->work_dir, out_name, name, cuda, asmpath, ptxpath, tmp, r))) {
        snprintf(err, errlen, "cannot store the compile's kept files in %s: %s", cache, strerror(-rc));
        goto cleanup;
    }
    if (sr.exited && sr.exit_code == 0 && access(outpath, R_OK) == 0) {
        if ((rc = copy_file(outpath, tmp)) || rename(tmp, path) != 0) {
            rc = rc ? rc : -errno;
            snprintf(err, errlen, "cannot store %s: %s", path, strerror(-rc));
            unlink(tmp);
            goto cleanup;
        }
        r->ok = 1;
        write_file(logpath, r->log, strlen(r->log), 0600);
    } else {
        /* Only a clean compiler verdict is cached; timeouts and signals may
         * be the machine's fault, not the source's. */
        if (sr.exited && sr.exit_code != 0 && !sr.timed_out && !sr.cancelled && avo_compile_failure_cacheable(r->log))
            write_file(failpath, r->log, strlen(r->log), 0600);
    }
cleanup:
    unlink(outpath);
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
