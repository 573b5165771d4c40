"""DeepSeek-V4 interleaved rotary embedding: Triton kernels, a float64 reference and the naive
torch path.

    from occtune.kernels.rope import apply_rope
    apply_rope(o[..., -64:], freqs_cis, positions, inverse=True, inplace=True)

``freqs_cis`` is complex64 ``[max_seq, rope_dim/2]`` or its fp32 view ``[max_seq, rope_dim]``
(cos0, sin0, cos1, sin1, ...). ``x`` is ``[tokens, rope_dim]`` or ``[tokens, heads, rope_dim]``,
bf16/fp16/fp32, any strided view (a last-dim stride other than 1 costs a copy). Math is fp32;
results are cast to the output's dtype. ``positions[t]`` (int32/int64) picks token t's frequency
row; without it token t uses row t. Positions are not bounds-checked on the device (that would
cost a synchronisation): they must lie in ``[0, max_seq)``.
"""

from __future__ import annotations

import os

from occtune.errors import UserError

from .config import (BASELINE_CONFIG, VARIANT_NAMES, default_config, local_target, tuned_config,
                     validate_config)

__all__ = ["apply_rope", "reference_rope", "naive_torch_rope", "default_config", "tuned_config",
           "validate_config", "local_target", "VARIANT_NAMES", "BASELINE_CONFIG"]

_DTYPES = ("bfloat16", "float16", "float32")


def _freqs_fp32(freqs_cis, D: int):
    """fp32 ``[S, D]`` view of complex64 ``[S, D/2]`` or fp32 ``[S, D]`` freqs, last stride 1."""
    import torch

    f = freqs_cis
    if f.dtype == torch.complex64:
        if f.dim() != 2 or f.shape[1] != D // 2:
            raise UserError(f"freqs_cis: expected complex64 [max_seq, {D // 2}] for rope_dim {D}, got {list(f.shape)}")
        f = torch.view_as_real(f).reshape(f.shape[0], D)
    elif f.dtype == torch.float32:
        if f.dim() != 2 or f.shape[1] != D:
            raise UserError(f"freqs_cis: expected fp32 [max_seq, {D}] (cos, sin interleaved), got {list(f.shape)}")
    else:
        raise UserError(f"freqs_cis: expected complex64 or its float32 view, got {f.dtype}")
    return f if f.stride(1) == 1 else f.contiguous()


def _check_x(x, name="x"):
    import torch

    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
        raise UserError(f"{name}: expected a [tokens, rope_dim] or [tokens, heads, rope_dim] tensor")
    if str(x.dtype).replace("torch.", "") not in _DTYPES:
        raise UserError(f"{name}: dtype {x.dtype} is not supported; use bfloat16, float16 or float32")
    if x.shape[-1] == 0 or x.shape[-1] % 2:
        raise UserError(f"{name}: rope_dim (last dim) must be even and positive, got {x.shape[-1]}")


def _check_positions(positions, T: int, S: int, device):
    import torch

    if positions is None:
        if T > S:
            raise UserError(f"{T} tokens but freqs_cis has only {S} rows; pass positions or a longer freqs_cis")
        return None
    if positions.dtype not in (torch.int32, torch.int64) or positions.dim() != 1 or positions.shape[0] != T:
        raise UserError(f"positions: expected int32/int64 [{T}], got {positions.dtype} {list(positions.shape)}")
    if positions.device != device:
        raise UserError(f"positions is on {positions.device} but x is on {device}; move them to one device")
    return positions.contiguous()


def _resolve_config(config, variant, x):
    workload = {"T": x.shape[0], "H": x.shape[1] if x.dim() == 3 else 1, "D": x.shape[-1]}
    cfg = validate_config(config) if config is not None else tuned_config(workload=workload, device=x.device)
    if variant is not None:
        cfg = validate_config({**cfg, "variant": variant})
    return cfg


def apply_rope(x, freqs_cis, positions=None, inverse=False, *, out=None, inplace=False,
               config=None, variant=None):
    """Rotate ``x`` by ``freqs_cis`` (the conjugate if ``inverse``); returns the output tensor.

    ``inplace=True`` writes into ``x``; ``out=`` writes into a given tensor of x's shape (any
    float dtype above, any strides); otherwise a new tensor of x's dtype is returned.
    ``config`` (dict: variant, BLOCK_M, num_warps) defaults to the tuned config of x's device
    for this many tokens (``results/<target>/rope.yaml``, nearest tuned T; ``$OCCTUNE_RESULTS``
    names another results folder), else :func:`default_config`; ``variant`` overrides the
    config's variant.
    """
    import torch

    from .kernels import launch

    _check_x(x)
    if inplace and out is not None:
        raise UserError("apply_rope: pass either out= or inplace=True, not both")
    if x.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise UserError("apply_rope needs a GPU tensor (or TRITON_INTERPRET=1 on the CPU); "
                        "naive_torch_rope runs anywhere")
    dst = x if inplace else (out if out is not None else torch.empty_like(x))
    if out is not None:
        _check_x(out, "out")
        if out.shape != x.shape or out.device != x.device:
            raise UserError(f"out: expected shape {list(x.shape)} on {x.device}, got {list(out.shape)} on {out.device}")
    D = x.shape[-1]
    f2 = _freqs_fp32(freqs_cis, D)
    if f2.device != x.device:
        raise UserError(f"freqs_cis is on {f2.device} but x is on {x.device}; move them to one device")
    pos = _check_positions(positions, x.shape[0], f2.shape[0], x.device)
    cfg = _resolve_config(config, variant, x)
    if x.numel() == 0:
        return dst
    x3 = x if x.dim() == 3 else x.unsqueeze(1)
    src = x3 if x3.stride(-1) == 1 else x3.contiguous()
    d3 = dst if dst.dim() == 3 else dst.unsqueeze(1)
    tgt = d3 if d3.stride(-1) == 1 else torch.empty(d3.shape, dtype=d3.dtype, device=d3.device)
    launch(cfg["variant"], src, tgt, f2, pos, inverse, cfg["BLOCK_M"], cfg["num_warps"])
    if tgt is not d3:
        d3.copy_(tgt)
    return dst


def _rows(freqs_cis, T, positions, D):
    import torch

    f = freqs_cis if freqs_cis.is_complex() else torch.view_as_complex(
        freqs_cis.float().reshape(freqs_cis.shape[0], D // 2, 2).contiguous())
    return f[positions.long()] if positions is not None else f[:T]


def reference_rope(x, freqs_cis, positions=None, inverse=False):
    """The rotation as a complex multiply in float64; returns a float64 tensor of x's shape."""
    import torch

    D = x.shape[-1]
    f = _rows(freqs_cis, x.shape[0], positions, D).to(torch.complex128)
    if inverse:
        f = f.conj()
    if x.dim() == 3:
        f = f[:, None, :]
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(xc * f).reshape(x.shape)


def naive_torch_rope(x, freqs_cis, positions=None, inverse=False, inplace=False):
    """The plain torch path an LLM codebase runs: view as complex in fp32, multiply, cast back."""
    import torch

    D = x.shape[-1]
    f = _rows(freqs_cis, x.shape[0], positions, D)
    if inverse:
        f = f.conj()
    if x.dim() == 3:
        f = f.unsqueeze(1)
    xc = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    y = torch.view_as_real(xc * f).flatten(-2).to(x.dtype)
    if inplace:
        x.copy_(y)
        return x
    return y
