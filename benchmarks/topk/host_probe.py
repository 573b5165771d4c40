#!/usr/bin/env python3
"""Host cost of one top-k call (GPU machine): microseconds of host time per call, measured as the
wall time of N back-to-back calls without synchronisation (issue 17), for ours (the launcher's
serving path; also into the caller's own output buffer, out=), ours through torch's launcher
(the fallback), the op (torch.ops.occtune.topk, with and without lengths; its kernel C++ or
Python, as printed), a CUDA graph replay of one call, and
torch.topk; plus the pieces of our call (one bare driver launch of the packed arguments, one
output allocation).

    python3 benchmarks/topk/host_probe.py                      # (1, 8K) and (64, 8K), 1000 calls
    python3 benchmarks/topk/host_probe.py --shapes 1x8192,8x131072,1x1048576 --profile

``host us/call`` is the host time; ``loop us/call`` the GPU time of the whole loop per call
(harness.serving_loop, bench_topk.py's serving loop: the larger of host and GPU time per call,
L2 warm).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py, read_probe.py
from harness import gpu_missing, graph_of, parse_shapes, refuse, serving_loop  # noqa: E402


def probe_shape(torch, tk, kern, B, L, k, n, config):
    from occtune.build import rtc
    from occtune.kernels.topk import op      # registers torch.ops.occtune.topk

    x = torch.randn(B, L, device="cuda")
    slow = dataclasses.replace(kern, launcher="torch", fn=None)      # torch's launcher, same kernel
    plan = tk.plan_for(x, k, kernel=kern)
    tk.topk(x, k, kernel=kern)
    h, grid, block, smem, pack = plan.launches[-1]
    stream = torch._C._cuda_getCurrentRawStream(x.device.index)
    i32 = {"dtype": torch.int32, "device": "cuda"}
    tensors = (x, plan.dummy, plan.dummy, torch.empty((B, k), **i32), plan.dummy, plan.sink,
               torch.empty(max(1, plan.scratch_numel), **i32), torch.zeros(max(1, plan.ws_numel), **i32))
    pack = rtc.ArgPack(pack.template)            # its own copy, bound to tensors that stay alive
    pack.bind(tuple(t.data_ptr() for t in tensors))
    g = graph_of(torch, lambda: tk.topk(x, k, kernel=kern))
    lengths = torch.full((B,), L, dtype=torch.int32, device="cuda")
    own = torch.empty((B, k), **i32)
    rows = [("ours", lambda: tk.topk(x, k, kernel=kern)),
            ("ours, out= (own buffer)", lambda: tk.topk(x, k, kernel=kern, out=own)),
            ("ours, torch launcher", lambda: tk.topk(x, k, kernel=slow)),
            ("torch.ops.occtune.topk", lambda: torch.ops.occtune.topk(x, k, **config)),
            ("torch.ops.occtune.topk lengths", lambda: torch.ops.occtune.topk(x, k, lengths, **config)),
            ("ours, CUDA graph replay", g.replay),
            ("  one driver launch", lambda: rtc.launch_packed(h, grid, block, smem, pack, stream, tensors)),
            ("  one output allocation", lambda: torch.empty((B, k), dtype=torch.int32, device="cuda")),
            ("torch.topk", lambda: torch.topk(x, k, dim=-1, sorted=False))]
    print(f"\nB={B} L={L} k={k}: launcher {kern.launcher}, {len(plan.launches)} launch(es), "
          f"split {plan.nsplit}, cluster {plan.ncluster}, resident {plan.nresident}; {n} calls, no sync")
    why = op.native_error()
    print(f"  the op's kernel: {'C++ (op_native.cpp)' if why is None else f'Python ({why})'}")
    print(f"  {'':28s} {'host us/call':>13s} {'loop us/call':>13s}")
    for name, fn in rows:
        host, loop = serving_loop(torch, fn, n)
        print(f"  {name:28s} {host:13.1f} {loop:13.1f}", flush=True)
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="host cost per top-k call")
    ap.add_argument("--shapes", default="1x8192,64x8192")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--budget", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=512)
    ap.add_argument("--bits", type=int, default=12)
    ap.add_argument("--profile", action="store_true", help="also a cProfile of 200 calls per shape")
    a = ap.parse_args(argv)
    from occtune.errors import UserError

    try:
        shapes = parse_shapes(a.shapes)
    except UserError as e:
        return refuse(e)
    import torch

    from occtune.kernels import topk as tk

    if gpu_missing(torch):
        return 2
    kern = tk.build(a.budget, a.threads, a.bits)
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}; config {a.budget // 1024}K, "
          f"{a.threads} threads, {a.bits}-bit; launcher {kern.launcher}")
    for B, L in shapes:
        x = probe_shape(torch, tk, kern, B, L, a.k, a.calls,
                        {"lds_budget": a.budget, "threads": a.threads, "bits": a.bits})
        if a.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(200):
                tk.topk(x, a.k, kernel=kern)
            pr.disable()
            torch.cuda.synchronize()
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
