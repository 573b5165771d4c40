"""Occupancy as pure functions of (target, kernel resources): no I/O, no torch.

AMD: ``amd_occupancy`` models the hardware (LDS rounded up to the allocation granularity, a whole
workgroup's waves resident at once); ``llvm_amd_occupancy`` reproduces, exactly, the number LLVM's
AMDGPU backend prints (``; Occupancy: N``), version by version: LLVM 19 neither rounds LDS nor looks
at the flat-work-group-size range's minimum, LLVM 24 does both. Both are checked against compiled
kernels in tests/data/occupancy_amd.yaml (tools/gen_amd_occupancy_cases.py).
NVIDIA follows CUDA's ``cuda_occupancy.h``, checked against the driver's
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` (tools/collect_nvidia_occupancy.py on an H200).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from occtune.model.targets import Target


@dataclass(frozen=True)
class Resources:
    """What one config uses per block / workgroup, as its compiler reports it (or as given). A
    register count of None (or 0) is unknown and never limits."""

    threads: int                         # threads per block / workgroup
    static_lds: int = 0                  # bytes of static LDS / shared memory
    dynamic_lds: int = 0                 # bytes of dynamic LDS / shared memory
    vgprs: int | None = None             # AMD: arch VGPRs per lane
    agprs: int | None = None             # AMD: accumulation VGPRs per lane
    sgprs: int | None = None             # AMD: SGPRs per wave, VCC/flat scratch/XNACK included as LLVM's
                                         # NumSGPRsForWavesPerEU counts them
    regs: int | None = None              # NVIDIA: registers per thread
    scratch_bytes: int | None = None     # private memory per lane/thread: spilled VGPRs/registers and
                                         # stack (AMD ScratchSize, NVIDIA stack frame); SGPR spills to
                                         # VGPR lanes are not in it
    source: str = "assumed"              # where the numbers came from: "compiled: clang 22.1.8 gfx950",
                                         # "driver", "assumed: <why>"
    compiler_occupancy: int | None = None   # the compiler's own occupancy remark (AMD: waves/SIMD)


def max_lds_per_block(target: Target) -> int:
    """The most LDS / shared memory one workgroup / block may have on ``target`` (NVIDIA: with
    the opt-in)."""
    return target.max_lds_per_workgroup if target.is_amd else target.max_shared_per_block_optin


def partial_wave_note(target: Target, threads: int) -> str:
    """Why ``threads`` per block wastes lanes on ``target`` ("" when they are whole waves/warps):
    the hardware schedules whole waves (AMD) / warps (NVIDIA), so the last one runs part-empty
    and still takes a slot and its registers, as the model counts it."""
    width = target.wave_size if target.is_amd else target.warp_size
    if threads % width == 0:
        return ""
    unit = "wave" if target.is_amd else "warp"
    whole = -(-threads // width)
    lower = f"{threads - threads % width} or " if threads > width else ""
    last = f"the last of {whole} {unit}s" if whole > 1 else f"its one {unit}"
    return (f"{threads} threads are not whole {unit}s of {width} on {target.name}: {last} runs {threads % width} "
            f"of its {width} lanes and is counted whole; e.g. {lower}{whole * width} threads use every lane")


def _counted(res: Resources) -> Resources:
    """``res`` with unknown registers as 0, which the formulas below read as "not limiting"."""
    return replace(res, vgprs=res.vgprs or 0, agprs=res.agprs or 0, sgprs=res.sgprs or 0, regs=res.regs or 0)


@dataclass
class Occupancy:
    target: str
    vendor: str
    fits: bool
    reason: str                      # why it does not fit ("" if it fits)
    blocks_per_cu: int               # resident blocks per CU (AMD) / SM (NVIDIA)
    waves_per_simd: int | None       # AMD
    warps_per_sm: int | None         # NVIDIA
    occupancy: float                 # fraction of the wave/warp slots in use
    limiter: str                     # resource that sets blocks_per_cu
    lds_per_block: int               # LDS/shared bytes one block occupies, after rounding
    limits: dict = field(default_factory=dict)   # resource -> max blocks per CU/SM it allows
    unconfirmed: list = field(default_factory=list)  # target parameters used that are unconfirmed

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.vendor == "amd":
            d.pop("warps_per_sm")
            d["blocks_per_sm"] = None
        else:
            d.pop("waves_per_simd")
            d["blocks_per_sm"] = self.blocks_per_cu
        return d


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _align(x: int, a: int) -> int:
    return _ceil_div(x, a) * a


def occupancy(target: Target, res: Resources, *, lds_rounding: bool = True) -> Occupancy:
    if res.threads <= 0:
        raise ValueError("threads per block must be positive")
    if target.vendor == "amd":
        return amd_occupancy(target, res, lds_rounding=lds_rounding)
    return nvidia_occupancy(target, res)


# ---------------------------------------------------------------------------------------- AMD


def amd_total_vgprs(vgprs: int, agprs: int) -> int:
    """Unified register file (gfx90a+): arch VGPRs aligned to 4, then the AGPRs after them."""
    if agprs <= 0:
        return vgprs
    return _align(vgprs, 4) + agprs


def amd_waves_by_vgprs(target: Target, vgprs: int, agprs: int = 0) -> int:
    total = amd_total_vgprs(vgprs, agprs)
    if total <= 0:
        return target.max_waves_per_simd
    per_wave = _align(total, target.vgpr_alloc_granule)
    return max(1, min(target.max_waves_per_simd, target.vgprs_per_simd_lane // per_wave))


def amd_waves_by_sgprs(target: Target, sgprs: int) -> int:
    cap = target.max_waves_per_simd
    if sgprs <= 0:
        return cap
    for bound, waves in target.sgpr_waves:
        if sgprs <= bound:
            return min(cap, waves)
    return cap if not target.sgpr_waves else min(cap, target.sgpr_waves[-1][1])


def amd_workgroups_by_waves(target: Target, waves_per_wg: int) -> int:
    """LLVM getMaxWorkGroupsPerCU: wave slots per CU over waves per group, capped by barriers."""
    slots = target.max_waves_per_simd * target.simds_per_cu
    if waves_per_wg == 1:
        return slots  # single-wave groups use no barrier resource
    return min(slots // waves_per_wg, target.max_workgroups_per_cu)


# SGPRs a wave may hold beyond the addressable ones: VCC, FLAT_SCRATCH and XNACK_MASK, 2 each
# (LLVM AMDGPUBaseInfo.cpp getNumExtraSGPRs). The compiler reports totals up to 102 + 6 = 108 on
# gfx942 (tests/data/occupancy_amd.yaml), so only a count above that cannot fit.
AMD_EXTRA_SGPRS = 6


def amd_occupancy(target: Target, res: Resources, *, lds_rounding: bool = True) -> Occupancy:
    t, res = target, _counted(res)
    waves_per_wg = _ceil_div(res.threads, t.wave_size)
    lds_raw = res.static_lds + res.dynamic_lds
    lds = _align(lds_raw, t.lds_alloc_granularity) if (lds_rounding and lds_raw) else lds_raw
    w_vgpr = amd_waves_by_vgprs(t, res.vgprs, res.agprs)
    w_sgpr = amd_waves_by_sgprs(t, res.sgprs)
    reg_waves = min(w_vgpr, w_sgpr)

    reason = ""
    if res.threads > t.max_threads_per_workgroup:
        reason = f"{res.threads} threads per workgroup > maximum {t.max_threads_per_workgroup}"
    elif lds_raw > t.max_lds_per_workgroup:
        reason = f"LDS {lds_raw} B per workgroup > maximum {t.max_lds_per_workgroup} B"
    elif amd_total_vgprs(res.vgprs, res.agprs) > t.max_vgprs_per_wave:
        reason = f"{amd_total_vgprs(res.vgprs, res.agprs)} VGPRs > maximum {t.max_vgprs_per_wave}"
    elif res.sgprs > t.max_sgprs + AMD_EXTRA_SGPRS:
        reason = (f"{res.sgprs} SGPRs > maximum {t.max_sgprs + AMD_EXTRA_SGPRS} "
                  f"({t.max_sgprs} addressable + VCC, flat scratch, XNACK)")
    elif _ceil_div(waves_per_wg, t.simds_per_cu) > reg_waves:
        reason = (f"a {res.threads}-thread workgroup needs {_ceil_div(waves_per_wg, t.simds_per_cu)} "
                  f"waves per SIMD but its registers allow {reg_waves}")

    limits = {
        "waves": amd_workgroups_by_waves(t, waves_per_wg),
        "lds": (t.lds_per_cu // lds) if lds else None,
        "vgprs": (w_vgpr * t.simds_per_cu) // waves_per_wg if (res.vgprs or res.agprs) else None,
        "sgprs": (w_sgpr * t.simds_per_cu) // waves_per_wg if res.sgprs else None,
    }
    if reason:
        blocks, waves, limiter = 0, 0, "does not fit"
    else:
        blocks, limiter = _min_limit(limits)
        waves = min(_ceil_div(blocks * waves_per_wg, t.simds_per_cu), reg_waves)
    return Occupancy(
        target=t.name, vendor="amd", fits=not reason, reason=reason, blocks_per_cu=blocks,
        waves_per_simd=waves, warps_per_sm=None, occupancy=waves / t.max_waves_per_simd,
        limiter=limiter, lds_per_block=lds, limits=limits,
        unconfirmed=_used_unconfirmed(t, ["max_waves_per_simd", "max_threads_per_cu"]),
    )


# LLVM's own estimate, reproduced function by function so that it can be checked against what the
# compiler prints (tests/data/occupancy_amd.yaml). It differs from the hardware model above in two
# ways, both deliberate in LLVM: LDS is not rounded to the allocation granularity, and the register
# limits are per SIMD (waves), not per whole workgroup.

# LLVM releases from this major on compute the LDS/workgroup-size limit over the whole
# amdgpu-flat-work-group-size range (llvm/llvm-project PR #123748); older ones (19 checked) use only
# the range's maximum. No release between 19 and 24 was checked.
LLVM_WG_RANGE_SINCE = 21
# LLVM 24 rounds the LDS up to the allocation granularity before dividing (the FIXME in
# getOccupancyWithWorkGroupSizes resolved); LLVM 19 and 22 (clang 22.1.8) do not. The first release
# that rounds is 23 or 24: 24 is the first one checked (tests/data/occupancy_amd.yaml; clang 22:
# tests/build/test_compiled.py::test_hip_probe, whose LDS sizes change the answer if rounded).
LLVM_LDS_ROUNDING_SINCE = 24


def llvm_max_workgroups_per_cu(target: Target, wg_size: int) -> int:
    """AMDGPUBaseInfo.cpp ``IsaInfo::getMaxWorkGroupsPerCU``: wave slots per CU over waves per
    group, capped by the barrier limit; a single-wave group uses no barrier."""
    waves = _ceil_div(wg_size, target.wave_size)
    slots = target.max_waves_per_simd * target.simds_per_cu
    if waves == 1:
        return slots
    return min(slots // waves, target.max_workgroups_per_cu)


def llvm_occupancy_with_wg_sizes(target: Target, lds_bytes: int, lo: int, hi: int) -> tuple[int, int]:
    """AMDGPUSubtarget.cpp ``getOccupancyWithWorkGroupSizes`` (LLVM 21+): the (min, max) waves per
    SIMD that LDS and workgroup slots allow over flat workgroup sizes ``lo..hi``. ``lds_bytes`` as
    LLVM counts it (rounded or not: see ``llvm_amd_occupancy``)."""
    t = target
    max_wgs_lds = t.lds_per_cu // max(lds_bytes, 1)
    if max_wgs_lds == 0:
        return 1, 1
    eus, per_eu, wave = t.simds_per_cu, t.max_waves_per_simd, t.wave_size

    def props(wg_size):
        waves_per_wg = _ceil_div(wg_size, wave)
        wgs = min(llvm_max_workgroups_per_cu(t, wg_size), max_wgs_lds)
        return waves_per_wg, wgs, waves_per_wg * wgs

    min_waves_per_wg, max_wgs, max_waves = props(lo)
    max_waves_per_wg, min_wgs, min_waves = props(hi)
    if min_waves >= max_waves:
        min_waves, max_waves = max_waves, min_waves
    else:
        slots = per_eu * eus
        # a smaller group than hi may need fewer waves for the same number of groups
        min_for_size = _ceil_div(slots, min_wgs + 1) * min_wgs
        if min_waves > min_for_size:
            excess_per_wg = (min_waves - min_for_size) // min_wgs
            if excess_per_wg:
                min_waves -= min_wgs * min(excess_per_wg, max_waves_per_wg - min_waves_per_wg)
        # a larger group than lo may fill more slots for the same number of groups
        leftover_per_wg = (slots - max_wgs * min_waves_per_wg) // max_wgs
        if leftover_per_wg:
            max_waves += max_wgs * min(leftover_per_wg, (hi - 1) // wave + 1 - min_waves_per_wg)
    clamp = lambda w: max(1, min(w, per_eu))  # noqa: E731
    return clamp(min_waves // eus), clamp(_ceil_div(max_waves, eus))


def llvm_amd_occupancy(target: Target, res: Resources, *,
                       flat_wg_range: tuple[int, int] | None = None,
                       llvm_major: int | None = None) -> int:
    """Waves per SIMD exactly as LLVM reports it (``; Occupancy: N`` in the assembly; the
    ``-Rpass-analysis=kernel-resource-usage`` remark).

    ``flat_wg_range``: the kernel's ``amdgpu-flat-work-group-size`` (Triton emits ``1,<threads>``;
    HIP's ``__launch_bounds__(N)`` gives ``1,N``); default ``(threads, threads)``. ``llvm_major``:
    the compiling LLVM's major version (default: the newest behaviour); before
    ``LLVM_WG_RANGE_SINCE`` only the range's maximum counts (``getOccupancyWithLocalMemSize``), and
    before ``LLVM_LDS_ROUNDING_SINCE`` the LDS is not rounded to the allocation granularity. Only the LDS LLVM sees counts: Triton's is dynamic.
    The result is the minimum of the LDS/workgroup limit and the VGPR and SGPR limits
    (GCNSubtarget ``computeOccupancy``; AMDGPUMCExpr ``createOccupancy``).
    """
    t, res = target, _counted(res)
    lo, hi = flat_wg_range or (res.threads, res.threads)
    if llvm_major is not None and llvm_major < LLVM_WG_RANGE_SINCE:
        lo = hi
    lds = res.static_lds + res.dynamic_lds
    if lds and (llvm_major is None or llvm_major >= LLVM_LDS_ROUNDING_SINCE):
        lds = _align(lds, t.lds_alloc_granularity)
    by_lds = llvm_occupancy_with_wg_sizes(t, lds, lo, hi)[1]
    return min(by_lds, amd_waves_by_vgprs(t, res.vgprs, res.agprs), amd_waves_by_sgprs(t, res.sgprs))


# ------------------------------------------------------------------------------------- NVIDIA


def nvidia_occupancy(target: Target, res: Resources) -> Occupancy:
    t, res = target, _counted(res)
    warps_per_block = _ceil_div(res.threads, t.warp_size)
    smem_raw = res.static_lds + res.dynamic_lds
    smem = _align(smem_raw + t.reserved_shared_per_block, t.shared_alloc_unit)

    regs_per_warp = _align(res.regs * t.warp_size, t.reg_alloc_unit) if res.regs else 0
    # The per-block check assumes allocation in every sub-partition at once (cuda_occupancy.h).
    regs_per_block = regs_per_warp * _align(warps_per_block, t.sub_partitions)

    reason = ""
    if res.threads > t.max_threads_per_block:
        reason = f"{res.threads} threads per block > maximum {t.max_threads_per_block}"
    elif res.regs > t.max_regs_per_thread:
        reason = f"{res.regs} registers per thread > maximum {t.max_regs_per_thread}"
    elif smem_raw > t.max_shared_per_block_optin:
        reason = f"shared memory {smem_raw} B per block > maximum {t.max_shared_per_block_optin} B (opt-in)"
    elif regs_per_block > t.registers_per_block:
        reason = f"{regs_per_block} registers per block > maximum {t.registers_per_block}"

    if regs_per_warp:
        warps_per_sub = (t.registers_per_sm // t.sub_partitions) // regs_per_warp
        by_regs = (warps_per_sub * t.sub_partitions) // warps_per_block
    else:
        by_regs = None
    limits = {
        "warps": t.max_warps_per_sm // warps_per_block,
        "blocks": t.max_blocks_per_sm,
        "registers": by_regs,
        "shared": t.shared_per_sm // smem,
    }
    if reason:
        blocks, limiter = 0, "does not fit"
    else:
        blocks, limiter = _min_limit(limits)
    warps = blocks * warps_per_block
    return Occupancy(
        target=t.name, vendor="nvidia", fits=not reason, reason=reason, blocks_per_cu=blocks,
        waves_per_simd=None, warps_per_sm=warps, occupancy=warps / t.max_warps_per_sm,
        limiter=limiter, lds_per_block=smem, limits=limits,
        unconfirmed=_used_unconfirmed(t, ["shared_alloc_unit"]),
    )


# ------------------------------------------------------------------------------------- common

# When several resources allow the same number of blocks, name the one that would still bind if the
# others were relaxed: hardware slot caps first, then memory, then registers.
_LIMITER_ORDER = ["waves", "warps", "blocks", "lds", "shared", "vgprs", "registers", "sgprs"]


def _min_limit(limits: dict) -> tuple[int, str]:
    present = {k: v for k, v in limits.items() if v is not None}
    blocks = min(present.values())
    limiter = next(k for k in _LIMITER_ORDER if present.get(k) == blocks)
    return blocks, limiter


def _used_unconfirmed(target: Target, keys: list[str]) -> list[str]:
    always = ["wave_size", "simds_per_cu", "lds_per_cu", "max_lds_per_workgroup",
              "lds_alloc_granularity", "vgprs_per_simd_lane", "vgpr_alloc_granule",
              "shared_per_sm", "max_shared_per_block_optin"]
    return sorted(k for k in set(keys + always) if k in target.params
                  and target.params[k].confidence == "unconfirmed")
