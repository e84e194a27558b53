#!/usr/bin/env bash
# Evaluations per GPU-hour and GPU busy share of a campaign through the
# whole system (issue 20's campaign targets): embedded PostgreSQL, avod, one
# GPU worker (`--target gpu`, the default --prefetch for a GPU), and
# `avoctl campaign run FILE` to its end.
#
#   bench/campaign_rate.sh [CAMPAIGN.json]      (default kernels/attention/campaign.json)
#
# Reports, for the campaign's wall time W (from `campaign run` to its exit):
# - evaluations finished (state done or failed) in W, by purpose (search,
#   final, compare) and how many the screen stopped; evaluations per
#   GPU-hour = finished / W * 3600 (one GPU);
# - the GPU busy share, two ways, both named:
#   (a) NVML utilisation sampling (`nvidia-smi --query-gpu=utilization.gpu
#       -lms 200`): the mean over W of "the share of the last sample period
#       in which one or more kernels ran", i.e. any kernel, the reference's
#       and the calibration's included;
#   (b) the harness's own stream times of the candidate's and the
#       baseline's/against's calls (each result's phases.harness.gpu, as in
#       bench/eval_cost.sh) summed over the campaign's evaluations, over W.
# - the median worker wall of one evaluation, and the share of W in which
#   the worker held an evaluation (claimed_at -> finished_at, merged);
# - the profiles: run within W (and their time in it), run after W (a new
#   best's waits for an idle worker: waited for, up to 120 s), superseded.
# KEEP=DIR keeps the campaign's summaries, the worker log, the utilisation
# samples, a table of every evaluation and their phases (phases.jsonl). BUILD: the build directory.
# Needs a GPU (nvidia-smi lists one); on a bare host the carried .pg and
# .devlibs (docs/gpu-testing.md).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CAMPAIGN=${1:-kernels/attention/campaign.json}
[ -f "$CAMPAIGN" ] || { echo "campaign_rate: no campaign file '$CAMPAIGN'" >&2; exit 2; }
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { echo "campaign_rate: skipped: no GPU here (nvidia-smi lists none)"; exit 0; }
source tests/integration/lib.sh
source tests/gpu/bare-host-setup.sh >/dev/null
command -v psql >/dev/null || { echo "campaign_rate: psql is needed (carried in .devlibs/bin on a bare host)" >&2; exit 2; }
PG_ARGS=()
[ -n "${AVO_PG_BINDIR:-}" ] && PG_ARGS+=(--pg-bindir "$AVO_PG_BINDIR")
[ -n "${AVO_PG_USER:-}" ] && PG_ARGS+=(--pg-user "$AVO_PG_USER")
start_avod "${PG_ARGS[@]}" || exit 1
# WORKER_ARGS: more of the worker's options (e.g. "--serve 1": the kept checker).
start_worker --target gpu --timeout 600 ${WORKER_ARGS:-}
echo "# campaign_rate: $CAMPAIGN through avod + one GPU worker ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 200 >"$T/util.csv" 2>/dev/null &
SMI=$!
PIDS+=("$SMI")
t0=$(date +%s.%N)
mkdir -p "$T/campaign"
avoctl campaign run "$CAMPAIGN" --out "$T/campaign" >"$T/campaign.out" 2>&1
rc=$?
t1=$(date +%s.%N)
kill "$SMI" 2>/dev/null
W=$(python3 -c "print($t1 - $t0)")
tail -5 "$T/campaign.out"
echo "# campaign exit $rc, wall $(printf %.1f "$W") s"
# The campaign's own evaluations (every job is the campaign's: the database is this run's).
psql_avo "SELECT e.id, e.job_id, e.purpose, e.state, COALESCE(e.outcome, ''),
                 COALESCE((e.result->>'screened_out')::boolean, false),
                 extract(epoch FROM e.claimed_at), extract(epoch FROM e.finished_at),
                 COALESCE((e.result->'phases'->>'total')::float8, 0),
                 COALESCE((e.result->'phases'->'harness'->'gpu'->>'candidate_s')::float8, 0)
                 + COALESCE((e.result->'phases'->'harness'->'gpu'->>'against_s')::float8, 0)
                 + COALESCE((e.result->'phases'->'harness'->'gpu'->>'baseline_s')::float8, 0)
          FROM evaluations e WHERE e.state IN ('done', 'failed') ORDER BY e.id" | tr '|' '\t' >"$T/evals.tsv"
