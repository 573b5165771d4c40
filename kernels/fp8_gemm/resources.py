"""Registers and shared memory of the compiled FP8 GEMM kernel, for any target, without a GPU.

The kernel is cross-compiled by Triton (occtune.build.compiled.triton_resources over occtune.build.tritonxc)
with the specialisation its launcher makes for a workload: fp8 pointers typed per target (fp8e4nv
on NVIDIA and gfx950, fp8e4b8 on gfx942), integers equal to 1 folded to constants (the unit
strides, M = 1), integers divisible by 16 marked so. Launch options: num_warps, num_stages and the AMD-only ones present in the config.
"""

from __future__ import annotations

from pathlib import Path

from occtune.engine.family import Resources

from .config import PIPE_SPLITK_WGMMA, PIPES_ONE_PASS, PIPES_SPLITK, PIPES_WGMMA, amd_keys, fp8_dtype_name

H200_SMS = 132     # the SM count PIPE 8's split is cross-compiled for (the split only changes the epilogue)

# the default runs' compiled resources on every target (tools/precompute.py fp8_gemm)
PRECOMPUTED = Path(__file__).with_name("precomputed.json")

_TRITON_FP8 = {"float8_e4m3fn": "*fp8e4nv", "float8_e4m3fnuz": "*fp8e4b8"}


def signature(target: str, M: int, N: int, K: int, config: dict):
    """(signature, constexprs, attrs) as the launcher specialises ``kernel.launch`` for this problem:
    A row-major, its scales column-major (stride [1, M]), B [N, K] row-major, C row-major; the
    kernel's NOT_SPECIALISED arguments stay plain integers. PIPE 8 (splitk.py): its split-K
    kernel as split_of chooses it on an H200's 132 SMs (the partials' pass when it splits)."""
    from occtune.build.tritonxc import launcher_signature

    from . import splitk
    from .kernel import NOT_SPECIALISED

    kb = -(-K // 128)
    ints = {"M": M, "N": N, "K": K, "stride_am": K, "stride_ak": 1, "stride_bn": K, "stride_bk": 1,
            "stride_cm": N, "stride_cn": 1, "stride_asm": 1, "stride_ask": M, "stride_bsn": kb, "stride_bsk": 1}
    fp8 = _TRITON_FP8[fp8_dtype_name(target)]
    pointers = {"a_ptr": fp8, "b_ptr": fp8, "c_ptr": "*bf16", "as_ptr": "*fp32", "bs_ptr": "*fp32"}
    constexprs = {k: config[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")}
    constexprs.update(EVEN_K=K % config["BLOCK_K"] == 0, SCALE=128)
    if config.get("PIPE", 0) in PIPES_SPLITK:
        split = splitk.split_of(M, N, K, config, H200_SMS)
        ints["steps"] = splitk.steps_of(K, config, split)
        return launcher_signature({**pointers, "ws_ptr": "*fp32", "cnt_ptr": "*i32"}, ints,
                                  {**constexprs, "PARTIAL": split > 1, "ONE_PASS": config["PIPE"] in PIPES_ONE_PASS},
                                  splitk.NOT_SPECIALISED)
    constexprs.update(GROUP_M=config["GROUP_M"], PIPE=config.get("PIPE", 0))
    return launcher_signature(pointers, ints, constexprs, NOT_SPECIALISED)


def compiled_resources(config: dict, target: str, workload: dict) -> Resources:
    """``config`` compiled for ``target`` at ``workload`` (occtune.build.compiled.triton_resources: cached
    on disk, the compiler named in ``source``)."""
    from occtune.build.compiled import triton_resources
    from occtune.build.tritonxc import compilable_module

    from . import kernel, splitk

    M, N, K = int(workload["M"]), int(workload["N"]), int(workload["K"])
    name = kernel.kernel_name(config)
    if config.get("PIPE", 0) in PIPES_WGMMA:     # the Gluon kernel (sm_90 only; config.pipe_runs_on)
        from . import wgmma

        sig, cx, attrs = wgmma.signature(config, M, N, K)
        fn = getattr(compilable_module(wgmma, name), name)
        warps = wgmma.launch_warps(config)
    elif config.get("PIPE", 0) == PIPE_SPLITK_WGMMA:     # the Gluon decode kernel (sm_90 only)
        from . import splitk_wgmma

        sig, cx, attrs = splitk_wgmma.signature(config, splitk.split_of(M, N, K, config, H200_SMS))
        fn = getattr(compilable_module(splitk_wgmma, name), name)
        warps = config["num_warps"]
    else:
        sig, cx, attrs = signature(target, M, N, K, config)
        fn = getattr(compilable_module(splitk if config.get("PIPE", 0) in PIPES_SPLITK else kernel, name), name)
        warps = config["num_warps"]
    opts = {"num_warps": warps, "num_stages": config["num_stages"]}
    opts.update({k: config[k] for k in amd_keys(target)})
    return triton_resources(fn, sig, cx, attrs, target=target, options=opts, shipped=PRECOMPUTED)
