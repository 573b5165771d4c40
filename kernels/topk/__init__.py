"""Radix top-k with transform ("topk_transform"), our own CUDA/HIP single-source kernel.

``topk(scores, k, lengths, row_starts, budget=..., ...)`` -> int32 ``[B, k]`` row indices of the
k largest scores per row (unsorted; -1 padding where a row is shorter than k), optionally mapped
through a page table or ragged offsets. See ``topk.cuh`` for the algorithm and the NaN policy.
"""

from __future__ import annotations

from pathlib import Path

from tuner.errors import UserError

SOURCE_PATH = Path(__file__).with_name("topk.cuh")
KERNEL_NAME = "topk_transform_kernel"
DEFAULT_BUDGET = 128 * 1024          # the untuned default of the original kernel
MAX_K = 2048
# Long rows: prefix length that bounds the threshold bin, and the per-row scratch list length.
PREFIX_MIN_ROW = 131072               # rows at least this long use the prefix-bound single pass


def read_source() -> str:
    return SOURCE_PATH.read_text(encoding="utf-8")


def capacity(budget: int) -> int:
    """Candidate-list entries of a dynamic shared-memory budget (8 bytes per entry)."""
    return int(budget) // 8


def defines(budget: int, threads: int = 512, bits: int = 8) -> dict:
    """The compile-time macros of one config (validated)."""
    if bits not in (8, 12):
        raise UserError(f"coarse key width must be 8 or 12 bits, got {bits}")
    if threads % 64 or not 64 <= threads <= 1024:
        raise UserError(f"threads must be a multiple of 64 between 64 and 1024, got {threads}")
    if budget < 64 or budget % 8:
        raise UserError(f"LDS budget must be a multiple of 8 bytes and at least 64, got {budget}")
    return {"SGL_TOPK_DYNAMIC_SMEM_BYTES": int(budget), "TOPK_THREADS": int(threads),
            "TOPK_COARSE_BITS": int(bits)}


def long_row_plan(L: int, k: int, prefix_min_row: int = PREFIX_MIN_ROW) -> tuple[int, int]:
    """(prefix_len, scratch_cap) for rows of ``L`` columns; (0, 0) disables the single pass.

    The prefix (L/16, at least 16k) bounds the threshold bin from below: only elements at or
    above that bound are counted and copied to the scratch list, roughly k/prefix of the row plus
    one coarse bin. L/8 entries (at least 16k) leave headroom on random rows; an overflow falls
    back to re-reading the row, exactly.
    """
    if L < prefix_min_row or L < 16 * k:
        return 0, 0
    prefix = max(16 * k, L // 16)
    if 2 * prefix >= L:
        prefix = max(k, (L - 1) // 2)
    return prefix, max(16 * k, L // 8)


def build(budget: int = DEFAULT_BUDGET, threads: int = 512, bits: int = 8, device=None):
    from tuner import rtc

    return rtc.compile_kernel(read_source(), KERNEL_NAME, defines(budget, threads, bits), device,
                              dynamic_smem=int(budget))


def _check_args(scores, k, lengths, row_starts):
    import torch

    if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.dtype != torch.float32:
        raise UserError("scores must be a float32 tensor of shape [B, L]")
    if not scores.is_cuda:
        raise UserError("scores must be on a CUDA/ROCm device (the reference runs on the CPU)")
    if scores.stride(1) != 1:
        raise UserError("scores rows must be contiguous (stride 1 along L)")
    if not 1 <= int(k) <= MAX_K:
        raise UserError(f"k must be between 1 and {MAX_K}, got {k}")
    B = scores.shape[0]
    for name, t in (("lengths", lengths), ("row_starts", row_starts)):
        if t is not None and (t.dtype != torch.int32 or t.shape != (B,) or t.device != scores.device):
            raise UserError(f"{name} must be int32 of shape [{B}] on {scores.device}")
    if row_starts is not None and lengths is None:
        raise UserError("row_starts needs lengths (each row's valid length from its start)")


def topk(scores, k: int = 2048, lengths=None, row_starts=None, *, budget: int = DEFAULT_BUDGET,
         threads: int = 512, bits: int = 8, page_table=None, page_bits: int = 0, offsets=None,
         return_diagnostics: bool = False, kernel=None, prefix_min_row: int = PREFIX_MIN_ROW):
    """Top-k indices of each row; see the module docstring. With ``row_starts`` the caller
    guarantees ``row_starts[b] + lengths[b] <= row stride`` (the kernel reads from the start)."""
    import torch

    from tuner import rtc

    _check_args(scores, k, lengths, row_starts)
    if page_table is not None and offsets is not None:
        raise UserError("give either page_table or offsets, not both")
    B, L = scores.shape
    dev = scores.device
    handle = kernel if kernel is not None else build(budget, threads, bits, dev)
    dummy = torch.empty(1, dtype=torch.int32, device=dev)   # never read (its flag is 0)
    mode, table, tstride = 0, dummy, 0
    if page_table is not None:
        if page_table.dtype != torch.int32 or page_table.dim() != 2 or page_table.shape[0] != B:
            raise UserError(f"page_table must be int32 [B={B}, pages]")
        if not 0 <= page_bits <= 20:
            raise UserError(f"page_bits must be between 0 and 20, got {page_bits}")
        if page_table.shape[1] << page_bits < L:
            raise UserError(f"page_table covers {page_table.shape[1] << page_bits} positions, rows have {L}")
        mode, table, tstride = 1, page_table.contiguous(), page_table.contiguous().stride(0)
    elif offsets is not None:
        if offsets.dtype != torch.int32 or offsets.shape != (B,):
            raise UserError(f"offsets must be int32 [B={B}]")
        mode, table = 2, offsets.contiguous()
    out = torch.empty((B, k), dtype=torch.int32, device=dev)
    bin_counts = torch.empty((B,), dtype=torch.int32, device=dev)
    prefix, scap = long_row_plan(L, k, prefix_min_row)
    scratch = torch.empty((B * 2 * scap,) if scap else (2,), dtype=torch.int32, device=dev)
    if B:
        nthreads = int(handle.defines.get("TOPK_THREADS", threads))
        rtc.launch(handle, (B,), (nthreads,), [
            scores, scores.stride(0), L,
            lengths if lengths is not None else dummy, int(lengths is not None),
            row_starts if row_starts is not None else dummy, int(row_starts is not None),
            int(k), out, mode, table, int(tstride), int(page_bits), bin_counts,
            scratch, int(scap), int(prefix)])
    if not return_diagnostics:
        return out
    cap = capacity(int(handle.defines.get("SGL_TOPK_DYNAMIC_SMEM_BYTES", budget)))
    return out, {"overflow_rows": int((bin_counts > cap).sum().item()), "capacity": cap,
                 "bin_counts": bin_counts}
