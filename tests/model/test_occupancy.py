"""Hand-checked occupancy cases. Vendor-agreement cases live in test_occupancy_vendor.py."""

import pytest

from occtune.model.occupancy import Resources as R
from occtune.model.occupancy import occupancy
from occtune.model.targets import load_target

K = 1024


@pytest.mark.parametrize("target,dyn,blocks,limiter", [
    # The sglang hand analysis (shared/facts/kernels.md): 512 threads, ~7 KiB static LDS.
    ("gfx950", 128 * K, 1, "lds"),
    ("gfx950", 40 * K, 3, "lds"),
    ("gfx942", 48 * K, 1, "lds"),
])
def test_hand_analysis(target, dyn, blocks, limiter):
    occ = occupancy(load_target(target), R(threads=512, static_lds=7 * K, dynamic_lds=dyn))
    assert occ.fits and occ.blocks_per_cu == blocks and occ.limiter == limiter


def test_gfx942_128k_does_not_fit():
    occ = occupancy(load_target("gfx942"), R(threads=512, static_lds=7 * K, dynamic_lds=128 * K))
    assert not occ.fits and "LDS" in occ.reason and occ.blocks_per_cu == 0


def test_lds_is_rounded_to_the_granularity():
    g = load_target("gfx950")  # 1280-byte granules: 54 KiB + 1 B needs 44 granules = 56320 B
    occ = occupancy(g, R(threads=256, dynamic_lds=54 * K + 1))
    assert occ.lds_per_block == 56320 and occ.limits["lds"] == 163840 // 56320
    unrounded = occupancy(g, R(threads=256, dynamic_lds=54 * K + 1), lds_rounding=False)
    assert unrounded.lds_per_block == 54 * K + 1


@pytest.mark.parametrize("vgprs,agprs,waves", [
    # worked by hand: total = align(arch, 4) + agprs (if any), aligned to 8; 512 // that, 1..8
    (128, 0, 4), (129, 0, 3), (64, 0, 8), (256, 0, 2), (512, 0, 1), (100, 28, 4), (97, 0, 4),
    (1, 0, 8), (130, 126, 1), (30, 2, 8), (61, 3, 7),
])
def test_vgpr_limited_waves(vgprs, agprs, waves):
    occ = occupancy(load_target("gfx942"), R(threads=64, vgprs=vgprs, agprs=agprs))
    assert occ.waves_per_simd == waves


def test_1024_thread_workgroup_needs_at_most_128_vgprs():
    g = load_target("gfx942")
    assert occupancy(g, R(threads=1024, vgprs=128)).fits
    bad = occupancy(g, R(threads=1024, vgprs=136))
    assert not bad.fits and "waves per SIMD" in bad.reason


def test_sgprs_bind_only_above_100_on_gfx9():
    g = load_target("gfx942")
    assert occupancy(g, R(threads=64, sgprs=100)).waves_per_simd == 8
    assert occupancy(g, R(threads=64, sgprs=102)).waves_per_simd == 7


def test_wave_slots_and_barrier_limits():
    g = load_target("gfx942")
    one_wave = occupancy(g, R(threads=64))
    assert one_wave.blocks_per_cu == 32 and one_wave.waves_per_simd == 8  # no barrier for 1 wave
    two_waves = occupancy(g, R(threads=128))
    assert two_waves.blocks_per_cu == 16 and two_waves.limiter == "waves"   # 16 barriers
    assert occupancy(g, R(threads=1025)).fits is False


@pytest.mark.parametrize("threads,regs,smem,blocks,limiter", [
    (256, 32, 0, 8, "warps"),        # 64 warps / 8
    (256, 64, 0, 4, "registers"),    # 2048 regs/warp -> 8 warps per sub-partition -> 32 warps
    (256, 255, 0, 1, "registers"),   # 8192 regs/warp -> 2 per sub-partition -> 8 warps
    (128, 16, 0, 16, "warps"),
    (32, 16, 0, 32, "blocks"),       # the 32-blocks cap
    (512, 0, 100 * K, 2, "shared"),  # (100 KiB + 1 KiB) -> 2 in 228 KiB
    (512, 0, 112 * K, 2, "shared"),  # 113 KiB * 2 = 226 KiB <= 228 KiB
    (512, 0, 113 * K, 2, "shared"),  # 114 KiB * 2 = 228 KiB exactly
    (512, 0, 114 * K, 1, "shared"),
    (96, 0, 0, 21, "warps"),         # 3 warps per block: 64 // 3
    (96, 40, 0, 16, "registers"),    # 1280 regs/warp -> 12 per sub-partition -> 48 warps -> 16
])
def test_nvidia_sm90_cases(threads, regs, smem, blocks, limiter):
    occ = occupancy(load_target("sm_90"), R(threads=threads, regs=regs, dynamic_lds=smem))
    assert occ.fits and occ.blocks_per_cu == blocks and occ.limiter == limiter
    assert occ.warps_per_sm == blocks * -(-threads // 32)


def test_nvidia_does_not_fit():
    s = load_target("sm_90")
    assert not occupancy(s, R(threads=1024, regs=65)).fits       # 73728 registers per block
    assert occupancy(s, R(threads=1024, regs=64)).fits
    assert not occupancy(s, R(threads=256, dynamic_lds=228 * K)).fits   # over the 227 KiB opt-in
    assert not occupancy(s, R(threads=256, regs=256)).fits
