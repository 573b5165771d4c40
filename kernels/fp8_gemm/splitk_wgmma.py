"""PIPE 10 (NVIDIA sm_90 only): the decode kernel of ``splitk.py`` written in Gluon, wgmma by hand.

Same split, workspace, tickets and output as PIPE 9 (``splitk.py``: split-K over the SMs, swap AB,
the fp32 partials added in the order 0, 1, ..., split - 1 by each tile's last program); what
changes is how one program walks its K range:

- **TMA ring, filled up front.** The weight tile ``[BLOCK_N, 128]`` and the tokens' tile
  ``[BLOCK_M, 128]`` of each K step arrive by TMA into a ring of ``num_stages`` slots, one
  mbarrier each; all slots are requested before the first MMA, and a slot is refilled once the
  wgmma that read it is complete. A program of S <= num_stages steps has every byte of its K
  range in flight at once (PIPE 8/9's cp.async pipeline keeps num_stages - 1 steps ahead).
- **Scaling one step behind the MMA** (as ``wgmma.py``, PIPE 4-7): issue wgmma(k), wait until only
  it is in flight, then add product(k-1) x its scales, so the tensor cores never wait for the
  scaling; a step's scales are loaded ``AHEAD`` steps before they are used. Triton's own pipeline
  waits for each step's wgmma (``wgmma.wait_group 0``); PIPE 8/9 take up to a quarter more time
  at M = 64 than at M = 1 (``docs/fp8_gemm.md``).
- Swap AB: the weight rows are wgmma's M (64 rows per warp group: BLOCK_N 64 on 4 warps, 128 on
  8), the tokens its N (BLOCK_M 16, 32 or 64); a step's scale is the weight block's scalar times
  the tokens' row scales, one per column of the ``[BLOCK_N, BLOCK_M]`` product. Tokens past M and
  weight rows past N read as zeros (TMA), their outputs are not stored.
- The partial tile leaves through a layout with the weight rows contiguous (coalesced along N).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from . import splitk
from .wgmma import _barrier, _descriptor, _tma_load

BLOCK_K = 128
# steps ahead a step's scales are loaded (benchmarks/records/fp8_decode/call7, H200: 2 was 1.015x
# faster than 1 over the 56 decode points, geometric mean of the best config each; 0.95-1.06x)
AHEAD = 2


@gluon.jit
def _issue(w_desc, x_desc, w_bufs, x_bufs, ready, i, n, k0, off_n, off_m, STAGES: gl.constexpr):
    """Request step ``i`` (of ``n``; K step ``k0 + i``) into its ring slot (nothing past ``n``)."""
    slot = i % STAGES
    bar = ready.index(slot)
    pred = i < n
    mbarrier.expect(bar, w_desc.block_type.nbytes + x_desc.block_type.nbytes, pred=pred)
    _tma_load(w_desc, [off_n, (k0 + i) * 128], bar, w_bufs.index(slot), pred=pred)
    _tma_load(x_desc, [off_m, (k0 + i) * 128], bar, x_bufs.index(slot), pred=pred)


@gluon.jit
def _mma(w_bufs, x_bufs, ready, i, acc, STAGES: gl.constexpr):
    """Wait for step ``i``'s tiles and start their product (async, zero-initialised)."""
    slot = i % STAGES
    mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
    return warpgroup_mma(w_bufs.index(slot), x_bufs.index(slot).permute((1, 0)), acc, use_acc=False, is_async=True)


@gluon.jit
def _refill(w_desc, x_desc, w_bufs, x_bufs, ready, i, n, k0, off_n, off_m, STAGES: gl.constexpr,
            NUM_WARPS: gl.constexpr):
    """Step ``i``'s wgmma is complete: its slot takes step ``i + STAGES``."""
    if NUM_WARPS > 4:
        _barrier()    # both warp groups are past that wgmma
    _issue(w_desc, x_desc, w_bufs, x_bufs, ready, i + STAGES, n, k0, off_n, off_m, STAGES)


@gluon.jit
def _scales(as_ptrs, bs_ptr, i, n, k0, stride_ask, stride_bsk):
    """Step ``i``'s token scales times the weight block's scale: [BLOCK_M] (clamped to the last step)."""
    k = k0 + gl.minimum(i, n - 1)
    return gl.load(as_ptrs + k * stride_ask) * gl.load(bs_ptr + k * stride_bsk)


