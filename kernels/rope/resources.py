"""Registers and shared memory of a compiled RoPE kernel, for any target, without a GPU.

Triton cross-compiles from the AST for a named target (``GPUTarget("cuda", 90, 32)``,
``GPUTarget("hip", "gfx942", 64)``). We hand it the same specialisation its launcher would make
for the workload (16-byte aligned pointers, ints divisible by 16 marked so, ints equal to 1
folded to constants), because that decides vectorisation and hence the register count.
NVIDIA: registers and shared memory from ``cuobjdump --dump-resource-usage`` of the cubin;
AMD: VGPR/SGPR/LDS and the compiler's own occupancy from the ``.amdgcn`` text.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

from occtune.engine.family import Resources
from occtune.errors import UserError

from .config import validate_config

# DeepSeek-V4's output rope: bf16 [8192, 128, 64] slice of a [8192, 128, 512] tensor, inverse.
DEFAULT_WORKLOAD = {"T": 8192, "H": 128, "D": 64, "head_dim": 512, "dtype": "bf16",
                    "inverse": True, "positions": True}

_TYPES = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}


def gpu_target(name: str):
    """``"sm_90"`` -> GPUTarget("cuda", 90, 32); ``"gfx942"`` -> GPUTarget("hip", "gfx942", 64)."""
    from triton.backends.compiler import GPUTarget

    m = re.fullmatch(r"sm_(\d+)a?", name)
    if m:
        return GPUTarget("cuda", int(m.group(1)), 32)
    if re.fullmatch(r"gfx[0-9a-f]+", name):
        return GPUTarget("hip", name, 32 if name.startswith(("gfx10", "gfx11", "gfx12")) else 64)
    raise UserError(f"unknown target {name!r}; write e.g. sm_80, sm_90, sm_100, gfx942, gfx950")


def _signature(workload: dict, config: dict):
    """(signature, constexprs, attrs) as Triton's launcher would specialise this workload."""
    w = {**DEFAULT_WORKLOAD, **workload}
    T, H, D, hd = int(w["T"]), int(w["H"]), int(w["D"]), int(w.get("head_dim") or w["D"])
    ints = {"T": T, "H": H, "D": D, "sx_t": H * hd, "sx_h": hd, "so_t": H * hd, "so_h": hd, "sf": D}
    xt = _TYPES[w["dtype"]]
    sig = {"x_ptr": xt, "out_ptr": xt, "f_ptr": "*fp32", "pos_ptr": "*i64" if w["positions"] else "*fp32"}
    cx = {}
    for k, v in ints.items():
        if v == 1:
            sig[k], cx[k] = "constexpr", 1
        else:
            sig[k] = "i32" if v < 2**31 else "i64"
    block_d = max(2, 1 << (D - 1).bit_length())
    for k, v in (("HAS_POS", bool(w["positions"])), ("INVERSE", bool(w["inverse"])),
                 ("BLOCK_M", config["BLOCK_M"]), ("BLOCK_D", block_d)):
        sig[k], cx[k] = "constexpr", v
    names = list(sig)
    aligned = ["x_ptr", "out_ptr", "f_ptr", "pos_ptr"] + [k for k, v in ints.items() if v != 1 and v % 16 == 0]
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in aligned}
    return sig, cx, attrs


def _cuobjdump() -> str | None:
    try:
        from triton import knobs

        return knobs.nvidia.cuobjdump.path
    except Exception:
        pass
    import triton

    cand = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return cand if os.path.exists(cand) else shutil.which("cuobjdump")


def _nvidia_numbers(cubin: bytes) -> dict:
    tool = _cuobjdump()
    if tool is None:
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+).*?SHARED:(\d+)", text)
    return {"regs": int(m.group(1)), "static_shared": int(m.group(2))} if m else {}


def _amd_numbers(asm: str) -> dict:
    out = {}
    for key, pat in (("vgprs", r"\.vgpr_count:\s+(\d+)"), ("sgprs", r"\.sgpr_count:\s+(\d+)"),
                     ("agprs", r"\.agpr_count:\s+(\d+)"), ("lds", r"\.group_segment_fixed_size:\s+(\d+)"),
                     ("compiler_occupancy", r";\s*Occupancy:\s+(\d+)")):
        m = re.search(pat, asm)
        if m:
            out[key] = int(m.group(1))
    return out


@functools.lru_cache(maxsize=1)
def _compilable_variants() -> dict:
    """VARIANTS whose kernels are JITFunctions. Under TRITON_INTERPRET=1 ``@triton.jit`` makes
    interpreter objects that cannot be compiled, so load a second copy of kernels.py with the
    interpreter switched off for the duration of the import."""
    import importlib.util

    from . import kernels

    if hasattr(kernels.rope_flat_kernel, "cache_key"):
        return kernels.VARIANTS
    try:    # Triton >= 3.4 reads TRITON_INTERPRET through knobs, unless a script set the knob
        from triton import knobs

        overrides = knobs.runtime.__dict__
    except ImportError:
        overrides = {}
    saved_env, saved_knob = os.environ.get("TRITON_INTERPRET"), overrides.pop("interpret", None)
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        spec = importlib.util.spec_from_file_location("occtune.kernels.rope._compiled_kernels", kernels.__file__)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved_knob is not None:
            overrides["interpret"] = saved_knob
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
    return mod.VARIANTS


@functools.lru_cache(maxsize=512)
def _compile_info(variant, block_m, num_warps, target_name, wl_key) -> dict:
    import triton

    workload = dict(wl_key)
    sig, cx, attrs = _signature(workload, {"BLOCK_M": block_m})
    target = gpu_target(target_name)
    src = triton.compiler.ASTSource(_compilable_variants()[variant][0], sig, cx, attrs)
    k = triton.compile(src, target=target, options={"num_warps": num_warps})
    info = {"target": target_name, "variant": variant, "BLOCK_M": block_m, "num_warps": num_warps,
            "threads": num_warps * target.warp_size, "shared": int(k.metadata.shared)}
    if target.backend == "cuda":
        info.update(_nvidia_numbers(k.asm["cubin"]))
    else:
        info.update(_amd_numbers(k.asm["amdgcn"]))
    return info


def compiled_info(config: dict, target_name: str, workload: dict | None = None) -> dict:
    """Everything the compiler reports for one config on one target (see module doc)."""
    cfg = validate_config(config)
    wl = tuple(sorted({**DEFAULT_WORKLOAD, **(workload or {})}.items()))
    return dict(_compile_info(cfg["variant"], cfg["BLOCK_M"], cfg["num_warps"], target_name, wl))


def compiled_resources(config: dict, target_name: str, workload: dict | None = None) -> Resources:
    """Per-block resources of ``config`` compiled for ``target_name`` (sm_80, sm_90, sm_100,
    gfx942, gfx950, ...), taken from the compiled kernel itself."""
    i = compiled_info(config, target_name, workload)
    if "lds" in i:      # AMD: Triton's LDS is the kernel's fixed group segment
        static, dynamic = i["lds"], 0
    else:               # NVIDIA: Triton launches with metadata.shared bytes of dynamic smem
        static, dynamic = i.get("static_shared", 0), i["shared"]
    return Resources(threads=i["threads"], static_lds=static, dynamic_lds=dynamic,
                     regs=i.get("regs"), vgprs=i.get("vgprs"),
                     agprs=i.get("agprs"), sgprs=i.get("sgprs"), source="compiler")
