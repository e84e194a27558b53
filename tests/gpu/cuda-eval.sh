#!/usr/bin/env bash
# On a GPU host: evaluate the gemm_bf16 seed through avo-worker eval and the
# CUDA harness (checks, event timing, clocks, energy, ptxas report). Writes
# the JSON result under $OUT (or /tmp/avo-cuda-eval).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUTDIR=${OUT:-/tmp/avo-cuda-eval}
mkdir -p "$OUTDIR"
source tests/gpu/bare-host-setup.sh >/dev/null
export PATH="$ROOT/build/bin:/usr/local/cuda/bin:$PATH"
export AVO_HOME=${AVO_HOME:-/tmp/avo-cuda-home}
mkdir -p "$AVO_HOME"
file=${1:-kernels/gemm_bf16/seed.cu}
avo-worker eval kernels/gemm_bf16 "$file" --json --timeout 500 >"$OUTDIR/eval.json" 2>"$OUTDIR/eval.err"
echo "avo-worker eval exit: $?"
python3 - "$OUTDIR/eval.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("no JSON result:", e); sys.exit(0)
print("outcome:", r.get("outcome"), "|", (r.get("detail") or "")[:300])
print("aggregate:", r.get("aggregate"), r.get("unit"), "energy_mj:", r.get("energy_mj"), "arch:", r.get("gpu_arch"))
print("gpu:", r.get("gpu"), "reference:", r.get("reference_validated"), r.get("reference_validation"))
for c in r.get("configs", []):
    print("  %-16s tflops %-8.1f median %.4f ms  rse %.4f runs %d discarded %s rt %.4f ms" % (
        c["name"], (c.get("tflops") or 0), c["median_s"] * 1e3, c["rse"], c["runs"], c.get("clock_discarded"),
        (c.get("round_trip_median_s") or 0) * 1e3))
comp = r.get("compile") or {}
print("compile: cached", comp.get("cached"), "seconds", comp.get("seconds"), "ptxas", json.dumps(comp.get("ptxas"))[:400])
PY
tail -5 "$OUTDIR/eval.err"