@gluon.jit
def _k_range(w_desc, x_desc, w_bufs, x_bufs, ready, as_ptrs, bs_ptr, k0, n, off_n, off_m, stride_ask, stride_bsk,
             layout: gl.constexpr, STAGES: gl.constexpr, NUM_WARPS: gl.constexpr, AHEAD: gl.constexpr):
    """The fp32 [BLOCK_N, BLOCK_M] product of K steps k0 .. k0 + n - 1, each step scaled while the
    next one's wgmma runs (unrolled by two, as wgmma.py's ``_tile_acc``, for the same reason); a
    step's scales are loaded AHEAD (1 or 2) steps before they are used."""
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    BLOCK_M: gl.constexpr = x_desc.block_type.shape[0]
    for s in gl.static_range(STAGES):
        _issue(w_desc, x_desc, w_bufs, x_bufs, ready, s, n, k0, off_n, off_m, STAGES)
    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout)
    d0 = _mma(w_bufs, x_bufs, ready, 0, acc, STAGES)
    s0 = _scales(as_ptrs, bs_ptr, 0, n, k0, stride_ask, stride_bsk)
    if AHEAD == 2:
        s1 = _scales(as_ptrs, bs_ptr, 1, n, k0, stride_ask, stride_bsk)
    for j in range(0, (n - 1) // 2):
        i = 1 + 2 * j
        d1 = _mma(w_bufs, x_bufs, ready, i, acc, STAGES)
        r0 = warpgroup_mma_wait(1, deps=(d0,))
        _refill(w_desc, x_desc, w_bufs, x_bufs, ready, i - 1, n, k0, off_n, off_m, STAGES, NUM_WARPS)
        acc = acc + r0 * s0[None, :]
        if AHEAD == 2:
            s0 = _scales(as_ptrs, bs_ptr, i + 1, n, k0, stride_ask, stride_bsk)
        else:
            s1 = _scales(as_ptrs, bs_ptr, i, n, k0, stride_ask, stride_bsk)
        d0 = _mma(w_bufs, x_bufs, ready, i + 1, acc, STAGES)
        r1 = warpgroup_mma_wait(1, deps=(d1,))
        _refill(w_desc, x_desc, w_bufs, x_bufs, ready, i, n, k0, off_n, off_m, STAGES, NUM_WARPS)
        acc = acc + r1 * s1[None, :]
        if AHEAD == 2:
            s1 = _scales(as_ptrs, bs_ptr, i + 2, n, k0, stride_ask, stride_bsk)
        else:
            s0 = _scales(as_ptrs, bs_ptr, i + 1, n, k0, stride_ask, stride_bsk)
    if n % 2 == 0:
        d1 = _mma(w_bufs, x_bufs, ready, n - 1, acc, STAGES)
        r0 = warpgroup_mma_wait(1, deps=(d0,))
        acc = acc + r0 * s0[None, :]
        if AHEAD == 2:
            s0 = s1
        else:
            s0 = _scales(as_ptrs, bs_ptr, n - 1, n, k0, stride_ask, stride_bsk)
        last = warpgroup_mma_wait(0, deps=(d1,))
    else:
        last = warpgroup_mma_wait(0, deps=(d0,))
    return acc + last * s0[None, :]


@gluon.jit
def _finish(part, c_ptr, ws_ptr, cnt_ptr, pid_m, pid_n, s, M, N, stride_cm, stride_cn, BLOCK_M: gl.constexpr,
            BLOCK_N: gl.constexpr, PARTIAL: gl.constexpr, num_warps: gl.constexpr):
    """Store the program's [BLOCK_N, BLOCK_M] result: bf16 to C (no split), or fp32 to ws[s] and, by
    the tile's last program (a ticket on cnt[tile], reset after), C = ws[0] + ws[1] + ... in order."""
    TPW_N: gl.constexpr = 32 if BLOCK_N >= 128 else BLOCK_N // 4
    out_layout: gl.constexpr = gl.BlockedLayout([4, 1], [TPW_N, 32 // TPW_N], [1, num_warps], [0, 1])
    part = gl.convert_layout(part, out_layout)
    rn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, out_layout))
    rm = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, out_layout))
    mask = (rn[:, None] < N) & (rm[None, :] < M)
    c_ptrs = c_ptr + rm.to(gl.int64)[None, :] * stride_cm + rn.to(gl.int64)[:, None] * stride_cn
    if PARTIAL:
        w_off = rm.to(gl.int64)[None, :] * N + rn[:, None]
        total = M.to(gl.int64) * N
        gl.store(ws_ptr + s * total + w_off, part, mask=mask)
        _barrier()          # every thread's partial is written before the ticket is taken
        split = gl.num_programs(2)
        tile = pid_n * gl.num_programs(0) + pid_m
        ticket = gl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if ticket == split - 1:
            acc = gl.load(ws_ptr + w_off, mask=mask, other=0.0, cache_modifier=".cg")
            for t in range(1, split):
                acc += gl.load(ws_ptr + t * total + w_off, mask=mask, other=0.0, cache_modifier=".cg")
            gl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
            gl.store(cnt_ptr + tile, 0)          # ready for the next call on this stream
    else:
        gl.store(c_ptrs, part.to(c_ptr.dtype.element_ty), mask=mask)


