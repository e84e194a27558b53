/* `avo-worker check <problem-dir>`: a problem package checked before anyone
 * submits it, with the worker's own compile and evaluation code
 * (evaluate.h): problem.json loads; the reference and the baseline compile;
 * every seed compiles at every knob setting its constraints allow (or a
 * random sample of them, said so, with the seed that repeats it); each seed
 * evaluates once at its defaults. One line per step; a knob value that
 * fails in every build that has it is named. No database. */
#ifndef AVO_CHECK_H
#define AVO_CHECK_H

/* Builds per seed when --max-builds is not given. */
#define AVO_CHECK_DEFAULT_BUILDS 64
/* Knob spaces up to this many points are enumerated; larger ones sampled. */
#define AVO_CHECK_ENUM_MAX 1000000u
/* The GPU a CUDA package is compiled for on a host that has none. */
#define AVO_CHECK_DEFAULT_ARCH "sm_90a"

/* argv[0] is "check" (or the program, then "check"). Returns the exit code:
 * 0 every step passed (a CUDA seed that compiled but could not be
 * evaluated without a GPU counts as passed, said on its line and in the
 * summary), 1 a step failed, 2 usage. */
int avo_check_cli(int argc, char **argv);

#endif
