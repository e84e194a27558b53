/* avo-harness <problem-dir> <candidate.so> <reference.so> (--seed N | --seed-stdin) [--deadline S]
 *             [--baseline SO] [--against SO [--confidence C] [--screen]]
 *             [--counters | --profile [--config NAME]]
 * --seed-stdin: "SEED[ JOB_SEED]\n" on stdin; the job's seed makes the
 * warm-up calls' input sets (the same in every evaluation of a job), never
 * on the command line (docs/evaluation.md, "Input sets"); without it the
 * evaluation's seed stands in.
 * --ref-cache-fd N --ref-cache-max BYTES: the worker's reference cache
 * (daemon/harness/refcache.h), an open directory on fd N: the warm-up
 * sets' reference outputs read from it or written to it (needs a job seed).
 * --against: the candidate timed paired with that object (the island's
 * best), interleaved call by call; the result gains "paired"
 * (docs/evaluation.md). --confidence: of its interval, in (0, 1), 0.95.
 * --screen: when the problem declares "screen", time its configs first and
 * stop there when the candidate is slower beyond noise (the worker asks for
 * a search's evaluations, not for a job's final measurement).
 * --counters: a CUDA evaluation runs the CUPTI pass after timing (not by
 * default: counters are a task of their own). --profile: no timing, no
 * score; each profiled configuration's checked calls, then its counters
 * (harness.h, avo_harness_opts).
 * The checker: writes exactly one JSON result object to fd 3 when it is
 * open (the worker's result pipe), else to stdout, and exits 0 when it could
 * evaluate, whatever the candidate did. Exit 2: usage, spec or internal
 * error; exit 3 (AVO_HARNESS_EXIT_REFERENCE): the reference is invalid.
 * --serve FD (the candidate "-"): one evaluation after another in this
 * process, each asked for on the unix socket FD (serve.h has the
 * request), its result a line on fd 3 (or stdout); the checker's state
 * (context, reference, device tensors, reference cache) kept between them
 * (harness.h, avo_harness_keep). Ends at the socket's end of file (exit
 * 0) or after an evaluation that could not be made (exit 2 or 3 as above).
 * `avo-harness --runner ENTRY` is the runner it starts itself (runner.h). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "avo_file.h"
#include "harness.h"
#include "serve.h"
#include "tensors.h"
#include "runner.h"

/* Checker and runner share one CPU (the runner inherits the mask): the call
 * and the cache flush then happen on the same core, and neither migrates
 * mid-measurement (docs/benchmarks.md has the figures). */
static void pin_cpu(void)
{
    /* Which CPU: AVO_HARNESS_CPU, one assigned to this harness alone (a
     * worker per CPU); else AVO_HARNESS_PIN, the one the worker leased for
     * its harnesses (daemon/worker/cpulease.h: its own threads keep off
     * it, so it may lie outside the mask inherited); else the highest CPU
     * allowed (CPU 0 usually takes more of the host's interrupts and
     * housekeeping). AVO_NO_PIN leaves the scheduler alone. */
    cpu_set_t set;
    if (getenv("AVO_NO_PIN") || sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    const char *alone = getenv("AVO_HARNESS_CPU"), *leased = getenv("AVO_HARNESS_PIN");
    int cpu = -1;
    /* Filling and comparing tensors (never during a timed run) may still
     * use every CPU the harness was given, unless a CPU was assigned to it
     * alone (its neighbours time). */
    if (alone && *alone)
        cpu = atoi(alone);
    else {
        avo_tensors_set_workers(&set, 0, 0);
        if (leased && *leased) {
            cpu_set_t one;
            CPU_ZERO(&one);
            cpu = atoi(leased);
            if (cpu >= 0 && cpu < CPU_SETSIZE) {
                CPU_SET(cpu, &one);
                if (sched_setaffinity(0, sizeof one, &one) == 0)
                    return;
            }
            cpu = -1;
        }
        for (int i = CPU_SETSIZE - 1; i >= 0 && cpu < 0; i--)
            if (CPU_ISSET(i, &set))
                cpu = i;
    }
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &set)) {
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
}