psql_avo "SELECT jsonb_build_object('screened', COALESCE((result->>'screened_out')::boolean, false), 'purpose', purpose,
                 'outcome', outcome, 'phases', result->'phases')::text
          FROM evaluations WHERE state IN ('done', 'failed') ORDER BY id" >"$T/phases.jsonl"
python3 - "$T/evals.tsv" "$T/util.csv" "$t0" "$t1" "$T/phases.jsonl" "$T/worker.log" <<'EOF'
import sys, statistics
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
t0, t1 = float(sys.argv[3]), float(sys.argv[4])
W = t1 - t0
n = len(rows)
by = {}
for r in rows:
    by[r[2]] = by.get(r[2], 0) + 1
screened = sum(1 for r in rows if r[5] == 't')
print(f"evaluations finished: {n} ({', '.join(f'{k} {v}' for k, v in sorted(by.items()))}; screened out {screened})")
print(f"evaluations per GPU-hour: {n / W * 3600:.0f}")
walls = [float(r[8]) for r in rows if float(r[8]) > 0]
if walls:
    print(f"worker wall of one evaluation: median {statistics.median(walls):.1f} s (min {min(walls):.1f}, max {max(walls):.1f})")
# share of W in which the worker held an evaluation (intervals merged)
iv = sorted((max(float(r[6]), t0), min(float(r[7]), t1)) for r in rows if r[6] and r[7])
held, cur = 0.0, None
for a, b in iv:
    if b <= a:
        continue
    if cur and a <= cur[1]:
        cur[1] = max(cur[1], b)
    else:
        if cur:
            held += cur[1] - cur[0]
        cur = [a, b]
if cur:
    held += cur[1] - cur[0]
print(f"worker held an evaluation: {100 * held / W:.0f}% of the wall")
util = []
for l in open(sys.argv[2]):
    p = l.split(',')
    try:
        util.append(float(p[1]))
    except (IndexError, ValueError):
        pass
if util:
    print(f"GPU busy (a) NVML utilization.gpu mean over {len(util)} samples: {statistics.mean(util):.0f}%")
