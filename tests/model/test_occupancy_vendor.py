"""The occupancy model against the vendors' own answers, recorded as test data with provenance.

AMD: tests/data/occupancy_amd.yaml, LLVM's ``; Occupancy`` for kernels compiled by
tools/gen_amd_occupancy_cases.py (Triton cross-compilation, hand-written LLVM IR through Triton's
LLVM, clang-19 HIP). NVIDIA: tests/data/occupancy_nvidia.yaml, the driver's
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` on an H200 (tools/collect_nvidia_occupancy.py).
"""

from __future__ import annotations

import pytest
import yaml

from clihelp import TESTS
from occtune.model.occupancy import (Resources, amd_occupancy, amd_waves_by_sgprs, amd_waves_by_vgprs,
                             llvm_amd_occupancy, occupancy)
from occtune.model.targets import load_target

DATA = TESTS / "data"


def _load(name: str) -> dict | None:
    path = DATA / name
    if not path.exists():
        return None
    return yaml.safe_load(path.read_text())


AMD = _load("occupancy_amd.yaml")
NVIDIA = _load("occupancy_nvidia.yaml")
AMD_CASES = AMD["cases"] if AMD else []
NVIDIA_CASES = [c for c in (NVIDIA or {}).get("cases", []) if "driver_blocks_per_sm" in c]


def _amd_resources(c: dict) -> Resources:
    # Only the LDS LLVM sees: Triton's (dynamic, given at launch) is not part of its answer.
    return Resources(threads=c["threads"], static_lds=c["lds"], vgprs=c["vgprs"],
                           agprs=c["agprs"], sgprs=c["sgprs"])


def test_amd_data_spans_the_limits():
    """The recorded cases must exercise every resource, both generators and both targets."""
    if not AMD_CASES:
        pytest.skip("tests/data/occupancy_amd.yaml is missing: run tools/gen_amd_occupancy_cases.py")
    assert len(AMD_CASES) >= 48
    assert {c["target"] for c in AMD_CASES} >= {"gfx942", "gfx950"}
    assert {c["generator"] for c in AMD_CASES} >= {"triton", "clang"}
    assert len({c["llvm_major"] for c in AMD_CASES}) >= 2
    limiters = set()
    for c in AMD_CASES:
        occ = amd_occupancy(load_target(c["target"]), _amd_resources(c), lds_rounding=False)
        if occ.fits and occ.waves_per_simd < 8:
            limiters.add(occ.limiter)
    assert limiters >= {"waves", "lds", "vgprs", "sgprs"}, limiters
    assert any(c["occupancy"] == 8 for c in AMD_CASES)
    assert any(c["flat_wg_range"][0] != c["flat_wg_range"][1] for c in AMD_CASES)
    for c in AMD_CASES:
        assert c["tool"] and c["command"], c["id"]


@pytest.mark.parametrize("case", AMD_CASES, ids=[c["id"] for c in AMD_CASES])
def test_llvm_amd_occupancy_matches_llvm(case):
    target = load_target(case["target"])
    got = llvm_amd_occupancy(target, _amd_resources(case), flat_wg_range=tuple(case["flat_wg_range"]),
                             llvm_major=case["llvm_major"])
    assert got == case["occupancy"], (
        f"{case['id']}: model {got}, LLVM {case['llvm_major']} said {case['occupancy']} "
        f"(vgprs {case['vgprs']}+{case['agprs']}, sgprs {case['sgprs']}, lds {case['lds']}, "
        f"range {case['flat_wg_range']})")


