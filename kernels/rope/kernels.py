"""Triton kernels for DeepSeek-V4's interleaved (GPT-J style) rotary embedding.

Pair i of a row is ``(x[2i], x[2i+1])``; the frequencies are the fp32 view of complex64
``freqs_cis``: ``[max_seq, rope_dim]`` laid out ``cos0, sin0, cos1, sin1, ...``. Math is in fp32
and every store casts to the output's element type.

Every kernel sees the input as 3D ``[T, H, D]`` with strides ``(sx_t, sx_h, 1)`` (a 2D input is
``H = 1``), the output likewise, so strided slices such as ``o[..., -64:]`` of a head_dim-512
tensor need no copy. Columns are masked against ``D`` so a rope_dim that is not a power of two
(96, say) never touches the neighbouring columns. Offsets are computed in int64: a
``[32768, 128, 512]`` tensor already has 2**31 elements.

Variants (one small host launcher each, all with the same argument list):
- ``token``:   one program per (token, head); strided even/odd loads.
- ``batched``: one program per (BLOCK_M tokens, head); strided even/odd loads.
- ``tile``:    one program per (BLOCK_M tokens, head); one contiguous ``[BLOCK_M, D]`` load,
               the pair split done in registers (reshape to ``[BLOCK_M, D/2, 2]`` and split).
- ``flat``:    one program per BLOCK_M rows of the flattened ``token*H + head`` index; same
               in-register split; adjacent programs walk adjacent heads of one token.
- ``heads``:   one program per (token, BLOCK_M heads): the token's frequency row is loaded once
               and broadcast over the heads (our own variant; not in the sources).
"""

from __future__ import annotations

import triton
import triton.language as tl

# T (tokens) is not specialised (equal to 1 / divisible by 16): it only bounds the row mask, and
# specialising it compiled every config twice for the sweep's workloads (T=1 and T=64..32768).
NOT_SPECIALISED = ("T",)


@triton.jit
def _rotate(xr, xi, c, s, INVERSE: tl.constexpr):
    if INVERSE:
        return xr * c + xi * s, xi * c - xr * s
    else:
        return xr * c - xi * s, xr * s + xi * c


