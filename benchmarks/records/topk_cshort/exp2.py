#!/usr/bin/env python3
"""Issue 33, after exp1: where the cluster kernel's register path beats the shipped default on
rows that are not long (B x L over S blocks of T threads; exp1's checks and timer, 8 KiB budget),
and what the L2 flush costs each kernel at (1, 8K): the default, the register path (8 x 256) and
the read-once probe's Triton kernel, timed with and without the flush (median of 40). One CSV
line a run, as exp1's; the flush lines: flush,<kernel>,<flushed us>,<warm us>."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import exp1  # noqa: E402
import torch  # noqa: E402

from occtune.engine.bench import BenchTimer  # noqa: E402

SHAPES = {(1, 4096): [(4, 256), (8, 128)],
          (2, 8192): [(8, 256), (4, 256)], (4, 8192): [(8, 256), (4, 256)],
          (8, 8192): [(8, 256), (4, 256)], (16, 8192): [(8, 256), (4, 256), (2, 512)],
          (4, 16384): [(16, 256), (8, 256)], (16, 16384): [(8, 256), (4, 512)],
          (1, 32768): [(16, 256), (16, 512), (8, 512)], (4, 32768): [(16, 256), (8, 512)],
          (1, 65536): [(16, 512), (16, 1024), (8, 1024)], (2, 65536): [(16, 512), (16, 1024)],
          (1, 8192): [(8, 256)]}


def flush_compare():
    import triton
    import triton.language as tl

    @triton.jit
    def chunk_max(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=float("-inf"))
        tl.store(y_ptr + pid, tl.max(v, 0))

    x = torch.randn(1, 8192, device=exp1.DEV)
    out = torch.empty(1, exp1.K, dtype=torch.int32, device=exp1.DEV)
    y = torch.empty(2, device=exp1.DEV)
    h = exp1.handle(8, 256, 8192, 1)
    bins = torch.zeros(1, 2, dtype=torch.int32, device=exp1.DEV)
    calls = {"default": lambda: exp1.tk.topk(x, exp1.K, out=out),
             "cluster8x256": exp1.runner(h, 8, 256, x, out, bins, None),
             "read_probe": lambda: chunk_max[(2,)](x, y, 8192, BLOCK=4096, num_warps=8)}
    for name, fn in calls.items():
        fn()
        f = BenchTimer(reps=40, flush_l2=True)(fn).median_us
        w = BenchTimer(reps=40, flush_l2=False)(fn).median_us
        print(f"flush,{name},{f:.2f},{w:.2f}", flush=True)


if __name__ == "__main__":
    flush_compare()
    exp1.main(SHAPES, [8192])
