#!/usr/bin/env python3
"""Issue 33, short rows: the resident kernel's register path (one block a row, the row in its
threads' registers) against the same kernel's LDS slice and the two-pass kernel, per config: exact
on every adversarial family first, then timed on the engine's timer (L2 flushed). One CSV line a
run: B,L,budget,threads,bits,path,ok,median_us,iqr_us,p90_us[,why]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

from harness import kernel_time  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref, runtime  # noqa: E402

K = 2048
SHAPES = [(1, 8192), (64, 8192), (1, 16384), (16, 16384), (1, 4096), (132, 8192), (3, 10001)]
CONFIGS = [(49152, 1024, 12), (49152, 512, 12), (32768, 1024, 12), (32768, 512, 12), (40960, 512, 8),
           (16384, 256, 12)]
REGS = runtime.RES_REGS_VALUES


def run(B, L, budget, threads, bits, name, res, regs):
    runtime.RES_REGS_VALUES = regs
    tk.clear_plans()
    kw = dict(lds_budget=budget, threads=threads, bits=bits, resident=res)
    ok, why = True, ""
    for case, s, lens in ref.adversarial_cases(B, L, K):
        x = torch.from_numpy(s).cuda()
        ln = torch.from_numpy(lens).cuda()
        out, diag = tk.topk(x, K, ln, return_diagnostics=True, **kw)
        good, why = ref.check_topk(s, lens, K, out.cpu().numpy())
        if not good:
            ok, why = False, f"{case}: {why}"
            break
    x = torch.randn(B, L, device="cuda")
    out = torch.empty(B, K, dtype=torch.int32, device="cuda")
    med, iqr, p90 = kernel_time(lambda: tk.topk(x, K, out=out, **kw), 40)
    path = f"{name}:r{diag['resident']}"
    print(f"{B},{L},{budget},{threads},{bits},{path},{ok},{med:.2f},{iqr:.2f},{p90:.2f}"
          + ("" if ok else f",{why[:200]}"), flush=True)


for B, L in SHAPES:
    for budget, threads, bits in CONFIGS:
        if not tk.policy.resident_reg_row(L, threads, REGS):
            continue
        run(B, L, budget, threads, bits, "regs", 1, REGS)
        if 4 * ((L + 3) & ~3) + 8 * 256 <= budget:
            run(B, L, budget, threads, bits, "slice", 1, 0)
        run(B, L, budget, threads, bits, "two-pass", False, REGS)
runtime.RES_REGS_VALUES = REGS
