#!/usr/bin/env python3
"""Time the split main-pass kernel alone and the transform kernel alone (GPU diagnostic).

    python3 benchmarks/split_probe.py --shape 64x131072 --define TOPK_SAMPLE_RUN=1
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="64x131072")
    ap.add_argument("--split", type=int, default=4)
    ap.add_argument("--define", action="append", default=[])
    a = ap.parse_args(argv)
    import torch

    from bench_topk import make_flush, time_fn
    from occtune.kernels import topk as tk
    from occtune.build import rtc

    B, L = (int(v) for v in a.shape.split("x"))
    extra = dict(kv.split("=", 1) for kv in a.define)
    d = {**tk.defines(32768, 512, 12), **extra}
    kern = rtc.compile_kernel(tk.read_source(), tk.KERNEL_NAME, d, None, dynamic_smem=32768)
    skern = rtc.compile_kernel(tk.read_source(), tk.SPLIT_KERNEL_NAME, d, None)
    x = torch.randn(B, L, device="cuda")
    prefix, scap = tk.long_row_plan(L, 2048)
    scratch = torch.empty(B * 2 * scap, dtype=torch.int32, device="cuda")
    rec = tk.split_record_ints(d["TOPK_COARSE_BITS"])
    kept = torch.zeros(B * rec, dtype=torch.int32, device="cuda")
    dummy = torch.empty(1, dtype=torch.int32, device="cuda")
    out = torch.empty(B, 2048, dtype=torch.int32, device="cuda")
    bc = torch.empty(B, 2, dtype=torch.int32, device="cuda")   # per row: count(t), flags
    flush = make_flush(torch)

    def split_only():
        kept.zero_()
        rtc.launch(skern, (B * a.split,), (512,), [x, x.stride(0), L, dummy, 0, dummy, 0, 2048,
                                                  scratch, scap, prefix, kept, a.split])

    def transform_only():
        rtc.launch(kern, (B,), (512,), [x, x.stride(0), L, dummy, 0, dummy, 0, 2048, out, 0, dummy, 0,
                                        0, bc, scratch, scap, prefix, kept, 1])

    split_only()
    torch.cuda.synchronize()
    print(f"{extra} B={B} L={L} S={a.split}: kept per row min {int(kept[::rec].min())} max {int(kept[::rec].max())}")
    for name, fn in (("zero+split", split_only), ("transform(presplit)", transform_only),
                     ("full call", lambda: tk.topk(x, 2048, kernel=kern, split=a.split, split_kernel=skern))):
        med, iqr = time_fn(torch, fn, flush, 20)
        print(f"  {name:20s} {med:8.1f} us (iqr {iqr:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
