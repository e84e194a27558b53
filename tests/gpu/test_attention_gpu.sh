#!/usr/bin/env bash
# On a GPU host: the attention problem's correctness (kernels/attention).
# A copy of the package with small, awkward configurations (S = 1, odd S,
# S not a multiple of any tile, GQA groups of 2 and 4, both head dims, both
# masks) and validate sizes without the causal mask (the package's own
# validate sizes have it, so both paths of the reference are checked against
# its float64 twin; the reference's query rows split into many chunks) is
# evaluated with `avo-worker eval` for each seed at its defaults (and at the
# knob settings AVO_ATTN_SEED_KNOBS / AVO_ATTN_SM90_KNOBS name); every one
# must come out ok on every configuration with the reference validated. The seeds' SASS is checked
# too: HMMA (mma.sync) in seed.cu, HGMMA (wgmma) in seed_sm90.cu on Hopper,
# no spills. Prints "ok - ..." / "not ok - ..." lines and ends with
# "N passed, N failed". Screening on a GPU too: a 3x-slower seed screened
# out, an A/A copy timed in full.
#   tests/gpu/test_attention_gpu.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
setup_log=$(mktemp)
source tests/gpu/bare-host-setup.sh >"$setup_log" 2>&1
rm -f "$setup_log"
export PATH="$ROOT/build/bin:/usr/local/cuda/bin:$PATH"
unset AVO_DB AVO_CONFIG AVO_KERNELS
T=$(mktemp -d /tmp/avo-attn.XXXXXX)
chmod 755 "$T"
export AVO_HOME="$T/home" TMPDIR="$T/tmp"
mkdir -p "$AVO_HOME" "$TMPDIR"
# ATTN_RESULTS_DIR=DIR keeps every result JSON (the evidence of a run).
trap '[ -n "${ATTN_RESULTS_DIR:-}" ] && mkdir -p "$ATTN_RESULTS_DIR" && cp "$T"/*.json "$ATTN_RESULTS_DIR"/ 2>/dev/null; rm -rf "$T"' EXIT
PASS=0
FAIL=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
notok() { echo "not ok - $*"; FAIL=$((FAIL + 1)); }

SMALL="$T/attention_small"
mkdir -p "$SMALL"
cp kernels/attention/*.cu "$SMALL/"
# The reference batches key/value heads while their scores fit 2^28 floats
# and their fp32 operands 2^26, and splits query rows into chunks (of 512
# under the causal mask); here the budgets are 4096 and 1024 floats, so
# small sizes take its chunked paths: many row chunks (checked against the
# float64 twin on the validate sizes), one head per batch, and batches of
# 3 key/value heads with an uneven last one (b4-h4-kv2-s5).
sed -i '1i #define AVO_REF_CHUNK_ELEMS 4096' "$SMALL/reference.cu"
python3 - kernels/attention/problem.json "$SMALL/problem.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
def c(b, h, hkv, s, d, causal):
    return {"name": "b%d-h%d-kv%d-s%d-d%d%s" % (b, h, hkv, s, d, "-causal" if causal else ""),
            "sizes": {"B": b, "H": h, "HKV": hkv, "S": s, "D": d, "CAUSAL": causal}}
p["description"] = "tests/gpu/test_attention_gpu.sh: kernels/attention with small awkward configurations"
p["configs"] = [c(1, 2, 1, 1, 64, 0), c(1, 2, 2, 1, 128, 1), c(2, 4, 2, 77, 64, 1), c(1, 2, 2, 200, 128, 0),
                c(1, 4, 1, 333, 128, 1), c(2, 2, 2, 1000, 64, 0), c(1, 8, 4, 1024, 128, 1),
                c(1, 2, 2, 4096, 64, 1), c(1, 4, 2, 2049, 128, 0), c(4, 4, 2, 5, 64, 1)]
p["validate"] = {"sizes": {"B": 1, "H": 4, "HKV": 2, "S": 130, "D": 128, "CAUSAL": 0}}
p["counters"] = {"configs": [p["configs"][6]["name"]]}   # one profiled config: the pass and its opt-out both run
p["timing"] = {"max_seconds": 0.05, "min_runs": 2}
# Row-subset checks of timed calls (docs/evaluation.md, "Row-subset checks"):
# 256 rows a check, so the configs of at least 512 rows take them and the
# smaller ones are checked whole.
p["check"] = {"input_sets": 2, "rows": {"dims": ["B", "H", "S"], "sample": 256}}
p["screen"] = {"configs": [p["configs"][6]["name"], p["configs"][8]["name"]], "runs": 10}   # two of the larger ones
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY

# eval SEEDFILE "NAME V ..." -> checks; the candidate is rendered like the
# tune operator renders it (defines first).
evaluate() {
    local file=$1 knobs=$2 label cand out
    label="$(basename "$file")${knobs:+ ($knobs)}"
    cand="$T/cand-$RANDOM.cu"
    : >"$cand"
    [ -n "$knobs" ] && tr ',' '\n' <<<"$knobs" | sed 's/^ */#define /; s/=/ /' >>"$cand"
    cat "$file" >>"$cand"
    out="$T/out-$RANDOM.json"
    # --counters: the CUPTI pass, no longer part of a plain evaluation (a
    # profile task runs it), with its opt-out for the unprofiled configs.
    timeout -k 5 600 avo-worker eval "$SMALL" "$cand" --json --counters --timeout 300 --seed 20261203 >"$out" 2>"$out.err"
    python3 - "$out" "$label" "$SMALL/problem.json" <<'PY'
