"""w8a8 block-scaled FP8 GEMM (DeepSeek-style 1x128 activation / 128x128 weight scales), bf16 out.

    from occtune.kernels.fp8_gemm import fp8_gemm
    out = fp8_gemm(a, a_s, b, b_s)            # (a * a_s) @ (b * b_s)^T

``a`` fp8 e4m3 ``[M, K]``, ``a_s`` fp32 ``[M, ceil(K/128)]`` (any strides), ``b`` fp8 e4m3
``[N, K]`` with unit last stride, ``b_s`` fp32 ``[ceil(N/128), ceil(K/128)]``; fp8 is
``float8_e4m3fn`` on NVIDIA and gfx950, ``float8_e4m3fnuz`` on gfx942. The family (family.py)
times this Triton kernel against the vendor paths (backends.py) and writes the allow-list
(allowlist.py) that says, per (n, k) and M, which one to call.
"""

from __future__ import annotations

import os

from occtune.errors import UserError

from .config import BASELINE_TRITON, config_problem

__all__ = ["fp8_gemm", "BASELINE_TRITON"]

_FP8 = ("float8_e4m3fn", "float8_e4m3fnuz")


def _check(a, a_s, b, b_s):
    import torch

    for name, t, dims in (("a", a, 2), ("a_s", a_s, 2), ("b", b, 2), ("b_s", b_s, 2)):
        if not isinstance(t, torch.Tensor) or t.dim() != dims:
            raise UserError(f"fp8_gemm: {name} must be a 2-D tensor")
    if str(a.dtype).replace("torch.", "") not in _FP8 or b.dtype != a.dtype:
        raise UserError(f"fp8_gemm: a and b must share an e4m3 fp8 dtype ({', '.join(_FP8)}), got {a.dtype}, {b.dtype}")
    if a_s.dtype != torch.float32 or b_s.dtype != torch.float32:
        raise UserError("fp8_gemm: scales must be float32")
    (M, K), (N, Kb) = a.shape, b.shape
    kb, nb = -(-K // 128), -(-N // 128)
    if Kb != K or tuple(a_s.shape) != (M, kb) or tuple(b_s.shape) != (nb, kb):
        raise UserError(f"fp8_gemm: expected b [N, {K}], a_s [{M}, {kb}], b_s [ceil(N/128), {kb}]; got "
                        f"b {list(b.shape)}, a_s {list(a_s.shape)}, b_s {list(b_s.shape)}")
    if len({t.device for t in (a, a_s, b, b_s)}) != 1:
        raise UserError("fp8_gemm: a, a_s, b and b_s must be on one device")


def fp8_gemm(a, a_s, b, b_s, config: dict | None = None, out=None):
    """bf16 ``[M, N]`` = ``(a * a_s) @ (b * b_s)^T`` with our Triton kernel (``config``: the Triton
    axes BLOCK_M BLOCK_N BLOCK_K GROUP_M num_warps num_stages [PIPE] [+ AMD options]; default the baseline)."""
    import torch

    from .kernel import launch

    _check(a, a_s, b, b_s)
    if a.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise UserError("fp8_gemm needs a GPU tensor (or TRITON_INTERPRET=1 on the CPU)")
    from .kernel import tma_ready

    cfg = {"PIPE": 0, **(config or BASELINE_TRITON)}
    if a.device.type == "cpu":
        target = "sm_90"                # the interpreter runs every PIPE
    else:                               # the tensor's own GPU: no driver probe on every call
        from occtune.model.targets import all_targets, device_target

        name = device_target(torch, a.device)
        target = name if name in all_targets() else "an unknown device"
    why = config_problem(cfg, target) or (tma_ready(a, b) if cfg["PIPE"] else "")
    if why:
        raise UserError(f"fp8_gemm: {why}")
    M, N = a.shape[0], b.shape[0]
    if out is None:
        out = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    launch(a, a_s, b, b_s, out, cfg)
    return out
