"""The backends of the FP8 block-scaled GEMM: our Triton kernel and the vendor paths, detected.

Every library backend is probed once per process and device before it is used: import it, run it
on two tiny problems (K/128 a multiple of 4 and not, M a multiple of 4 and not) and compare with
the float64 reference. It is *available* only if that passes; otherwise the probe says precisely
why (``missing: No module named 'deep_gemm'``, ``unusable: <the library's error>``, ``wrong:
<the error bound it broke>``), and the family's ``build`` raises with that text, so a sweep
reports the backend as built_failed with the reason: never silently skipped.

Inputs are laid out the way serving code hands them over: A ``[M, K]`` row-major with its
scales column-major (stride ``[1, M]``: what sglang's and vLLM's activation quantisers write for
the CUTLASS and cuBLASLt paths), B ``[N, K]`` row-major. Weight-side layouts a library wants
(padded or transposed block scales, a shuffled B) are made once by ``prepare`` outside the timed
call, as a serving framework does at load time; per-call work a library needs (padding M) is
inside the timed call.

torch ``scaled_mm`` with DeepSeek-style scales (1 x 128 for A, 128 x 128 for B) goes through
cuBLASLt 12.9+ on sm_90 only (PyTorch PR #158037; elsewhere torch raises "DeepSeek style ...
scaling only supported in CUDA for SM90"). The 128 x 128 scales must be padded along K to a
multiple of 4 blocks (L4) and laid out K-major (PyTorch PR #166752: without it cuBLASLt returns
wrong answers when (K/128) % 4 != 0), and vLLM pads M to a multiple of 4 for cuBLASLt (vLLM PR
#49932). The library is timed as serving code calls it: M padded inside the timed call (one pad
kernel for A and one for its scales where M % 4 != 0). The probe tries the v2 API
(``torch.nn.functional.scaled_mm`` with ``ScalingType``) and the v1 API (``torch._scaled_mm``,
recipe inferred from the scale shapes), with M padding first and without it only where no padded
variant is right, and keeps the first variant that is right on both tiny problems, preferring one
that also takes a ragged N (torch's v2 checks ``scale_b`` against ``N // 128`` blocks, so it refuses
DeepSeek's n = 2112; v1 checks ``ceil(N / 128)``); ``detail["ragged_n"]`` records the outcome.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

# name -> (vendors it can run on, what it is)
BACKENDS = {
    "triton": (("nvidia", "amd"), "our Triton kernel (kernels/fp8_gemm/kernel.py)"),
    "torch_scaled_mm": (("nvidia", "amd"), "torch scaled_mm, 1x128 x 128x128 block scales (cuBLASLt)"),
    "deep_gemm": (("nvidia",), "DeepGEMM fp8_gemm_nt (JIT CUDA, Hopper+)"),
    "sgl_kernel": (("nvidia",), "sgl-kernel fp8_blockwise_scaled_mm (CUTLASS)"),
    "vllm_cutlass": (("nvidia",), "vLLM cutlass_scaled_mm with block scales"),
    "aiter": (("amd",), "aiter gemm_a8w8_blockscale (CK)"),
    "aiter_bpreshuffle": (("amd",), "aiter gemm_a8w8_blockscale_bpreshuffle (CK, pre-shuffled B)"),
}
LIBRARIES = tuple(b for b in BACKENDS if b != "triton")


@dataclass
class Availability:
    ok: bool
    reason: str                      # "" when ok; else "missing: ..." / "unusable: ..." / "wrong: ..."
    detail: dict = field(default_factory=dict)   # e.g. {"api": "v2", "pad_m": True, "tried": [...]}


class BackendUnavailable(RuntimeError):
    pass


def backends_for(vendor: str) -> list[str]:
    return [b for b, (vendors, _) in BACKENDS.items() if vendor in vendors]


# --- weight-side preparation and the calls, per library ----------------------------------------

def _pad_m(a, a_s, mult: int = 4):
    """A and its column-major scales with M padded up to a multiple of ``mult`` (zeros): one pad
    kernel each, inside the call, as serving code pads a decode batch for cuBLASLt."""
    import torch
    import torch.nn.functional as F

    pad = (-a.shape[0]) % mult
    if not pad:
        return a, a_s
    return F.pad(a.view(torch.uint8), (0, 0, 0, pad)).view(a.dtype), F.pad(a_s.t(), (0, pad)).t()


def _torch_b_scales(b_s):
    """128x128 scales ``[NB, KB]`` -> ``[L4, NB]`` K-major, zero-padded along K to L4 = round_up(KB, 4)."""
    import torch

    NB, KB = b_s.shape
    L4 = -(-KB // 4) * 4
    pad = torch.zeros((NB, L4), dtype=torch.float32, device=b_s.device)
    pad[:, :KB] = b_s
    return pad.t()


def _torch_call(variant: dict) -> Callable:
    import torch

    def run(inp):
        a, sa = _pad_m(inp.a, inp.a_s) if variant["pad_m"] else (inp.a, inp.a_s)
        sb = inp.prep["torch_scaled_mm"]
        if variant["api"] == "v2":
            from torch.nn.functional import ScalingType, scaled_mm

            out = scaled_mm(a, inp.b.t(), sa, ScalingType.BlockWise1x128, sb, ScalingType.BlockWise128x128,
                            output_dtype=torch.bfloat16)
        else:
            # v1 infers the recipe from the shapes: scale_b [KB, NB], here a view with leading dim L4
            out = torch._scaled_mm(a, inp.b.t(), sa, sb[: inp.a_s.shape[1]], out_dtype=torch.bfloat16)
        return out[: inp.a.shape[0]] if out.shape[0] != inp.a.shape[0] else out
    return run


def _prep_torch(inp) -> Any:
    return _torch_b_scales(inp.b_s)


def _deep_gemm_call(_detail) -> Callable:
    import torch

    dg = importlib.import_module("deep_gemm")
    gemm = getattr(dg, "fp8_gemm_nt", None) or getattr(dg, "gemm_fp8_fp8_bf16_nt")
    align = getattr(dg, "get_col_major_tma_aligned_tensor", None)

    def run(inp):
        out = torch.empty((inp.a.shape[0], inp.b.shape[0]), dtype=torch.bfloat16, device=inp.a.device)
        sa = align(inp.a_s) if align is not None else inp.a_s
        gemm((inp.a, sa), (inp.b, inp.b_s), out)
        return out
    return run


def _sgl_call(_detail) -> Callable:
    import torch

    fn = importlib.import_module("sgl_kernel").fp8_blockwise_scaled_mm
    return lambda inp: fn(inp.a, inp.b.t(), inp.a_s, inp.b_s.t(), torch.bfloat16)


def _vllm_call(_detail) -> Callable:
    import torch

    fn = importlib.import_module("vllm._custom_ops").cutlass_scaled_mm
    return lambda inp: fn(inp.a, inp.b.t(), out_dtype=torch.bfloat16, scale_a=inp.a_s, scale_b=inp.b_s.t())


def _aiter_call(_detail) -> Callable:
    import torch

    fn = importlib.import_module("aiter").gemm_a8w8_blockscale
    return lambda inp: fn(inp.a, inp.b, inp.a_s.contiguous(), inp.b_s, dtype=torch.bfloat16)


def _aiter_pre_call(_detail) -> Callable:
    import torch

    fn = importlib.import_module("aiter").gemm_a8w8_blockscale_bpreshuffle
    return lambda inp: fn(inp.a, inp.prep["aiter_bpreshuffle"], inp.a_s.contiguous(), inp.b_s, dtype=torch.bfloat16)


def _prep_aiter_shuffle(inp) -> Any:
    shuffle = importlib.import_module("aiter.ops.shuffle").shuffle_weight
    return shuffle(inp.b, layout=(16, 16))


_CALLS = {"torch_scaled_mm": _torch_call, "deep_gemm": _deep_gemm_call, "sgl_kernel": _sgl_call,
          "vllm_cutlass": _vllm_call, "aiter": _aiter_call, "aiter_bpreshuffle": _aiter_pre_call}
_PREP = {"torch_scaled_mm": _prep_torch, "aiter_bpreshuffle": _prep_aiter_shuffle}
_MODULES = {"deep_gemm": "deep_gemm", "sgl_kernel": "sgl_kernel", "vllm_cutlass": "vllm._custom_ops",
            "aiter": "aiter", "aiter_bpreshuffle": "aiter"}
# M padded to a multiple of 4 first: how serving code calls cuBLASLt (vLLM PR #49932); unpadded
# only where no padded variant is right.
_TORCH_VARIANTS = ({"api": "v2", "pad_m": True}, {"api": "v1", "pad_m": True},
                   {"api": "v2", "pad_m": False}, {"api": "v1", "pad_m": False})


def prepare(name: str, inp) -> None:
    """Weight-side layouts ``name`` needs, stored in ``inp.prep`` (done once per input set, untimed)."""
    if name in _PREP and name not in inp.prep:
        inp.prep[name] = _PREP[name](inp)


# --- detection --------------------------------------------------------------------------------

def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__


def _probe_inputs(device, fp8_dtype):
    """The must-pass problems, and one with a ragged N (N % 128 != 0, as DeepSeek's n = 2112)."""
    from .family import make_gemm_inputs

    # K/128 = 4 (no padding) with M = 8; K/128 = 3 (cuBLASLt's L4 padding) with M = 5 (ragged M)
    core = [make_gemm_inputs(8, 256, 512, 11, device, fp8_dtype), make_gemm_inputs(5, 256, 384, 12, device, fp8_dtype)]
    return core, [make_gemm_inputs(8, 320, 256, 13, device, fp8_dtype)]


def _try(name: str, detail: dict, probes) -> str:
    """'' if ``name`` with ``detail`` is right on every probe input, else why not."""
    from .reference import check_rows, reference

    try:
        run = _CALLS[name](detail)
        for inp in probes:
            inp.prep.pop(name, None)
            prepare(name, inp)
            out = run(inp)
            ok, why, _ = check_rows(out.float(), reference(inp.a, inp.a_s, inp.b, inp.b_s))
            if not ok:
                return f"wrong: M={inp.a.shape[0]} K={inp.a.shape[1]}: {why}"
    except Exception as e:  # noqa: BLE001 - the library's own words are the report
        return f"unusable: {_one_line(e)}"
    return ""


@functools.lru_cache(maxsize=None)
def availability(name: str, device: str = "cuda", fp8_dtype: str = "float8_e4m3fn") -> Availability:
    """Whether library backend ``name`` can run on ``device`` (see the module docstring)."""
    if name == "triton":
        return Availability(True, "")
    if name not in BACKENDS:
        return Availability(False, f"unknown backend {name!r}")
    try:
        import torch

        if not str(device).startswith("cuda") or not torch.cuda.is_available():
            return Availability(False, "missing: no GPU here (a library backend needs one)")
    except ImportError as e:
        return Availability(False, f"missing: {_one_line(e)}")
    if name in _MODULES:
        try:
            importlib.import_module(_MODULES[name])
        except Exception as e:  # noqa: BLE001 - ImportError or a broken install: both are "missing"
            return Availability(False, f"missing: {_one_line(e)}")
    core, ragged = _probe_inputs(device, fp8_dtype)
    variants = _TORCH_VARIANTS if name == "torch_scaled_mm" else ({},)
    tried, passed = [], []
    for v in variants:
        why = _try(name, dict(v), core)
        if why:
            tried.append({**v, "why": why})
            continue
        why_ragged = _try(name, dict(v), ragged)
        passed.append({**v, "ragged_n": not why_ragged, **({"ragged_n_why": why_ragged} if why_ragged else {})})
        if not why_ragged:
            break
    if passed:     # the first variant right on the core problems, preferring one that takes a ragged N
        best = next((p for p in passed if p["ragged_n"]), passed[0])
        return Availability(True, "", {**best, "tried": tried})
    reason = tried[0]["why"] if len(tried) == 1 else "; ".join(
        f"{t.get('api')}{' pad M' if t.get('pad_m') else ''}: {t['why']}" for t in tried)
    return Availability(False, reason, {"tried": tried})


def runner(name: str, device: str, fp8_dtype: str) -> Callable:
    """The call of an available library backend; raises BackendUnavailable with the probe's reason."""
    av = availability(name, str(device), fp8_dtype)
    if not av.ok:
        raise BackendUnavailable(f"{name} {av.reason}")
    return _CALLS[name](av.detail)
