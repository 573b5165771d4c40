"""Occupancy as pure functions of (target, kernel resources): no I/O, no torch.

AMD follows LLVM's AMDGPU model (AMDGPUBaseInfo.cpp / AMDGPUSubtarget.cpp), with one deliberate
difference: the hardware rounds each workgroup's LDS up to the allocation granularity, which LLVM's
own estimate does not (a FIXME there). ``lds_rounding=False`` reproduces LLVM's number exactly.
NVIDIA follows CUDA's ``cuda_occupancy.h`` (checked against the driver's
``cuOccupancyMaxActiveBlocksPerMultiprocessor``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tuner.targets import Target


@dataclass(frozen=True)
class KernelResources:
    threads: int                 # threads per block / workgroup
    static_lds: int = 0          # bytes of static LDS / shared memory
    dynamic_lds: int = 0         # bytes of dynamic LDS / shared memory
    vgprs: int = 0               # AMD: arch VGPRs per lane (0: unknown, not limiting)
    agprs: int = 0               # AMD: accumulation VGPRs per lane
    sgprs: int = 0               # AMD: SGPRs per wave (0: unknown, not limiting)
    regs: int = 0                # NVIDIA: registers per thread (0: unknown, not limiting)


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


def occupancy(target: Target, res: KernelResources, *, lds_rounding: bool = True) -> Occupancy:
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


def amd_occupancy(target: Target, res: KernelResources, *, lds_rounding: bool = True) -> Occupancy:
    t = target
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
    elif res.sgprs > t.max_sgprs:
        reason = f"{res.sgprs} SGPRs > maximum {t.max_sgprs}"
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


def llvm_amd_occupancy(target: Target, res: KernelResources) -> int:
    """Waves per SIMD exactly as LLVM reports it (``; Occupancy: N``): no LDS rounding."""
    occ = amd_occupancy(target, res, lds_rounding=False)
    return occ.waves_per_simd


# ------------------------------------------------------------------------------------- NVIDIA


def nvidia_occupancy(target: Target, res: KernelResources) -> Occupancy:
    t = target
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
