#!/usr/bin/env python3
"""Attention forward side by side on one GPU: avo kernels (built from .cu
files with the worker's nvcc flags, called through the problem's ABI),
torch SDPA with the cuDNN backend and with the flash backend, on the same
inputs in the same process.

    python3 bench/attention/run.py [KERNEL.cu[:NAME=V,...]]... [--configs A,B]
                                   [--reps N] [--check-only] [--json FILE] [--md FILE]

Each KERNEL is compiled as the tune operator renders a candidate (the
knob defines first). Per configuration of kernels/attention/problem.json:
every implementation is checked first (O and LSE of the first and the last
batch element against an fp32 torch computation of the definition, the
problem's tolerances), then timed: N rounds, each calling every
implementation once in turn (so clock drift and ordering fall on all
alike), CUDA events around each call, L2 flushed before each call (a 512
MB write) and the GPU then held briefly (torch.cuda._sleep) so that the
host's Python overhead of queueing the call stays outside the timed
region; median per implementation, TFLOPS = problem FLOPs / median. GQA: SDPA gets enable_gqa=True; a backend that
refuses it gets K and V expanded to every query head (noted in the table).
Needs torch with CUDA and nvcc; no avo library.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = json.load(open(os.path.join(ROOT, "kernels/attention/problem.json")))


def build(arg, tmp):
    path, _, knobs = arg.partition(":")
    defs = [kv.split("=") for kv in knobs.split(",") if kv]
    src = os.path.join(tmp, "cand_%d.cu" % len(os.listdir(tmp)))
    with open(src, "w") as f:
        f.write("/* avo knobs */\n")
        for k, v in defs:
            f.write("#define %s %s\n" % (k, v))
        f.write('#line 1 "%s"\n' % os.path.basename(path))
        f.write(open(path).read())
    so = src[:-3] + ".so"
    cc = torch.cuda.get_device_capability()
    arch = "%d%d%s" % (cc[0], cc[1], "a" if cc[0] >= 9 else "")
    cmd = ["nvcc", *SPEC.get("nvcc_flags", []), "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch),
           "-cudart=shared", "-Xcompiler=-fPIC", "-shared", "-o", so, src]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("%s does not compile:\n%s" % (arg, r.stderr[-3000:]))
    lib = ctypes.CDLL(so)
    fn = lib[SPEC["entry"]]
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
    name = os.path.basename(path) + (":" + knobs if knobs else "")
    return name, fn


def inputs(z, gen):
    b, h, hkv, s, d = z["B"], z["H"], z["HKV"], z["S"], z["D"]
    scale = {t["name"]: t.get("scale", 1.0) for t in SPEC["tensors"]}

    def u(shape, sc):
        return ((torch.rand(shape, generator=gen, device="cuda") * 2 - 1) * sc).to(torch.bfloat16)
    q = u((b, h, s, d), scale["Q"])
    k = u((b, hkv, s, d), scale["K"])
    v = u((b, hkv, s, d), scale["V"])
    return q, k, v


def reference_one(q, k, v, causal, b):
    """fp32 attention of batch element b, head by head: O [H, S, D], LSE [H, S]."""
    h, s, d = q.shape[1], q.shape[2], q.shape[3]
    g = h // k.shape[1]
    o = torch.empty((h, s, d), device="cuda")
    lse = torch.empty((h, s), device="cuda")
    rows = max(1, (1 << 28) // s)
    for hh in range(h):
        kk, vv = k[b, hh // g].float(), v[b, hh // g].float()
        for r0 in range(0, s, rows):
            qq = q[b, hh, r0:r0 + rows].float()
            sc = (qq @ kk.T) / math.sqrt(d)
            if causal:
                i = torch.arange(r0, r0 + qq.shape[0], device="cuda")[:, None]
                j = torch.arange(s, device="cuda")[None, :]
                sc.masked_fill_(j > i, float("-inf"))
            m = sc.amax(dim=1, keepdim=True)
            p = torch.exp(sc - m)
            l = p.sum(dim=1, keepdim=True)
            o[hh, r0:r0 + rows] = (p / l) @ vv
            lse[hh, r0:r0 + rows] = (m + torch.log(l)).squeeze(1)
    return o, lse


def compare(got, want, tol):
    got, want = got.double(), want.double()
    if not torch.isfinite(got).all():
        return False, float("inf"), float("inf")
    rel = ((got - want).norm() / want.norm().clamp_min(1e-300)).item()
    mx = (got - want).abs().max().item()
    return rel <= tol["rel_l2"] and mx <= tol["max_abs"], rel, mx


def time_all(calls, reps, flush):
    """Median and spread (max/min - 1) of each call, timed in interleaved rounds."""
    for call in calls:
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    times = [[] for _ in calls]
    sleep = getattr(torch.cuda, "_sleep", None)
    for _ in range(reps):
        for i, call in enumerate(calls):
            flush.zero_()
            if sleep:
                sleep(1000000)   # about 0.5 ms of GPU time while the host queues the call
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            call()
            b.record()
            b.synchronize()
            times[i].append(a.elapsed_time(b) * 1e-3)
    out = []
    for t in times:
        m = statistics.median(t)
        out.append((m, (max(t) - min(t)) / m))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels", nargs="*")
    ap.add_argument("--configs", default="")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_name()
    tmp = tempfile.mkdtemp(prefix="avo-attn-")
    impls = [build(k, tmp) for k in a.kernels]
    want = set(a.configs.split(",")) if a.configs else None
    cfgs = [c for c in SPEC["configs"] if not want or c["name"] in want]
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream()
    rows = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    for c in cfgs:
        z = c["sizes"]
        causal = bool(z["CAUSAL"])
        q, k, v = inputs(z, gen)
        b, h, s, d = z["B"], z["H"], z["S"], z["D"]
        flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
        refs = {bb: reference_one(q, k, v, causal, bb) for bb in sorted({0, b - 1})}
        row = {"config": c["name"], "sizes": z, "results": {}}
        cand = []
        for name, fn in impls:
            o = torch.full((b, h, s, d), float("nan"), dtype=torch.bfloat16, device="cuda")
            lse = torch.full((b, h, s), float("nan"), dtype=torch.float32, device="cuda")
            ptrs = (ctypes.c_void_p * 5)(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr())
            sizes = (ctypes.c_int64 * 6)(*[z[n] for n in SPEC["sizes"]])

            def call(fn=fn, ptrs=ptrs, sizes=sizes):
                rc = fn(ptrs, sizes, ctypes.c_void_p(stream.cuda_stream))
                if rc:
                    raise RuntimeError("returned %d" % rc)
            cand.append((name, call, o, lse))
        if not a.no_torch:
            for label, backend in (("torch cuDNN", SDPBackend.CUDNN_ATTENTION),
                                   ("torch flash", SDPBackend.FLASH_ATTENTION)):
                def make(backend=backend):
                    note = ""
                    kk, vv = k, v
                    gqa = h != z["HKV"]
                    if gqa:
                        try:
                            with sdpa_kernel(backend):
                                F.scaled_dot_product_attention(q[:1, :, :128], k[:1, :, :128], v[:1, :, :128],
                                                               is_causal=causal, enable_gqa=True)
                        except RuntimeError:
                            kk = k.repeat_interleave(h // z["HKV"], dim=1)
                            vv = v.repeat_interleave(h // z["HKV"], dim=1)
                            gqa, note = False, "K/V expanded"
                    out = {}

                    def call():
                        with sdpa_kernel(backend):
                            out["o"] = F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, enable_gqa=gqa)
                    return call, out, note
                try:
                    call, out, note = make()
                    call()
                    torch.cuda.synchronize()
                    cand.append((label, call, out, note))
                except RuntimeError as e:
                    row["results"][label] = {"error": str(e).splitlines()[0][:200]}
        tol = SPEC["tolerance"]
        timed = []
        for name, call, o, lse in cand:
            res = {"ok": True}
            try:
                call()
                torch.cuda.synchronize()
                for bb, (ref_o, ref_l) in refs.items():
                    if isinstance(o, dict):   # torch: O only
                        ok, rel, mx = compare(o["o"][bb].float(), ref_o, tol["bf16"])
                        res["ok"] &= ok
                        res["o_rel_l2"], res["o_max_abs"] = max(rel, res.get("o_rel_l2", 0)), max(mx, res.get("o_max_abs", 0))
                    else:
                        ok1, rel, mx = compare(o[bb].float(), ref_o, tol["bf16"])
                        ok2, lrel, lmx = compare(lse[bb], ref_l, tol["f32"])
                        res["ok"] &= ok1 and ok2
                        res["o_rel_l2"], res["o_max_abs"] = max(rel, res.get("o_rel_l2", 0)), max(mx, res.get("o_max_abs", 0))
                        res["lse_rel_l2"], res["lse_max_abs"] = max(lrel, res.get("lse_rel_l2", 0)), max(lmx, res.get("lse_max_abs", 0))
                if isinstance(o, dict) and lse:
                    res["note"] = lse
                timed.append((name, call))
            except RuntimeError as e:
                res = {"ok": False, "error": str(e)[:200]}
            row["results"][name] = res
        if not a.check_only and timed:
            try:
                for (name, _), (t, spread) in zip(timed, time_all([c for _, c in timed], a.reps, flush)):
                    row["results"][name].update(median_s=t, spread=spread, tflops=flops / t / 1e12)
            except RuntimeError as e:
                for name, _ in timed:
                    row["results"][name]["error"] = "timing: " + str(e)[:200]
        for name, res in row["results"].items():
            print("%-26s %-34s %s" % (c["name"], name, json.dumps(res)), flush=True)
        rows.append(row)
        del q, k, v, cand
        torch.cuda.empty_cache()
    meta = {"gpu": dev, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cuda": torch.version.cuda, "reps": a.reps}
    try:
        meta["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if a.json:
        json.dump({"meta": meta, "rows": rows}, open(a.json, "w"), indent=1)
    names = []
    for r in rows:
        for n in r["results"]:
            if n not in names:
                names.append(n)
    lines = ["%s, torch %s, cuDNN %s, CUDA %s, driver %s; median of %d calls, L2 flushed; TFLOPS (check)" % (
        dev, meta["torch"], meta["cudnn"], meta["cuda"], meta.get("driver", "?"), a.reps), "",
        "| config | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in rows:
        cells = []
        for n in names:
            x = r["results"].get(n)
            if not x:
                cells.append("")
            elif "error" in x:
                cells.append("error")
            else:
                cell = ("%.0f" % x["tflops"]) if "tflops" in x else "-"
                cell += "" if x.get("ok") else " (WRONG)"
                if x.get("note"):
                    cell += " (%s)" % x["note"]
                cells.append(cell)
        lines.append("| %s | %s |" % (r["config"], " | ".join(cells)))
    print("\n".join(lines))
    if a.md:
        open(a.md, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
