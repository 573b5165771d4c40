"""w8a8 block-scaled FP8 GEMM (DeepSeek-style 1x128 activation / 128x128 weight scales), bf16 out.

    from occtune.kernels.fp8_gemm import fp8_gemm
    out = fp8_gemm(a, a_s, b, b_s)            # (a * a_s) @ (b * b_s)^T

``a`` fp8 e4m3 ``[M, K]``, ``a_s`` fp32 ``[M, ceil(K/128)]`` (any strides), ``b`` fp8 e4m3
``[N, K]`` with unit last stride, ``b_s`` fp32 ``[ceil(N/128), ceil(K/128)]``; fp8 is
``float8_e4m3fn`` on NVIDIA and gfx950, ``float8_e4m3fnuz`` on gfx942. The family (family.py)
times this Triton kernel against the vendor paths (backends.py) and writes the allow-list
(allowlist.py) that says, per (n, k) and M, which one to call.

Serving: a repeated call costs a plan lookup and the launch (plan.py, launcher.py), can be
captured in a CUDA graph, and exists as ``torch.ops.occtune.fp8_gemm`` (op.py); without a config
M <= 64 runs a split-K decode kernel (splitk_wgmma.py on sm_90, else splitk.py). docs/fp8_gemm.md
has the design and figures.
"""

from __future__ import annotations

import os

from occtune.errors import UserError

from . import plan as plans
from .config import (ALLOWED, BASELINE_TRITON, DECODE_TRITON, DECODE_WGMMA, PIPES_NVIDIA_ONLY, PIPES_SM90_ONLY,
                     PIPES_WGMMA, TRITON_KEYS, config_problem, triton_row, wgmma_problem)

__all__ = ["fp8_gemm", "default_config", "BASELINE_TRITON", "DECODE_TRITON", "DECODE_WGMMA"]

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


_ROUTE: dict = {}        # device type -> (op, out op): op.py's C++ kernels, where it loaded them


def fp8_gemm(a, a_s, b, b_s, config=None, out=None):
    """bf16 ``[M, N]`` = ``(a * a_s) @ (b * b_s)^T`` with our Triton kernel. ``config``: a dict of
    the Triton axes (BLOCK_M BLOCK_N BLOCK_K GROUP_M num_warps num_stages [PIPE] [+ AMD options]),
    or their values in that order (a profile row); None: :func:`default_config` for M and the
    device's target. ``out``: the caller's bf16 ``[M, N]`` buffer (then returned; it must not
    overlap the inputs).

    Serving: the first call of a (config, shapes, strides, dtypes, devices) key checks everything
    and makes a launch plan (plan.py); a repeated call only looks the plan up and launches it,
    on the current stream, without a host synchronisation, and can be captured in a CUDA graph.
    ``torch.ops.occtune.fp8_gemm`` (op.py) is the same call as a torch operator. On a GPU, calls
    without a config or with a sequence of ints go through that operator where its C++ kernels
    are in use (op.py, loaded by the first call: the plan lookup, the output's allocation and the
    launches without Python); ``OCCTUNE_NATIVE_OP=0`` keeps them in Python."""
    route = _ROUTE.get(a.device.type) if _ROUTE and hasattr(a, "device") else None
    if route is not None and _routable(a_s, b, b_s, out, config):
        if out is None:
            return route[0](a, a_s, b, b_s, config)
        route[1](a, a_s, b, b_s, out, config)
        return out
    return _run(a, a_s, b, b_s, config, out)


def _routable(a_s, b, b_s, out, config) -> bool:
    """Whether the op's schema takes these arguments as they are (else Python checks them and
    raises the UserError a bad call gets)."""
    import torch

    T = torch.Tensor
    return (isinstance(a_s, T) and isinstance(b, T) and isinstance(b_s, T) and (out is None or isinstance(out, T))
            and (config is None or (type(config) in (tuple, list)
                                    and all(type(v) is int and 0 <= v < 65536 for v in config))))


def _run(a, a_s, b, b_s, config=None, out=None):
    """:func:`fp8_gemm` in Python: the plan of the call's key (made on its first call), launched."""
    try:
        key = plans.plan_key(config, a, a_s, b, b_s, out)
        p = plans.PLANS.get(key)
    except (AttributeError, TypeError):         # not tensors, or an unhashable config: checked below
        key = p = None
    if p is None:
        p = _new_plan(a, a_s, b, b_s, config, out)
        if key is not None:
            plans.PLANS[key] = p
    if out is None:
        out = p.new_output()
    p(a, a_s, b, b_s, out)
    return out


DECODE_M = 64            # default_config's bound for the decode kernels (PIPE 9, or 10 on sm_90)