gpu = sum(float(r[9]) for r in rows)
print(f"GPU busy (b) candidate/against/baseline stream time (phases.harness.gpu) summed: {gpu:.1f} s = {100 * gpu / W:.1f}% of the wall")
# Where an ok evaluation's worker wall goes, median per phase: screened out, and timed in full.
import json
ph = [json.loads(l) for l in open(sys.argv[5]) if l.strip()]
def num(d):
    return {k: v for k, v in (d or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
for label, sel in (("screened out", lambda e: e["screened"]), ("timed in full (search)", lambda e: not e["screened"] and e["purpose"] == "search")):
    es = [e["phases"] for e in ph if e.get("outcome") == "ok" and sel(e) and isinstance(e.get("phases"), dict)]
    if not es:
        continue
    print(f"phases of the {label} evaluations ({len(es)}), median s:")
    keys = []
    for e in es:
        for k in list(num(e)) + ["harness." + k for k in num(e.get("harness"))]:
            if k not in keys:
                keys.append(k)
    for k in keys:
        vals = [(num(e.get("harness")) if k.startswith("harness.") else num(e)).get(k.split(".", 1)[-1] if k.startswith("harness.") else k, 0) for e in es]
        m = statistics.median(vals)
        if m >= 0.005:
            print(f"   {k:<34} {m:8.3f}")
# Where the campaign's wall went: every finished evaluation's phases summed
# (sums over the campaign, not medians), the kernels (b) apart from the
# rest of the harness, the worker around the harness, and the time no
# evaluation was held. An evaluation that ran past W counts whole: the
# account is of the work, W the yardstick.
allp = [e["phases"] for e in ph if isinstance(e.get("phases"), dict)]
tot = {}
for e in allp:
    for k, v in num(e).items():
        tot[k] = tot.get(k, 0) + v
    for k, v in num(e.get("harness")).items():
        tot["harness." + k] = tot.get("harness." + k, 0) + v
hp, ht, wt = tot.get("harness_process", 0), tot.get("harness.total", 0), tot.get("total", 0)
print(f"where the wall went ({len(allp)} evaluations' phases summed, W = {W:.1f} s):")
for what, s in (("kernels timed (b)", gpu), ("harness, the rest of its total", ht - gpu),
                ("harness process around its total", hp - ht), ("worker around the harness", wt - hp),
                ("no evaluation held", W - held)):
    print(f"   {what:<34} {s:8.1f} s {100 * s / W:5.1f}%")
# Between one evaluation's stored result and the next one's start (the
# worker's log): the GPU idle while the next candidate was still compiling
# (a claim held ahead counts as held above, so the account cannot show it).
import datetime, re
cur, end, gaps = None, None, []
for line in open(sys.argv[6], errors="replace"):
    m = re.search(r"evaluation (\d+): job ", line)
    try:
        ts = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").timestamp()
    except ValueError:
        continue
    if m:
        if end is not None:
            gaps.append(ts - end)
        cur, end = m.group(1), None
    elif cur and re.search(r"evaluation %s: [a-z_]+, aggregate" % cur, line):
        end = ts
if gaps:
    print(f"   between a result and the next start    {sum(gaps):8.1f} s {100 * sum(gaps) / W:5.1f}%"
          f" ({len(gaps)} gaps, {sum(g > 0.5 for g in gaps)} over 0.5 s, the longest {max(gaps):.2f} s)")
print("the largest phases summed (s):")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:24]:
    if k not in ("total", "harness.total", "harness_process") and v >= 0.05:
        print(f"   {k:<34} {v:8.1f}")
EOF
# The profiles (sql/011, sql/027): those the worker ran inside W took GPU
# time from the evaluations; a new best's waits for an idle worker, so some
# run after W: waited for here (up to 120 s) and reported, so a rate is
# never bought by moving work past the campaign's end.
for _ in $(seq 1 240); do
    [ "$(psql_avo "SELECT count(*) FROM profiles WHERE state IN ('queued', 'running')")" = 0 ] && break
    sleep 0.5
done
psql_avo "SELECT count(*) FILTER (WHERE result->>'outcome' = 'superseded'),
                 count(*) FILTER (WHERE claimed_at IS NOT NULL AND finished_at <= to_timestamp($t1)),
                 COALESCE(sum(extract(epoch FROM least(finished_at, to_timestamp($t1)) - claimed_at))
                          FILTER (WHERE claimed_at IS NOT NULL AND claimed_at < to_timestamp($t1)), 0),
                 count(*) FILTER (WHERE claimed_at IS NOT NULL AND finished_at > to_timestamp($t1)),
                 COALESCE(max(extract(epoch FROM finished_at - to_timestamp($t1)))
                          FILTER (WHERE claimed_at IS NOT NULL AND finished_at > to_timestamp($t1)), 0),
                 count(*) FILTER (WHERE state IN ('queued', 'running'))
          FROM profiles" | tr '|' ' ' | {
    read -r sup inside inside_s after after_s left
    echo "profiles: $inside run within the wall ($(printf %.1f "$inside_s") s of it), $after after its end (the last done $(printf %.1f "$after_s") s after), $sup superseded (not run), $left still queued"
}
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" && cp -r "$T/campaign" "$T/campaign.out" "$T/util.csv" "$T/evals.tsv" "$T/phases.jsonl" "$T/worker.log" "$T/avod.log" "$KEEP/" 2>/dev/null
fi
exit $rc