def _quantized_by_registers(target, c) -> bool:
    """LLVM's register limit is in waves per SIMD; the hardware needs a whole workgroup's waves
    resident at once, so when registers bind and the CU's register-limited wave slots are not a
    multiple of the group's waves, the hardware model is (rightly) below LLVM."""
    reg_waves = min(amd_waves_by_vgprs(target, c["vgprs"], c["agprs"]), amd_waves_by_sgprs(target, c["sgprs"]))
    waves_per_wg = -(-c["threads"] // target.wave_size)
    return (reg_waves < target.max_waves_per_simd
            and (reg_waves * target.simds_per_cu) % waves_per_wg != 0)


def _hardware_comparable(c) -> bool:
    t = load_target(c["target"])
    res = _amd_resources(c)
    lo, hi = c["flat_wg_range"]
    # LLVM's number for a range (Triton: "1,N") may come from a size other than the launched one;
    # keep the cases where the range changes nothing (the assertion still compares against LLVM).
    same_at_launch = lo == hi or llvm_amd_occupancy(t, res, flat_wg_range=(lo, hi)) == llvm_amd_occupancy(t, res)
    return (same_at_launch and c["lds"] % t.lds_alloc_granularity == 0   # rounding changes nothing
            and not _quantized_by_registers(t, c))


HW_CASES = [c for c in AMD_CASES if _hardware_comparable(c)]


def test_hardware_comparison_covers_enough_cases():
    if not AMD_CASES:
        pytest.skip("tests/data/occupancy_amd.yaml is missing")
    assert len(HW_CASES) >= len(AMD_CASES) // 3


@pytest.mark.parametrize("case", HW_CASES, ids=[c["id"] for c in HW_CASES])
def test_amd_hardware_model_agrees_where_rounding_is_moot(case):
    occ = amd_occupancy(load_target(case["target"]), _amd_resources(case))
    assert occ.fits
    assert occ.waves_per_simd == case["occupancy"], case["id"]


@pytest.mark.parametrize("case", AMD_CASES, ids=[c["id"] for c in AMD_CASES])
def test_amd_hardware_model_never_above_llvm_at_the_launched_size(case):
    """Rounding LDS up and whole-workgroup residency can only lower LLVM's estimate."""
    t = load_target(case["target"])
    res = _amd_resources(case)
    occ = amd_occupancy(t, res)
    assert occ.fits, case["id"]
    assert occ.waves_per_simd <= llvm_amd_occupancy(t, res), case["id"]


def test_hardware_model_counts_triton_dynamic_lds():
    """LLVM's number for a Triton kernel ignores the LDS Triton allocates at launch; ours must not."""
    cases = [c for c in AMD_CASES if c.get("dynamic_lds")]
    if not cases:
        pytest.skip("no Triton case with dynamic LDS in tests/data/occupancy_amd.yaml")
    lower = 0
    for c in cases:
        t = load_target(c["target"])
        res = Resources(threads=c["threads"], dynamic_lds=c["dynamic_lds"], vgprs=c["vgprs"],
                              agprs=c["agprs"], sgprs=c["sgprs"])
        occ = amd_occupancy(t, res)
        assert occ.waves_per_simd <= c["occupancy"], c["id"]
        lower += occ.waves_per_simd < c["occupancy"]
    assert lower > 0, "expected some Triton kernels to be LDS-limited beyond what LLVM reports"


# --------------------------------------------------------------------------------------- NVIDIA

@pytest.mark.skipif(not NVIDIA_CASES, reason="tests/data/occupancy_nvidia.yaml is absent: run "
                    "tools/collect_nvidia_occupancy.py on an H100/H200 and copy its YAML there")
@pytest.mark.parametrize("case", NVIDIA_CASES or [None], ids=[c["id"] for c in NVIDIA_CASES] or ["none"])
def test_nvidia_occupancy_matches_driver(case):
    target = load_target(case.get("target", "sm_90"))
    res = Resources(threads=case["threads"], static_lds=case["static_smem"],
                          dynamic_lds=case["dynamic_smem"], regs=case["regs"])
    occ = occupancy(target, res)
    assert occ.blocks_per_cu == case["driver_blocks_per_sm"], (
        f"{case['id']}: model {occ.blocks_per_cu} ({occ.limiter}), driver {case['driver_blocks_per_sm']} "
        f"(regs {case['regs']}, static {case['static_smem']}, dynamic {case['dynamic_smem']})")