def default_config(M: int, target: str = "") -> dict:
    """The config of a call without one: up to ``DECODE_M`` rows a decode kernel, else vLLM's and
    sglang's untuned default (BASELINE_TRITON). The decode kernel is PIPE 10 on sm_90
    (DECODE_WGMMA, 16 or 32 token rows as M needs), else PIPE 9 (DECODE_TRITON, with a 16-, 32- or
    64-row tile and 64-row weight tiles at M > 32: benchmarks/records/fp8_decode/call1). Tuned
    choices per shape and M are the allow-list's (``tune fp8-gemm`` exports ``triton_config(n, k, m)``)."""
    if M > DECODE_M:
        return dict(BASELINE_TRITON)
    if target == "sm_90":
        return {**DECODE_WGMMA, "BLOCK_M": 16 if M <= 16 else 32}
    return {**DECODE_TRITON, "BLOCK_M": 16 if M <= 16 else 32 if M <= 32 else 64, "BLOCK_N": 128 if M <= 32 else 64}


def _new_plan(a, a_s, b, b_s, config, out):
    """Check a call, resolve its config for the tensors' target and make its plan (the slow path,
    once per key)."""
    import torch

    _check(a, a_s, b, b_s)
    M, N = a.shape[0], b.shape[0]
    if a.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise UserError("fp8_gemm needs a GPU tensor (or TRITON_INTERPRET=1 on the CPU)")
    if a.device.type == "cpu":
        cfg = _config_of(config, M, "")  # the interpreter: PIPE 9's default, every Triton PIPE
        target = "sm_90"
        if cfg["PIPE"] in PIPES_SM90_ONLY:
            raise UserError(f"fp8_gemm: PIPE={cfg['PIPE']} is a Gluon kernel, which Triton's interpreter cannot "
                            "run; on the CPU use PIPE 0, 8 or 9")
    else:                               # the tensor's own GPU: no driver probe on every call
        from occtune.model.targets import all_targets, device_target

        _load_op()

        name = device_target(torch, a.device)
        target = name if name in all_targets() else "an unknown device"
        cfg = _config_of(config, M, target)
    why = _problem(cfg, target, a, b, out)
    if why and config is None and cfg["PIPE"] in PIPES_SM90_ONLY:      # e.g. K % 16: the portable kernel
        cfg = default_config(M)
        why = _problem(cfg, target, a, b, out)
    if why:
        raise UserError(f"fp8_gemm: {why}")
    if out is not None:
        _check_out(out, a, M, N)
    stand_in = out if out is not None else torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    return plans.build(a, a_s, b, b_s, stand_in, cfg)


_OP_TRIED: list = []


def _load_op() -> None:
    """Import op.py once per process (its C++ kernels, built once per machine, then take fp8_gemm()'s
    GPU calls); where that fails, the calls stay in Python (``op.native_error()`` says why the C++
    kernels are not in use, ``_OP_TRIED[0]`` why the import failed)."""
    if _OP_TRIED:
        return
    try:
        from . import op  # noqa: F401
        _OP_TRIED.append(None)
    except Exception as e:       # noqa: BLE001  (e.g. no setuptools for torch's extension builder)
        _OP_TRIED.append(f"importing op.py failed: {type(e).__name__}: {e}")


def _problem(cfg: dict, target: str, a, b, out) -> str:
    """Why ``cfg`` cannot run this call on ``target`` ('' when it can)."""
    from .kernel import tma_ready

    why = config_problem(cfg, target) or (tma_ready(a, b) if cfg["PIPE"] in PIPES_NVIDIA_ONLY else "")
    if not why and cfg["PIPE"] in PIPES_WGMMA:
        why = wgmma_problem(cfg, b.shape[0]) or _tma_store_problem(out)
    return why


def _config_of(config, M: int, target: str) -> dict:
    """The call's config as a dict of the Triton axes (AMD options kept), each value checked."""
    if config is None:
        return default_config(M, target)
    if isinstance(config, dict):
        cfg = {"PIPE": 0, **config}
    elif isinstance(config, (list, tuple)):
        cfg = triton_row(config, "fp8_gemm config")
    else:
        raise UserError(f"fp8_gemm: config must be a dict or a sequence of ints ({', '.join(TRITON_KEYS)}), "
                        f"got {type(config).__name__}")
    for k, v in cfg.items():
        if k not in ALLOWED:
            raise UserError(f"fp8_gemm: unknown config key {k!r}; the keys are {', '.join(ALLOWED)}")
        if isinstance(v, bool) or not isinstance(v, int) or v not in ALLOWED[k]:
            raise UserError(f"fp8_gemm: config {k}={v!r} is invalid; choose one of {ALLOWED[k]}")
    missing = [k for k in TRITON_KEYS if k not in cfg]
    if missing:
        raise UserError(f"fp8_gemm: config misses {', '.join(missing)}")
    return cfg


def _check_out(out, a, M: int, N: int) -> None:
    import torch

    if not (isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and tuple(out.shape) == (M, N)
            and out.device == a.device):
        raise UserError(f"fp8_gemm: out must be a bfloat16 tensor of shape [{M}, {N}] on {a.device}")


def _tma_store_problem(out) -> str:
    """The Gluon kernels store C by TMA: unit column stride, 16-byte row stride."""
    if out is not None and (out.stride(1) != 1 or (2 * out.stride(0)) % 16):
        return "PIPE 4-7 store by TMA: out needs a unit column stride and a row stride of a multiple of 8"
    return ""
