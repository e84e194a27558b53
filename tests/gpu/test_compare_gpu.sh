#!/usr/bin/env bash
# On a GPU host: the device comparisons (daemon/gpu/avo_compare.cu) against
# the host's rule, by tests/gpu/unit/test_compare.cu (built by make with
# nvcc). Prints its "ok - ..." lines and "N passed, N failed".
#   tests/gpu/test_compare_gpu.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BUILD:-$ROOT/build}/tests/gpu/test_compare
[ -x "$BIN" ] || { echo "not ok - $BIN not built (make, with nvcc)"; echo "0 passed, 1 failed"; exit 1; }
exec "$BIN"
