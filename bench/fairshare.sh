#!/usr/bin/env bash
# Issue 22's fair-share benchmark: two teams submit 3:1 demand to two
# workers; over the window in which both teams have work waiting, each
# should get its equal share of device time within +-10% (docs/benchmarks.md).
#
# avod with its embedded PostgreSQL, teams fa and fb (tokens on TCP), a
# quota file that only names the shares ('* share=1'), WORKERS workers of
# TARGET. Team fa submits 3 jobs, team fb 1 (the same problem and budget:
# 3:1 demand), all at once, each with enough islands to keep every worker
# busy by itself. After DURATION seconds every job is cancelled. Measured
# from the database: device-seconds charged per team (avo_eval_cost of
# each evaluation, what the quotas count) for evaluations claimed in the
# window, the window ending early if a team ran out of work; the claim order
# without fair share would be FIFO (by priority, then age): 3:1.
#   [DURATION=600] [WORKERS=2] [TARGET=cpu] [PROBLEM=cpu/sgemm] [OUT=dir] bash bench/fairshare.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DURATION=${DURATION:-600}
WORKERS=${WORKERS:-2}
TARGET=${TARGET:-cpu}
PROBLEM=${PROBLEM:-cpu/sgemm}
OUTDIR=${OUT:-/tmp/avo-fairshare}
export PATH="$ROOT/build/bin:$PATH"
unset AVO_DB AVO_CONFIG AVO_KERNELS
rm -rf "$OUTDIR"; mkdir -p "$OUTDIR"; chmod 755 "$OUTDIR"
export AVO_HOME="$OUTDIR/home"; mkdir -p "$AVO_HOME"
PIDS=()
finish() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
}
trap finish EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
U="http://127.0.0.1:$PORT"
tok() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
KA=$(tok); KB=$(tok); KO=$(tok)
printf '%s principal=a team=fa\n%s principal=b team=fb\n%s principal=ops admin\n' "$KA" "$KB" "$KO" >"$OUTDIR/tokens"
printf '%s principal=a team=fa\n' "$KA" >"$OUTDIR/ka"; printf '%s principal=b team=fb\n' "$KB" >"$OUTDIR/kb"
printf '%s principal=ops admin\n' "$KO" >"$OUTDIR/ko"
chmod 600 "$OUTDIR"/tokens "$OUTDIR"/k?
printf '* share=1\n' >"$OUTDIR/quotas"
avod --teams fa,fb --quotas "$OUTDIR/quotas" --listen "127.0.0.1:$PORT" --token-file "$OUTDIR/tokens" \
    >"$OUTDIR/avod.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 300); do avoctl health >/dev/null 2>&1 && break; sleep 0.1; done
q() { psql "$(cat "$AVO_HOME/avod.dsn")" -XAtq -c "$1"; }
for i in $(seq 1 "$WORKERS"); do
    avo-worker --target "$TARGET" >"$OUTDIR/worker$i.log" 2>&1 &
    PIDS+=($!)
done
sub() { avoctl --url "$U" --token-file "$OUTDIR/$1" --json submit --problem "$PROBLEM" --evaluations 5000 \
        --islands "$WORKERS" | jq -r .id; }
JOBS_A="$(sub ka) $(sub ka) $(sub ka)"
JOBS_B=$(sub kb)
echo "# fairshare: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $WORKERS $TARGET workers, $PROBLEM, ${DURATION} s;" \
     "team fa jobs $JOBS_A, team fb job $JOBS_B" | tee "$OUTDIR/summary.txt"
# Every few seconds: does each team have work waiting (queued) or running?
: >"$OUTDIR/demand.tsv"
end=$((SECONDS + DURATION))
while [ $SECONDS -lt $end ]; do
    q "SELECT extract(epoch FROM now()), COALESCE(j.team, ''), count(*) FILTER (WHERE e.state = 'queued'),
              count(*) FILTER (WHERE e.state = 'running')
         FROM evaluations e JOIN jobs j ON j.id = e.job_id
        WHERE e.state IN ('queued', 'running') GROUP BY 2" | tr '|' '\t' >>"$OUTDIR/demand.tsv"
    sleep 5
done
for j in $JOBS_A $JOBS_B; do avoctl --url "$U" --token-file "$OUTDIR/ko" cancel "$j" >/dev/null 2>&1; done
avoctl --url "$U" --token-file "$OUTDIR/ko" teams >"$OUTDIR/teams.txt"
# The window: from the first claim to the first sample (after the first minute) at which a team had
# no work queued or running, or the end.
q "SELECT COALESCE(j.team, ''), e.id, extract(epoch FROM e.claimed_at), extract(epoch FROM e.finished_at),
          CASE WHEN e.target = 'cpu' THEN k.cpu_s ELSE k.gpu_s END, e.outcome
     FROM evaluations e JOIN jobs j ON j.id = e.job_id, avo_eval_cost(e.target, e.result) k
    WHERE e.state IN ('done', 'failed') ORDER BY e.claimed_at" | tr '|' '\t' >"$OUTDIR/evals.tsv"
python3 - "$OUTDIR" <<'EOF' | tee -a "$OUTDIR/summary.txt"
import sys, datetime, collections
d = sys.argv[1]
both = []
samples = collections.defaultdict(dict)
for line in open(f"{d}/demand.tsv"):
    ts, team, queued, running = line.rstrip("\n").split("\t")
    samples[ts][team] = int(queued) + int(running)  # work waiting or on a worker: demand
times = sorted(samples)
for ts in times:
    both.append(all(samples[ts].get(t, 0) > 0 for t in ("fa", "fb")))
ev = [l.rstrip("\n").split("\t") for l in open(f"{d}/evals.tsv")]
ev = [(t, float(c), float(f), float(s or 0)) for t, _, c, f, s, _ in ev]
if not ev:
    print("no evaluations finished"); sys.exit(1)
t0 = min(c for _, c, _, _ in ev)
# the window ends at the first sample where a team had no work (after the start-up minute)
def epoch(ts):
    return float(ts)
t_end = max(f for _, _, f, _ in ev)
gap = [epoch(ts) for ts, ok in zip(times, both) if not ok and epoch(ts) > t0 + 60]
if gap:
    t_end = min(t_end, gap[0])
per = collections.Counter(); n = collections.Counter(); total = collections.Counter()
for t, c, f, s in ev:
    total[t] += s
    if c >= t0 and f <= t_end:
        per[t] += s; n[t] += 1
tot = sum(per.values())
print(f"window {t_end - t0:.0f} s (both teams had work queued or running in {sum(both)} of {len(both)} samples)")
for t in ("fa", "fb"):
    print(f"team {t}: {n[t]} evaluations, {per[t]:.1f} device-s, share {100 * per[t] / tot:.1f}% (equal: 50%)")
dev = max(abs(per[t] / tot - 0.5) / 0.5 for t in ("fa", "fb"))
print(f"largest deviation from the equal share: {100 * dev:.1f}% of it (target <= 10%): {'met' if dev <= 0.10 else 'NOT met'}")
EOF
