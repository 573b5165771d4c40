#!/usr/bin/env python3
"""The read-once probe: the fastest measured kernel that only reads an input once, on the engine's
timer (L2 flushed, as the top-k benchmark times its calls).

What it costs here to read an input once: the launch as the timer sees it, plus streaming the
bytes from device memory. The copy-bandwidth floor (bytes / bandwidth) leaves the launch out; this
probe does not. It is the best of the kernels measured, not a proven floor (a kernel may read
faster than these), but a target close to it leaves little for the work beyond the read.

The probe is the best of a few streaming max-reductions of the flat input (a Triton chunked max
at several chunk sizes, and torch.amax per row); each is checked against torch before it counts.

    python3 benchmarks/read_probe.py --shapes 64x131072,256x131072,256x1048576
"""

from __future__ import annotations

import argparse
import sys

from harness import gpu_missing, kernel_time, parse_shapes, refuse

# (values per program, values per program step, warps) of the Triton probe: 16 to 64 values per
# thread in flight, 4K to 32K values per program
CONFIGS = ((4096, 4096, 8), (8192, 8192, 8), (16384, 16384, 8), (16384, 8192, 4), (32768, 8192, 8))


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def chunk_max(x_ptr, out_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        start = pid.to(tl.int64) * CHUNK
        end = tl.minimum(start + CHUNK, n)          # this program's chunk only
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
        for off in range(0, CHUNK, BLOCK):
            idx = start + off + tl.arange(0, BLOCK)
            acc = tl.maximum(acc, tl.load(x_ptr + idx, mask=idx < end, other=float("-inf")))
        tl.store(out_ptr + pid, tl.max(acc, 0))

    return chunk_max


_KERNEL = []


def chunk_max(x, chunk: int, block: int = 4096, warps: int = 8):
    """The max of every ``chunk`` consecutive values of the flat, contiguous float32 ``x`` (the
    last chunk may be short): one Triton program per chunk, each reading its values once,
    ``block`` at a time."""
    import torch
    import triton

    if not _KERNEL:
        _KERNEL.append(_kernel())
    n = x.numel()
    out = torch.empty(triton.cdiv(n, chunk), dtype=torch.float32, device=x.device)
    _KERNEL[0][(out.numel(),)](x, out, n, CHUNK=chunk, BLOCK=min(block, chunk), num_warps=warps)
    return out


def probes(x):
    """(name, call, check) of each read-once kernel over ``x`` (B, L); ``check()`` is True when
    the call's result matches another computation of it (torch's amax over the padded chunks for
    the Triton probes, numpy's row max for torch's)."""
    import torch

    flat = x.reshape(-1)
    out = []
    for cfg in CONFIGS:
        def check(cfg=cfg):
            pad = (-flat.numel()) % cfg[0]
            want = torch.nn.functional.pad(flat, (0, pad), value=float("-inf")).view(-1, cfg[0]).amax(1)
            return bool(torch.equal(chunk_max(flat, *cfg), want))
        out.append(("triton chunk max %d/%d/%dw" % cfg, lambda cfg=cfg: chunk_max(flat, *cfg), check))

    def rows_max():             # numpy on the host: not the kernel being checked
        return torch.from_numpy(x.cpu().numpy().max(axis=-1))
    out.append(("torch.amax(dim=-1)", lambda: x.amax(dim=-1),
                lambda: bool(torch.equal(x.amax(dim=-1).cpu(), rows_max()))))
    return out


def probe_times(x, reps: int = 25) -> list:
    """[(us, name)] of every probe: its median on the engine's timer (L2 flushed), each checked
    first."""
    out = []
    for name, call, check in probes(x):
        if not check():
            raise RuntimeError(f"read probe {name!r} gave a wrong result; not timed")
        out.append((kernel_time(call, reps)[0], name))
    return out


def read_once_us(x, reps: int = 25):
    """(us, name): the fastest probe."""
    return min(probe_times(x, reps))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="read-once probe on the engine's timer")
    ap.add_argument("--shapes", default="64x131072,256x131072,256x1048576,8x131072")
    ap.add_argument("--reps", type=int, default=25)
    a = ap.parse_args(argv)
    from occtune.errors import UserError

    try:
        shapes = parse_shapes(a.shapes)
    except UserError as e:
        return refuse(e)
    import torch

    if gpu_missing(torch):
        return 2
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}: read-once probe, engine timer "
          f"(L2 flushed), median of {a.reps}")
    for B, L in shapes:
        x = torch.randn(B, L, device="cuda")
        times = probe_times(x, a.reps)
        us, name = min(times)
        print(f"({B}, {L}): {us:7.2f} us  {B * L * 4 / us / 1e3:7.1f} GB/s  ({name}); all: "
              + ", ".join(f"{t:.2f}" for t, _ in times), flush=True)
        del x
    return 0


if __name__ == "__main__":
    sys.exit(main())
