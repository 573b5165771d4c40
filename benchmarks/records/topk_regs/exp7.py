#!/usr/bin/env python3
"""Issue 33: the resident kernel's one-block LDS path with leaner code (lean_patch.patch):
DIAG_LEAN_HIST (the load's histogram by one shared atomic a value instead of the warp-aggregated
update) and DIAG_LEAN_COLLECT (the collect as the spread rows do it: one float compare, one shared
atomic a value that goes out), against the same path as shipped and the two-pass kernel: exact on
every family, then timed (engine timer, L2 flushed, median of 40). One CSV line a run:
B,L,budget,threads,variant,ok,median_us,iqr_us,p90_us[,why]. With argv[1] = ncu: five calls of
argv[2]'s variant at (1, 8K), 48K/1024 (for Nsight Compute)."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

from harness import kernel_time  # noqa: E402
from occtune.build import rtc  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref  # noqa: E402

K = 2048
VARIANTS = {"slice": {}, "lean_hist": {"DIAG_LEAN_HIST": 1}, "lean_collect": {"DIAG_LEAN_COLLECT": 1},
            "lean_both": {"DIAG_LEAN_HIST": 1, "DIAG_LEAN_COLLECT": 1}}
CONFIGS = [(49152, 1024, 12), (49152, 512, 12)]


def defines(budget, threads, bits, extra):
    return {**tk.defines(budget, threads, bits), **extra}


def kernel(budget, threads, bits, extra):
    return rtc.compile_kernel(tk.read_source(), tk.KERNEL_NAME, defines(budget, threads, bits, extra), None,
                              dynamic_smem=budget)


if len(sys.argv) > 1 and sys.argv[1] == "ncu":
    kern = kernel(49152, 1024, 12, VARIANTS[sys.argv[2]])
    x = torch.randn(1, 8192, device="cuda")
    for _ in range(5):
        tk.topk(x, K, kernel=kern, resident=1)
    torch.cuda.synchronize()
    sys.exit(0)

jobs = [(n, d) for (b, t, bits) in CONFIGS for e in VARIANTS.values()
        for n, d in ((tk.KERNEL_NAME, defines(b, t, bits, e)), (tk.RESIDENT_KERNEL_NAME, {**defines(b, t, bits, e), "TOPK_RESIDENT": 1}))]
with ThreadPoolExecutor(16) as pool:
    list(pool.map(lambda j: rtc.compile_kernel(tk.read_source(), j[0], j[1], None, dynamic_smem=49152), jobs))
for B, L in [(1, 8192), (64, 8192), (132, 8192), (1, 4096), (3, 10001)]:
    for budget, threads, bits in CONFIGS:
        runs = [("two-pass", {}, False)] + [(v, e, 1) for v, e in VARIANTS.items()]
        for name, extra, res in runs:
            kern = kernel(budget, threads, bits, extra)
            ok, why = True, ""
            for case, s, lens in ref.adversarial_cases(B, L, K):
                out = tk.topk(torch.from_numpy(s).cuda(), K, torch.from_numpy(lens).cuda(), kernel=kern, resident=res)
                good, why = ref.check_topk(s, lens, K, out.cpu().numpy())
                if not good:
                    ok, why = False, f"{case}: {why}"
                    break
            x = torch.randn(B, L, device="cuda")
            out = torch.empty(B, K, dtype=torch.int32, device="cuda")
            med, iqr, p90 = kernel_time(lambda: tk.topk(x, K, out=out, kernel=kern, resident=res), 40)
            print(f"{B},{L},{budget},{threads},{name},{ok},{med:.2f},{iqr:.2f},{p90:.2f}" + ("" if ok else f",{why[:200]}"),
                  flush=True)
