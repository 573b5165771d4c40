#!/usr/bin/env python3
"""Host-side cost of one top-k call (GPU machine): wall time per call and a cProfile of 200 calls."""
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main():
    import torch

    from occtune.kernels import topk as tk

    kern = tk.build(32768, 512, 12)
    for B, L in ((1, 8192), (256, 131072)):
        x = torch.randn(B, L, device="cuda")
        for _ in range(5):
            tk.topk(x, 2048, kernel=kern)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            tk.topk(x, 2048, kernel=kern)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(f"B={B} L={L}: host {1e6 * (t1 - t0) / 200:.1f} us per call (200 calls, no sync)")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            tk.topk(x, 2048, kernel=kern)
        pr.disable()
        torch.cuda.synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)


main()
