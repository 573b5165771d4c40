"""Offline builds of topk.cuh with the vendors' compilers (no GPU needed): nvcc for sm_XX and
clang HIP device-only for gfx9xx, with their resource-usage reports parsed into dicts."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from occtune.kernels.topk import SOURCE_PATH, defines as topk_defines
from occtune.rtc import build_options

_REMARK = re.compile(r"remark:\s+([A-Za-z][A-Za-z /\[\]]*?):\s+(\S+)\s+\[-Rpass-analysis")
_REMARK_KEYS = {"SGPRs": "sgprs", "VGPRs": "vgprs", "AGPRs": "agprs",
                "ScratchSize [bytes/lane]": "scratch_bytes_per_lane",
                "Occupancy [waves/SIMD]": "occupancy_waves_per_simd",
                "SGPRs Spill": "sgpr_spill", "VGPRs Spill": "vgpr_spill",
                "LDS Size [bytes/block]": "static_lds"}
_PTXAS = re.compile(r"Used (\d+) registers.*?(\d+) bytes smem")


def find_clang() -> str | None:
    for name in ("clang-19", "clang-20", "clang-18", "clang"):
        if shutil.which(name):
            return name
    return None


def parse_amdgpu_remarks(text: str, kernel: str = "topk_transform_kernel") -> dict:
    """Parse clang's -Rpass-analysis=kernel-resource-usage remarks of one kernel."""
    out: dict = {}
    current = None
    for line in text.splitlines():
        m = _REMARK.search(line)
        if not m:
            continue
        key, val = m.group(1).strip(), m.group(2)
        if key == "Function Name":
            current = val
            continue
        if current == kernel and key in _REMARK_KEYS:
            out[_REMARK_KEYS[key]] = int(val) if val.lstrip("-").isdigit() else val
    return out


def parse_ptxas(text: str) -> dict:
    m = _PTXAS.search(text)
    return {"regs": int(m.group(1)), "static_smem": int(m.group(2))} if m else {}


def hip_command(arch: str, opts: list[str], out: str, clang: str = "clang-19") -> list[str]:
    return [clang, "-x", "hip", "--cuda-device-only", f"--offload-arch={arch}", "-nogpulib",
            "-nogpuinc", "-O3", "-S", str(SOURCE_PATH), "-o", out,
            "-Rpass-analysis=kernel-resource-usage", *opts]


def nvcc_command(sm: str, opts: list[str], out: str) -> list[str]:
    return ["nvcc", f"-arch=sm_{sm}", "-cubin", "-x", "cu", str(SOURCE_PATH), "-o", out,
            "-Xptxas", "-v", *opts]


def compile_hip(arch: str, budget: int, threads: int = 512, bits: int = 8,
                clang: str | None = None) -> dict:
    clang = clang or find_clang()
    if clang is None:
        raise FileNotFoundError("no clang found for HIP device compilation")
    opts = build_options(topk_defines(budget, threads, bits))
    with tempfile.TemporaryDirectory() as d:
        cmd = hip_command(arch, opts, str(Path(d) / "topk.s"), clang)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    res = parse_amdgpu_remarks(p.stderr)
    res["command"] = " ".join(Path(c).name if c == str(SOURCE_PATH) or c.startswith(d) else c for c in cmd)
    return res


def compile_nvcc(sm: str, budget: int, threads: int = 512, bits: int = 8) -> dict:
    opts = build_options(topk_defines(budget, threads, bits))
    with tempfile.TemporaryDirectory() as d:
        cmd = nvcc_command(sm, opts, str(Path(d) / "topk.cubin"))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    res = parse_ptxas(p.stdout + p.stderr)
    res["command"] = " ".join(Path(c).name if c == str(SOURCE_PATH) or c.startswith(d) else c for c in cmd)
    return res


def tool_version(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    return lines[0].strip() if cmd[0] != "nvcc" else (lines[-1].strip() if lines else "unavailable")
