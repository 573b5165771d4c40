"""Exported headers and flags in real compiles: host and device passes see the same value, or the
build stops with an #error that says what to do.

A probe file static_asserts the expected value at file scope, which every pass compiles: nvcc
(sm_90: device pass, then host pass), Debian clang-19 (HIP gfx942, both passes in one -c with
-fgpu-rdc: no device linker needed) and the ziglang wheel's clang (HIP gfx950, one command per
pass: it ships no offload bundler). Each compiler is skipped, with the reason, where absent.
"""

import shutil
import subprocess
import sys

import pytest
import yaml

from clihelp import REPO

TOPK = ["results/gfx942/topk.yaml", "results/gfx950/topk.yaml", "results/sm_90/topk.yaml"]
ROPE = "results/sm_90/rope.yaml"
HIP = ["-x", "hip", "-nogpulib", "-nogpuinc"]

PROBE = r"""
#ifndef __device__
#define __device__ __attribute__((device))   /* -nogpuinc: no HIP headers */
#endif
#include HEADER
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define PASS "device pass"
#else
#define PASS "host pass"
#endif
static_assert(SGL_TOPK_DYNAMIC_SMEM_BYTES == EXPECTED, "wrong value in the " PASS);
__device__ int probe() { return SGL_TOPK_DYNAMIC_SMEM_BYTES; }
"""

ROPE_PROBE = r"""
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifdef HEADER
#include HEADER
static_assert(OCCTUNE_ROPE_VARIANT == OCCTUNE_ROPE_VARIANT_FLAT, "variant by name");
#endif
static_assert(OCCTUNE_ROPE_VARIANT == 3 && OCCTUNE_ROPE_BLOCK_M == @BLOCK_M@ && OCCTUNE_ROPE_NUM_WARPS == @WARPS@, "rope");
__device__ int probe() { return OCCTUNE_ROPE_BLOCK_M; }
"""
_ROPE_WIN = yaml.safe_load((REPO / "results/sm_90/rope.yaml").read_text())["winner"]["config"]
assert _ROPE_WIN["variant"] == "flat"          # VARIANT_NAMES[3], asserted by name in the probe too
ROPE_PROBE = ROPE_PROBE.replace("@BLOCK_M@", str(_ROPE_WIN["BLOCK_M"])).replace("@WARPS@", str(_ROPE_WIN["num_warps"]))



def _zig() -> list[str] | None:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ziglang", "clang"]


COMPILERS = {
    "nvcc-sm_90": (shutil.which("nvcc") and [["nvcc", "-arch=sm_90", "-x", "cu", "-c"]], "nvcc not installed"),
    "nvcc-sm_100": (shutil.which("nvcc") and [["nvcc", "-arch=sm_100", "-x", "cu", "-c"]], "nvcc not installed"),
    "clang19-gfx942": (shutil.which("clang-19") and [["clang-19", *HIP, "--offload-arch=gfx942", "-fgpu-rdc", "-c"]],
                       "clang-19 not installed (scripts/test.sh installs it with apt)"),
    "zig-gfx950": (_zig() and [[*_zig(), *HIP, "--offload-arch=gfx950", "-fgpu-rdc", "--cuda-device-only", "-c"],
                               [*_zig(), *HIP, "--offload-arch=gfx950", "--cuda-host-only", "-c"]],
                   "the ziglang wheel is not installed (pip install ziglang): its clang builds gfx950"),
}


def compile_probe(tmp_path, compiler: str, source: str, *defines: str) -> subprocess.CompletedProcess:
    """Compile ``source`` in every pass; the first failing pass's result, else the last."""
    commands, why = COMPILERS[compiler]
    if not commands:
        pytest.skip(why)
    src = tmp_path / "probe.cu"
    src.write_text(source)
    for cmd in commands:
        r = subprocess.run([*cmd, *defines, str(src), "-o", str(tmp_path / "probe.o")], capture_output=True,
                           text=True, timeout=120)
        if r.returncode:
            return r
    return r


