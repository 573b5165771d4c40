#!/usr/bin/env python3
"""Device call 11 of issue 32 (H200; a wheel with split_tokens.patch applied, which allows the new
configs): PIPE 10 with its two warp groups splitting the token tile (BLOCK_N 64 on 8 warps,
BLOCK_M 32 or 64: both multiply the one weight tile in shared memory) against the profile's PIPE 10
configs (one warp group per 64 weight rows), on the 14 seed shapes at M in {32, 64}. Every variant with the split of splitk.split_of's rule and with splits 1-8;
odd shapes checked first; every variant verified against the float64 reference before it is
timed (one call captured in a CUDA graph, engine timer, L2 flushed; each timed twice in
alternation, the best kept).

    python3 benchmarks/records/fp8_decode/explore_split_tokens.py --out $OUT/split_tokens.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from explore_wgmma import SHAPES, cfg_of, run  # noqa: E402

NEW = [(bm, 64, 8, st) for bm in (32, 64) for st in (3, 4, 6)]        # (BLOCK_M, BLOCK_N, warps, stages)
SPLITS = (0, 1, 2, 3, 4, 6, 8)                                       # 0: splitk.split_of's rule


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    from harness import graph_of
    from occtune.engine.bench import BenchTimer
    from occtune.kernels.fp8_gemm.config import load_profile
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, make_gemm_inputs, verify
    from occtune.kernels.fp8_gemm.kernel import split_of

    t0 = time.time()
    ws = torch.empty(16 * 64 * 32768, dtype=torch.float32, device="cuda")
    cnt = torch.zeros(1 << 14, dtype=torch.int32, device="cuda")
    bad = []
    for (M, N, K), (bm, bn, w, st), S in itertools.product(((33, 200, 400), (64, 2112, 1936), (37, 7168, 272)),
                                                           ((32, 64, 8, 3), (64, 64, 8, 4)), (1, 2, 3)):
        inp = make_gemm_inputs(M, N, K, 7, "cuda")
        inp.out.fill_(float("nan"))
        run(inp, cfg_of(bm, bn, w, st), S, ws, cnt)
        ok = verify(inp.out, inp)
        if not ok.ok:
            bad.append(f"M={M} N={N} K={K} {bm}x{bn} w{w} s{st} S={S}: {ok.reason[:80]}")
    print(f"odd shapes: {len(bad)} bad ({time.time() - t0:.0f} s)", *bad[:8], sep="\n  ", flush=True)
    if bad:
        raise SystemExit(1)

    prof = load_profile()
    timer = BenchTimer(warmup_ms=1.0, rep_ms=4.0)
    fam = Fp8GemmFamily([{"M": 1, "N": 512, "K": 7168}], target="sm_90", backends=["triton"])

    def gtime(fn):
        g = graph_of(torch, fn)
        t = timer(g.replay, context={"device": "cuda"}).median_us
        del g
        return t

    res, ratios, rule_ratios = [], [], []
    for (n, k), M in itertools.product(SHAPES, (32, 64)):
        inp = fam.make_inputs({"M": M, "N": n, "K": k}, 1, "cuda")
        exp = expected_rows(inp)
        old = [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"])
               for c in prof.triton_configs("sm_90", prof.bucket_of(M)) if c["PIPE"] == 10]
        variants = [(v, S) for v in old + [x for x in NEW if x[0] <= max(32, M)] for S in SPLITS]
        times = {}
        for v, S in variants:
            cfg = cfg_of(*v)
            split = S or split_of(M, n, k, cfg, inp.a.device)
            inp.out.fill_(float("nan"))
            run(inp, cfg, split, ws, cnt)
            if not verify(inp.out, inp, exp).ok:
                raise SystemExit(f"wrong: {n},{k} M={M} {v} split {split}")
            times[(v, S)] = []
        for _ in range(2):
            for v, S in variants:
                cfg = cfg_of(*v)
                split = S or split_of(M, n, k, cfg, inp.a.device)
                times[(v, S)].append(gtime(lambda: run(inp, cfg, split, ws, cnt)))
        best = {key: min(t) for key, t in times.items()}
        b_old = min(t for (v, S), t in best.items() if v in old)
        b_new = min(t for (v, S), t in best.items() if v not in old)
        r_old = min(t for (v, S), t in best.items() if v in old and S == 0)
        r_new = min(t for (v, S), t in best.items() if v not in old and S == 0)
        ratios.append(b_old / b_new)
        rule_ratios.append(r_old / r_new)
        win = min(best, key=best.get)
        res.append({"n": n, "k": k, "M": M, "us": {f"{v}|{S}": t for (v, S), t in best.items()}})
        print(f"{n:>5},{k:<5} M={M:<2} best old {b_old:6.2f} new {b_new:6.2f} x{b_old / b_new:5.3f}  "
              f"rule split: old {r_old:6.2f} new {r_new:6.2f} x{r_old / r_new:5.3f}  best {win}  "
              f"({time.time() - t0:.0f} s)", flush=True)
        Path(a.out).write_text(json.dumps(res))
    for name, rs in (("best of each", ratios), ("with the rule's split", rule_ratios)):
        g = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"token split over one warp group per 64 rows ({name}): geometric mean x{g:.3f}, "
              f"range {min(rs):.3f}-{max(rs):.3f}, faster at {sum(r > 1 for r in rs)} of {len(rs)}")


if __name__ == "__main__":
    main()
