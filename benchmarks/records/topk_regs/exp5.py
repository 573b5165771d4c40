#!/usr/bin/env python3
"""Issue 33: raw phase stamps (cycles since stamp 0) of the resident kernel's one-block paths, profile
builds: the register path with the collect's inner stamps (-DTOPK_PROF_FINE: 1 load+histogram,
3 threshold, 5 flags, 6 reserve, 4 writes, 7 list finish, 9 end) and the LDS slice path (1 load,
3 threshold, 4 collect, 9 end); diagnostic builds: DIAG_TWICE (the row done twice in one launch,
the second time's stamps: code and row warm on that SM), DIAG_NOSTORE (no output or candidate
stores), DIAG_TOPBITS (the bin from the bits' top bits: no fp16 conversion; wrong output). The
first call (code cold) and three more."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

from occtune.build import rtc  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import runtime  # noqa: E402

K = 2048
REGS = runtime.RES_REGS_VALUES
VARIANTS = [("regs", REGS, {}), ("regs", REGS, {"DIAG_TWICE": 1}), ("regs", REGS, {"DIAG_NOSTORE": 1}),
            ("regs", REGS, {"DIAG_TOPBITS": 1}), ("slice", 0, {}), ("slice", 0, {"DIAG_TWICE": 1})]
def builds():
    for name, regs, extra in VARIANTS:
        d = {**tk.defines(49152, 1024, 12), "TOPK_PROF": 1, "TOPK_PROF_FINE": 1, **extra}
        yield tk.KERNEL_NAME, d
        r = tk.policy.resident_regs(1024, regs)
        yield tk.RESIDENT_KERNEL_NAME, {**d, "TOPK_RESIDENT": 1, **({"TOPK_RES_REGS": r} if r else {})}


from concurrent.futures import ThreadPoolExecutor  # noqa: E402

with ThreadPoolExecutor(16) as pool:   # side by side into the binary cache (NVRTC releases the GIL)
    list(pool.map(lambda j: rtc.compile_kernel(tk.read_source(), j[0], j[1], None, dynamic_smem=49152), builds()))
for B, L in [(1, 8192), (64, 8192)]:
    for threads in (1024,):
        for name, regs, extra in VARIANTS:
            runtime.RES_REGS_VALUES = regs
            tk.clear_plans()
            d = {**tk.defines(49152, threads, 12), "TOPK_PROF": 1, "TOPK_PROF_FINE": 1, **extra}
            kp = rtc.compile_kernel(tk.read_source(), tk.KERNEL_NAME, d, None, dynamic_smem=49152)
            x = torch.randn(B, L, device="cuda")
            for rep in range(4):
                st = tk.topk(x, K, kernel=kp, resident=1)[0, :10].cpu().tolist()
                print(f"{B},{L},{threads},{name},{extra},{rep}: " + " ".join(f"s{i}={v}" for i, v in enumerate(st)),
                      flush=True)
runtime.RES_REGS_VALUES = REGS