import json, sys
label = sys.argv[2]
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("not ok - %s: no result (%s)" % (label, e)); sys.exit(1)
bad = [c["name"] + ": " + str(c.get("detail") or c.get("outcome")) for c in r.get("configs", [])
       if c.get("outcome", "ok") != "ok"]
ok = r.get("outcome") == "ok" and r.get("reference_validated") is True and not bad
print("%s - %s: outcome %s, reference %s%s" % ("ok" if ok else "not ok", label, r.get("outcome"),
      r.get("reference_validation"), ("; " + "; ".join(bad[:3])) if bad else
      ("" if ok else "; " + " ".join(str(r.get("detail")).split())[:300])))
# The configs of at least 2 x 256 rows had their timed calls checked on row
# subsets, the smaller ones whole, and the row validation ran.
rows = {c["name"]: (c.get("references") or {}).get("rows") or {} for c in r.get("configs", [])}
spec = {c["name"]: c["sizes"] for c in json.load(open(sys.argv[3]))["configs"]}
wrong = [n for n, v in rows.items() if (spec[n]["B"] * spec[n]["H"] * spec[n]["S"] >= 512) != (v.get("checks", 0) > 0)]
sub = sum(1 for v in rows.values() if v.get("checks", 0) > 0)
rv = "avo_reference_rows too" in str(r.get("reference_validation"))
print("%s - %s: timed calls checked on 256-row subsets in the %d configs of >= 512 rows, whole in the others%s%s" % (
      "ok" if ok and not wrong and sub > 0 and rv else "not ok", label, sub,
      "" if rv else "; the row entry was not validated", ("; wrong: " + ", ".join(wrong)) if wrong else ""))
p = (r.get("compile") or {}).get("ptxas") or []
if not p:
    print("not ok - %s: no ptxas report in the result" % label)
else:
    spills = sum(int(k.get("spill_store_bytes", 0)) + int(k.get("spill_load_bytes", 0)) for k in p)
    for k in p:
        print("# ptxas %s: %s registers, %s bytes smem, %s bytes stack" % (k.get("kernel", "?")[:90],
              k.get("registers"), k.get("smem_bytes"), k.get("stack_bytes")))
    print("%s - %s: no spills (%d bytes)" % ("ok" if spills == 0 else "not ok", label, spills))
