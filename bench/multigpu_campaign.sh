#!/usr/bin/env bash
# Issue 24's run: every GPU of a host busy. One avod (embedded PostgreSQL),
# one GPU worker per GPU started as the systemd template starts them
# (CUDA_VISIBLE_DEVICES=<i>, target gpu), and a campaign of 2N or more
# jobs (attention and gemm_bf16, some with two islands) to its end.
#
#   [N=gpus] [JOBS=2N] [JOB_GPU_S=60] [KEEP=DIR] [WORKER_BIN=avo-worker] [WORKER_ARGS=...] \
#       bash bench/multigpu_campaign.sh
# (WORKER_BIN: another build's worker, e.g. to compare claim orders; give it
# --harness build/bin/avo-harness in WORKER_ARGS when it has none beside it)
#
# N defaults to every GPU nvidia-smi lists (N=1 exercises the script on a
# one-GPU machine). Reports, for the campaign's wall W:
# - per worker: its GPU's UUID from registration and from every result's
#   gpu_lock (the GPU its harnesses held), distinct across workers, and
#   whether any of its results names another GPU;
# - per GPU: evaluations, the time its worker held claimed work (claimed_at
#   -> finished_at, merged), the candidate/against/baseline kernel time in
#   it (phases.harness.gpu) and their ratio (issue target >= 90%), and the
#   mean NVML utilisation of that GPU over W;
# - evaluations per hour in all and per GPU (issue target: >= 0.9 N x one
#   GPU's: run it with N=1 on the same host for the reference);
# - per job, the workers its evaluations ran on (islands spread over GPUs);
# - per worker, the CPUs its harnesses timed on (runner.cpu: the one it
#   leased, daemon/worker/cpulease.h).
# Exit 1 when a check fails (distinct GPUs, every result on its worker's GPU,
# no two workers' harnesses on one CPU).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${NGPU:-0}" -ge 1 ] || { echo "multigpu_campaign: skipped: no GPU here (nvidia-smi lists none)"; exit 0; }
N=${N:-$NGPU}
[ "$N" -ge 1 ] && [ "$N" -le "$NGPU" ] || { echo "multigpu_campaign: N=$N, but this host has $NGPU GPU(s)" >&2; exit 2; }
JOBS=${JOBS:-$((2 * N))}
JOB_GPU_S=${JOB_GPU_S:-60}
source tests/integration/lib.sh
source tests/gpu/bare-host-setup.sh >/dev/null
command -v psql >/dev/null || { echo "multigpu_campaign: psql is needed (carried in .devlibs/bin on a bare host)" >&2; exit 2; }
PG_ARGS=()
[ -n "${AVO_PG_BINDIR:-}" ] && PG_ARGS+=(--pg-bindir "$AVO_PG_BINDIR")
[ -n "${AVO_PG_USER:-}" ] && PG_ARGS+=(--pg-user "$AVO_PG_USER")
start_avod "${PG_ARGS[@]}" || exit 1
for ((i = 0; i < N; i++)); do
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$i AVO_TARGET=gpu ${WORKER_BIN:-avo-worker} --timeout 600 ${WORKER_ARGS:-} \
        >>"$T/worker-$i.log" 2>&1 &
    PIDS+=($!)
done
# The campaign: JOBS jobs, alternating attention and gemm_bf16 (both seeds
# of each), every third with two islands.
python3 - "$JOBS" "$JOB_GPU_S" >"$T/campaign.json" <<'PY'
import json, sys
n, gs = int(sys.argv[1]), float(sys.argv[2])
kinds = [("attention", None), ("gemm_bf16", {"name": "sm90"}), ("attention", {"name": "sm90"}), ("gemm_bf16", None)]
jobs = []
for i in range(n):
    prob, seed = kinds[i % len(kinds)]
    j = {"problem": prob, "target": "sm_90", "budget": {"evaluations": 40, "gpu_seconds": gs},
         "operator_params": {"seed": 11 + i}}
    if seed:
        j["seed"] = seed
    if i % 3 == 2:
        j["islands"] = 2
    jobs.append(j)
print(json.dumps({"name": "multigpu", "description": "bench/multigpu_campaign.sh", "tolerance": 0.02, "jobs": jobs}))
PY
for _ in $(seq 1 300); do
    [ "$(psql_avo "SELECT count(*) FROM workers WHERE state IN ('idle','busy')")" -ge "$N" ] && break
    sleep 0.2
