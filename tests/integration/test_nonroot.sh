#!/usr/bin/env bash
# Evaluation as a worker that is not root (docs/evaluation.md, "Isolation":
# what such a worker keeps and loses). `avo-worker eval` runs as nobody on
# cpu/sgemm: the honest seed and twin are ok; the sandbox reports a user
# namespace of its own (PID, mount, IPC and network namespaces inside it),
# no control group; the seed stays out of reach (reads_seed no better than
# its twin), nothing outlives the evaluation (escapes_daemon, fills_shm),
# invalid UTF-8 on stderr keeps the evidence, and a host file stays out of
# the compile log. Where the host refuses unprivileged user namespaces the
# evaluation must still work, and the test says what was lost.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
    # Already unprivileged: the whole suite runs that way; nothing to switch to.
    ok "# SKIP not root: test_hostile.sh already evaluates as a non-root worker here"
    exit 0
fi
if ! command -v setpriv >/dev/null; then
    ok "# SKIP setpriv (util-linux) not found"
    exit 0
fi

# Everything nobody needs, in a tree it can read: the binaries, the
# problem, the cases. Its own cache and scratch root.
NR="$T/nonroot"
mkdir -p "$NR/bin" "$NR/cases" "$NR/tmp" "$NR/home"
cp "$BIN/avo-worker" "$BIN/avo-harness" "$NR/bin/"
cp -r "$ROOT/kernels/cpu/sgemm" "$NR/sgemm"
# The same package with the policy's file_inclusion rule relaxed, so the
# confined compiler behind it stays tested (docs/evaluation.md, "Policy").
cp -r "$ROOT/kernels/cpu/sgemm" "$NR/sgemm-relaxed"
jq '.policy = {"relax": {"file_inclusion": "test: the confined compiler is the defence under test"}}' \
    "$ROOT/kernels/cpu/sgemm/problem.json" >"$NR/sgemm-relaxed/problem.json"
cp "$ROOT/tests/hostile/twins/gemm_ikj.c" "$ROOT/tests/hostile/twins/gemm_threads.c" \
    "$ROOT/tests/hostile/reads_seed.c" "$ROOT/tests/hostile/escapes_daemon.c" "$ROOT/tests/hostile/fills_shm.c" \
    "$ROOT/tests/hostile/bad_utf8.c" "$NR/cases/"
# A file only this test's root may read, #included by a case: it must not
# show in what the compile returns.
SECRET="$T/secret-$RANDOM$RANDOM"
echo "avo-nonroot-secret-$RANDOM$RANDOM" >"$SECRET"
chmod 600 "$SECRET"
printf '#include "%s"\nint sgemm(void *const *t, const long *s) { (void)t; (void)s; return 0; }\n' "$SECRET" \
    >"$NR/cases/include_secret.c"
chown -R 65534:65534 "$NR"
chmod -R a+rX "$NR"

nobody_eval() {  # FILE OUT [timeout [PROBLEM_DIR [avo-worker eval args]]]
    timeout -k 5 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
        env -i PATH=/usr/bin:/bin HOME="$NR/home" TMPDIR="$NR/tmp" \
        "$NR/bin/avo-worker" eval "${4:-$NR/sgemm}" "$1" --json --timeout "${3:-60}" --cache "$NR/home/cache" \
        "${@:5}" >"$2" 2>"$2.err"
}
# Per-config scores within TWIN_MARGIN x the twin's; where they are not, the
# paired referee of test_hostile.sh: the case evaluated again with the twin
# as its against, both timed in one harness in random order, so the host's
# load falls on both alike (lib.sh paired_above).
TWIN_MARGIN=1.3
score_ok() {  # OUT CASE
    jq -e --slurpfile t "$T/twin.json" --argjson m "$TWIN_MARGIN" '
        if .outcome != "ok" then true else
        [.configs, $t[0].configs] | transpose | all(.[0].score <= $m * .[1].score) end' "$1" | grep -qx true &&
        return 0
    nobody_eval "$2" "$1.paired" 60 "$NR/sgemm" --against "$NR/cases/gemm_ikj.c"
    [ -s "$1.paired" ] && [ -z "$(paired_above "$1.paired" "$TWIN_MARGIN")" ]
}

nobody_eval "$NR/cases/gemm_ikj.c" "$T/twin.json"
check "as nobody: the honest twin evaluates ok ($(jq -r '.outcome + " " + (.detail|.[0:100])' "$T/twin.json" 2>/dev/null))" \
    jqt '.outcome == "ok"' "$T/twin.json"
userns=$(jq -r '.sandbox.isolation.userns' "$T/twin.json" 2>/dev/null)
if [ "$userns" = true ]; then
    check "as nobody: a user namespace of its own with PID and mount namespaces" \
        jqt '.sandbox.isolation.pidns and .sandbox.isolation.mountns' "$T/twin.json"
else
    ok "as nobody: note: no user namespace here ($(jq -r '.sandbox.isolation.note' "$T/twin.json")): evaluation ran without isolation"
fi
check "as nobody: no control group (none delegated), said in the result" \
    jqt '.sandbox.isolation.cgroup == null and (.sandbox.isolation.cgroup_note | type == "string")' "$T/twin.json"