@triton.jit
def _row_of(pos_ptr, t, HAS_POS: tl.constexpr):
    """Frequency row of token ``t`` (int64): positions[t] if given, else t."""
    if HAS_POS:
        return tl.load(pos_ptr + t, mask=t >= 0, other=0).to(tl.int64)
    else:
        return t.to(tl.int64)


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def rope_token_kernel(x_ptr, out_ptr, f_ptr, pos_ptr, T, H, D,
                      sx_t, sx_h, so_t, so_h, sf,
                      HAS_POS: tl.constexpr, INVERSE: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    i = tl.arange(0, BLOCK_D // 2)
    m = 2 * i < D
    row = _row_of(pos_ptr, t, HAS_POS)
    c = tl.load(f_ptr + row * sf + 2 * i, mask=m, other=0.0)
    s = tl.load(f_ptr + row * sf + 2 * i + 1, mask=m, other=0.0)
    xp = x_ptr + t * sx_t + h * sx_h
    xr = tl.load(xp + 2 * i, mask=m, other=0.0).to(tl.float32)
    xi = tl.load(xp + 2 * i + 1, mask=m, other=0.0).to(tl.float32)
    re, im = _rotate(xr, xi, c, s, INVERSE)
    op = out_ptr + t * so_t + h * so_h
    ty = out_ptr.dtype.element_ty
    tl.store(op + 2 * i, re.to(ty), mask=m)
    tl.store(op + 2 * i + 1, im.to(ty), mask=m)


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def rope_batched_kernel(x_ptr, out_ptr, f_ptr, pos_ptr, T, H, D,
                        sx_t, sx_h, so_t, so_h, sf,
                        HAS_POS: tl.constexpr, INVERSE: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    h = tl.program_id(1).to(tl.int64)
    i = tl.arange(0, BLOCK_D // 2)
    mt = t < T
    m = mt[:, None] & (2 * i < D)[None, :]
    row = _row_of(pos_ptr, tl.where(mt, t, -1), HAS_POS)
    fp = f_ptr + row[:, None] * sf + 2 * i[None, :]
    c = tl.load(fp, mask=m, other=0.0)
    s = tl.load(fp + 1, mask=m, other=0.0)
    xp = x_ptr + t[:, None] * sx_t + h * sx_h + 2 * i[None, :]
    xr = tl.load(xp, mask=m, other=0.0).to(tl.float32)
    xi = tl.load(xp + 1, mask=m, other=0.0).to(tl.float32)
    re, im = _rotate(xr, xi, c, s, INVERSE)
    op = out_ptr + t[:, None] * so_t + h * so_h + 2 * i[None, :]
    ty = out_ptr.dtype.element_ty
    tl.store(op, re.to(ty), mask=m)
    tl.store(op + 1, im.to(ty), mask=m)


@triton.jit
def _rotate_tile(xt, ft, INVERSE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rotate a contiguous ``[BLOCK_M, BLOCK_D]`` tile by its ``[BLOCK_M, BLOCK_D]`` freqs tile."""
    xr, xi = tl.split(tl.reshape(xt.to(tl.float32), (BLOCK_M, BLOCK_D // 2, 2)))
    c, s = tl.split(tl.reshape(ft, (BLOCK_M, BLOCK_D // 2, 2)))
    re, im = _rotate(xr, xi, c, s, INVERSE)
    return tl.reshape(tl.join(re, im), (BLOCK_M, BLOCK_D))


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def rope_tile_kernel(x_ptr, out_ptr, f_ptr, pos_ptr, T, H, D,
                     sx_t, sx_h, so_t, so_h, sf,
                     HAS_POS: tl.constexpr, INVERSE: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    h = tl.program_id(1).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    mt = t < T
    m = mt[:, None] & (d < D)[None, :]
    row = _row_of(pos_ptr, tl.where(mt, t, -1), HAS_POS)
    ft = tl.load(f_ptr + row[:, None] * sf + d[None, :], mask=m, other=0.0)
    xt = tl.load(x_ptr + t[:, None] * sx_t + h * sx_h + d[None, :], mask=m, other=0.0)
    y = _rotate_tile(xt, ft, INVERSE, BLOCK_M, BLOCK_D)
    op = out_ptr + t[:, None] * so_t + h * so_h + d[None, :]
    tl.store(op, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def rope_flat_kernel(x_ptr, out_ptr, f_ptr, pos_ptr, T, H, D,
                     sx_t, sx_h, so_t, so_h, sf,
                     HAS_POS: tl.constexpr, INVERSE: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    mr = r < T * H
    t = r // H
    h = r - t * H
    d = tl.arange(0, BLOCK_D)
    m = mr[:, None] & (d < D)[None, :]
    row = _row_of(pos_ptr, tl.where(mr, t, -1), HAS_POS)
    ft = tl.load(f_ptr + row[:, None] * sf + d[None, :], mask=m, other=0.0)
    xt = tl.load(x_ptr + (t * sx_t + h * sx_h)[:, None] + d[None, :], mask=m, other=0.0)
    y = _rotate_tile(xt, ft, INVERSE, BLOCK_M, BLOCK_D)
    op = out_ptr + (t * so_t + h * so_h)[:, None] + d[None, :]
    tl.store(op, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def rope_heads_kernel(x_ptr, out_ptr, f_ptr, pos_ptr, T, H, D,
                      sx_t, sx_h, so_t, so_h, sf,
                      HAS_POS: tl.constexpr, INVERSE: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    row = _row_of(pos_ptr, t, HAS_POS)
    ft = tl.load(f_ptr + row * sf + d, mask=d < D, other=0.0)
    c, s = tl.split(tl.reshape(ft, (BLOCK_D // 2, 2)))
    m = (h < H)[:, None] & (d < D)[None, :]
    xt = tl.load(x_ptr + t * sx_t + h[:, None] * sx_h + d[None, :], mask=m, other=0.0)
    xr, xi = tl.split(tl.reshape(xt.to(tl.float32), (BLOCK_M, BLOCK_D // 2, 2)))
    re, im = _rotate(xr, xi, c[None, :], s[None, :], INVERSE)
    y = tl.reshape(tl.join(re, im), (BLOCK_M, BLOCK_D))
    op = out_ptr + t * so_t + h[:, None] * so_h + d[None, :]
    tl.store(op, y.to(out_ptr.dtype.element_ty), mask=m)


# variant -> (kernel, grid(T, H, BLOCK_M))
def _grid_token(T, H, bm):
    return (T, H)


def _grid_tokens_by_head(T, H, bm):
    return (triton.cdiv(T, bm), H)


def _grid_flat(T, H, bm):
    return (triton.cdiv(T * H, bm),)


def _grid_heads(T, H, bm):
    return (T, triton.cdiv(H, bm))


VARIANTS = {
    "token": (rope_token_kernel, _grid_token),
    "batched": (rope_batched_kernel, _grid_tokens_by_head),
    "tile": (rope_tile_kernel, _grid_tokens_by_head),
    "flat": (rope_flat_kernel, _grid_flat),
    "heads": (rope_heads_kernel, _grid_heads),
}


def launch_args(variant, x3, out3, f2, pos, inverse, block_m, num_warps) -> tuple[tuple, dict, tuple]:
    """(args, kwargs, grid) of one launch (see :func:`launch`)."""
    T, H, D = x3.shape
    block_d = max(2, triton.next_power_of_2(D))
    args = (x3, out3, f2, pos if pos is not None else f2, T, H, D,
            x3.stride(0), x3.stride(1), out3.stride(0), out3.stride(1), f2.stride(0))
    kwargs = dict(HAS_POS=pos is not None, INVERSE=bool(inverse), BLOCK_M=block_m, BLOCK_D=block_d,
                  num_warps=num_warps)
    return args, kwargs, VARIANTS[variant][1](T, H, block_m)


def launch(variant, x3, out3, f2, pos, inverse, block_m, num_warps):
    """Launch one variant on 3D views ``x3``/``out3`` ``[T, H, D]`` (last stride 1) and fp32
    ``f2`` ``[S, D]`` (last stride 1). Returns Triton's handle of the compiled kernel."""
    args, kwargs, grid = launch_args(variant, x3, out3, f2, pos, inverse, block_m, num_warps)
    return VARIANTS[variant][0][grid](*args, **kwargs)


def warm_args(workload: dict, config: dict, dtype) -> tuple[tuple, dict, tuple]:
    """(args, kwargs, grid) for ``kernel.warmup`` of ``config`` on ``workload``: what
    :func:`launch` passes for the family's inputs (``x``/``out`` the last ``D`` columns of a
    contiguous ``[T, H, head_dim]`` tensor, fp32 ``[S, D]`` frequencies), with torch dtypes in
    place of the tensors (Triton mocks them; tensors of these views are 16-byte aligned)."""
    import torch

    T, H, D, hd = (int(workload[k]) for k in ("T", "H", "D", "head_dim"))
    pos = torch.int64 if workload["positions"] else torch.float32
    args = (dtype, dtype, torch.float32, pos, T, H, D, H * hd, hd, H * hd, hd, D)
    bm = config["BLOCK_M"]
    kwargs = dict(HAS_POS=bool(workload["positions"]), INVERSE=bool(workload["inverse"]), BLOCK_M=bm,
                  BLOCK_D=max(2, triton.next_power_of_2(D)), num_warps=config["num_warps"])
    return args, kwargs, VARIANTS[config["variant"]][1](T, H, bm)
