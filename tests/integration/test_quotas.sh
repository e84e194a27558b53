#!/usr/bin/env bash
# Per-team quotas and fair share (issue 22, point 3; docs/operations.md,
# "Teams and quotas"). Two teams, each with a token on avod's TCP listener.
# Bad quota files are refused at start naming the file and line; a team at
# its job limit has its next job wait (and says why); a team over its daily
# device time has its queued evaluations left for others, on a real worker;
# device time is charged to the job's team; the claim serves the team with
# the lowest decayed usage first (checked on avo_claim itself, so no timing
# is involved); a reload applies a new quota file, and a bad one keeps the
# old and says why.
source "$(dirname "$0")/lib.sh"
trap cleanup EXIT

TA=qa; TB=qb
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
U="http://127.0.0.1:$PORT"
tok() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
KA=$(tok); KB=$(tok); KADM=$(tok)
printf '%s principal=ann team=%s\n%s principal=ben team=%s\n%s principal=ops admin\n' \
    "$KA" "$TA" "$KB" "$TB" "$KADM" >"$T/tokens"
chmod 600 "$T/tokens"
printf '%s principal=ann team=%s\n' "$KA" "$TA" >"$T/ka"; chmod 600 "$T/ka"
printf '%s principal=ben team=%s\n' "$KB" "$TB" >"$T/kb"; chmod 600 "$T/kb"
printf '%s principal=ops admin\n' "$KADM" >"$T/kadm"; chmod 600 "$T/kadm"
A() { avoctl --url "$U" --token-file "$T/ka" "$@"; }
B() { avoctl --url "$U" --token-file "$T/kb" "$@"; }
OPS() { avoctl --url "$U" --token-file "$T/kadm" "$@"; }
printf 'teams = %s,%s\nquotas = %s\n' "$TA" "$TB" "$T/quotas" >"$T/avod.conf"
AVOD_ARGS=(--config "$T/avod.conf" --listen "127.0.0.1:$PORT" --token-file "$T/tokens")

# ---- bad quota files: refused at start, naming the file and the line
refused() {  # NAME FILE-CONTENT PATTERN
    printf "$2" >"$T/quotas"
    local out rc
    out=$(timeout 30 avod "${AVOD_ARGS[@]}" 2>&1); rc=$?
    check "$1 ($rc: $out)" bash -c '[ "$1" = 2 ] && grep -q -- "$2" <<<"$0"' "$out" "$rc" "$3"
}
refused "an unknown team is refused at start, naming file and line" \
    "$TA jobs=2\n# comment\nqc jobs=1\n" "quotas $T/quotas line 3: unknown team 'qc' (avod's teams: $TA, $TB)"
refused "a negative limit is refused naming the key" \
    "$TA jobs=-1\n" "quotas $T/quotas line 1: jobs=-1: a limit is a whole number >= 0"
refused "an unknown key is refused, listing the keys" \
    "$TA gpu-hours=3\n" "line 1: unknown key 'gpu-hours' (keys: jobs, evals-in-flight, gpu-seconds-day"
refused "a malformed duration is refused" \
    "$TB gpu-seconds-day=1x\n" "line 1: gpu-seconds-day=1x: seconds >= 0, optionally with a unit"
refused "a team given twice is refused" \
    "$TA jobs=1\n$TA jobs=2\n" "line 2: team '$TA' has a line already"
refused "a line without limits is refused" \
    "$TA\n" "line 1: team '$TA' has no key=value"
refused "a share of 0 is refused" \
    "* share=0\n" "share=0: a share is a number > 0"
out=$(timeout 30 avod "${AVOD_ARGS[@]}" --quotas "$T/nonexistent" 2>&1); rc=$?
check "a quota file that cannot be read is refused naming it ($rc: $out)" \
    bash -c '[ "$1" = 2 ] && grep -q "quotas $2: No such file" <<<"$0"' "$out" "$rc" "$T/nonexistent"