check "as nobody: the runner is frozen by SIGSTOP, said in the result" \
    jqt '.runner.freezer == "SIGSTOP"' "$T/twin.json"

nobody_eval "$NR/cases/gemm_threads.c" "$T/threads.json"
check "as nobody: the threaded twin evaluates ok" jqt '.outcome == "ok"' "$T/threads.json"

nobody_eval "$NR/cases/reads_seed.c" "$T/reads_seed.json"
out=$(jq -r '.outcome' "$T/reads_seed.json" 2>/dev/null)
check "as nobody: reads_seed (outcome $out) scores no better than its twin" \
    score_ok "$T/reads_seed.json" "$NR/cases/reads_seed.c"
check "as nobody: reads_seed found no seed to read" \
    bash -c "! grep -q 'predicted the inputs' '$T/reads_seed.json'"

touch "$T/start"
nobody_eval "$NR/cases/escapes_daemon.c" "$T/escapes.json"
nobody_eval "$NR/cases/fills_shm.c" "$T/fills.json"
sleep 0.5
left=$(pgrep -u 65534 -f 'avo-hostile' | tr '\n' ' ')
check "as nobody: no process of escapes_daemon or fills_shm left (${left:-none})" test -z "$left"
files=$(find /tmp /dev/shm -maxdepth 1 -name '*avo-hostile-shm-*' -newer "$T/start" 2>/dev/null | tr '\n' ' ')
check "as nobody: nothing fills_shm wrote is left in /tmp or /dev/shm (${files:-none})" test -z "$files"
[ -n "$left" ] && pkill -9 -u 65534 -f 'avo-hostile'
# shellcheck disable=SC2086
[ -n "$files" ] && rm -f $files

nobody_eval "$NR/cases/bad_utf8.c" "$T/utf8.json"
check "as nobody: invalid UTF-8 on stderr keeps the evidence (sandbox is an object)" \
    jqt '(.sandbox | type == "object") and (.sandbox.stderr_tail | type == "string")' "$T/utf8.json"

nobody_eval "$NR/cases/include_secret.c" "$T/secret-policy.json"
check "as nobody: #include of a host path is refused by the policy before any compile" \
    jqt '.outcome == "policy_violation" and .policy.rule == "file_inclusion" and .compile == null' \
    "$T/secret-policy.json"
nobody_eval "$NR/cases/include_secret.c" "$T/secret.json" 60 "$NR/sgemm-relaxed"
check "as nobody, the policy relaxed: #include of a file nobody may read is a compile error" \
    jqt '.outcome == "compile_error"' "$T/secret.json"
check "as nobody: the file's content is nowhere in the results" \
    bash -c "! grep -q '$(cat "$SECRET")' '$T/secret.json' '$T/secret-policy.json'"

# A colluding pair as nobody (tests/fixtures/kernels/paired/stash_pair.c):
# at load each role maps /dev/shm, $TMPDIR, the working directory (the
# scratch directory, which a runner of the worker's own uid could write),
# System V shm and the region's end; the candidate fails its call
# (returns 10 + the channel) the moment it finds the against's record in
# any of them.
mkdir -p "$NR/paired"
cp "$ROOT"/tests/fixtures/kernels/paired/*.c "$ROOT"/tests/fixtures/kernels/paired/problem.json "$NR/paired/"
(echo '#define AGAINST 1'; cat "$NR/paired/stash_pair.c") >"$NR/cases/stash_against.c"
chmod -R a+rX "$NR"
nobody_eval "$NR/paired/stash_pair.c" "$T/stash.json" 90 "$NR/paired" --against "$NR/cases/stash_against.c"
check "as nobody: a colluding pair finds no channel between its runners ($(jq -r '.outcome + " " + (.detail|.[0:120])' "$T/stash.json" 2>/dev/null))" \
    jqt '.outcome == "ok" and (.paired.configs | length > 0)' "$T/stash.json"

# A scratch root outside /tmp, /var/tmp and /dev/shm (the worker's
# `scratch` setting): the sandbox's root is read-only there, so the
# compile's own directory must be mounted writable (every compile failed,
# "ld returned 1", before). A fresh cache: a failed compile is cached.
OUTSIDE=$(mktemp -d /var/lib/avo-test-scratch.XXXXXX)
chown 65534:65534 "$OUTSIDE"
timeout -k 5 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -i PATH=/usr/bin:/bin HOME="$NR/home" TMPDIR="$OUTSIDE" \
    "$NR/bin/avo-worker" eval "$NR/sgemm" "$NR/cases/gemm_ikj.c" --json --cache "$OUTSIDE/cache" \
    >"$T/outside.json" 2>"$T/outside.json.err"
check "as nobody: with its scratch root outside /tmp ($OUTSIDE) the twin evaluates ok ($(jq -r '.outcome' "$T/outside.json" 2>/dev/null; head -c 160 "$T/outside.json.err"))" \
    jqt '.outcome == "ok"' "$T/outside.json"
rm -rf "$OUTSIDE"

[ "$FAILS" -eq 0 ]
