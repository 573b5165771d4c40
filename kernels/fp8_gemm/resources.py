"""Registers and shared memory of the compiled FP8 GEMM kernel, for any target, without a GPU.

The kernel is cross-compiled by Triton (occtune.tritonxc) with the specialisation its launcher
makes for a workload: fp8 pointers typed per target (fp8e4nv on NVIDIA and gfx950, fp8e4b8 on
gfx942), integers equal to 1 folded to constants (the unit strides, M = 1), integers divisible by
16 marked so. Launch options: num_warps, num_stages and the AMD-only ones present in the config.
"""

from __future__ import annotations

import functools

from occtune.engine.family import Resources

from .config import amd_keys, fp8_dtype_name

_TRITON_FP8 = {"float8_e4m3fn": "*fp8e4nv", "float8_e4m3fnuz": "*fp8e4b8"}


def signature(target: str, M: int, N: int, K: int, config: dict):
    """(signature, constexprs, attrs) as the launcher specialises ``kernel.launch`` for this problem:
    A row-major, its scales column-major (stride [1, M]), B [N, K] row-major, C row-major; the
    kernel's NOT_SPECIALISED arguments stay plain integers."""
    kb = -(-K // 128)
    ints = {"M": M, "N": N, "K": K, "stride_am": K, "stride_ak": 1, "stride_bn": K, "stride_bk": 1,
            "stride_cm": N, "stride_cn": 1, "stride_asm": 1, "stride_ask": M, "stride_bsn": kb, "stride_bsk": 1}
    fp8 = _TRITON_FP8[fp8_dtype_name(target)]
    sig = {"a_ptr": fp8, "b_ptr": fp8, "c_ptr": "*bf16", "as_ptr": "*fp32", "bs_ptr": "*fp32"}
    from .kernel import NOT_SPECIALISED

    cx = {}
    for k, v in ints.items():
        if v == 1 and k not in NOT_SPECIALISED:
            sig[k], cx[k] = "constexpr", 1
        else:
            sig[k] = "i32" if v < 2**31 else "i64"
    for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"):
        sig[k], cx[k] = "constexpr", config[k]
    sig["EVEN_K"], cx["EVEN_K"] = "constexpr", K % config["BLOCK_K"] == 0
    sig["SCALE"], cx["SCALE"] = "constexpr", 128
    names = list(sig)
    aligned = ["a_ptr", "b_ptr", "c_ptr", "as_ptr", "bs_ptr"] + [
        k for k, v in ints.items() if v != 1 and v % 16 == 0 and k not in NOT_SPECIALISED]
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in aligned}
    return sig, cx, attrs


@functools.lru_cache(maxsize=512)
def _compile(target: str, M: int, N: int, K: int, cfg_items: tuple) -> dict:
    from occtune.tritonxc import compilable_module, compile_info

    from . import kernel

    config = dict(cfg_items)
    sig, cx, attrs = signature(target, M, N, K, config)
    fn = compilable_module(kernel, "fp8_gemm_kernel").fp8_gemm_kernel
    opts = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    opts.update({k: config[k] for k in amd_keys(target)})
    return compile_info(fn, sig, cx, attrs, target, opts)


def compiled_info(config: dict, target: str, workload: dict) -> dict:
    """Everything the compiler reports for ``config`` compiled for ``target`` at ``workload``."""
    items = tuple(sorted((k, v) for k, v in config.items() if k != "backend"))
    return dict(_compile(target, int(workload["M"]), int(workload["N"]), int(workload["K"]), items))


def compiled_resources(config: dict, target: str, workload: dict) -> Resources:
    i = compiled_info(config, target, workload)
    # Triton launches with metadata.shared bytes of dynamic shared memory / LDS on both vendors
    # (the AMD kernels here report .group_segment_fixed_size 0); the static part is the
    # cubin's static shared memory, or the AMD kernel's fixed group segment.
    static, dynamic = i.get("lds", i.get("static_shared", 0)), i["shared"]
    import triton

    return Resources(threads=i["threads"], static_lds=static, dynamic_lds=dynamic, regs=i.get("regs"),
                     vgprs=i.get("vgprs"), agprs=i.get("agprs"), sgprs=i.get("sgprs"),
                     source=f"compiled: triton {triton.__version__} {target}",
                     compiler_occupancy=i.get("compiler_occupancy"))