# ---- the job limit: team A may run one job at a time
printf '# test quotas\n%s jobs=1\n%s gpu-seconds-day=1s   # one second a day\n' "$TA" "$TB" >"$T/quotas"
check "avod starts with a quota file" start_avod "${AVOD_ARGS[@]}"
OPS --json teams >"$T/teams0.json"
check "teams lists both quota lines ($(jq -c '[.teams[] | {team, quota}]' "$T/teams0.json"))" \
    jqt --arg a "$TA" --arg b "$TB" '(.teams | map({(.team): .quota}) | add) as $q
        | $q[$a].jobs == 1 and $q[$b].gpu_s_day == 1 and .half_life_s == 604800' "$T/teams0.json"

submit() {  # WHO [flags] -> job id
    local who=$1; shift
    "$who" --json submit --problem cpu/sgemm "$@" | jq -r .id
}
J1=$(submit A --evaluations 3)
check "team A's first job starts (no worker yet: its seed waits)" \
    wait_for 20 "[ \"\$(psql_avo \"SELECT state FROM jobs WHERE id = $J1\")\" = running ]"
J2=$(submit A --evaluations 3)
sleep 2  # several engine passes (1 s each)
check "team A's second job stays queued: the team runs 1 job of 1" \
    test "$(psql_avo "SELECT state FROM jobs WHERE id = $J2")" = queued
check "... and says why" \
    test "$(psql_avo "SELECT avo_job_quota_wait($J2)")" = "team quota (running jobs 1 of 1)"
shows() { local who=$1 j=$2; "$who" status "$j" | grep -q "$3"; }  # WHO JOB PATTERN
check "... in the job's detail, which status shows" shows A "$J2" "waiting: team quota (running jobs 1 of 1)"
OPS teams >"$T/teams1.txt"
check "avoctl teams shows the job counts and the limit ($(grep "^$TA" "$T/teams1.txt"))" \
    bash -c 'grep -q "^$1 .*jobs 1.*1 run, 1 queued" "$0"' "$T/teams1.txt" "$TA"
JB=$(submit B --evaluations 4 --islands 2)
check "team B is not held by team A's job limit" \
    wait_for 20 "[ \"\$(psql_avo \"SELECT state FROM jobs WHERE id = $JB\")\" = running ]"
A cancel "$J1" >/dev/null
check "when team A's job ends its next job starts" \
    wait_for 20 "[ \"\$(psql_avo \"SELECT state FROM jobs WHERE id = $J2\")\" = running ]"

# ---- device time charged, and the daily limit on a real worker
start_worker --target cpu
check "team B's seed evaluation runs and is charged to team B" \
    wait_for 240 "[ \"\$(psql_avo \"SELECT count(*) FROM team_usage WHERE team = '$TB' AND day_s > 0\")\" = 1 ]"
charged=$(psql_avo "SELECT day_s FROM team_usage WHERE team = '$TB'")
cost=$(psql_avo "SELECT sum(k.cpu_s) FROM evaluations e, avo_eval_cost(e.target, e.result) k
                  WHERE e.job_id = $JB AND e.state IN ('done','failed')")
check "... by what its evaluations held the worker for (compile + harness: $charged s = $cost s)" \
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (b > 0 and abs(a - b) < 1e-6 * b))" \
    "$charged" "$cost"
check "team B is over its day (1 s) and its queued evaluations wait" \
    wait_for 60 "psql_avo \"SELECT avo_team_blocked('$TB')\" | grep -q '^GPU-seconds today .* of 1\$'"
check "... the job says why" \
    wait_for 60 "psql_avo \"SELECT avo_job_quota_wait($JB)\" | grep -q '^team quota (GPU-seconds today .* of 1)\$'"
check "... and status shows it" shows B "$JB" "waiting: team quota (GPU-seconds today .* of 1)"
OPS teams >"$T/teams2.txt"
check "avoctl teams shows what blocks team B ($(grep "^$TB" "$T/teams2.txt"))" \
    grep -q "^$TB .*GPU-seconds today .* of 1\$" "$T/teams2.txt"
