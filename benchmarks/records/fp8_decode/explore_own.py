#!/usr/bin/env python3
"""Device call 9 of issue 32 (H200): PIPE 10's split epilogue with the tile's last program adding
its own partial from registers (OWN=1) against re-reading it from the workspace (OWN=0, as
d87ec5b), on a wheel with ``own.patch`` applied (it adds the OWN switch): the 14 seed shapes at M
in {1, 8, 32, 64}, each of the profile's PIPE 10 configs of the point's bucket, the split by
splitk.split_of, verified first (both variants the same bits), then timed twice in alternation
(one call captured in a CUDA graph, engine timer, L2 flushed); the best of the two runs per
variant is kept.

    python3 benchmarks/records/fp8_decode/explore_own.py --out $OUT/own.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from explore_wgmma import MS, SHAPES  # noqa: E402


def run(inp, cfg, own, ws, cnt):
    from occtune.kernels.fp8_gemm import splitk, splitk_wgmma
    from occtune.kernels.fp8_gemm.kernel import split_of

    split = split_of(inp.a.shape[0], inp.b.shape[0], inp.a.shape[1], cfg, inp.a.device)
    fn, grid, args, kw = splitk_wgmma.launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg, split,
                                             ws if split > 1 else None, cnt if split > 1 else None,
                                             splitk.steps_of(inp.a.shape[1], cfg, split))
    fn[grid](*args, **{**kw, "OWN": bool(own)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    from harness import graph_of
    from occtune.engine.bench import BenchTimer
    from occtune.kernels.fp8_gemm.config import load_profile
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, verify

    t0 = time.time()
    prof = load_profile()
    timer = BenchTimer(warmup_ms=1.0, rep_ms=4.0)
    fam = Fp8GemmFamily([{"M": 1, "N": 512, "K": 7168}], target="sm_90", backends=["triton"])
    ws = torch.empty(16 * 64 * 32768, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(1 << 14, dtype=torch.int32, device="cuda")

    def gtime(fn):
        g = graph_of(torch, fn)
        t = timer(g.replay, context={"device": "cuda"}).median_us
        del g
        return t

    res, ratios = [], []
    for (n, k) in SHAPES:
        for M in MS:
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 1, "cuda")
            exp = expected_rows(inp)
            cfgs = [c for c in prof.triton_configs("sm_90", prof.bucket_of(M)) if c["PIPE"] == 10]
            best = {0: math.inf, 1: math.inf}
            for c in cfgs:
                cfg = {key: v for key, v in c.items() if key != "backend"}
                outs = []
                for own in (0, 1):
                    inp.out.fill_(float("nan"))
                    run(inp, cfg, own, ws, cnt)
                    if not verify(inp.out, inp, exp).ok:
                        raise SystemExit(f"wrong: {n},{k} M={M} {cfg} OWN={own}")
                    outs.append(inp.out.clone())
                if not torch.equal(outs[0], outs[1]):
                    raise SystemExit(f"OWN=0 and OWN=1 differ: {n},{k} M={M} {cfg}")
                t = {0: [], 1: []}
                for _ in range(2):
                    for own in (0, 1):
                        t[own].append(gtime(lambda: run(inp, cfg, own, ws, cnt)))
                for own in (0, 1):
                    best[own] = min(best[own], min(t[own]))
                res.append({"n": n, "k": k, "M": M, "cfg": cfg, "us": {str(h): min(v) for h, v in t.items()}})
            ratios.append(best[0] / best[1])
            print(f"{n:>5},{k:<5} M={M:<2} best OWN=0 {best[0]:6.2f} OWN=1 {best[1]:6.2f} "
                  f"x{best[0] / best[1]:5.3f}  ({time.time() - t0:.0f} s)", flush=True)
            Path(a.out).write_text(json.dumps(res))
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"OWN=1 over OWN=0 (best config per point): geometric mean x{g:.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}, faster at {sum(r > 1 for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    main()