def export(tmp_path, *args) -> str:
    out = tmp_path / "tuned.h"
    r = subprocess.run([sys.executable, "-m", "occtune", "export", *args, "--out", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return f'-DHEADER="{out}"'


@pytest.fixture(scope="module")
def headers(tmp_path_factory):
    d = tmp_path_factory.mktemp("headers")
    (d / "one").mkdir()
    (d / "all").mkdir()
    (d / "gfx942").mkdir()
    return {"sm_90": export(d / "one", TOPK[2]), "all": export(d / "all", *TOPK, "--all-targets"),
            "gfx942": export(d / "gfx942", TOPK[0])}


def _budget(target: str) -> int:
    """The committed winner's LDS budget for ``target`` (the header must give exactly this)."""
    return yaml.safe_load((REPO / f"results/{target}/topk.yaml").read_text())["winner"]["config"]["lds_budget"]


SM90, GFX942, GFX950 = _budget("sm_90"), _budget("gfx942"), _budget("gfx950")

# (compiler, header, extra -D, the value every pass that gets through sees, the #error's words or None)
CASES = [
    ("nvcc-sm_90", "sm_90", [], SM90, None),
    ("nvcc-sm_90", "all", ["-DOCCTUNE_TARGET_SM_90"], SM90, None),
    ("nvcc-sm_90", "all", [], 0, "pick the target being built with"),
    ("nvcc-sm_90", "all", ["-DOCCTUNE_TARGET_GFX950"], GFX950, "another target than gfx950"),
    ("nvcc-sm_100", "sm_90", [], SM90, "another target than sm_90"),
    ("clang19-gfx942", "gfx942", [], GFX942, None),
    ("clang19-gfx942", "all", ["-DOCCTUNE_TARGET_GFX942"], GFX942, None),
    ("clang19-gfx942", "all", [], 0, "pick the target being built with"),
    ("clang19-gfx942", "all", ["-DOCCTUNE_TARGET_SM_100"], 0, "holds tuned values for gfx942, gfx950, sm_90 only"),
    ("clang19-gfx942", "sm_90", [], SM90, "another target than sm_90"),
    ("clang19-gfx942", "all", ["-DOCCTUNE_TARGET_GFX942", "-DOCCTUNE_TARGET_GFX950"], 0, "more than one"),
    ("zig-gfx950", "all", ["-DOCCTUNE_TARGET_GFX950"], GFX950, None),
    ("zig-gfx950", "all", ["-DOCCTUNE_TARGET_GFX942"], GFX942, "another target than gfx942"),
]


@pytest.mark.parametrize("compiler,header,defines,value,error", CASES,
                         ids=[f"{c}-{h}-{'-'.join(d) or 'noD'}" for c, h, d, *_ in CASES])
def test_header_in_both_passes(tmp_path, headers, compiler, header, defines, value, error):
    r = compile_probe(tmp_path, compiler, PROBE, headers[header], f"-DEXPECTED={value}", *defines)
    if error is None:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode != 0 and "occtune: " in r.stderr and error in r.stderr, r.stderr


def _flags(tmp_path, *files) -> str:
    r = subprocess.run([sys.executable, "-m", "occtune", "export", *files, "--format", "flags"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("compiler", ["nvcc-sm_90", "clang19-gfx942"])
def test_flags_work_unquoted_in_a_shell(tmp_path, compiler):
    """`cc $(tune export rope.yaml --format flags) -c x.cu`, through a real shell's word splitting."""
    commands, why = COMPILERS[compiler]
    if not commands:
        pytest.skip(why)
    (tmp_path / "flags").write_text(_flags(tmp_path, ROPE))
    (tmp_path / "probe.cu").write_text(ROPE_PROBE)
    cmd = " ".join(commands[0]) + ' $(cat flags) probe.cu -o probe.o'
    r = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_rope_header_names_the_variants(tmp_path):
    r = compile_probe(tmp_path, "nvcc-sm_90", ROPE_PROBE, export(tmp_path, ROPE))
    assert r.returncode == 0, r.stderr