done
echo "# multigpu_campaign: $N GPU worker(s) of $NGPU GPU(s) ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), $JOBS jobs of $JOB_GPU_S GPU-s, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
nvidia-smi --query-gpu=timestamp,uuid,utilization.gpu --format=csv,noheader,nounits -lms 500 >"$T/util.csv" 2>/dev/null &
SMI=$!
PIDS+=("$SMI")
t0=$(date +%s.%N)
mkdir -p "$T/campaign"
avoctl campaign run "$T/campaign.json" --out "$T/campaign" >"$T/campaign.out" 2>&1
rc=$?
t1=$(date +%s.%N)
kill "$SMI" 2>/dev/null
tail -3 "$T/campaign.out"
echo "# campaign exit $rc, wall $(python3 -c "print(round($t1 - $t0, 1))") s"
psql_avo "SELECT w.id, COALESCE(w.toolchain->'versions'->>'gpu_uuid', '') FROM workers w ORDER BY w.id" | tr '|' '\t' >"$T/workers.tsv"
psql_avo "SELECT e.id, e.job_id, e.worker_id, COALESCE(e.result->'gpu_lock'->>'gpu', ''),
                 extract(epoch FROM e.claimed_at), extract(epoch FROM e.finished_at),
                 COALESCE((e.result->'phases'->'harness'->'gpu'->>'candidate_s')::float8, 0)
                 + COALESCE((e.result->'phases'->'harness'->'gpu'->>'against_s')::float8, 0)
                 + COALESCE((e.result->'phases'->'harness'->'gpu'->>'baseline_s')::float8, 0),
                 COALESCE(e.result->'runner'->>'cpu', ''),
                 COALESCE(e.result->'served'->>'kept', '')
          FROM evaluations e WHERE e.state IN ('done', 'failed') AND e.worker_id IS NOT NULL ORDER BY e.id" |
    tr '|' '\t' >"$T/evals.tsv"
python3 - "$T/workers.tsv" "$T/evals.tsv" "$T/util.csv" "$t0" "$t1" <<'PY'
import sys, statistics
workers = {int(r[0]): r[1] for r in (l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip())}
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[2]) if l.strip()]
t0, t1 = float(sys.argv[4]), float(sys.argv[5])
W = t1 - t0
bad = 0
uu = [u for u in workers.values() if u]
if len(set(uu)) != len(uu) or len(uu) != len(workers):
    print(f"FAIL: workers' GPUs not distinct or not recorded: {workers}")
    bad = 1
util = {}
for l in open(sys.argv[3]):
    p = [x.strip() for x in l.split(',')]
    try:
        util.setdefault(p[1], []).append(float(p[2]))
    except (IndexError, ValueError):
        pass
def merged(iv):
    held, cur = 0.0, None
    for a, b in sorted(iv):
        if b <= a:
            continue
        if cur and a <= cur[1]:
            cur[1] = max(cur[1], b)
        else:
            if cur:
                held += cur[1] - cur[0]
            cur = [a, b]
    return held + (cur[1] - cur[0] if cur else 0)
print(f"evaluations finished: {len(rows)}; per hour: {len(rows) / W * 3600:.0f} in all, {len(rows) / W * 3600 / max(1, len(workers)):.0f} per GPU")
for w, uuid in sorted(workers.items()):
    mine = [r for r in rows if int(r[2]) == w]
    other = [r for r in mine if r[3] and r[3] != uuid]
    if other:
        print(f"FAIL: worker {w}: {len(other)} result(s) held another GPU's lock: {sorted(set(r[3] for r in other))}")
        bad = 1
    held = merged([(max(float(r[4]), t0), min(float(r[5]), t1)) for r in mine if r[4] and r[5]])
    k = sum(float(r[6]) for r in mine)
    u = util.get(uuid, [])
    print(f"worker {w} on {uuid}: {len(mine)} evaluations, held work {held:.0f} s ({100 * held / W:.0f}% of the wall), "
          f"candidate/against/baseline kernels {k:.1f} s = {100 * k / held if held else 0:.1f}% of the held time, "
          f"NVML utilisation mean {statistics.mean(u) if u else float('nan'):.0f}%")
jobs = {}
for r in rows:
    jobs.setdefault(int(r[1]), set()).add(int(r[2]))
print("workers per job: " + ", ".join(f"job {j}: {len(s)}" for j, s in sorted(jobs.items())))
kept = [r for r in rows if len(r) > 8 and r[8] == 'true']
print(f"answered by a kept checker: {len(kept)} of {len(rows)}")
for w in sorted(workers):
    seq = [r[1] for r in sorted((r for r in rows if int(r[2]) == w and r[4]), key=lambda r: float(r[4]))]
    print(f"worker {w}: {sum(a != b for a, b in zip(seq, seq[1:]))} changes of job in {len(seq)} claims")
cpus = {w: sorted({r[7] for r in rows if int(r[2]) == w and len(r) > 7 and r[7]}) for w in workers}
print("harness CPUs per worker: " + ", ".join(f"worker {w}: {','.join(c) or '-'}" for w, c in sorted(cpus.items())))
seen = [c for cs in cpus.values() for c in cs]
if len(seen) != len(set(seen)):
    print(f"FAIL: two workers' harnesses timed on one CPU: {cpus}")
    bad = 1
sys.exit(bad)
PY
chk=$?
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" && cp -r "$T/campaign" "$T/campaign.out" "$T/campaign.json" "$T/util.csv" "$T/evals.tsv" \
        "$T/workers.tsv" "$T"/worker-*.log "$T/avod.log" "$KEEP/" 2>/dev/null
fi
[ $rc -eq 0 ] && [ $chk -eq 0 ]