PY
}

run_case() {
    local line
    while IFS= read -r line; do
        echo "$line"
        case $line in "ok - "*) PASS=$((PASS + 1));; "not ok - "*) FAIL=$((FAIL + 1));; esac
    done < <(evaluate "$@")
}

CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
run_case kernels/attention/seed.cu ""
for k in ${AVO_ATTN_SEED_KNOBS:-}; do run_case kernels/attention/seed.cu "$k"; done
if [ "$CC" = 9.0 ]; then
    run_case kernels/attention/seed_sm90.cu ""
    for k in ${AVO_ATTN_SM90_KNOBS:-}; do run_case kernels/attention/seed_sm90.cu "$k"; done
else
    echo "# seed_sm90.cu skipped: compute capability $CC is not Hopper (9.0)"
fi

# Counters as their own task (issue 20, point 5): a plain evaluation runs no
# CUPTI pass and says so per configuration; the profile mode (the worker's
# profile task: avo-worker eval --profile) runs the checked calls of the one
# configuration asked for, then the CUPTI pass, with no timing.
PROFILED=$(jq -r '.counters.configs[0]' "$SMALL/problem.json")
timeout -k 5 600 avo-worker eval "$SMALL" kernels/attention/seed.cu --json --timeout 300 >"$T/plain.json" 2>&1
if jq -e '.outcome == "ok" and all(.configs[]; .counters.available == false and (.counters.reason | test("not profiled in the evaluation")))' "$T/plain.json" >/dev/null; then
    ok "a plain evaluation runs no counters pass and says why per configuration"
else
    notok "a plain evaluation runs no counters pass ($(jq -c '[.outcome, .configs[0].counters]' "$T/plain.json" 2>&1 | head -c 300))"
fi
# The protocol around no call is calibrated once per runner and kept for
# later configurations while young (2 s) and the SM clock holds (issue 20,
# point 4): fewer calibrations than configurations, the first one timed
# calibrated, every kept one younger than the bound.
if jq -e '.outcome == "ok" and ([.configs[].events.calibrated_here] | (any(. == true) and any(. == false)))
        and ([.configs[].events.calibrations] | max) < (.configs | length)
        and all(.configs[].events; .calibrated_here or (.calibration_age_s > 0 and .calibration_age_s <= 2))' \
    "$T/plain.json" >/dev/null; then
    ok "the call protocol's calibration is kept across configurations ($(jq -c '[.configs[].events | [.calibrated_here, .calibrations]]' "$T/plain.json"))"
else
    notok "the call protocol's calibration kept across configurations ($(jq -c '[.outcome, [.configs[].events | [.calibrated_here, .calibration_age_s, .calibrations]]]' "$T/plain.json" 2>&1 | head -c 400))"
fi
timeout -k 5 600 avo-worker eval "$SMALL" kernels/attention/seed.cu --json --profile --config "$PROFILED" --timeout 300 \
    >"$T/profile.json" 2>&1
if jq -e --arg c "$PROFILED" '.outcome == "ok" and .mode == "profile" and .aggregate == null and (.configs | length) == 1
        and .configs[0].name == $c and .configs[0].calls == 2 and .configs[0].counters.available == true
        and (.configs[0].counters.kernels | length) > 0 and (.configs[0] | has("median_s") | not)' "$T/profile.json" >/dev/null; then
    ok "the profile mode: the checked calls of $PROFILED, then CUPTI's ranges, no timing"
else
    notok "the profile mode ($(jq -c '[.outcome, .detail, .configs[0].counters]' "$T/profile.json" 2>&1 | head -c 400))"
fi

