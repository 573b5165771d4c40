#!/usr/bin/env python3
"""One-block top-k of short rows (issue 33): the resident kernel (one block a row, the row read
once into LDS) against the two-pass kernel, per config, exact on every adversarial family first,
then timed on the engine's timer (L2 flushed). Prints one CSV line a run:
variant,B,L,budget,threads,bits,path,ok,median_us,iqr_us,p90_us"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

from harness import kernel_time  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref  # noqa: E402

variant = sys.argv[1]
K = 2048
SHAPES = [(1, 8192), (64, 8192), (1, 16384), (16, 16384), (1, 4096)]
CONFIGS = [(49152, 1024, 12), (49152, 512, 12), (32768, 512, 12), (98304, 1024, 12), (40960, 512, 8)]
for B, L in SHAPES:
    for budget, threads, bits in CONFIGS:
        if 4 * L + 8 * 256 > budget:
            paths = [("two-pass", False)]
        else:
            paths = [("resident1", 1), ("two-pass", False)]
        for name, res in paths:
            kw = dict(lds_budget=budget, threads=threads, bits=bits, resident=res)
            ok, why = True, ""
            for case, s, lens in ref.adversarial_cases(B, L, K):
                x = torch.from_numpy(s).cuda()
                ln = torch.from_numpy(lens).cuda()
                out = tk.topk(x, K, ln, **kw)
                good, why = ref.check_topk(s, lens, K, out.cpu().numpy())
                if not good:
                    ok, why = False, f"{case}: {why}"
                    break
            x = torch.randn(B, L, device="cuda")
            out = torch.empty(B, K, dtype=torch.int32, device="cuda")
            med, iqr, p90 = kernel_time(lambda: tk.topk(x, K, out=out, **kw), 40)
            print(f"{variant},{B},{L},{budget},{threads},{bits},{name},{ok},{med:.2f},{iqr:.2f},{p90:.2f}"
                  + ("" if ok else f",{why[:200]}"), flush=True)
