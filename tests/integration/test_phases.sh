#!/usr/bin/env bash
# The evaluation result's "phases" (docs/evaluation.md), which
# bench/eval_cost.sh reads: one `avo-worker eval --json` of the sgemm seed
# reports the worker's phases and, nested under them as "harness", the
# harness's, each a non-negative number of seconds; phases are disjoint
# stretches of wall time, so each level sums to no more than its total and
# the harness's total (and its close after it) fits in the worker's
# harness_process; only phases
# that exist on the path appear (no baseline, counters or GPU time on a CPU
# problem; no harness after a compile error; a disassembly only when asked).
source "$(dirname "$0")/lib.sh"

S="$ROOT/kernels/cpu/sgemm"
avo-worker eval "$S" "$S/seed.c" --json --cache "$T/cache" >"$T/r.json" 2>"$T/r.err"
check "the sgemm seed evaluates ok" jqt '.outcome == "ok"' "$T/r.json"

W='["setup", "compile_reference", "compile_candidate", "harness_process", "result", "cleanup", "total"]'
H='["setup", "reference_load", "reference_validation", "runner_start", "calibration", "runner_load", "layout",
    "inputs", "flush", "calls", "reference", "checks", "idle_probe", "scoring", "runner_stop", "result", "total"]'
C='["layout", "inputs", "flush", "calls", "reference", "checks", "idle_probe", "scoring"]'
nonneg='(type == "number" and . >= 0)'
check "the worker's phases: $W, each a non-negative number" \
    jqt "$W as \$k | .phases as \$p | all(\$k[]; \$p[.] | $nonneg)" "$T/r.json"
check "the harness's phases under phases.harness, each a non-negative number" \
    jqt "$H as \$k | .phases.harness as \$p | all(\$k[]; \$p[.] | $nonneg)" "$T/r.json"
check "per config (one entry a config, named): $C" \
    jqt "$C as \$k | (.phases.harness.configs | length) == (.configs | length) and
         all(.phases.harness.configs[]; . as \$c | (.name | type == \"string\") and all(\$k[]; \$c[.] | $nonneg))" \
    "$T/r.json"
# Every number but the total, summed: within the total (a phase counted
# twice, or one measured outside the run, would exceed it).
sum='[to_entries[] | select(.key != "total" and (.value | type == "number")) | .value] | add'
# "close" (the checker's resources released after the result was built)
# is outside the harness's total and inside harness_process.
hsum='[to_entries[] | select(.key != "total" and .key != "close" and (.value | type == "number")) | .value] | add'
check "the harness's phases sum to no more than the harness's wall time" \
    jqt ".phases.harness | ($hsum) <= .total and .total > 0" "$T/r.json"
check "the harness's close follows its total, both within harness_process" \
    jqt ".phases | (.harness.close | $nonneg) and .harness.total + .harness.close <= .harness_process" "$T/r.json"
check "each per-config phase of the harness is the sum of the configs' own" \
    jqt "$C as \$k | .phases.harness as \$h | all(\$k[]; . as \$n |
         ([\$h.configs[][\$n]] | add) - \$h[\$n] | fabs <= 1e-9 * (1 + \$h[\$n]))" "$T/r.json"
check "the worker's phases sum to no more than its total, and the harness's total fits in harness_process" \
    jqt ".phases | ($sum) <= .total and .harness.total <= .harness_process" "$T/r.json"
check "the wall of the harness process is most of the evaluation (the timed calls' share shows)" \
    jqt '.phases.harness.calls > 0 and .phases.harness_process > .phases.total / 2' "$T/r.json"
check "only phases of this path: no baseline, counters, GPU time or per-config calibration on a CPU problem" \
    jqt '.phases.harness | (has("baseline") or has("counters") or has("gpu") or has("gpu_context")) | not' "$T/r.json"
check "which compiles were cache hits" \
    jqt '.phases.cache_hits | (.reference | type == "boolean") and (.candidate | type == "boolean")' "$T/r.json"

avo-worker eval "$S" "$S/seed.c" --json --cache "$T/cache" >"$T/again.json" 2>/dev/null
check "evaluated again: both compiles are cache hits" \
    jqt '.phases.cache_hits == {"reference": true, "candidate": true}' "$T/again.json"

printf 'this is not C;\n' | cat "$S/seed.c" - >"$T/broken.c"
avo-worker eval "$S" "$T/broken.c" --json --cache "$T/cache" >"$T/broken.json" 2>/dev/null
check "a compile error: the compiles' phases, no harness" \
    jqt '.outcome == "compile_error" and (.phases | has("compile_candidate") and (has("harness") or has("harness_process") | not))' \
    "$T/broken.json"

avo-worker eval "$S" "$S/seed.c" --json --cache "$T/cache" --compile-only --disassemble >"$T/dis.json" 2>/dev/null
check "--compile-only --disassemble: compile_candidate and disassembly, nothing of a run" \
    jqt '.phases | (.compile_candidate >= 0 and .disassembly >= 0 and .total >= .disassembly) and (has("harness_process") | not)' \
    "$T/dis.json"
[ "$FAILS" -eq 0 ]
