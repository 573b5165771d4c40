"""PIPE 8: the decode kernel (small M), portable Triton: split-K over the SMs, the weights read once.

At M <= 64 the GEMM is memory-bound: its floor is reading the ``N x K`` fp8 weight bytes once.
One program per (N tile, M tile) gives few programs (N = 2112 on 64-row tiles: 33) that each walk
all of K, so few bytes are in flight and HBM idles. Here the K steps are also split across
programs (``split`` of them per tile, see :func:`split_of`), so that about ``WAVES`` programs per
SM stream the weights at once, each reading its own K range of its weight rows once.

- **Swap AB.** Each program computes ``C^T`` tiles: ``dot(B tile [BLOCK_N, BLOCK_K], A tile^T
  [BLOCK_K, BLOCK_M])``. The weight rows are the MMA's M dimension (64 or 128 rows, what Hopper's
  wgmma and AMD's MFMA want), the tokens its N dimension (16, 32 or 64: a 16-wide MMA for
  M = 1 wastes no more than 15 rows of a small A tile, never a weight byte).
- **Scales.** ``BLOCK_N`` divides 128, so a tile's weight rows lie in one 128 x 128 scale block: per
  K step (``BLOCK_K`` divides 128) the product is scaled by one weight scale and the tokens' row
  scales before it joins the fp32 accumulator.
- **Deterministic reduction.** With ``split > 1`` each program writes its fp32 partial tile to a
  workspace ``[split, M, N]``, and a second small kernel adds the ``split`` partials of each output
  in the order 0, 1, ..., split - 1 and writes bf16: the same inputs give the same bits on every
  run (no atomics, no arrival order). With ``split == 1`` the program stores bf16 directly.
- Loads use plain pointers (software-pipelined by Triton over ``num_stages``), so the same source
  compiles for NVIDIA and AMD targets; weight rows past N wrap inside the matrix (stores are
  masked), a ragged last K step is masked.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .config import PIPE_SPLITK_WGMMA

WAVES = 2                 # programs per SM the split aims for (the H200 sweep's best rule: see split_of)
MIN_STEPS = 4             # K steps (of BLOCK_K) each program walks at least
REDUCE_BLOCK = 1024       # outputs per program of the reduction
REDUCE_WARPS = 4


NOT_SPECIALISED = ("M", "steps", "stride_ask", "stride_bsn")     # as kernel.py's (and the K steps per split)


@triton.jit
def _partial(a_ptr, b_ptr, as_ptr, bs_ptr, pid_m, pid_n, s, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
             stride_asm, stride_ask, stride_bsn, stride_bsk, steps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, SCALE: tl.constexpr):
    """The fp32 [BLOCK_N, BLOCK_M] product of K steps s*steps .. (s+1)*steps - 1 (swap AB: C^T)."""
    rn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
    rm = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    nk = (K + BLOCK_K - 1) // BLOCK_K
    k_lo = s * steps
    k_hi = min(k_lo + steps, nk)
    b_ptrs = b_ptr + rn[:, None] * stride_bn + (k_lo * BLOCK_K + rk)[None, :] * stride_bk
    a_ptrs = a_ptr + rm[:, None] * stride_am + (k_lo * BLOCK_K + rk)[None, :] * stride_ak
    as_ptrs = as_ptr + rm * stride_asm
    bs_row = bs_ptr + ((pid_n * BLOCK_N) // SCALE) * stride_bsn
    acc = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
    for kk in range(k_lo, k_hi):
        if EVEN_K:
            b = tl.load(b_ptrs)
            a = tl.load(a_ptrs)
        else:
            left = K - kk * BLOCK_K
            b = tl.load(b_ptrs, mask=rk[None, :] < left, other=0.0)
            a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        ks = (kk * BLOCK_K) // SCALE
        scale = tl.load(as_ptrs + ks * stride_ask) * tl.load(bs_row + ks * stride_bsk)
        acc += tl.dot(b, tl.trans(a)) * scale[None, :]
        b_ptrs += BLOCK_K * stride_bk
        a_ptrs += BLOCK_K * stride_ak
    return acc


@triton.jit(do_not_specialize=NOT_SPECIALISED)
def fp8_gemm_splitk_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, ws_ptr, cnt_ptr, M, N, K,
                           stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                           stride_asm, stride_ask, stride_bsn, stride_bsk, steps,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           EVEN_K: tl.constexpr, SCALE: tl.constexpr, PARTIAL: tl.constexpr, ONE_PASS: tl.constexpr):
    """Program (m tile, n tile, split s): one K range of one [BLOCK_M, BLOCK_N] output tile (the M
    tiles of an N tile are neighbours in launch order, so they share its weights in L2). Without
    PARTIAL, bf16 to C. With PARTIAL, fp32 to ws[s]; then ONE_PASS: the tile's last program to
    finish (a ticket on cnt[tile], which it resets) adds ws[0], ws[1], ... in that order into C."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    s = tl.program_id(2)
    acc = _partial(a_ptr, b_ptr, as_ptr, bs_ptr, pid_m, pid_n, s, M, N, K, stride_am, stride_ak, stride_bn,
                   stride_bk, stride_asm, stride_ask, stride_bsn, stride_bsk, steps, BLOCK_M, BLOCK_N, BLOCK_K,
                   EVEN_K, SCALE)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (cn[:, None] < N) & (cm[None, :] < M)
    c_ptrs = c_ptr + cm.to(tl.int64)[None, :] * stride_cm + cn.to(tl.int64)[:, None] * stride_cn
    if PARTIAL:
        w_off = cm.to(tl.int64)[None, :] * N + cn[:, None]
        total = M.to(tl.int64) * N
        tl.store(ws_ptr + s * total + w_off, acc, mask=mask)
        if ONE_PASS:
            tl.debug_barrier()          # every thread's partial is written before the ticket is taken
            split = tl.num_programs(2)
            tile = pid_n * tl.num_programs(0) + pid_m
            ticket = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if ticket == split - 1:
                out = tl.load(ws_ptr + w_off, mask=mask, other=0.0, cache_modifier=".cg")
                for t in range(1, split):
                    out += tl.load(ws_ptr + t * total + w_off, mask=mask, other=0.0, cache_modifier=".cg")
                tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)
                tl.store(cnt_ptr + tile, 0)          # ready for the next call on this stream
    else:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=("M", "split"))