/* The command line, parsed. */
typedef struct {
    const char *pos[3];
    int npos;
    unsigned long long seed, job_seed;
    double deadline;
    const char *baseline, *against;
    double confidence;
    int confidence_given;
    int serve_fd; /* --serve: the request socket (-1: one evaluation) */
    int seed_given;
    avo_harness_opts ho;
} harness_args;

/* --seed-stdin: how the worker passes it: a seed on the command line can be
 * read by any process that sees this one in /proc. The job's seed (the
 * warm-up calls' sets) may follow it on the line. Returns 0, or -1 (said). */
static int parse_seed_stdin(harness_args *a)
{
    char line[64] = "", *end, *end2;
    ssize_t n = read(0, line, sizeof line - 1);
    line[n > 0 ? n : 0] = 0;
    errno = 0;
    a->seed = strtoull(line, &end, 10);
    int bad = n <= 0 || end == line || errno || a->seed > (unsigned long long)INT64_MAX;
    if (!bad && *end == ' ') {
        a->job_seed = strtoull(end + 1, &end2, 10);
        bad = end2 == end + 1 || errno || a->job_seed == 0 || a->job_seed > (unsigned long long)INT64_MAX;
        end = end2;
    }
    if (bad || (*end && *end != '\n')) {
        fprintf(stderr, "avo-harness: --seed-stdin wants an integer in [0, 2^63) on stdin, optionally "
                        "followed by a space and the job's seed, an integer in [1, 2^63)\n");
        return -1;
    }
    memset(line, 0, sizeof line);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) {
        dup2(devnull, 0);
        close(devnull);
    }
    return 0;
}

/* The options whose value is a number to check. Returns 1 when `opt` is one
 * (its value v taken), 0 when it is not, -1 when v is bad (said on stderr). */
static int parse_number_option(harness_args *a, const char *opt, const char *v)
{
    char *end;
    if (strcmp(opt, "--seed") == 0) {
        a->seed_given = 1;
        errno = 0;
        a->seed = strtoull(v, &end, 10);
        if (errno || *end || a->seed > (unsigned long long)INT64_MAX) {
            fprintf(stderr, "avo-harness: --seed wants an integer in [0, 2^63)\n");
            return -1;
        }
    } else if (strcmp(opt, "--ref-cache-fd") == 0) {
        /* The worker's reference cache directory, an inherited descriptor
         * (its path is hidden from this sandbox). Close on exec, and the
         * runner closes every descriptor not its own. */
        long fd = strtol(v, &end, 10);
        struct stat st;
        if (*end || end == v || fd < 3 || fd > 1023 || fstat((int)fd, &st) != 0 || !S_ISDIR(st.st_mode) ||
            fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0) {
            fprintf(stderr, "avo-harness: --ref-cache-fd wants an open directory descriptor, got '%s'\n", v);
            return -1;
        }
        a->ho.ref_cache_fd = (int)fd;
    } else if (strcmp(opt, "--ref-cache-max") == 0) {
        errno = 0;
        unsigned long long b = strtoull(v, &end, 10);
        if (*end || end == v || errno || b == 0) {
            fprintf(stderr, "avo-harness: --ref-cache-max wants a number of bytes > 0, got '%s'\n", v);
            return -1;
        }
        a->ho.ref_cache_max = b;
    } else if (strcmp(opt, "--serve") == 0) {
        long fd = strtol(v, &end, 10);
        if (*end || end == v || fd < 3 || fd > 1023 || fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0) {
            fprintf(stderr, "avo-harness: --serve wants an open socket descriptor, got '%s'\n", v);
            return -1;
        }
        a->serve_fd = (int)fd;
    } else if (strcmp(opt, "--confidence") == 0) {
        a->confidence = strtod(v, &end);
        a->confidence_given = 1;
        if (*end || end == v || !(a->confidence > 0 && a->confidence < 1)) {
            fprintf(stderr, "avo-harness: --confidence wants a number in (0, 1), got '%s'\n", v);
            return -1;
        }
    } else if (strcmp(opt, "--deadline") == 0) {
        a->deadline = strtod(v, &end);
        if (*end || !(a->deadline > 0)) {
            fprintf(stderr, "avo-harness: --deadline wants seconds > 0\n");
            return -1;
        }
    } else {
        return 0;
    }
    return 1;
}

