#!/usr/bin/env python3
"""Issue 33: a run for Nsight Compute at (1, 8K), 48 KiB, 1024 threads, 12-bit: argv[1] regs or
slice (the resident kernel's one-block paths; regs needs register_path.patch applied) or two-pass
(the shipped plan for 8K rows); five calls each (ncu picks one)."""
import sys

import torch

from occtune.kernels import topk as tk
from occtune.kernels.topk import runtime

if sys.argv[1] == "slice":
    runtime.RES_REGS_VALUES = 0
res = False if sys.argv[1] == "two-pass" else 1
x = torch.randn(1, 8192, device="cuda")
for _ in range(5):
    tk.topk(x, 2048, lds_budget=49152, threads=1024, bits=12, resident=res)
torch.cuda.synchronize()
