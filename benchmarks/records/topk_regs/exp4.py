#!/usr/bin/env python3
"""Issue 33, short rows: is the register path's loss code fetch? The three one-block paths timed
with the L2 flushed before each call (the engine's timer, as every table) and without (code and
row warm in the L2), and back to back in a loop (GPU us a call). One CSV line a run:
B,L,budget,threads,bits,path,flushed_us,warm_us,loop_us"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

from harness import serving_loop  # noqa: E402
from occtune.engine.bench import BenchTimer  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import runtime  # noqa: E402

K = 2048
REGS = runtime.RES_REGS_VALUES
for B, L in [(1, 8192), (64, 8192), (1, 4096)]:
    for budget, threads, bits in [(49152, 1024, 12), (49152, 512, 12)]:
        for name, res, regs in [("regs", 1, REGS), ("slice", 1, 0), ("two-pass", False, REGS)]:
            runtime.RES_REGS_VALUES = regs
            tk.clear_plans()
            kw = dict(lds_budget=budget, threads=threads, bits=bits, resident=res)
            x = torch.randn(B, L, device="cuda")
            out = torch.empty(B, K, dtype=torch.int32, device="cuda")
            fn = lambda: tk.topk(x, K, out=out, **kw)  # noqa: E731
            fn()
            cold = BenchTimer(reps=40, flush_l2=True)(fn).median_us
            warm = BenchTimer(reps=40, flush_l2=False)(fn).median_us
            _, loop = serving_loop(torch, fn, 500)
            print(f"{B},{L},{budget},{threads},{bits},{name},{cold:.2f},{warm:.2f},{loop:.2f}", flush=True)
runtime.RES_REGS_VALUES = REGS
