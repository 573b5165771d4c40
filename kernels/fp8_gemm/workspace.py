"""Device scratch of the FP8 GEMM's launches: split-K partials (PIPE 8, 9), PIPE 9's tile tickets
and the global scratch of Triton's in-kernel TMA descriptors (PIPE 1-3), without an allocation
per call.

Eager calls take one buffer per (device, stream), kept across calls and grown when a call needs
more (as PyTorch keeps a cuBLAS workspace per handle and stream): work on one stream runs in
order, so consecutive calls may share it. A grown buffer's predecessor stays alive, because a
graph captured earlier may still hold its address. During CUDA graph capture a call takes a fresh
block from the graph's own memory pool instead (``torch.empty``, freed after the launch is
captured: the graph owns it), so two graphs never share scratch.

PIPE 9's tickets must be zero when a call starts; its kernel leaves them zero. Eager calls keep one
zeroed int32 buffer per (device, stream). Calls being captured use a buffer their plan zeroed when
it was made (so a graph needs no memset node): graphs of one plan replayed at the same time on two
streams would share it, as graphs share PyTorch's cuBLAS workspace. A plan made during a capture
has none; its captured calls take fresh zeros from the graph's pool (``torch.zeros``: a memset
node in the graph), never a buffer that a graph which has not yet replayed was meant to zero.
"""

from __future__ import annotations

_BUFFERS: dict = {}          # (device index, raw stream) -> [int8 tensors], the last one the largest
_TICKETS: dict = {}          # (device index, raw stream) -> [zeroed int32 tensors], the last one the largest


def capturing(device) -> bool:
    """Whether the current stream of a CUDA ``device`` is being captured into a graph."""
    import torch

    return device.type == "cuda" and torch._C._cuda_isCurrentStreamCapturing()


def scratch(device, stream: int, nbytes: int):
    """(address, owner) of ``nbytes`` of scratch on ``device`` for work on ``stream``; keep
    ``owner`` (a tensor or None) alive until the launch that uses the address is enqueued."""
    import torch

    if capturing(device):
        t = torch.empty(nbytes, dtype=torch.int8, device=device)
        return t.data_ptr(), t
    key = (device.index, stream)
    held = _BUFFERS.get(key)
    if held is None or held[-1].numel() < nbytes:
        size = max(nbytes, 2 * held[-1].numel()) if held else nbytes
        held = _BUFFERS.setdefault(key, [])
        held.append(torch.empty(size, dtype=torch.int8, device=device))
    return held[-1].data_ptr(), None


def counters(device, stream: int, n: int, for_graphs=None, keep=None):
    """(address, owners) of ``n`` zeroed int32 tickets on ``device`` for work on ``stream``: the
    stream's own buffer for an eager call; for a call being captured, ``for_graphs`` (a zeroed
    buffer of the plan's, made outside any capture: the graphs' replays leave it zeroed), or fresh
    zeros from the graph's pool where there is none. ``owners`` holds ``keep`` too (keep both
    alive until the launch is enqueued)."""
    import torch

    if capturing(device):
        if for_graphs is not None:
            return for_graphs.data_ptr(), keep
        t = torch.zeros(n, dtype=torch.int32, device=device)
        return t.data_ptr(), (keep, t)
    key = (device.index, stream)
    held = _TICKETS.get(key)
    if held is None or held[-1].numel() < n:
        size = max(n, 2 * held[-1].numel()) if held else n
        held = _TICKETS.setdefault(key, [])
        held.append(torch.zeros(size, dtype=torch.int32, device=device))
    return held[-1].data_ptr(), keep


def clear() -> None:
    """Drop the kept buffers (only safe when no captured graph still uses them)."""
    _BUFFERS.clear()
    _TICKETS.clear()
