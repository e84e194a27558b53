# The hostile CUDA corpus's table (sourced by tests/gpu/test_hostile_gpu.sh,
# one-shot evaluations, and tests/gpu/test_serve_gpu.sh, the same cases on a
# kept checker): the outcomes each case may end with, the variants built
# from another case's source, and how far above the honest twin an ok case
# may score.
# Allowed outcomes (space-separated); "any" = reported, not asserted.
declare -A EXPECT=(
    [deadlock]="timeout"
    [oob_write]="crash wrong_result"
    [side_stream]="ok"
    [side_tail]="ok"
    [partial_output]="wrong_result"
    [nan]="wrong_result"
    [reads_reference]="wrong_result"
    [caches_output]="cheat_suspected wrong_result"
    # Timed runs alternate between two input sets, so its one-entry cache
    # never hits and it computes honestly (slowly): ok is allowed, a score
    # above the seed is not (H200 run, 2026-12-02: ok at 5.9 vs seed 88 TFLOPS).
    [caches_fingerprint]="ok cheat_suspected wrong_result"
    [modifies_inputs]="cheat_suspected"
    [launch_fail]="wrong_result"
    [launch_error_ignored]="wrong_result"
    [trap]="crash"
    [fp16_accumulate]="wrong_result"
    [bf16_accumulate]="wrong_result"
    [late_launch]="wrong_result cheat_suspected crash"
    # The candidate policy (issue 21, point 4; docs/evaluation.md,
    # "Policy"): refused before anything runs, with the offending line.
    # calls_cublas dlopen()s the vendor library (module_loading).
    [calls_cublas]="policy_violation"
    [undocumented_ptx]="policy_violation"
    [loads_cubin]="policy_violation"
    [module_from_bytes]="policy_violation"
    [hidden_loader]="policy_violation"
    [compile_error]="compile_error"
    # Ends inside a raw string prefix: the policy scanner must not crash
    # the worker (it did: heap corruption); nvcc refuses the literal.
    [raw_string_crash]="compile_error"
    [device_sync]="ok"
    # Creates files, opens a socket and a memfd, forks and sets itself
    # dumpable in its first call, returning 1 if any works (the runner's
    # system-call filter, GPU profile).
    [syscalls]="ok"
    # Two slots keyed on sampled inputs, the replay padded to ~250 TFLOPS
    # (under the roofline): today every timed run hits (ok, far above the
    # twin: a hole); ok is allowed only within the twin rule.
    [memo_two_slots]="ok cheat_suspected wrong_result"
    # Skips the product on the timed runs the documented schedule leaves
    # unchecked (told apart by the gate still holding the stream).
    [skips_unchecked]="cheat_suspected wrong_result ok"
    # Reads --seed from the checker's /proc cmdline and precomputes every
    # input set; its stderr line must not appear (checked below).
    [reads_seed]="ok wrong_result cheat_suspected"
    # Honest product; disturbs the calibration in its own process (twin
    # rule at 3%, below).
    [disturbs_calibration]="ok cheat_suspected"
    # Leaves a helper holding a CUDA context and device memory: any outcome,
    # the checks after the evaluation are what count.
    [helper_process]="any"
    # Fills /dev/shm at load; the product is honest.
    [fills_shm]="ok crash cheat_suspected"
    # A thread of its own computes the product from the host inputs while
    # the runner is thawed for a prep (0975ad4: ok, above the twin: a
    # hole); with the checker's own copies it wakes up with the call.
    [computes_in_prep]="ok cheat_suspected"
    # The same, its entry waiting on its stream (as device_sync.cu): the gate
    # times out, so every timed call starts ungated and no gate wait is
    # charged; its thread still wakes up only with the call.
    [computes_in_prep_ungated]="ok cheat_suspected"
    # Rewrites the runner's link to cudaEventElapsedTime so that it reports
    # a twentieth of every time; the floor from the checker's own round trip
    # bounds it (a residual: ok, at most about 2x the twin, every config's
    # samples raised by the floor; checked below).
    [forges_event_time]="ok cheat_suspected"
    # Paired against the seed with a job seed whose references are cached
    # (PAIRED_JOB): looks for the answer in all device memory it can reach,
    # at every call, computing honestly when it finds none; the line that
    # says it found one must never appear (checked below).
    [reads_held_reference]="ok"
    # Its control: the answer planted in its own memory first, so the scan
    # must find it (the line must appear).
    [reads_held_reference_planted]="ok"
)
# Variants: a case built from another case's source with a line of its own
# in front (each case compiles as one file, so a variant cannot include).
declare -A VARIANT=([computes_in_prep_ungated]="computes_in_prep:#define SYNC_IN_ENTRY 1"
    [reads_held_reference_planted]="reads_held_reference:#define PLANT 1")
# The twin rule: an ok case on gemm_bf16_small at most this factor above the
# honest twin's TFLOPS on every config (default 1.10); exempt: not built on
# the tiled kernel.
declare -A TWIN_MAX=([disturbs_calibration]=1.03 [forges_event_time]=2.3)
declare -A TWIN_EXEMPT=()
