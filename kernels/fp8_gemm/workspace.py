"""Device scratch of the FP8 GEMM's launches: split-K partials (PIPE 8) and the global scratch of
Triton's in-kernel TMA descriptors (PIPE 1-3), without an allocation per call.

Eager calls take one buffer per (device, stream), kept across calls and grown when a call needs
more (as PyTorch keeps a cuBLAS workspace per handle and stream): work on one stream runs in
order, so consecutive calls may share it. A grown buffer's predecessor stays alive, because a
graph captured earlier may still hold its address. During CUDA graph capture a call takes a fresh
block from the graph's own memory pool instead (``torch.empty``, freed after the launch is
captured: the graph owns it), so two graphs never share scratch.
"""

from __future__ import annotations

_BUFFERS: dict = {}          # (device index, raw stream) -> [int8 tensors], the last one the largest


def scratch(device, stream: int, nbytes: int):
    """(address, owner) of ``nbytes`` of scratch on ``device`` for work on ``stream``; keep
    ``owner`` (a tensor or None) alive until the launch that uses the address is enqueued."""
    import torch

    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        t = torch.empty(nbytes, dtype=torch.int8, device=device)
        return t.data_ptr(), t
    key = (device.index, stream)
    held = _BUFFERS.get(key)
    if held is None or held[-1].numel() < nbytes:
        size = max(nbytes, 2 * held[-1].numel()) if held else nbytes
        held = _BUFFERS.setdefault(key, [])
        held.append(torch.empty(size, dtype=torch.int8, device=device))
    return held[-1].data_ptr(), None


def clear() -> None:
    """Drop the kept buffers (only safe when no captured graph still uses them)."""
    _BUFFERS.clear()