# Screening (issue 20, point 6; docs/evaluation.md, "Screening"): the seed
# doing its work three times over, against the seed, is stopped by the
# screen (its two configurations timed, the seven others checked only); the
# seed against a copy of itself passes and is timed in full (a second run
# when the first A/A screen's interval missed 1, a statistical event).
sed 's/^extern "C" int attention(/static int attention_once(/' kernels/attention/seed.cu >"$T/slow3.cu"
cat >>"$T/slow3.cu" <<'CU'
extern "C" int attention(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    int rc = 0;
    for (int k = 0; rc == 0 && k < 3; k++)
        rc = attention_once(tensors, sizes, stream);
    return rc;
}
CU
cp kernels/attention/seed.cu "$T/copy.cu"
timeout -k 5 600 avo-worker eval "$SMALL" "$T/slow3.cu" --json --timeout 300 --against kernels/attention/seed.cu --screen \
    >"$T/screen_slow.json" 2>&1
if jq -e '.outcome == "ok" and .screened_out == true and .screen.ci[1] < 1 and .paired.scope == "screen" and
        ([.configs[] | select(.timed == false)] | length) == (.configs | length) - (.screen.configs | length) and
        (.screen.configs | length) > 0 and
        all(.configs[] | select(.timed != false); .score > 0)' "$T/screen_slow.json" >/dev/null; then
    ok "screening: 3x the work is screened out ($(jq -c '[.screen.ratio, .screen.ci, .phases.total]' "$T/screen_slow.json"))"
else
    notok "screening: 3x the work is screened out ($(jq -c '[.outcome, .detail, .screen]' "$T/screen_slow.json" 2>&1 | head -c 400))"
fi
for attempt in 1 2; do
    timeout -k 5 600 avo-worker eval "$SMALL" "$T/copy.cu" --json --timeout 300 --against kernels/attention/seed.cu \
        --screen >"$T/screen_aa.json" 2>&1
    jq -e '.outcome == "ok" and .screened_out == false' "$T/screen_aa.json" >/dev/null && break
done
if jq -e '.outcome == "ok" and .screened_out == false and (.paired.configs | length) == (.configs | length) and
        all(.configs[]; .score > 0)' "$T/screen_aa.json" >/dev/null; then
    ok "screening: A/A passes the screen and is timed in full ($(jq -c '[.screen.ratio, .paired.ratio, .phases.total]' "$T/screen_aa.json"))"
else
    notok "screening: A/A passes the screen ($(jq -c '[.outcome, .detail, .screen]' "$T/screen_aa.json" 2>&1 | head -c 400))"
fi

# Row-subset checks (docs/evaluation.md, "Row-subset checks"). A candidate
# honest in its checked warm-up calls (the first check.input_sets calls of
# a size) that zeroes the last eighth of every head's query rows in every
# later call of the configs checked on row subsets (512 rows or more; the
# others it leaves alone): only the timed calls' subset checks can see it,
# and each compares 256 random rows, so it misses with probability
# 0.875^256 (1e-15); a timed call found wrong is cheat_suspected.
sed 's/^extern "C" int attention(/static int attention_once(/' kernels/attention/seed.cu >"$T/wrong_rows.cu"
cat >>"$T/wrong_rows.cu" <<'CU'
extern "C" int attention(void *const *tensors, const int64_t *sizes, cudaStream_t stream)
{
    int rc = attention_once(tensors, sizes, stream);
    static int64_t seen[64][6];
    static int calls[64], n;
    int k = 0;
    while (k < n && memcmp(seen[k], sizes, sizeof seen[k]) != 0)
        k++;
    if (k == n && n < 64)
        memcpy(seen[n++], sizes, sizeof seen[k]);
    const int64_t heads = sizes[0] * sizes[1], S = sizes[3], D = sizes[4], tail = (S + 7) / 8;
    if (rc || k == 64 || ++calls[k] <= 2 || heads * S < 512)
        return rc;
    for (int64_t h = 0; h < heads; h++) {
        cudaMemsetAsync((__nv_bfloat16 *)tensors[3] + (h * S + S - tail) * D, 0, tail * D * 2, stream);
        cudaMemsetAsync((float *)tensors[4] + h * S + S - tail, 0, tail * 4, stream);
    }
    return 0;
}
CU
sed -i '1i #include <string.h>' "$T/wrong_rows.cu"
timeout -k 5 600 avo-worker eval "$SMALL" "$T/wrong_rows.cu" --json --timeout 300 >"$T/wrong_rows.json" 2>&1
if jq -e '.outcome == "cheat_suspected" and (.detail | test("^config b2-h4-kv2-s77-d64-causal: correct on its first 2 calls, wrong on call"))' "$T/wrong_rows.json" >/dev/null; then
    ok "a candidate wrong on an eighth of the rows in timed calls only: cheat_suspected ($(jq -r '.detail' "$T/wrong_rows.json" | head -c 200))"
