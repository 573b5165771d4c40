"""The Triton w8a8 block-scaled FP8 GEMM: ``C[M, N] = (A * a_s) @ (B * b_s)^T`` in bf16.

- ``A``: fp8 e4m3 ``[M, K]``, ``a_s``: fp32 ``[M, ceil(K/128)]`` (one scale per row and 128
  columns; any strides, column-major is what the activation quantiser of sglang/vLLM writes).
- ``B``: fp8 e4m3 ``[N, K]`` (K contiguous), ``b_s``: fp32 ``[ceil(N/128), ceil(K/128)]`` (one scale
  per 128 x 128 block).
- The scales multiply (dequantised value = fp8 value x scale). fp8 is ``float8_e4m3fn`` on NVIDIA
  and gfx950, ``float8_e4m3fnuz`` on gfx942; the kernel is the same, Triton types it from the
  tensors (fp8e4nv / fp8e4b8).

Each program computes a ``BLOCK_M x BLOCK_N`` tile (grouped launch order, ``GROUP_M`` rows of
tiles share B in L2). Per ``BLOCK_K`` step the fp8 dot product is formed in fp32 and then scaled by
the step's row scales and block scale before it is added to the fp32 accumulator: the scales are
constant across one step because ``BLOCK_K`` divides 128.

How A and B reach the dot is the ``PIPE`` axis:

- ``PIPE=0`` (every target): pointer loads, software-pipelined by Triton over ``num_stages``. Only
  standard Triton (``tl.dot``, loads, stores), no vendor intrinsics, so the same source compiles
  for NVIDIA and AMD targets. Offsets are 64-bit; ragged M, N and K are masked (N and K need not
  be multiples of 128).
- ``PIPE=1`` (NVIDIA sm_90+ only): TMA tensor-descriptor loads (``tl.make_tensor_descriptor``;
  out-of-bounds rows and columns read as zeros). Needs K-contiguous A and B with ``K % 16 == 0``.
- ``PIPE=2`` (NVIDIA sm_90+ only): as 1, plus Triton's automatic warp specialisation of the K loop
  (``warp_specialize=True``): on Hopper, Triton 3.6 adds a load partition and splits the tile
  between two consumer warp groups that run unsynchronised, so one group's wgmma overlaps the
  other's scale-and-accumulate (the per-step scaling otherwise makes every wgmma wait, see
  below). Cross-compiled for sm_90 with num_warps=4 it runs 12 warps; 128 x 256 and 256 x 128
  tiles spill there.
- ``PIPE=3`` (NVIDIA sm_90+ only): as 2, persistent (``fp8_gemm_persistent_kernel``: one program
  per SM walks the tiles, the tile loop warp-specialised), so the producer loads the next tile
  while the consumers scale and store this one: for short K (the seed's K = 256 ... 2304).
- ``PIPE=4`` to ``7`` (NVIDIA sm_90 only): a second kernel, written in Gluon with the wgmma
  pipeline by hand so that each step's scaling overlaps the next step's MMA (``wgmma.py``): one
  program per tile (4), persistent (5), persistent with a TMA producer warp (6), and as 6 with
  each of the two consumer warp groups a partition of its own (7).
- ``PIPE=8`` and ``9`` (every target): the decode kernel of ``splitk.py`` for small M, split-K
  over the SMs with the weight rows as the MMA's M dimension; the fp32 partials are added in a
  fixed order by a second kernel (8) or by each tile's last program (9).
- ``PIPE=10`` (NVIDIA sm_90 only): the same decode kernel written in Gluon (``splitk_wgmma.py``):
  a TMA ring requested up front and each step's scaling overlapping the next step's wgmma.

Why the per-step scale limits Hopper: the scaled product is consumed in the same step, so Triton
waits for each step's wgmma group before the next one is issued (``wgmma.wait_group 0`` per step);
with PIPE 0 and 1 only other resident programs fill the tensor cores meanwhile.
"""

from __future__ import annotations

import functools

import triton
import triton.language as tl

from . import splitk
from .config import (PIPE_SPLITK_WGMMA, PIPES_DEVICE_TMA, PIPES_ONE_PASS, PIPES_SPLITK, PIPES_WGMMA,
                     SCALE_GROUP as SCALE_BLOCK)  # 1 x 128 for A, 128 x 128 for B