/* The options whose value is a string: 1 when `opt` is one, else 0. */
static int parse_string_option(harness_args *a, const char *opt, const char *v)
{
    if (strcmp(opt, "--config") == 0)
        a->ho.config = v;
    else if (strcmp(opt, "--baseline") == 0)
        a->baseline = v;
    else if (strcmp(opt, "--against") == 0)
        a->against = v;
    else
        return 0;
    return 1;
}

/* Returns 0, or -1 when the command line is wrong (said on stderr). */
static int parse_args(int argc, char **argv, harness_args *a)
{
    for (int i = 1; i < argc; i++) {
        /* An option missing its value falls through to "unexpected". */
        if (i + 1 < argc) {
            int r = parse_number_option(a, argv[i], argv[i + 1]);
            if (r < 0)
                return -1;
            if (r || parse_string_option(a, argv[i], argv[i + 1])) {
                i++;
                continue;
            }
        }
        if (strcmp(argv[i], "--seed-stdin") == 0) {
            a->seed_given = 1;
            if (parse_seed_stdin(a) != 0)
                return -1;
        } else if (strcmp(argv[i], "--screen") == 0) {
            a->ho.screen = 1;
        } else if (strcmp(argv[i], "--counters") == 0) {
            a->ho.counters = 1;
        } else if (strcmp(argv[i], "--profile") == 0) {
            a->ho.profile_only = 1;
        } else if ((argv[i][0] == '-' && strcmp(argv[i], "-") != 0) || a->npos == 3) {
            fprintf(stderr, "avo-harness: unexpected argument '%s'\n", argv[i]);
            return -1;
        } else {
            a->pos[a->npos++] = argv[i];
        }
    }
    return 0;
}

/* --serve: the evaluation's own options come with each request. Returns
 * 0, or -1 (said). */
static int check_serve_args(const harness_args *a)
{
    const avo_harness_opts *ho = &a->ho;
    const char *per = a->seed_given                    ? "--seed"
                      : a->against                     ? "--against"
                      : a->baseline                    ? "--baseline"
                      : a->confidence_given            ? "--confidence"
                      : ho->screen                     ? "--screen"
                      : ho->counters                   ? "--counters"
                      : a->deadline > 0                ? "--deadline"
                      : ho->profile_only || ho->config ? "--profile"
                      : strcmp(a->pos[1], "-") != 0    ? "a candidate"
                                                       : NULL;
    if (per) {
        fprintf(stderr, "avo-harness: --serve: %s comes with each request, not on the command line%s\n", per,
                strcmp(per, "a candidate") == 0 ? " (give '-' in its place)" : "");
        return -1;
    }
    if (ho->ref_cache_fd && !ho->ref_cache_max) {
        fprintf(stderr, "avo-harness: --ref-cache-fd needs --ref-cache-max\n");
        return -1;
    }
    return 0;
}