else
    notok "a candidate wrong on an eighth of the rows in timed calls only ($(jq -c '[.outcome, .detail]' "$T/wrong_rows.json" 2>&1 | head -c 400))"
fi
# The row entry is held to the float64 twin like the whole reference: one
# that forgets the scale, or a reference without it, is refused.
for variant in noscale missing; do
    BAD="$T/attention_rows_$variant"
    mkdir -p "$BAD"
    cp "$SMALL"/* "$BAD/"
    if [ $variant = noscale ]; then
        sed -i 's/            s\[j\] = scale \* acc;/            s[j] = acc;/' "$BAD/reference.cu"
        want='avo_reference_rows disagrees with avo_reference_f64'
    else
        sed -i 's/avo_reference_rows(/avo_reference_rowz(/' "$BAD/reference.cu"
        want='does not export avo_reference_rows'
    fi
    if cmp -s "$BAD/reference.cu" "$SMALL/reference.cu"; then
        notok "rows variant $variant: the sed changed nothing in reference.cu"
        continue
    fi
    timeout -k 5 600 avo-worker eval "$BAD" kernels/attention/seed.cu --json --timeout 300 >"$T/rows_$variant.json" 2>&1
    if jq -e --arg w "$want" '.outcome == "crash" and (.detail | test("reference invalid")) and (.detail | contains($w))' \
        "$T/rows_$variant.json" >/dev/null; then
        ok "a reference whose row entry is $variant is refused ($(jq -r '.detail' "$T/rows_$variant.json" | head -c 220))"
    else
        notok "a reference whose row entry is $variant is refused ($(jq -c '[.outcome, .detail]' "$T/rows_$variant.json" 2>&1 | head -c 400))"
    fi
done

# The machine code: tensor-core instructions present, no local memory.
for f in seed.cu seed_sm90.cu; do
    [ "$f" = seed_sm90.cu ] && [ "$CC" != 9.0 ] && continue
    arch=$(echo "$CC" | tr -d .); [ "$CC" = 9.0 ] && arch=90a
    nvcc -O3 -std=c++17 -gencode=arch=compute_$arch,code=sm_$arch -cudart=shared -Xcompiler=-fPIC -shared \
        -o "$T/$f.so" "kernels/attention/$f" 2>"$T/$f.nvcc" || { notok "$f compiles ($(tail -1 "$T/$f.nvcc"))"; continue; }
    cuobjdump -sass "$T/$f.so" >"$T/$f.sass"
    want=HMMA; [ "$f" = seed_sm90.cu ] && want=HGMMA
    n=$(grep -c "$want" "$T/$f.sass")
    [ "$n" -gt 0 ] && ok "$f: $n $want instructions in its SASS" || notok "$f: no $want in its SASS"
    n=$(grep -cE '\b(LDL|STL)\b' "$T/$f.sass")
    [ "$n" = 0 ] && ok "$f: no local-memory loads or stores (LDL/STL)" || notok "$f: $n LDL/STL instructions"
done
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ] && [ "$PASS" -gt 0 ]
