#!/usr/bin/env bash
# On a GPU host: a colluding pair (tests/hostile/gpu/pairs/stash_pair.cu).
# The candidate is evaluated paired against the same source built as the
# against ("#define AGAINST 1" in front); each role writes a record of its
# own into every place it can reach from its process at every call (the
# slack after each shared device tensor, every shared memfd mapping, the
# evaluation's /dev/shm, $TMPDIR, working directory, System V shm), and the
# candidate says on stderr when it finds the against's:
#   - the evaluation ends ok (both roles compute honestly) and its paired
#     measurement was made (paired.configs present, no paired.error);
#   - the candidate's control line ("avo-hostile: channels: ...") is there:
#     the probe ran and says which places its own process could open;
#   - no "avo-hostile: stash found in ..." line: no byte travelled from the
#     against's runner to the candidate's.
# The small fixture's config 1024 leaves three quarters of every shared
# device tensor as slack (sized for config 2048).
# AVO_COLLUSION_BIN=DIR runs another build's binaries (the tree before the
# defence, to watch the attack work: docs/gpu-testing.md). Prints TAP-style
# lines and ends with "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
setup_log=$(mktemp)
source tests/gpu/bare-host-setup.sh >"$setup_log" 2>&1
sed 's/^/# /' "$setup_log"
rm -f "$setup_log"
BIN=${AVO_COLLUSION_BIN:-$ROOT/build/bin}
export PATH="$BIN:/usr/local/cuda/bin:$PATH"
unset AVO_DB AVO_CONFIG AVO_KERNELS

PASS=0
FAIL=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $*"; FAIL=$((FAIL + 1)); }

if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "# skipped: no NVIDIA GPU on this machine"
    echo "0 passed, 0 failed"
    exit 0
fi

# World-traversable: as root the runners drop to an unprivileged uid.
T=$(mktemp -d /tmp/avo-collude.XXXXXX)
chmod 755 "$T"
export AVO_HOME="$T/home"
mkdir -p "$AVO_HOME" "$T/tmp"
export TMPDIR="$T/tmp"
trap 'rm -rf "$T"; rm -f /dev/shm/avo-hostile-stash' EXIT
SMALL="$ROOT/tests/fixtures/problems/gemm_bf16_small"
CAND="$ROOT/tests/hostile/gpu/pairs/stash_pair.cu"
AGAINST="$T/stash_against.cu"
{
    echo "#define AGAINST 1"
    cat "$CAND"
} >"$AGAINST"

out="$T/pair.json"
timeout -k 5 330 avo-worker eval "$SMALL" "$CAND" --json --timeout 150 --seed 20261206 --cache "$T/cache" \
    --against "$AGAINST" >"$out" 2>"$out.err"
rc=$?
[ -n "${COLLUSION_RESULTS_DIR:-}" ] && mkdir -p "$COLLUSION_RESULTS_DIR" && cp "$out" "$out.err" "$COLLUSION_RESULTS_DIR"/
read -r outcome paired < <(python3 - "$out" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    p = r.get("paired") or {}
    state = "error:" + " ".join(str(p["error"]).split())[:160] if p.get("error") else \
        ("measured" if p.get("configs") else "absent")
    print(r.get("outcome") or "none", state.replace(" ", "_"))
except Exception as e:
    print("none", "no_JSON_result")
PY
)
if [ "$rc" -le 1 ] && [ "$outcome" = ok ]; then
    ok "the pair's evaluation ends ok (worker exit $rc)"
else
    notok "the pair's evaluation: outcome $outcome, worker exit $rc: $(tail -c 400 "$out.err" | tr '\n' ' ')"
fi
if [ "$paired" = measured ]; then
    ok "the candidate was measured paired with the against"
else
    notok "no paired measurement: $paired"
fi
control=$(grep -oh 'avo-hostile: channels:[^"\\]*' "$out" "$out.err" 2>/dev/null | head -1)
if [ -n "$control" ]; then
    ok "the probe ran: ${control:0:400}"
else
    notok "the candidate's control line is missing (the probe never ran)"
fi
found=$(grep -oh 'avo-hostile: stash found in [^"\\]*' "$out" "$out.err" 2>/dev/null | sort -u | tr '\n' ';')
if [ -z "$found" ]; then
    ok "no record of the against's reached the candidate"
else
    notok "a channel between the pair's runners: ${found:0:400}"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