/* The options that need or exclude each other. Returns 0, or -1 (said). */
static int check_args(const harness_args *a)
{
    const avo_harness_opts *ho = &a->ho;
    if (a->npos != 3) {
        fprintf(stderr,
                "usage: avo-harness <problem-dir> <candidate.so> <reference.so> (--seed N | --seed-stdin) "
                "[--deadline S] [--baseline B.so] [--against A.so [--confidence C] [--screen]] "
                "[--counters | --profile [--config NAME]]\n"
                "       avo-harness <problem-dir> - <reference.so> --serve FD [--ref-cache-fd N --ref-cache-max B]\n");
        return -1;
    }
    if (a->serve_fd >= 0)
        return check_serve_args(a);
    if (ho->screen && !a->against) {
        fprintf(stderr, "avo-harness: --screen times paired: it needs --against\n");
        return -1;
    }
    if (ho->ref_cache_fd && !ho->ref_cache_max) {
        fprintf(stderr, "avo-harness: --ref-cache-fd needs --ref-cache-max\n");
        return -1;
    }
    if (a->confidence_given && !a->against) {
        fprintf(stderr, "avo-harness: --confidence is for a paired measurement: it needs --against\n");
        return -1;
    }
    if ((ho->config && !ho->profile_only) || (ho->counters && ho->profile_only) || (a->against && ho->profile_only)) {
        fprintf(stderr, "avo-harness: %s\n",
                ho->config && !ho->profile_only ? "--config goes with --profile"
                : a->against                    ? "--against measures a run: not with --profile"
                                                : "--counters and --profile exclude each other");
        return -1;
    }
    return 0;
}

/* The evaluation and its result on `out`; never returns. */
static _Noreturn void run_evaluation(harness_args *a, int out)
{
    avo_problem p;
    char err[1024];
    if (avo_problem_load(&p, a->pos[0], err, sizeof err)) {
        fprintf(stderr, "avo-harness: %s\n", err);
        exit(2);
    }
    avo_harness_opts *ho = &a->ho;
    if (ho->config && avo_problem_config_index(&p, ho->config, err, sizeof err) < 0) {
        fprintf(stderr, "avo-harness: --config: %s\n", err);
        exit(2);
    }
    json_t *result = NULL;
    ho->seed = a->seed;
    ho->job_seed = a->job_seed;
    ho->deadline_s = a->deadline;
    ho->base_so = a->baseline;
    ho->against_so = a->against;
    ho->confidence = a->confidence;
    int rc = avo_harness_run(&p, a->pos[1], a->pos[2], ho, &result, err, sizeof err);
    if (rc) {
        fprintf(stderr, "avo-harness: %s\n", err);
        fflush(stderr);
        _exit(rc == AVO_HARNESS_EREFERENCE ? AVO_HARNESS_EXIT_REFERENCE : 2);
    }
    char *text = json_dumps(result, JSON_COMPACT);
    if (!text || avo_file_write_all(out, text, strlen(text)) || avo_file_write_all(out, "\n", 1)) {
        fprintf(stderr, "avo-harness: cannot write the result\n");
        fflush(stderr);
        _exit(2);
    }
    fflush(stdout);
    fflush(stderr);
    /* _exit: nothing runs after the result (the runner is already reaped). */
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--runner") == 0)
        avo_runner_main(argc, argv);
    /* A runner that died leaves a closed pipe: the write reports EPIPE and
     * the runner is reaped as dead, instead of SIGPIPE ending the checker. */
    signal(SIGPIPE, SIG_IGN);
    /* Not dumpable: a process of the same uid (the runner, when the checker
     * is not root) can neither ptrace this one nor open its /proc fds or
     * memory. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    pin_cpu();
    harness_args a = {.seed = 1, .confidence = 0.95, .serve_fd = -1};
    if (parse_args(argc, argv, &a) != 0 || check_args(&a) != 0)
        return 2;
    /* Decided before any candidate code runs; close-on-exec so the runner
     * could not inherit it even if it were not closed explicitly. */
    int out = fcntl(3, F_SETFD, FD_CLOEXEC) != -1 ? 3 : STDOUT_FILENO;
    if (a.serve_fd >= 0)
        return avo_serve_main(a.pos[0], a.pos[2], &a.ho, a.serve_fd, out);
    run_evaluation(&a, out);
}
