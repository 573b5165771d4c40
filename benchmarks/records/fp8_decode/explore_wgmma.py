#!/usr/bin/env python3
"""Device call 4 of issue 32 (H200): the Gluon split-K decode kernel (splitk_wgmma.py, PIPE 10)
over BLOCK_M x BLOCK_N x num_stages x an explicit split on the 14 seed shapes at M in {1, 8, 32,
64}, beside PIPE 8/9's committed best config per point (re-timed on this loan), cuBLASLt (torch
scaled_mm, M padded inside the call as vLLM does) and the read-once probe of the weight bytes.
Every time is one call captured in a CUDA graph, replayed on the engine's timer with the L2
flushed; every variant is verified against the float64 reference and checked bit-identical on a
second call before it is timed. Odd shapes (N, K not multiples of 128, M = 1 and 3) are checked
first.

    python3 benchmarks/records/fp8_decode/explore_wgmma.py --out $OUT/explore.json
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPES = [(2112, 7168), (4096, 7168), (4608, 7168), (7168, 2048), (7168, 2304), (7168, 16384), (16384, 1536),
          (8192, 32768), (32768, 8192), (512, 7168), (1024, 8192), (3072, 1536), (7168, 256), (8192, 1024)]
MS = (1, 8, 32, 64)
BNS = ((64, 4), (128, 8))           # (BLOCK_N, warps): one warp group per 64 weight rows
STAGES = (3, 4, 6)
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
SMS = 132


def bms(M):
    return (16,) if M <= 16 else (32,) if M <= 32 else (32, 64)


def cfg_of(bm, bn, w, st):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": w, "num_stages": st, "PIPE": 10}


def committed_configs():
    """(n, k, M) -> the fastest Triton config of results/sm_90/fp8_gemm_bench_decode.csv."""
    pipes = {"splitk": 8, "splitk+1pass": 9}
    best = {}
    with open(ROOT / "results/sm_90/fp8_gemm_bench_decode.csv") as f:
        for r in csv.DictReader(f):
            if r["backend"] != "triton" or r["status"] != "ok":
                continue
            key = (int(r["n"]), int(r["k"]), int(r["M"]))
            if key in best and best[key][0] <= float(r["median_us"]):
                continue
            parts = r["config"].split()
            bm, bn, bk = map(int, parts[1].split("x"))
            cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": int(parts[2][1:]),
                   "num_warps": int(parts[3][1:]), "num_stages": int(parts[4][1:]),
                   "PIPE": pipes[parts[5]] if len(parts) > 5 else 0}
            best[key] = (float(r["median_us"]), cfg)
    return best


def run(inp, cfg, split, ws, cnt):
    from occtune.kernels.fp8_gemm import splitk, splitk_wgmma

    nk = -(-inp.a.shape[1] // 128)
    split = -(-nk // -(-nk // split))            # no empty split (as splitk.split_of)
    steps = splitk.steps_of(inp.a.shape[1], cfg, split)
    fn, grid, args, kw = splitk_wgmma.launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg, split,
                                             ws if split > 1 else None, cnt if split > 1 else None, steps)
    fn[grid](*args, **kw)


def precompile(jobs):
    """Child: compile the given variants into Triton's on-disk cache (both M specialisations alike)."""
    import torch
    from occtune.kernels.fp8_gemm.family import make_gemm_inputs
    inp = make_gemm_inputs(8, 2112, 7168, 0, "cuda")
    ws = torch.empty(16 * 8 * 2112, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(4096, dtype=torch.int32, device="cuda")
    for bm, bn, w, st, part in jobs:
        run(inp, cfg_of(bm, bn, w, st), 2 if part else 1, ws, cnt)
    torch.cuda.synchronize()
    return len(jobs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rep-ms", type=float, default=4.0)
    ap.add_argument("--shapes", default="")
    a = ap.parse_args()
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    import torch

    from harness import graph_of
    from read_probe import probes
    from occtune.engine.bench import BenchTimer
    from occtune.kernels.fp8_gemm import splitk
    from occtune.kernels.fp8_gemm.config import library_config
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, make_gemm_inputs, verify
    from occtune.kernels.fp8_gemm.kernel import launch

    t0 = time.time()
    jobs = [(bm, bn, w, st, p) for bm in (16, 32, 64) for bn, w in BNS for st in STAGES for p in (False, True)]
    with ProcessPoolExecutor(max_workers=12, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(precompile, [jobs[i::12] for i in range(12)]))
    print(f"precompiled {len(jobs)} variants in {time.time() - t0:.0f} s", flush=True)
    ws = torch.empty(16 * 64 * 32768, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(1 << 14, dtype=torch.int32, device="cuda")

    odd_bad = []
    for (M, N, K), (bm, bn, w, st), S in itertools.product(((1, 200, 400), (3, 2112, 1936), (33, 7168, 272)),
                                                           ((16, 64, 4, 3), (32, 128, 8, 4), (64, 64, 4, 6)), (1, 2, 3)):
        inp = make_gemm_inputs(M, N, K, 7, "cuda")
        run(inp, cfg_of(bm, bn, w, st), S, ws, cnt)
        ok = verify(inp.out, inp)
        if not ok.ok:
            odd_bad.append(f"M={M} N={N} K={K} {bm}x{bn} s{st} S={S}: {ok.reason[:80]}")
    print(f"odd shapes: {len(odd_bad)} bad", *odd_bad[:8], sep="\n  ", flush=True)

    timer = BenchTimer(warmup_ms=1.0, rep_ms=a.rep_ms)
    fam = Fp8GemmFamily([{"M": 1, "N": 512, "K": 7168}], target="sm_90", backends=["triton", "torch_scaled_mm"])
    lib = fam.build(library_config("torch_scaled_mm", "sm_90"), "cuda")
    committed = committed_configs()
    res = []

    def gtime(fn):
        g = graph_of(torch, fn)
        t = timer(g.replay, context={"device": "cuda"})
        del g
        return round(t.median_us, 3)

    shapes = [tuple(map(int, s.split(","))) for s in a.shapes.split(";")] if a.shapes else SHAPES
    for (n, k) in shapes:
        x = torch.randn(n, k // 4, device="cuda")
        probe = min(gtime(call) for name, call, check in probes(x) if check())
        del x
        nk = -(-k // 128)
        for M in MS:
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 1, "cuda")
            exp = expected_rows(inp)
            rec = {"n": n, "k": k, "M": M, "probe_us": probe, "lib_us": gtime(lambda: lib.call(inp)), "var": []}
            old_us, old = committed[(n, k, M)]
            rec["old"] = [old, gtime(lambda: launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, old)), old_us]
            for bm, (bn, w), st, S in itertools.product(bms(M), BNS, STAGES, SPLITS):
                tiles = -(-M // bm) * -(-n // bn)
                if S > nk or -(-nk // -(-nk // S)) != S or not (SMS // 4 <= tiles * S <= 8 * SMS or S == 1):
                    continue
                cfg = cfg_of(bm, bn, w, st)
                try:
                    inp.out.fill_(float("nan"))
                    run(inp, cfg, S, ws, cnt)
                    ok = verify(inp.out, inp, exp)
                    first = inp.out.clone()
                    run(inp, cfg, S, ws, cnt)
                    if not ok.ok or not torch.equal(first, inp.out):
                        rec["var"].append([bm, bn, st, S, None, (ok.reason or "not bit-identical")[:80]])
                        continue
                    rec["var"].append([bm, bn, st, S, gtime(lambda: run(inp, cfg, S, ws, cnt)), ""])
                except Exception as e:  # noqa: BLE001
                    rec["var"].append([bm, bn, st, S, None, f"{type(e).__name__}: {str(e)[:80]}"])
            good = [v for v in rec["var"] if v[4]]
            best = min(good, key=lambda v: v[4]) if good else [0, 0, 0, 0, float("nan")]
            rule = splitk.split_of(M, n, k, cfg_of(best[0], best[1], 4, 4), SMS) if good else 0
            res.append(rec)
            print(f"{n:>5},{k:<5} M={M:<2} probe {probe:6.2f} lib {rec['lib_us']:6.2f} old {rec['old'][1]:6.2f} "
                  f"new {best[4]:6.2f} {best[:4]} (rule split {rule}) x{rec['lib_us'] / best[4]:4.2f} lib, "
                  f"x{rec['old'][1] / best[4]:4.2f} old, {best[4] / probe:4.2f} probe; bad {len(rec['var']) - len(good)}"
                  f"  ({time.time() - t0:.0f} s)", flush=True)
            Path(a.out).write_text(json.dumps(res))
    print(f"done {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