nb=$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JB AND state IN ('running','done','failed')")
check "team A's work goes on meanwhile" \
    wait_for 240 "[ \"\$(psql_avo \"SELECT count(*) FROM evaluations WHERE job_id = $J2 AND state IN ('done','failed')\")\" -ge 1 ]"
check "... while no more of team B's evaluations started" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JB AND state IN ('running','done','failed')")" = "$nb"
check "team B's evaluations are still queued (waiting, not failed)" \
    test "$(psql_avo "SELECT count(*) FROM evaluations WHERE job_id = $JB AND state = 'queued'")" -ge 1

# ---- a reload lifts the limit; a bad reload keeps the running one
printf '%s jobs=1\n%s gpu-seconds-day=1h share=2\n' "$TA" "$TB" >"$T/quotas"
kill -HUP "$AVOD_PID"
check "after a reload with a larger day, team B is no longer blocked" \
    wait_for 20 "[ -z \"\$(psql_avo \"SELECT avo_team_blocked('$TB')\")\" ]"
check "... and its share is 2" test "$(psql_avo "SELECT share FROM team_quotas WHERE team = '$TB'")" = 2
check "team B's job goes on" \
    wait_for 240 "[ \"\$(psql_avo \"SELECT count(*) FROM evaluations WHERE job_id = $JB AND state IN ('running','done','failed')\")\" -gt $nb ]"
printf '%s jobs=1\n%s gpu-seconds-day=-5\n' "$TA" "$TB" >"$T/quotas"
kill -HUP "$AVOD_PID"
check "a reload with a negative limit is refused in the log, naming the line" \
    wait_for 10 "grep -q 'reload failed, the running configuration stays: quotas $T/quotas line 2: gpu-seconds-day=-5' '$T/avod.log'"
check "... and the running quotas stay" \
    test "$(psql_avo "SELECT gpu_s_day FROM team_quotas WHERE team = '$TB'")" = 3600
stop_workers
for j in "$J2" "$JB"; do OPS cancel "$j" >/dev/null 2>&1; done

# ---- fair share: the claim serves the team with the lowest load first
# Two queued evaluations, one per team, and a worker row of our own; the
# usage is set by hand so the order does not depend on how long anything ran.
printf '* share=1\n' >"$T/quotas"
kill -HUP "$AVOD_PID"
wait_for 10 "[ \"\$(psql_avo \"SELECT count(*) FROM team_quotas WHERE team = '*'\")\" = 1 ]"
JA=$(submit A --evaluations 2); JB2=$(submit B --evaluations 2)
wait_for 20 "[ \"\$(psql_avo \"SELECT count(*) FROM evaluations WHERE job_id IN ($JA, $JB2) AND state = 'queued'\")\" = 2 ]"
W=$(psql_avo "INSERT INTO workers (host, pid, target, state) VALUES ('fair-share-test', 1, 'cpu-test', 'idle') RETURNING id")
psql_avo "UPDATE evaluations SET target = 'cpu-test' WHERE job_id IN ($JA, $JB2) AND state = 'queued'" >/dev/null
psql_avo "DELETE FROM team_usage; INSERT INTO team_usage VALUES ('$TA', 1000, now(), avo_utc_day(), 0, avo_utc_week(), 0),
                                                                ('$TB', 10, now(), avo_utc_day(), 0, avo_utc_week(), 0)" >/dev/null