@gluon.jit(do_not_specialize=("M", "steps", "stride_ask"))
def fp8_gemm_splitk_wgmma_kernel(w_desc, x_desc, c_ptr, as_ptr, bs_ptr, ws_ptr, cnt_ptr, M, N, K, stride_cm,
                                 stride_cn, stride_asm, stride_ask, stride_bsn, stride_bsk, steps,
                                 STAGES: gl.constexpr, PARTIAL: gl.constexpr, AHEAD: gl.constexpr,
                                 num_warps: gl.constexpr):
    """Program (m tile, n tile, split s): K steps s*steps .. of one output tile (see the module)."""
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    BLOCK_M: gl.constexpr = x_desc.block_type.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                     instr_shape=[16, BLOCK_M, 32])
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    s = gl.program_id(2)
    nk = (K + 127) // 128
    k0 = s * steps
    n = gl.minimum(steps, nk - k0)
    off_n = pid_n * BLOCK_N
    off_m = pid_m * BLOCK_M
    rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, layout))
    as_ptrs = as_ptr + (rows % M).to(gl.int64) * stride_asm      # tokens past M wrap (their output is dropped)
    bs_ptr = bs_ptr + (off_n // 128) * stride_bsn
    w_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES, BLOCK_N, 128], w_desc.layout)
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BLOCK_M, 128], x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    part = _k_range(w_desc, x_desc, w_bufs, x_bufs, ready, as_ptrs, bs_ptr, k0, n, off_n, off_m, stride_ask,
                    stride_bsk, layout, STAGES, num_warps, AHEAD)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
    _finish(part, c_ptr, ws_ptr, cnt_ptr, pid_m, pid_n, s, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, PARTIAL,
            num_warps)


def layouts(config: dict) -> dict:
    """The shared-memory layouts of the weight (``b``) and token (``a``) descriptors."""
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    return {"b": ([bn, BLOCK_K], gl.NVMMASharedLayout.get_default_for([bn, BLOCK_K], gl.float8e4nv)),
            "a": ([bm, BLOCK_K], gl.NVMMASharedLayout.get_default_for([bm, BLOCK_K], gl.float8e4nv))}


def signature(config: dict, split: int) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) of the launch :func:`launch` makes with ``split`` (A
    row-major, its scales column-major, B [N, K] row-major, C row-major): what cross-compiles it
    (occtune.build.tritonxc)."""
    lay = layouts(config)
    sig = {f"{'w' if k == 'b' else 'x'}_desc": f"tensordesc<fp8e4nv[{', '.join(map(str, blk))}],{lt!r}>"
           for k, (blk, lt) in lay.items()}
    sig.update({"c_ptr": "*bf16", "as_ptr": "*fp32", "bs_ptr": "*fp32", "ws_ptr": "*fp32" if split > 1 else "*bf16",
                "cnt_ptr": "*i32" if split > 1 else "*bf16", "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32",
                "stride_cn": "constexpr", "stride_asm": "constexpr", "stride_ask": "i32", "stride_bsn": "i32",
                "stride_bsk": "constexpr", "steps": "i32", "STAGES": "constexpr", "PARTIAL": "constexpr",
                "AHEAD": "constexpr", "num_warps": "constexpr"})
    cx = {"stride_cn": 1, "stride_asm": 1, "stride_bsk": 1, "STAGES": config["num_stages"], "PARTIAL": split > 1,
          "AHEAD": AHEAD, "num_warps": config["num_warps"]}
    return sig, cx, {}


def launch(a, a_s, b, b_s, out, config: dict, split: int, ws, cnt, steps: int):
    """(jit function, grid, args, keyword args) of one call (shapes and split from the caller)."""
    M, K = a.shape
    N = b.shape[0]
    lay = layouts(config)
    w_desc, x_desc = _descriptor(b, *lay["b"]), _descriptor(a, *lay["a"])
    grid = splitk.grid(M, N, config, split)
    args = (w_desc, x_desc, out, a_s, b_s, out if ws is None else ws, out if cnt is None else cnt, M, N, K,
            out.stride(0), out.stride(1), a_s.stride(0), a_s.stride(1), b_s.stride(0), b_s.stride(1), steps)
    return fp8_gemm_splitk_wgmma_kernel, grid, args, {"STAGES": config["num_stages"], "PARTIAL": split > 1,
                                                      "AHEAD": AHEAD, "num_warps": config["num_warps"]}
