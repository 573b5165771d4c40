"""PIPE 10 with one constexpr switch at two values, on the 14 seed shapes at M in {1, 8, 32, 64}
(H200): each of the profile's PIPE 10 configs of the point's bucket, the split by
splitk.split_of, verified first (and, where ``same_bits``, the two values' outputs compared bit
for bit), then timed twice in alternation (one call captured in a CUDA graph, engine timer, L2
flushed); the best of the two runs per value is kept. Shared by explore_ahead.py (call7) and
explore_own.py (call9)."""
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


def run(inp, cfg, switch: str, value, ws, cnt):
    from occtune.kernels.fp8_gemm import splitk, splitk_wgmma
    from occtune.kernels.fp8_gemm.kernel import split_of

    split = split_of(inp.a.shape[0], inp.b.shape[0], inp.a.shape[1], cfg, inp.a.device)
    fn, grid, args, kw = splitk_wgmma.launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg, split,
                                             ws if split > 1 else None, cnt if split > 1 else None,
                                             splitk.steps_of(inp.a.shape[1], cfg, split))
    fn[grid](*args, **{**kw, switch: value})


def main(switch: str, values: tuple, same_bits: bool, default_out: str):
    """Time ``switch`` at ``values`` (old, new); prints per point and the new value's speed-up."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=default_out)
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

    old, new = values
    res, ratios = [], []
    for (n, k) in SHAPES:
        for M in MS:
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 1, "cuda")
            exp = expected_rows(inp)
            cfgs = [c for c in prof.triton_configs("sm_90", prof.bucket_of(M)) if c["PIPE"] == 10]
            best = {v: math.inf for v in values}
            for c in cfgs:
                cfg = {key: v for key, v in c.items() if key != "backend"}
                outs = []
                for v in values:
                    inp.out.fill_(float("nan"))
                    run(inp, cfg, switch, v, ws, cnt)
                    if not verify(inp.out, inp, exp).ok:
                        raise SystemExit(f"wrong: {n},{k} M={M} {cfg} {switch}={v}")
                    outs.append(inp.out.clone())
                if same_bits and not torch.equal(outs[0], outs[1]):
                    raise SystemExit(f"{switch}={old} and {new} differ: {n},{k} M={M} {cfg}")
                t = {v: [] for v in values}
                for _ in range(2):
                    for v in values:
                        t[v].append(gtime(lambda: run(inp, cfg, switch, v, ws, cnt)))
                for v in values:
                    best[v] = min(best[v], min(t[v]))
                res.append({"n": n, "k": k, "M": M, "cfg": cfg, "us": {str(int(h)): min(x) for h, x in t.items()}})
            ratios.append(best[old] / best[new])
            print(f"{n:>5},{k:<5} M={M:<2} best {switch}={int(old)} {best[old]:6.2f} {switch}={int(new)} "
                  f"{best[new]:6.2f} x{best[old] / best[new]:5.3f}  ({time.time() - t0:.0f} s)", flush=True)
            Path(a.out).write_text(json.dumps(res))
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"{switch}={int(new)} over {switch}={int(old)} (best config per point): geometric mean x{g:.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}, faster at {sum(r > 1 for r in ratios)} of {len(ratios)}")
