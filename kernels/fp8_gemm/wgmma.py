"""PIPE 4, 5 and 6 (NVIDIA sm_90 only): the FP8 block-scaled GEMM written in Gluon, wgmma by hand.

Same math, inputs and output as ``kernel.py`` (``C = (A * a_s) @ (B * b_s)^T`` in bf16). Why a
second kernel: in Triton's own pipeline every K step's product is scaled in the same step, so
Triton waits for that step's wgmma before issuing the next one (``wgmma.wait_group 0`` per step)
and the tensor cores idle while the warps scale. Here the scaling lags one step behind the MMA:

    issue wgmma(k)  ->  wait until only wgmma(k) is in flight  ->  acc += product(k-1) * scales(k-1)

so step k runs on the tensor cores while step k-1 is scaled. The loop is unrolled by two so that
an in-flight product never moves between registers (a loop-carried product did: ptxas then
serialises every wgmma of the kernel, "C7514 ... non wgmma instructions reading accumulator
registers"), and each new wgmma takes the accumulator as its (ignored, ``use_acc=False``) input,
which keeps the scaling ahead of the next wgmma in program order (without it LLVM sank the
scaling below that wgmma, which produced the same copy and serialisation).

- A and B arrive by TMA into a ring of ``num_stages`` shared-memory slots, one mbarrier each; a
  slot is refilled once the wgmma that read it is complete (with two warp groups, after a CTA
  barrier: both are past it).
- ``BLOCK_M`` is 16 rows per warp: 64 rows on 4 warps (one warp group), 128 on 8 (two, each a
  64-row half); ``BLOCK_N`` <= 128 so a tile's B scale is one number per step; ``BLOCK_K`` = 128.
- The bf16 tile leaves through shared memory by one TMA store (out-of-bounds rows and columns
  are dropped), whose wait is deferred to the next tile's epilogue.
- Programs walk the tiles with the grid's stride: PIPE 4 launches one program per tile, PIPE 5
  and 6 (persistent) as many as fit on the device's SMs at once (from the compiled kernel's
  registers and shared memory, ``occtune.model.occupancy``), so a program's next tile loads while its
  last tile's store drains.
- PIPE 6 is warp-specialised: one more warp (``PRODUCER_REGS`` registers, the consumers get
  more through ``setmaxnreg``) only issues the TMA loads, each slot once the consumers have
  released it on its ``empty`` mbarrier; the consumer warps no longer stop between wgmmas to
  issue loads. On the H200 this took our kernel from about 1.3x to about 1.1x of cuBLASLt's time
  (``docs/fp8_gemm.md``).
- PIPE 7 is PIPE 6 with each consumer warp group (64 rows of the 128-row tile) a partition of its
  own: a partition releases a ring slot (``empty`` counts two arrivals) and stores its half of
  the tile without a CTA barrier with the other, so one warp group's stall no longer stops both;
  its scales are loaded two steps ahead (one for PIPE 4-6, where two measured slower). With 6
  stages it ran the narrow, long-K shapes (N = 512, 1024; K = 7168, 8192) 4-7% faster than PIPE
  6 on the H200, 2-4% more with the scales two steps ahead; elsewhere each wins some shapes (the
  tuner picks).

Gluon is Triton's experimental low-level dialect; its names moved between Triton 3.6 and 3.9
(``async_copy_global_to_shared`` -> ``async_load``, ``gl.thread_barrier`` -> ``gl.barrier``): the
aliases below take either.
"""

from __future__ import annotations

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)

_tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
_tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
# a barrier of the warps running the code (the CTA; a warp-specialised partition's own warps)
_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier

PRODUCER_REGS = gl.constexpr(40)     # registers per thread of the TMA producer warp (PIPE 6, 7); consumers get the rest
HALF_REGS = gl.constexpr(232)        # PIPE 7: registers per thread of the second consumer warp group (the first gets the rest)


