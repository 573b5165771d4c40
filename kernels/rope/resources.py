"""Registers and shared memory of a compiled RoPE kernel, for any target, without a GPU.

Triton cross-compiles from the AST for a named target (:func:`occtune.build.compiled.triton_resources`,
through :mod:`occtune.build.tritonxc`).
We hand it the same specialisation its launcher would make for the workload (16-byte aligned
pointers, ints divisible by 16 marked so, ints equal to 1 folded to constants; T neither), because that
decides vectorisation and hence the register count.
"""

from __future__ import annotations

from pathlib import Path

from occtune.build.compiled import triton_resources
from occtune.build.tritonxc import compilable_module, launcher_signature
from occtune.engine.family import Resources

from .config import validate_config
from .kernels import NOT_SPECIALISED

# DeepSeek-V4's output rope: bf16 [8192, 128, 64] slice of a [8192, 128, 512] tensor, inverse.
DEFAULT_WORKLOAD = {"T": 8192, "H": 128, "D": 64, "head_dim": 512, "dtype": "bf16",
                    "inverse": True, "positions": True}

# the default runs' compiled resources on every target (tools/precompute.py rope)
PRECOMPUTED = Path(__file__).with_name("precomputed.json")

_TYPES = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}


def _signature(workload: dict, config: dict):
    """(signature, constexprs, attrs) as Triton's launcher would specialise this workload."""
    w = {**DEFAULT_WORKLOAD, **workload}
    T, H, D, hd = int(w["T"]), int(w["H"]), int(w["D"]), int(w.get("head_dim") or w["D"])
    ints = {"T": T, "H": H, "D": D, "sx_t": H * hd, "sx_h": hd, "so_t": H * hd, "so_h": hd, "sf": D}
    xt = _TYPES[w["dtype"]]
    pointers = {"x_ptr": xt, "out_ptr": xt, "f_ptr": "*fp32", "pos_ptr": "*i64" if w["positions"] else "*fp32"}
    block_d = max(2, 1 << (D - 1).bit_length())
    constexprs = {"HAS_POS": bool(w["positions"]), "INVERSE": bool(w["inverse"]), "BLOCK_M": config["BLOCK_M"],
                  "BLOCK_D": block_d}
    return launcher_signature(pointers, ints, constexprs, NOT_SPECIALISED)


def compiled_resources(config: dict, target_name: str, workload: dict | None = None) -> Resources:
    """Per-block resources of ``config`` compiled by Triton for ``target_name`` (sm_80, sm_90,
    sm_100, gfx942, gfx950, ...), taken from the compiled kernel itself (cached on disk)."""
    from . import kernels

    cfg = validate_config(config)
    sig, cx, attrs = _signature({**DEFAULT_WORKLOAD, **(workload or {})}, cfg)
    fn = compilable_module(kernels, "rope_flat_kernel").VARIANTS[cfg["variant"]][0]
    return triton_resources(fn, sig, cx, attrs, target=target_name, options={"num_warps": cfg["num_warps"]},
                            shipped=PRECOMPUTED)
