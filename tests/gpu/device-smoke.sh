#!/usr/bin/env bash
# The whole system on a GPU host: GPU group, a CPU evaluation, and a job through
# embedded PostgreSQL + avod + worker + avoctl. Writes logs under $OUT (or
# /tmp/avo-smoke). Used by docs/gpu-testing.md.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUTDIR=${OUT:-/tmp/avo-smoke}
mkdir -p "$OUTDIR"
source tests/gpu/bare-host-setup.sh
export PATH="$ROOT/build/bin:$PATH"
echo "== host: $(uname -r), $(nproc) cores; $(nvidia-smi -L 2>&1 | head -1)"
echo "== compiler: $(cc --version 2>&1 | head -1)"
./tests/run.sh gpu
echo "== CPU evaluation on this host"
avo-worker eval kernels/cpu/sgemm kernels/cpu/sgemm/seed.c 2>&1 | tail -8
echo "== full system"
export AVO_HOME=/tmp/avo-smoke-home
rm -rf "$AVO_HOME"; mkdir -p "$AVO_HOME"; chmod 755 "$AVO_HOME"
avod --pg-bindir "$AVO_PG_BINDIR" --pg-user "$AVO_PG_USER" >"$OUTDIR/avod.log" 2>&1 &
AVOD=$!
for _ in $(seq 1 300); do avoctl health >/dev/null 2>&1 && break; sleep 0.2; done
avoctl health || { tail -20 "$OUTDIR/avod.log"; cat "$AVO_HOME/pg/postgresql.log" 2>/dev/null | tail -20; }
avo-worker >"$OUTDIR/worker.log" 2>&1 &
WORKER=$!
timeout 300 avoctl submit --problem cpu/sgemm --evaluations 6 --watch | tail -4
echo "watch exit: ${PIPESTATUS[0]}"
avoctl --json workers | grep -E '"(name|kind|compute_capability|arch|driver)"' | sort -u
kill -TERM "$WORKER" "$AVOD"; wait "$WORKER" "$AVOD"
echo "avod exit: $?"
tail -3 "$OUTDIR/avod.log"