@gluon.jit
def _coords(tile, num_pid_m, num_pid_n, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """(off_m, off_n) of tile number ``tile`` in grouped order (GROUP_M rows of tiles share B in L2)."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    return (first_m + (tile % in_group) % group_m) * BLOCK_M, ((tile % in_group) // group_m) * BLOCK_N


@gluon.jit
def _issue(a_desc, b_desc, a_bufs, b_bufs, ready, base, step, off_m, off_n, nk, STAGES: gl.constexpr):
    """Load this tile's K step ``step`` (global step ``base + step``) into its ring slot."""
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    slot = (base + step) % STAGES
    bar = ready.index(slot)
    pred = step < nk
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    _tma_load(a_desc, [off_m, step * BLOCK_K], bar, a_bufs.index(slot), pred=pred)
    _tma_load(b_desc, [off_n, step * BLOCK_K], bar, b_bufs.index(slot), pred=pred)


@gluon.jit
def _release(a_desc, b_desc, a_bufs, b_bufs, ready, empty, base, step, off_m, off_n, nk, STAGES: gl.constexpr,
             NUM_WARPS: gl.constexpr, WS: gl.constexpr):
    """Step ``step``'s wgmma is complete, so its ring slot is free: signal the producer warp (WS),
    or load step ``step + STAGES`` into it here."""
    if NUM_WARPS > 4:
        _barrier()    # both warp groups are past that wgmma
    if WS:
        mbarrier.arrive(empty.index((base + step) % STAGES), count=1)    # one arrival (thread 0)
    else:
        _issue(a_desc, b_desc, a_bufs, b_bufs, ready, base, step + STAGES, off_m, off_n, nk, STAGES)


@gluon.jit
def _mma(a_bufs, b_bufs, ready, g, acc, STAGES: gl.constexpr, ROW0: gl.constexpr, ROWS: gl.constexpr):
    """Wait for global step ``g``'s tiles and start their product (async, zero-initialised)."""
    slot = g % STAGES
    mbarrier.wait(ready.index(slot), (g // STAGES) & 1)
    a = a_bufs.index(slot)
    if ROWS < a_bufs.shape[1]:
        a = a.slice(ROW0, ROWS)
    return warpgroup_mma(a, b_bufs.index(slot).permute((1, 0)), acc, use_acc=False, is_async=True)


@gluon.jit
def _scales(as_ptrs, bs_ptr, step, nk, stride_ask, stride_bsk):
    """Step ``step``'s row scales times the tile's block scale: [rows] (a step past the last
    one reads the last one's: loaded ahead, never used)."""
    step = gl.minimum(step, nk - 1)
    return gl.load(as_ptrs + step * stride_ask) * gl.load(bs_ptr + step * stride_bsk)


@gluon.jit
def _tile_acc(a_desc, b_desc, a_bufs, b_bufs, ready, empty, as_ptrs, bs_ptr, off_m, off_n, nk, base, stride_ask,
              stride_bsk, layout: gl.constexpr, STAGES: gl.constexpr, NUM_WARPS: gl.constexpr, WS: gl.constexpr,
              ROW0: gl.constexpr, ROWS: gl.constexpr, AHEAD: gl.constexpr):
    """One tile's fp32 result (rows ROW0 .. ROW0 + ROWS of the A tile): the K loop, each step's
    product scaled while the next one runs. A step's scales are loaded AHEAD (1 or 2) steps before
    they are used."""
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    if not WS:
        if NUM_WARPS > 4:
            _barrier()    # both warp groups are past the previous tile's wgmmas before the ring refills
        for s in gl.static_range(STAGES):
            _issue(a_desc, b_desc, a_bufs, b_bufs, ready, base, s, off_m, off_n, nk, STAGES)
    acc = gl.zeros([ROWS, BLOCK_N], gl.float32, layout)
    d0 = _mma(a_bufs, b_bufs, ready, base, acc, STAGES, ROW0, ROWS)
    s0 = _scales(as_ptrs, bs_ptr, 0, nk, stride_ask, stride_bsk)
    if AHEAD == 2:
        s1 = _scales(as_ptrs, bs_ptr, 1, nk, stride_ask, stride_bsk)
    for j in range(0, (nk - 1) // 2):
        k = 1 + 2 * j
        d1 = _mma(a_bufs, b_bufs, ready, base + k, acc, STAGES, ROW0, ROWS)
        r0 = warpgroup_mma_wait(1, deps=(d0,))
        _release(a_desc, b_desc, a_bufs, b_bufs, ready, empty, base, k - 1, off_m, off_n, nk, STAGES, NUM_WARPS, WS)
        acc = acc + r0 * s0[:, None]
        if AHEAD == 2:
            s0 = _scales(as_ptrs, bs_ptr, k + 1, nk, stride_ask, stride_bsk)
        else:
            s1 = _scales(as_ptrs, bs_ptr, k, nk, stride_ask, stride_bsk)
        d0 = _mma(a_bufs, b_bufs, ready, base + k + 1, acc, STAGES, ROW0, ROWS)
        r1 = warpgroup_mma_wait(1, deps=(d1,))
        _release(a_desc, b_desc, a_bufs, b_bufs, ready, empty, base, k, off_m, off_n, nk, STAGES, NUM_WARPS, WS)
        acc = acc + r1 * s1[:, None]
        if AHEAD == 2:
            s1 = _scales(as_ptrs, bs_ptr, k + 2, nk, stride_ask, stride_bsk)
        else:
            s0 = _scales(as_ptrs, bs_ptr, k + 1, nk, stride_ask, stride_bsk)
    if nk % 2 == 0:
        d1 = _mma(a_bufs, b_bufs, ready, base + nk - 1, acc, STAGES, ROW0, ROWS)
        r0 = warpgroup_mma_wait(1, deps=(d0,))
        if WS:
            _release(a_desc, b_desc, a_bufs, b_bufs, ready, empty, base, nk - 2, off_m, off_n, nk, STAGES, NUM_WARPS, WS)
        acc = acc + r0 * s0[:, None]
        if AHEAD == 2:
            s0 = s1
        else:
            s0 = _scales(as_ptrs, bs_ptr, nk - 1, nk, stride_ask, stride_bsk)
        last = warpgroup_mma_wait(0, deps=(d1,))
    else:
        last = warpgroup_mma_wait(0, deps=(d0,))
    if WS:
        _release(a_desc, b_desc, a_bufs, b_bufs, ready, empty, base, nk - 1, off_m, off_n, nk, STAGES, NUM_WARPS, WS)
    return acc + last * s0[:, None]


@gluon.jit
def _tiles(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, ready, empty, as_ptr, bs_ptr, M, N, K, stride_asm,
           stride_ask, stride_bsn, stride_bsk, GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_WARPS: gl.constexpr,
           WS: gl.constexpr, HALF: gl.constexpr = -1):
    """The program's tiles (the grid's stride), each computed and stored by TMA; the store's wait is
    deferred to the next tile's epilogue. WS: the loads come from the producer warp. HALF (PIPE 7,
    0 or 1): these warps compute and store that half of each tile's rows (-1: all of them)."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NUM_WARPS, 1],
                                                     instr_shape=[16, BLOCK_N, 32])
    ROWS: gl.constexpr = BLOCK_M if HALF < 0 else BLOCK_M // 2
    ROW0: gl.constexpr = 0 if HALF < 0 else HALF * ROWS
    AHEAD: gl.constexpr = 1 if HALF < 0 else 2      # measured: 2 helped PIPE 7 by 2-4%, cost PIPE 6 1-5%
    nk = (K + BLOCK_K - 1) // BLOCK_K
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    base = 0    # K steps this program has consumed: the ring position and mbarrier phase
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        off_m, off_n = _coords(tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP_M)
        rows = off_m + ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
        as_ptrs = as_ptr + (rows % M).to(gl.int64) * stride_asm     # rows past M wrap (their output is dropped)
        bs_ptrs = bs_ptr + (off_n // 128) * stride_bsn
        acc = _tile_acc(a_desc, b_desc, a_bufs, b_bufs, ready, empty, as_ptrs, bs_ptrs, off_m, off_n, nk, base,
                        stride_ask, stride_bsk, layout, STAGES, NUM_WARPS, WS, ROW0, ROWS, AHEAD)
        base += nk
        tma.store_wait(0)    # the previous tile's store has read c_smem
        c = c_smem if HALF < 0 else c_smem.index(HALF)
        c.store(acc.to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [off_m + ROW0, off_n], c)
    tma.store_wait(0)


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
    """PIPE 6's and 7's TMA warp: the same tiles and K steps as the consumers, each slot loaded once the
    consumers have released it (the first pass over the ring waits for nothing)."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    nk = (K + BLOCK_K - 1) // BLOCK_K
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    g = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        off_m, off_n = _coords(tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP_M)
        for k in range(nk):
            mbarrier.wait(empty.index(g % STAGES), ((g // STAGES) & 1) ^ 1)
            _issue(a_desc, b_desc, a_bufs, b_bufs, ready, g - k, k, off_m, off_n, nk, STAGES)
            g += 1


@gluon.jit
def _buffers(a_desc, b_desc, c_desc, STAGES: gl.constexpr, HALVES: gl.constexpr = False):
    """The A and B rings, the bf16 tile for the store (HALVES: one per consumer warp group), and
    one mbarrier per slot for ``ready`` (loads landed) and ``empty`` (slot released, PIPE 6 and 7:
    by the consumer partition, or by each of the two)."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    if HALVES:
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [2, BLOCK_M // 2, BLOCK_N], c_desc.layout)
    else:
        c_smem = gl.allocate_shared_memory(c_desc.dtype, [BLOCK_M, BLOCK_N], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2 if HALVES else 1)
    return a_bufs, b_bufs, c_smem, ready, empty


@gluon.jit
def _invalidate(ready, empty, STAGES: gl.constexpr):
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


@gluon.jit
def fp8_gemm_wgmma_kernel(a_desc, b_desc, c_desc, as_ptr, bs_ptr, M, N, K, stride_asm, stride_ask, stride_bsn,
                          stride_bsk, GROUP_M: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    """PIPE 4 / 5: every warp computes; loads are issued between the wgmmas."""
    a_bufs, b_bufs, c_smem, ready, empty = _buffers(a_desc, b_desc, c_desc, STAGES)
    _tiles(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, ready, empty, as_ptr, bs_ptr, M, N, K, stride_asm,
           stride_ask, stride_bsn, stride_bsk, GROUP_M, STAGES, num_warps, False)
    _invalidate(ready, empty, STAGES)


@gluon.jit
def fp8_gemm_wgmma_ws_kernel(a_desc, b_desc, c_desc, as_ptr, bs_ptr, M, N, K, stride_asm, stride_ask, stride_bsn,
                             stride_bsk, GROUP_M: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    """PIPE 6: warp-specialised. ``num_warps`` consumer warps compute (as PIPE 5); one more warp,
    with PRODUCER_REGS registers, only issues the TMA loads."""
    a_bufs, b_bufs, c_smem, ready, empty = _buffers(a_desc, b_desc, c_desc, STAGES)
    gl.warp_specialize([
        (_tiles, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, ready, empty, as_ptr, bs_ptr, M, N, K, stride_asm,
                  stride_ask, stride_bsn, stride_bsk, GROUP_M, STAGES, num_warps, True)),
        (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES)),
    ], [1], [PRODUCER_REGS])
    _invalidate(ready, empty, STAGES)


@gluon.jit
def fp8_gemm_wgmma_halves_kernel(a_desc, b_desc, c_desc, as_ptr, bs_ptr, M, N, K, stride_asm, stride_ask,
                                 stride_bsn, stride_bsk, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                                 num_warps: gl.constexpr):
    """PIPE 7: as PIPE 6, but each consumer warp group is a partition of its own (``num_warps``
    = 4 each) with one half of the tile's rows: it releases a slot and stores its half without
    waiting for the other one (no CTA barrier between them)."""
    a_bufs, b_bufs, c_smem, ready, empty = _buffers(a_desc, b_desc, c_desc, STAGES, True)
    gl.warp_specialize([
        (_tiles, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, ready, empty, as_ptr, bs_ptr, M, N, K, stride_asm,
                  stride_ask, stride_bsn, stride_bsk, GROUP_M, STAGES, num_warps, True, 0)),
        (_tiles, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_smem, ready, empty, as_ptr, bs_ptr, M, N, K, stride_asm,
                  stride_ask, stride_bsn, stride_bsk, GROUP_M, STAGES, num_warps, True, 1)),
        (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES)),
    ], [num_warps, 1], [HALF_REGS, PRODUCER_REGS])
    _invalidate(ready, empty, STAGES)


def launch_warps(config: dict) -> int:
    """The launch's ``num_warps``: the config's, but PIPE 7 launches its first consumer warp group
    (4 warps; the other one and the producer warp are warp-specialised partitions)."""
    return config["num_warps"] // 2 if config["PIPE"] == 7 else config["num_warps"]


def layouts(config: dict) -> dict:
    """The shared-memory layouts of the A, B and C descriptors (what TMA and wgmma agree on; PIPE
    7 stores each half of the C tile by itself)."""
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    cm = bm // 2 if config["PIPE"] == 7 else bm
    return {"a": ([bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], gl.float8e4nv)),
            "b": ([bn, bk], gl.NVMMASharedLayout.get_default_for([bn, bk], gl.float8e4nv)),
            "c": ([cm, bn], gl.NVMMASharedLayout.get_default_for([cm, bn], gl.bfloat16))}


def signature(config: dict, M: int, N: int, K: int) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) of the launch :func:`launch` makes (A row-major, its scales
    column-major, B [N, K] row-major, C row-major): what cross-compiles it (occtune.build.tritonxc)."""
    lay = layouts(config)
    ty = {"a": "fp8e4nv", "b": "fp8e4nv", "c": "bf16"}
    sig = {f"{k}_desc": f"tensordesc<{ty[k]}[{', '.join(map(str, blk))}],{lt!r}>" for k, (blk, lt) in lay.items()}
    sig.update({"as_ptr": "*fp32", "bs_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "stride_asm": "constexpr",
                "stride_ask": "i32", "stride_bsn": "i32", "stride_bsk": "constexpr", "GROUP_M": "constexpr",
                "STAGES": "constexpr", "num_warps": "constexpr"})
    cx = {"stride_asm": 1, "stride_bsk": 1, "GROUP_M": config["GROUP_M"], "STAGES": config["num_stages"],
          "num_warps": launch_warps(config)}
    return sig, cx, {}


def _descriptor(t, block, layout):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    if hasattr(TensorDescriptor, "from_tensor"):
        return TensorDescriptor.from_tensor(t, block, layout)
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def launches(a, a_s, b, b_s, out, config: dict) -> list:
    """The one launch of ``out = (a * a_s) @ (b * b_s)^T`` as ``(jit function, grid, args, keyword
    args)`` (fp8 e4m3 A [M, K], B [N, K], K-contiguous; ``out`` bf16 with unit column stride;
    shapes checked by the caller, config.wgmma_problem by the family)."""
    M, K = a.shape
    N = b.shape[0]
    lay = layouts(config)
    descs = [_descriptor(t, *lay[k]) for k, t in (("a", a), ("b", b), ("c", out))]
    args = (*descs, a_s, b_s, M, N, K, a_s.stride(0), a_s.stride(1), b_s.stride(0), b_s.stride(1))
    kw = {"GROUP_M": config["GROUP_M"], "STAGES": config["num_stages"], "num_warps": launch_warps(config)}
    from .kernel import kernel_name

    fn = globals()[kernel_name(config)]
    programs = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    if config["PIPE"] != 4:     # persistent
        programs = min(programs, _resident_programs(a.device, config, lambda: fn.warmup(*args, grid=(1,), **kw)))
    return [(fn, (programs,), args, kw)]


def _resident_programs(device, config: dict, compile_kernel) -> int:
    """How many programs of this config run at once on ``device``: its SMs x :func:`blocks_per_sm`
    of the compiled kernel (cached per device and config)."""
    import torch

    from occtune.model.targets import device_target

    from .kernel import _sm_count

    key = (str(device), tuple(sorted(config.items())))
    if key not in _RESIDENT:
        _RESIDENT[key] = blocks_per_sm(device_target(torch, device), compile_kernel()) * _sm_count(device)
    return _RESIDENT[key]


_RESIDENT: dict = {}


def blocks_per_sm(target: str, kernel) -> int:
    """Blocks of a compiled Triton ``kernel`` resident per SM of ``target`` (its warps, registers
    and shared memory through occtune.model.occupancy; at least 1)."""
    from occtune.model.occupancy import Resources, nvidia_occupancy
    from occtune.model.targets import load_target

    if getattr(kernel, "n_regs", None) is None:
        kernel._init_handles()      # Triton loads the module (and reads its registers) on first launch
    res = Resources(threads=kernel.metadata.num_warps * 32, dynamic_lds=kernel.metadata.shared,
                          regs=kernel.n_regs)
    return max(1, nvidia_occupancy(load_target(target), res).blocks_per_cu)