def fp8_gemm_splitk_reduce(ws_ptr, c_ptr, M, N, split, stride_cm, stride_cn, BLOCK: tl.constexpr):
    """C[m, n] = bf16(sum over s = 0, 1, ..., split - 1 of ws[s, m, n]), in that order."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    total = M.to(tl.int64) * N
    mask = offs < total
    acc = tl.load(ws_ptr + offs, mask=mask, other=0.0)
    for s in range(1, split):
        acc += tl.load(ws_ptr + s * total + offs, mask=mask, other=0.0)
    m = offs // N
    n = offs % N
    tl.store(c_ptr + m * stride_cm + n * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


# PIPE 10 (splitk_wgmma.py): about 4 programs per SM of at least 6 steps, the split one of those
# measured (benchmarks/records/fp8_decode/call4: with its three default configs per M bucket this
# rule took 1.5% more time than the best of 8 splits x 18 configs at each of 56 points; worst 1.08x)
WAVES_WGMMA, MIN_STEPS_WGMMA, SPLITS_WGMMA = 4, 6, (1, 2, 3, 4, 6, 8, 12, 16)


def split_of(M: int, N: int, K: int, config: dict, sms: int) -> int:
    """K splits per output tile: about ``WAVES`` programs per SM, each at least ``MIN_STEPS`` K
    steps (1 when the tiles alone fill the SMs). A function of the shape, the config and the SM
    count only, so a plan's result is the same on every call. The constants: on the H200 (132
    SMs, benchmarks/records/fp8_decode/call1), over 14 shapes x M 1-64 and 36 configs, this rule
    took 1.6% more time (geometric mean) than the best of splits 1-32 timed at each point.
    PIPE 10: ``WAVES_WGMMA`` and ``MIN_STEPS_WGMMA``, rounded down to one of ``SPLITS_WGMMA``."""
    nk = triton.cdiv(K, config["BLOCK_K"])
    gluon = config.get("PIPE") == PIPE_SPLITK_WGMMA
    waves, min_steps = (WAVES_WGMMA, MIN_STEPS_WGMMA) if gluon else (WAVES, MIN_STEPS)
    want = max(1, min(waves * sms // tiles(M, N, config), nk // min_steps))
    if not gluon:
        return _even(nk, want)
    return max(s for s in SPLITS_WGMMA if s <= want and _even(nk, s) == s)     # 1 always qualifies


def _even(nk: int, split: int) -> int:
    """The split of ``nk`` steps into ``split`` parts of equal steps with no empty one."""
    return triton.cdiv(nk, triton.cdiv(nk, split))


def steps_of(K: int, config: dict, split: int) -> int:
    return triton.cdiv(triton.cdiv(K, config["BLOCK_K"]), split)


def grid(M: int, N: int, config: dict, split: int) -> tuple[int, int, int]:
    return triton.cdiv(M, config["BLOCK_M"]), triton.cdiv(N, config["BLOCK_N"]), split


def tiles(M: int, N: int, config: dict) -> int:
    """Output tiles: the ticket counters PIPE 9 needs (one int32 each)."""
    return triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])


def reduce_grid(M: int, N: int) -> tuple[int]:
    return (triton.cdiv(M * N, REDUCE_BLOCK),)


def workspace_numel(M: int, N: int, split: int) -> int:
    """fp32 values of the partials (0: no split, no workspace)."""
    return split * M * N if split > 1 else 0