# M and the scale strides are not specialised (divisible by 16 / equal to 1): that would compile
# each config up to 6 times across the seed's shapes for no gain (they only index the scales).
NOT_SPECIALISED = ("M", "stride_ask", "stride_bsn")


@triton.jit
def _tile_of(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of program / tile number ``tile`` in the grouped order."""
    # No tl.cdiv / tl.zeros: they are @jit helpers of Triton's, which stay interpreter objects
    # under TRITON_INTERPRET=1 and then break the cross-compile of occtune.build.tritonxc.
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    in_group = GROUP_M * num_pid_n
    first_m = (tile // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % in_group) % group_m, (tile % in_group) // group_m


@triton.jit
def _scale_ptrs(as_ptr, bs_ptr, pid_m, pid_n, M, N, stride_asm, stride_bsn, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, SCALE: tl.constexpr, BROADCAST: tl.constexpr):
    """The tile's row-scale pointers [BLOCK_M] and block-scale pointers: one scalar when the tile
    lies in one 128-column block (or, BROADCAST, that one address as a [BLOCK_M] tensor: a scalar
    scale load raced under warp specialisation in tritonbench's blockwise kernel, PR
    meta-pytorch/tritonbench#1163), else [BLOCK_N]. Rows and columns wrap inside the matrix."""
    rm = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
    as_ptrs = as_ptr + rm * stride_asm
    if BLOCK_N > SCALE:
        rn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
        return as_ptrs, bs_ptr + (rn // SCALE) * stride_bsn
    elif BROADCAST:
        return as_ptrs, bs_ptr + ((pid_n * BLOCK_N) // SCALE) * stride_bsn + 0 * rm
    else:
        return as_ptrs, bs_ptr + ((pid_n * BLOCK_N) // SCALE) * stride_bsn


@triton.jit
def _scaled(acc, d, a_s, b_s, BLOCK_N: tl.constexpr, SCALE: tl.constexpr):
    """acc + one step's dot product ``d`` times its row scales and block scale(s)."""
    if BLOCK_N <= SCALE:
        return acc + d * (a_s * b_s)[:, None]
    else:
        return acc + d * a_s[:, None] * b_s[None, :]


@triton.jit
def _tma_steps(a_desc, b_desc, as_ptrs, bs_ptrs, pid_m, pid_n, K, stride_ask, stride_bsk,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SCALE: tl.constexpr,
               WS: tl.constexpr):
    """One tile's K loop through TMA descriptors (out-of-bounds reads are zeros)."""
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for kk in tl.range(0, (K + BLOCK_K - 1) // BLOCK_K, warp_specialize=WS):
        a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
        ks = (kk * BLOCK_K) // SCALE
        acc = _scaled(acc, tl.dot(a, b.T), tl.load(as_ptrs + ks * stride_ask), tl.load(bs_ptrs + ks * stride_bsk),
                      BLOCK_N, SCALE)
    return acc


@triton.jit
def _store(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + cm.to(tl.int64)[:, None] * stride_cm + cn.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def fp8_gemm_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K,
                    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                    stride_asm, stride_ask, stride_bsn, stride_bsk,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, SCALE: tl.constexpr, PIPE: tl.constexpr):
    """One program per tile: PIPE 0 (pointer loads), 1 (TMA), 2 (TMA, warp-specialised K loop)."""
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    as_ptrs, bs_ptrs = _scale_ptrs(as_ptr, bs_ptr, pid_m, pid_n, M, N, stride_asm, stride_bsn,
                                   BLOCK_M, BLOCK_N, SCALE, PIPE > 0)
    if PIPE > 0:    # TMA descriptors (NVIDIA sm_90+; family.is_valid keeps it off other targets)
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
        acc = _tma_steps(a_desc, b_desc, as_ptrs, bs_ptrs, pid_m, pid_n, K, stride_ask, stride_bsk,
                         BLOCK_M, BLOCK_N, BLOCK_K, SCALE, PIPE == 2)
    else:
        # rows and columns wrap inside the matrix, so that loads need no M/N mask (stores are masked)
        rm = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
        rn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rn[None, :] * stride_bn + rk[:, None] * stride_bk
        acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
        for kk in range(0, (K + BLOCK_K - 1) // BLOCK_K):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                left = K - kk * BLOCK_K
                a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
                b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
            ks = (kk * BLOCK_K) // SCALE
            acc = _scaled(acc, tl.dot(a, b), tl.load(as_ptrs + ks * stride_ask), tl.load(bs_ptrs + ks * stride_bsk),
                          BLOCK_N, SCALE)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    _store(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def fp8_gemm_persistent_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K,
                               stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                               stride_asm, stride_ask, stride_bsn, stride_bsk,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                               GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, SCALE: tl.constexpr,
                               PIPE: tl.constexpr):
    """PIPE 3: one program per SM walks the tiles (stride: the grid), TMA loads, the tile loop
    warp-specialised, so the producer loads the next tile while the consumers scale and store."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1], block_shape=[BLOCK_N, BLOCK_K])
    n_tiles = ((M + BLOCK_M - 1) // BLOCK_M) * ((N + BLOCK_N - 1) // BLOCK_N)
    for tile in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), warp_specialize=True):
        pid_m, pid_n = _tile_of(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        as_ptrs, bs_ptrs = _scale_ptrs(as_ptr, bs_ptr, pid_m, pid_n, M, N, stride_asm, stride_bsn,
                                       BLOCK_M, BLOCK_N, SCALE, True)
        acc = _tma_steps(a_desc, b_desc, as_ptrs, bs_ptrs, pid_m, pid_n, K, stride_ask, stride_bsk,
                         BLOCK_M, BLOCK_N, BLOCK_K, SCALE, False)
        _store(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


def kernel_name(config: dict) -> str:
    """The jit function that runs ``config`` (PIPE 3 is the persistent one; PIPE 4-7 are wgmma.py's
    Gluon kernels; PIPE 8 and 9 splitk.py's split-K kernel, PIPE 8 followed by its reduction)."""
    pipe = config.get("PIPE", 0)
    if pipe in PIPES_WGMMA:
        return {6: "fp8_gemm_wgmma_ws_kernel", 7: "fp8_gemm_wgmma_halves_kernel"}.get(pipe, "fp8_gemm_wgmma_kernel")
    if pipe == PIPE_SPLITK_WGMMA:
        return "fp8_gemm_splitk_wgmma_kernel"
    if pipe in PIPES_SPLITK:
        return "fp8_gemm_splitk_kernel"
    return "fp8_gemm_persistent_kernel" if pipe == 3 else "fp8_gemm_kernel"


# launch options that only AMD targets understand (HIPOptions), with their neutral values
AMD_OPTIONS = {"matrix_instr_nonkdim": 0, "waves_per_eu": 0, "kpack": 1}


def grid(M: int, N: int, config: dict, sms: int = 0) -> tuple[int]:
    """One program per tile; PIPE 3: one per SM (``sms``), at most one per tile."""
    tiles = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    return (min(tiles, sms),) if config.get("PIPE", 0) == 3 and sms else (tiles,)


@functools.lru_cache(maxsize=None)
def _sm_count(device) -> int:
    """The SMs of a CUDA ``device`` (4 under the interpreter, so that programs walk several tiles)."""
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def launch_options(config: dict) -> dict:
    """num_warps, num_stages and (present only in AMD configs) the AMD compile options."""
    opts = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    opts.update({k: config[k] for k in AMD_OPTIONS if k in config})
    return opts


@functools.lru_cache(maxsize=1)
def _use_scratch() -> None:
    """Install :func:`_scratch` as Triton's allocator, once (the launch path stays cheap)."""
    triton.set_allocator(_scratch)


def _scratch(size: int, alignment: int, stream):
    """Triton's allocator for in-kernel TMA descriptors (global scratch, 128 B per program)."""
    import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


def split_of(M: int, N: int, K: int, config: dict, device) -> int:
    """K splits of ``config`` on ``device`` (1 unless PIPE 8 or 9: see splitk.split_of)."""
    if config.get("PIPE", 0) not in PIPES_SPLITK:
        return 1
    return splitk.split_of(M, N, K, config, _sm_count(device))


def launches(a, a_s, b, b_s, out, config: dict, ws=None, cnt=None) -> list:
    """The launches of one call, in order: ``(jit function, grid, args, keyword args)`` with
    ``fn[grid](*args, **kwargs)`` launching each one (shapes checked by the caller). PIPE 8 and 9
    with a split: ``ws`` holds the fp32 partials (``splitk.workspace_numel`` values), and PIPE 9's
    ``cnt`` one zeroed int32 ticket per tile (``splitk.tiles``), which the kernel leaves zeroed."""
    M, K = a.shape
    N = b.shape[0]
    pipe = config.get("PIPE", 0)
    if pipe in PIPES_WGMMA:
        from . import wgmma

        return wgmma.launches(a, a_s, b, b_s, out, config)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
               a_s.stride(0), a_s.stride(1), b_s.stride(0), b_s.stride(1))
    meta = {"BLOCK_M": config["BLOCK_M"], "BLOCK_N": config["BLOCK_N"], "BLOCK_K": config["BLOCK_K"],
            "EVEN_K": K % config["BLOCK_K"] == 0, "SCALE": SCALE_BLOCK, **launch_options(config)}
    if pipe in PIPES_SPLITK:
        split = split_of(M, N, K, config, a.device)
        if pipe == PIPE_SPLITK_WGMMA:
            from . import splitk_wgmma

            return [splitk_wgmma.launch(a, a_s, b, b_s, out, config, split, ws, cnt, splitk.steps_of(K, config, split))]
        one_pass = pipe in PIPES_ONE_PASS and split > 1
        main = (splitk.fp8_gemm_splitk_kernel, splitk.grid(M, N, config, split),
                (a, b, out, a_s, b_s, out if ws is None else ws, cnt if one_pass else out, M, N, K, *strides,
                 splitk.steps_of(K, config, split)), {**meta, "PARTIAL": split > 1, "ONE_PASS": one_pass})
        if split == 1 or one_pass:
            return [main]
        return [main, (splitk.fp8_gemm_splitk_reduce, splitk.reduce_grid(M, N),
                       (ws, out, M, N, split, out.stride(0), out.stride(1)),
                       {"BLOCK": splitk.REDUCE_BLOCK, "num_warps": splitk.REDUCE_WARPS})]
    fn = globals()[kernel_name(config)]
    return [(fn, grid(M, N, config, _sm_count(a.device) if pipe == 3 else 0), (a, b, out, a_s, b_s, M, N, K, *strides),
             {**meta, "GROUP_M": config["GROUP_M"], "PIPE": pipe})]


def launch(a, a_s, b, b_s, out, config: dict) -> None:
    """``out[M, N] = (a * a_s) @ (b * b_s)^T`` with one Triton config through Triton's own launcher
    (shapes checked by the caller; a PIPE 1-7 config needs tma_ready(a, b): the caller checks,
    see family.is_valid). The serving path, with the host work done once, is plan.py's."""
    import torch

    M, K = a.shape
    N = b.shape[0]
    if M == 0 or N == 0:
        return
    if config.get("PIPE", 0) in PIPES_DEVICE_TMA and a.device.type == "cuda":
        _use_scratch()
    split = split_of(M, N, K, config, a.device)
    numel = splitk.workspace_numel(M, N, split)
    ws = torch.empty(numel, dtype=torch.float32, device=a.device) if numel else None
    cnt = torch.zeros(splitk.tiles(M, N, config), dtype=torch.int32, device=a.device) \
        if numel and config["PIPE"] in PIPES_ONE_PASS else None
    for fn, g, args, kw in launches(a, a_s, b, b_s, out, config, ws, cnt):
        fn[g](*args, **kw)


def tma_ready(a, b) -> str:
    """Why A and B cannot be read through TMA descriptors ('' when they can): K contiguous, and the
    row strides 16-byte aligned (fp8: K % 16 == 0), as cuTensorMapEncodeTiled requires."""
    if a.stride(1) != 1 or b.stride(1) != 1:
        return "TMA loads (PIPE > 0) need K-contiguous A and B"
    if (a.stride(0) % 16) or (b.stride(0) % 16):
        return "TMA loads (PIPE > 0) need row strides that are multiples of 16 bytes (K % 16 == 0)"
    return ""
