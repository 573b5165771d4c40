#!/usr/bin/env python3
"""Device call 1 of issue 32 (H200): PIPE 8 (split-K decode kernel) swept over BLOCK_M x BLOCK_N x
num_stages x an explicit split factor on the 14 seed shapes at M in {1, 8, 32, 64}, beside cuBLASLt
(torch scaled_mm, M padded inside the call as vLLM does) and the read-once probe of the weight
bytes; every time is one call captured in a CUDA graph, replayed on the engine's timer with the L2
flushed. Every variant is verified against the float64 reference before it is timed.

    python3 benchmarks/records/fp8_decode/explore_splitk.py --out $OUT/explore.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPES = [(2112, 7168), (4096, 7168), (4608, 7168), (7168, 2048), (7168, 2304), (7168, 16384), (16384, 1536),
          (8192, 32768), (32768, 8192), (512, 7168), (1024, 8192), (3072, 1536), (7168, 256), (8192, 1024)]
MS = (1, 8, 32, 64)
BNS = (32, 64, 128)
STAGES = (3, 5)
SPLITS = (1, 2, 4, 8, 16, 32)


def bms(M):
    return (16,) if M <= 16 else (16, 32) if M <= 32 else (16, 64)


def cfg_of(bm, bn, st):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": st, "PIPE": 8}


def precompile(args):
    """Child: compile the given variants into Triton's on-disk cache."""
    import torch
    from occtune.kernels.fp8_gemm import splitk
    from occtune.kernels.fp8_gemm.family import make_gemm_inputs
    from occtune.kernels.fp8_gemm.kernel import launches
    inp = make_gemm_inputs(8, 2112, 7168, 0, "cuda")
    for bm, bn, st, part in args:
        splitk.split_of = lambda *_a, S=2 if part else 1: S       # as launch() makes it: ws only when split
        ws = torch.empty(2 * 8 * 2112, dtype=torch.float32, device="cuda") if part else None
        (fn, g, a, kw), *_ = launches(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg_of(bm, bn, st), ws)
        fn.warmup(*a, grid=g, **kw)
    return len(args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rep-ms", type=float, default=4.0)
    a = ap.parse_args()
    import torch
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp

    from host_probe import graph_of
    from read_probe import probes
    from occtune.engine.bench import BenchTimer
    from occtune.kernels.fp8_gemm import splitk
    from occtune.kernels.fp8_gemm.config import library_config
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, verify
    from occtune.kernels.fp8_gemm.kernel import launch

    t0 = time.time()
    jobs = [(bm, bn, st, p) for bm in (16, 32, 64) for bn in BNS for st in STAGES for p in (False, True)]
    with ProcessPoolExecutor(max_workers=14, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(precompile, [jobs[i::14] for i in range(14)]))
    print(f"precompiled {len(jobs)} variants in {time.time() - t0:.0f} s", flush=True)
    timer = BenchTimer(warmup_ms=1.0, rep_ms=a.rep_ms)
    fam = Fp8GemmFamily([{"M": 1, "N": 512, "K": 7168}], target="sm_90", backends=["triton", "torch_scaled_mm"])
    lib = fam.build(library_config("torch_scaled_mm", "sm_90"), "cuda")
    orig_split = splitk.split_of
    res = []

    def gtime(fn):
        g = graph_of(torch, fn)
        t = timer(g.replay, context={"device": "cuda"})
        del g
        return round(t.median_us, 3)

    for (n, k) in SHAPES:
        x = torch.randn(n, k // 4, device="cuda")
        probe = min(gtime(call) for name, call, check in probes(x) if check())
        del x
        for M in MS:
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 1, "cuda")
            exp = expected_rows(inp)
            rec = {"n": n, "k": k, "M": M, "probe_us": probe, "lib_us": gtime(lambda: lib.call(inp)), "var": []}
            nk = -(-k // 128)
            for bm, bn, st in itertools.product(bms(M), BNS, STAGES):
                cfg = cfg_of(bm, bn, st)
                for S in SPLITS:
                    if S > nk:
                        continue
                    splitk.split_of = lambda *_a, S=S: S
                    try:
                        inp.out.fill_(float("nan"))
                        launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg)
                        ok = verify(inp.out, inp, exp)
                        if not ok.ok:
                            rec["var"].append([bm, bn, st, S, None, ok.reason[:80]])
                            continue
                        us = gtime(lambda: launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg))
                        rec["var"].append([bm, bn, st, S, us, ""])
                    except Exception as e:  # noqa: BLE001
                        rec["var"].append([bm, bn, st, S, None, f"{type(e).__name__}: {str(e)[:80]}"])
                    finally:
                        splitk.split_of = orig_split
            ok = [v for v in rec["var"] if v[4]]
            best = min(ok, key=lambda v: v[4]) if ok else None
            res.append(rec)
            bad = len(rec["var"]) - len(ok)
            print(f"{n:>5},{k:<5} M={M:<2} probe {probe:6.2f} lib {rec['lib_us']:6.2f} best {best[4] if best else 0:6.2f} "
                  f"{best[:4] if best else '-'} x{rec['lib_us'] / best[4] if best else 0:4.2f} lib, "
                  f"{best[4] / probe if best else 0:4.2f} probe; bad {bad}  ({time.time() - t0:.0f} s)", flush=True)
            Path(a.out).write_text(json.dumps(res))
    print(f"done {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