first=$(psql_avo "SELECT job_id FROM avo_claim($W, 'cpu-test', 60)")
check "the team with less decayed usage is served first (claimed job $first, team B's $JB2)" test "$first" = "$JB2"
psql_avo "UPDATE evaluations SET state = 'queued', worker_id = NULL WHERE job_id = $JB2 AND state = 'running'" >/dev/null
psql_avo "UPDATE team_usage SET decayed_s = 5000 WHERE team = '$TB'" >/dev/null
first=$(psql_avo "SELECT job_id FROM avo_claim($W, 'cpu-test', 60)")
check "with more usage than team A, team B waits for A (claimed job $first, team A's $JA)" test "$first" = "$JA"
psql_avo "UPDATE evaluations SET state = 'queued', worker_id = NULL WHERE job_id = $JA AND state = 'running'" >/dev/null
psql_avo "INSERT INTO team_quotas (team, share) VALUES ('$TB', 10)" >/dev/null
first=$(psql_avo "SELECT job_id FROM avo_claim($W, 'cpu-test', 60)")
check "a share of 10 makes 5000 s count as 500 against team A's 1000 (claimed job $first)" test "$first" = "$JB2"
psql_avo "UPDATE evaluations SET state = 'queued', worker_id = NULL WHERE job_id = $JB2 AND state = 'running'" >/dev/null
# evaluations in flight: team A (the lower load) may have one claimed at once
psql_avo "INSERT INTO evaluations (job_id, candidate_id, problem, target)
          SELECT job_id, candidate_id, problem, target FROM evaluations WHERE job_id = $JA AND target = 'cpu-test' LIMIT 1;
          DELETE FROM team_quotas WHERE team = '$TB'; INSERT INTO team_quotas (team, evals_in_flight) VALUES ('$TA', 1);
          UPDATE team_usage SET decayed_s = 0 WHERE team = '$TA'; UPDATE team_usage SET decayed_s = 5000 WHERE team = '$TB'" >/dev/null
first=$(psql_avo "SELECT job_id FROM avo_claim($W, 'cpu-test', 60)")
second=$(psql_avo "SELECT job_id FROM avo_claim($W, 'cpu-test', 60)")
check "with evals-in-flight=1 team A gets one claim, then team B's work is taken although A's load is lower ($first, $second)" \
    test "$first,$second" = "$JA,$JB2"
check "... and team A says why" test "$(psql_avo "SELECT avo_team_blocked('$TA')")" = "evaluations in flight 1 of 1"
psql_avo "UPDATE team_usage SET decayed_s = 1000, at = now() - interval '14 days' WHERE team = '$TA'" >/dev/null
check "usage halves every half-life (1000 s two weeks ago counts 250)" \
    python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - 250) > 1)" "$(psql_avo "SELECT avo_team_load('$TA')")"
psql_avo "UPDATE evaluations SET state = 'cancelled' WHERE target = 'cpu-test'" >/dev/null
for j in "$JA" "$JB2"; do OPS cancel "$j" >/dev/null 2>&1; done

# ---- the same order on a real worker: team A has used 1000 s, team B
# nothing; both submit before the worker starts; its first claim is B's.
psql_avo "DELETE FROM team_quotas WHERE team <> '*';
          UPDATE team_usage SET decayed_s = 1000, at = now() WHERE team = '$TA';
          UPDATE team_usage SET decayed_s = 0, at = now() WHERE team = '$TB'" >/dev/null
JA3=$(submit A --evaluations 2); JB3=$(submit B --evaluations 2)
wait_for 20 "[ \"\$(psql_avo \"SELECT count(*) FROM evaluations WHERE job_id IN ($JA3, $JB3) AND state = 'queued'\")\" = 2 ]"
start_worker --target cpu
wait_for 120 "[ -n \"\$(psql_avo \"SELECT 1 FROM evaluations WHERE job_id IN ($JA3, $JB3) AND claimed_at IS NOT NULL LIMIT 1\")\" ]"
first=$(psql_avo "SELECT job_id FROM evaluations WHERE job_id IN ($JA3, $JB3) AND claimed_at IS NOT NULL ORDER BY claimed_at LIMIT 1")
check "a real worker's first claim is the team with less usage (job $first; team B's $JB3, submitted second)" \
    test "$first" = "$JB3"
stop_workers
[ "$FAILS" -eq 0 ]
