#!/usr/bin/env python3
"""Generate AMD occupancy comparison cases without a GPU: what LLVM's AMDGPU backend reports.

Three generators, two LLVM versions:

* ``triton``: cross-compiles small Triton kernels for gfx942 and gfx950 with the LLVM bundled in
  Triton; reads the ``.amdgcn`` assembly (``; Occupancy: N``, ``; NumVgprs``, ``; NumAgprs``,
  ``; NumSGPRsForWavesPerEU``, ``.group_segment_fixed_size``) and the kernel's
  ``amdgpu-flat-work-group-size`` range from the LLVM IR (Triton emits ``"1,<threads>"``).
* ``llvm-ir``: hand-written LLVM IR kernels (static LDS, flat-work-group-size ranges, live
  values) compiled for gfx942 and gfx950 by the same LLVM as Triton's (its AMD code generator).
  Needed because Triton allocates LDS dynamically, so its own kernels never show LLVM's LDS rule.
* ``clang``: compiles generated HIP device code for gfx942 with ``clang-19`` and parses the
  ``-Rpass-analysis=kernel-resource-usage`` remarks. Register pressure is set by N values loaded
  with volatile loads and stored back, in reverse order, with volatile stores (volatile accesses
  keep their order, so all N values are live at once); static LDS by a ``__shared__`` array; the
  workgroup size by ``amdgpu_flat_work_group_size(lo, hi)``.

Writes ``tests/data/occupancy_amd.yaml`` (or ``--out``). ``--quick`` makes a handful of cases.
Usage: python tools/gen_amd_occupancy_cases.py [--out PATH] [--only triton|llvm-ir|clang] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from occtune.build.compiled import parse_remarks  # noqa: E402
from occtune.fsutil import atomic_write_yaml  # noqa: E402

CLANG = os.environ.get("CLANG", "clang-19")
DEFAULT_OUT = ROOT / "tests" / "data" / "occupancy_amd.yaml"


# ----------------------------------------------------------------------------- asm parsing

def _int(pattern: str, text: str, default=None):
    m = re.search(pattern, text, re.M)
    return int(m.group(1)) if m else default


def parse_amdgcn(asm: str) -> dict:
    """Resource figures from LLVM's AMDGPU assembly (the ``; Kernel info`` comment block)."""
    out = {
        "vgprs": _int(r"^; NumVgprs: (\d+)", asm),
        "agprs": _int(r"^; NumAgprs: (\d+)", asm, 0),
        "total_vgprs": _int(r"^; TotalNumVgprs: (\d+)", asm),
        "sgprs": _int(r"^; NumSGPRsForWavesPerEU: (\d+)", asm),
        "lds": _int(r"\.group_segment_fixed_size:\s+(\d+)", asm),
        "scratch": _int(r"^; ScratchSize: (\d+)", asm, 0),
        "max_flat_workgroup_size": _int(r"\.max_flat_workgroup_size:\s+(\d+)", asm),
        "occupancy": _int(r"^; Occupancy: (\d+)", asm),
    }
    if out["lds"] is None:
        out["lds"] = _int(r"\.amdhsa_group_segment_fixed_size (\d+)", asm)
    missing = [k for k, v in out.items() if v is None]
    if missing:
        raise ValueError(f"could not find {', '.join(missing)} in the assembly")
    return out


def parse_flat_wg_range(llir: str) -> tuple[int, int] | None:
    m = re.search(r'"amdgpu-flat-work-group-size"="(\d+),(\d+)"', llir)
    return (int(m.group(1)), int(m.group(2))) if m else None


# ----------------------------------------------------------------------------- provenance

def triton_llvm_version() -> str:
    """The LLVM that generates Triton's AMD code: its AMD codegen library (Triton 3.9+) or core."""
    import triton
    libs = [Path(triton.__file__).parent / "backends" / "amd" / "lib" / "libtriton_amd_codegen.so",
            Path(triton.__file__).parent / "_C" / "libtriton.so"]
    for lib in libs:
        try:
            data = lib.read_bytes()
        except OSError:
            continue
        m = re.search(rb"LLVM version (\d+\.\d+\.\d+\w*) \(([0-9a-f]{40})\)", data)
        if m:
            return f"{m.group(1).decode()} ({m.group(2).decode()}, {lib.name})"
    return "unknown"


def clang_version() -> str:
    try:
        return subprocess.run([CLANG, "--version"], capture_output=True, text=True,
                              check=True).stdout.splitlines()[0].strip()
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unavailable"


def _llvm_major(version: str) -> int:
    m = re.search(r"(\d+)\.\d+\.\d+", version)
    return int(m.group(1)) if m else 0


# ----------------------------------------------------------------------------- Triton kernels

def _triton_kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def add(x, y, n, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = o < n
        tl.store(x + o, tl.load(x + o, mask=m) + tl.load(y + o, mask=m), mask=m)

    @triton.jit
    def rowsum(x, out, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        v = tl.load(x + tl.program_id(0) * n + o, mask=o < n, other=0.0)
        tl.store(out + tl.program_id(0), tl.sum(v, axis=0))

    @triton.jit
    def transpose(x, y, BM: tl.constexpr, BN: tl.constexpr):
        m = tl.arange(0, BM)
        n = tl.arange(0, BN)
        t = tl.load(x + m[:, None] * BN + n[None, :])
        tl.store(y + n[:, None] * BM + m[None, :], tl.trans(t))

    @triton.jit
    def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        m = tl.program_id(0) * BM + tl.arange(0, BM)
        n = tl.program_id(1) * BN + tl.arange(0, BN)
        k = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ta = tl.load(a + m[:, None] * K + (k0 + k)[None, :])
            tb = tl.load(b + (k0 + k)[:, None] * BN + n[None, :])
            acc += tl.dot(ta, tb)
        tl.store(c + m[:, None] * BN + n[None, :], acc.to(tl.float16))

    sigs = {
        "add": ({"x": "*fp32", "y": "*fp32", "n": "i32"}, add),
        "rowsum": ({"x": "*fp32", "out": "*fp32", "n": "i32"}, rowsum),
        "transpose": ({"x": "*fp32", "y": "*fp32"}, transpose),
        "matmul": ({"a": "*fp16", "b": "*fp16", "c": "*fp16", "K": "i32"}, matmul),
    }
    return sigs


def triton_plan(quick: bool) -> list[tuple[str, str, dict, dict]]:
    """(target, kernel, constexprs, options) to compile."""
    plan = []
    for arch in ("gfx942", "gfx950"):
        for w in (1, 2, 4, 8, 16):
            for per_lane in (1, 16, 64):                       # elements per lane: register pressure
                plan.append((arch, "add", {"BLOCK": w * 64 * per_lane}, {"num_warps": w}))
            plan.append((arch, "rowsum", {"BLOCK": w * 64 * 8}, {"num_warps": w}))
        for w, bm, bn in ((1, 64, 64), (4, 64, 128), (4, 128, 64), (8, 128, 128), (16, 128, 128),
                          (4, 32, 96), (2, 128, 32)):
            plan.append((arch, "transpose", {"BM": bm, "BN": bn}, {"num_warps": w}))
        for w, bm, bn, bk, st in ((4, 64, 64, 32, 1), (4, 64, 64, 64, 2), (4, 128, 128, 32, 2),
                                  (8, 128, 128, 64, 2), (8, 256, 128, 64, 3), (4, 128, 64, 64, 3),
                                  (2, 64, 64, 64, 2), (16, 256, 256, 64, 2), (1, 32, 32, 32, 2),
                                  (8, 128, 256, 64, 2), (4, 256, 256, 32, 2)):
            plan.append((arch, "matmul", {"BM": bm, "BN": bn, "BK": bk},
                         {"num_warps": w, "num_stages": st}))
    if quick:
        plan = plan[::12]
    return plan


def gen_triton(quick: bool, log) -> tuple[list[dict], dict]:
    import triton
    from triton.backends.compiler import GPUTarget

    warnings.filterwarnings("ignore")
    kernels = _triton_kernels()
    llvm = triton_llvm_version()
    tool = f"triton {triton.__version__} (bundled LLVM {llvm})"
    cases, failures = [], []
    for arch, name, constexprs, options in triton_plan(quick):
        sig, fn = kernels[name]
        tag = "-".join(f"{k}{v}" for k, v in {**constexprs, **options}.items())
        case_id = f"triton-{arch}-{name}-{tag}"
        try:
            src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=constexprs)
            k = triton.compile(src, target=GPUTarget("hip", arch, 64), options=options)
            info = parse_amdgcn(k.asm["amdgcn"])
            rng = parse_flat_wg_range(k.asm["llir"])
        except Exception as e:  # one failing case must not stop the rest
            failures.append({"id": case_id, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
            log(f"  skip {case_id}: {failures[-1]['error']}")
            continue
        threads = options["num_warps"] * 64
        cases.append({
            "id": case_id, "target": arch, "kernel": name, "generator": "triton", "tool": tool,
            "llvm_major": _llvm_major(llvm), "params": {**constexprs, **options},
            "threads": threads, "flat_wg_range": list(rng) if rng else [1, threads],
            "max_flat_workgroup_size": info["max_flat_workgroup_size"],
            "vgprs": info["vgprs"], "agprs": info["agprs"], "total_vgprs": info["total_vgprs"],
            "sgprs": info["sgprs"], "lds": info["lds"], "scratch": info["scratch"],
            # LDS Triton allocates at launch (dynamic): LLVM's occupancy does not see it
            "dynamic_lds": int(k.metadata.shared),
            "occupancy": info["occupancy"],
            "command": f"triton.compile(ASTSource({name}, constexprs={constexprs}), "
                       f"target=GPUTarget('hip', '{arch}', 64), options={options})",
        })
        log(f"  {case_id}: occ {info['occupancy']} vgpr {info['vgprs']}+{info['agprs']} "
            f"sgpr {info['sgprs']} lds {info['lds']}")
    return cases, {"tool": tool, "triton": triton.__version__, "llvm": llvm, "failures": failures}


# ----------------------------------------------------------------------------- LLVM IR kernels

def llvm_ir_source(live: int, lds_bytes: int, lo: int, hi: int) -> str:
    """A kernel in LLVM IR with ``live`` values live at once and ``lds_bytes`` of static LDS.

    Triton kernels allocate their LDS dynamically (``@global_smem`` is an external zero-size
    array), so LLVM's ``; Occupancy`` for them never sees LDS; this kernel, compiled with the same
    LLVM, gives that LLVM's answer for static LDS and for flat-work-group-size ranges.
    """
    L = []
    n = lds_bytes // 4
    if n:
        L.append(f"@lds = internal addrspace(3) global [{n} x float] poison, align 4")
    L += ["declare i32 @llvm.amdgcn.workitem.id.x()", "declare void @llvm.amdgcn.s.barrier()",
          "define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %in) #0 {",
          "  %t = call i32 @llvm.amdgcn.workitem.id.x()"]
    if n:
        L += [f"  %li = urem i32 %t, {n}",
              "  %lp = getelementptr float, ptr addrspace(3) @lds, i32 %li",
              "  store volatile float 1.0, ptr addrspace(3) %lp",
              "  call void @llvm.amdgcn.s.barrier()",
              "  %lv = load volatile float, ptr addrspace(3) %lp",
              "  store volatile float %lv, ptr addrspace(1) %out"]
    for i in range(live):
        L += [f"  %o{i} = add i32 %t, {i * 4096}",
              f"  %p{i} = getelementptr float, ptr addrspace(1) %in, i32 %o{i}",
              f"  %v{i} = load volatile float, ptr addrspace(1) %p{i}"]
    for i in reversed(range(live)):
        L += [f"  %q{i} = getelementptr float, ptr addrspace(1) %out, i32 %o{i}",
              f"  store volatile float %v{i}, ptr addrspace(1) %q{i}"]
    L += ["  ret void", "}", f'attributes #0 = {{ "amdgpu-flat-work-group-size"="{lo},{hi}" }}']
    return "\n".join(L) + "\n"


def ir_plan(arch: str, quick: bool) -> list[dict]:
    lds_cu = {"gfx942": 65536, "gfx950": 163840}[arch]
    plan = []
    # LDS-limited at 256 threads: fractions of the CU's LDS, on and off the allocation granule
    for frac in (0.02, 0.05, 0.07, 0.1, 0.13, 0.2, 0.26, 0.34, 0.45, 0.51, 0.7, 1.0):
        plan.append(dict(live=4, lds=int(lds_cu * frac) // 4 * 4, lo=256, hi=256))
    # the same LDS with Triton's range "1,N" and with a fixed size N
    for hi in (64, 128, 256, 512, 1024):
        for lds in (0, 3000, lds_cu // 20, lds_cu // 6):
            plan.append(dict(live=4, lds=lds, lo=1, hi=hi))
            plan.append(dict(live=4, lds=lds, lo=hi, hi=hi))
    # other ranges, and registers under a range
    for lo, hi, lds, live in ((64, 256, 4096, 4), (128, 512, 2000, 4), (65, 200, 0, 4),
                              (256, 1024, 6000, 4), (1, 256, 0, 60), (1, 512, 0, 40), (1, 1024, 0, 70),
                              (320, 320, 0, 4), (448, 448, 0, 4), (1, 448, 2500, 4), (100, 700, 5000, 4)):
        plan.append(dict(live=live, lds=lds, lo=lo, hi=hi))
    # ranges whose maximum leaves wave slots idle: where LLVM 21+ and LLVM 19 part ways
    for hi in (192, 320, 448, 576, 704, 960):
        for lds in (0, lds_cu // 12, lds_cu // 7):
            plan.append(dict(live=4, lds=lds, lo=1, hi=hi))
    return plan[::8] if quick else plan


def gen_ir(quick: bool, log) -> tuple[list[dict], dict]:
    from triton.backends.amd import compiler as amdc

    warnings.filterwarnings("ignore")
    llvm = triton_llvm_version()
    tool = f"LLVM {llvm} (Triton's AMD code generator, via triton.backends.amd.compiler.compile_amdgpu)"
    cases, failures = [], []
    for arch in ("gfx942", "gfx950"):
        for p in ir_plan(arch, quick):
            name = f"ir_r{p['live']}_l{p['lds']}_w{p['lo']}_{p['hi']}"
            case_id = f"llvm-ir-{arch}-{name}"
            try:
                asm = amdc.compile_amdgpu(
                    llvm_ir_source(p["live"], p["lds"], p["lo"], p["hi"]),
                    amdc.get_amd_codegen_target_triple(arch), arch, "", flags=amdc.get_llvm_flags(arch),
                    enable_fp_fusion=False, disable_optimization=False, canonicalize_gep=False,
                    disabled_passes="", dump_ir=False, enable_timing=False)
                info = parse_amdgcn(asm)
            except Exception as e:  # one failing case must not stop the rest
                failures.append({"id": case_id, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
                log(f"  skip {case_id}: {failures[-1]['error']}")
                continue
            cases.append({
                "id": case_id, "target": arch, "kernel": name, "generator": "llvm-ir", "tool": tool,
                "llvm_major": _llvm_major(llvm),
                "params": {"live_values": p["live"], "static_lds_request": p["lds"]},
                "threads": p["hi"], "flat_wg_range": [p["lo"], p["hi"]],
                "max_flat_workgroup_size": info["max_flat_workgroup_size"],
                "vgprs": info["vgprs"], "agprs": info["agprs"], "total_vgprs": info["total_vgprs"],
                "sgprs": info["sgprs"], "lds": info["lds"], "scratch": info["scratch"],
                "occupancy": info["occupancy"],
                "command": f"compile_amdgpu(llvm_ir_source(live={p['live']}, lds_bytes={p['lds']}, "
                           f"lo={p['lo']}, hi={p['hi']}), arch='{arch}')",
            })
            log(f"  {case_id}: occ {info['occupancy']} vgpr {info['vgprs']}+{info['agprs']} "
                f"lds {info['lds']}")
    return cases, {"tool": tool, "llvm": llvm, "failures": failures}


# ----------------------------------------------------------------------------- clang kernels

def hip_source(name: str, live: int, lds_bytes: int, lo: int, hi: int, sgpr_clobber: int = -1) -> str:
    """One HIP kernel with ``live`` values live at once and ``lds_bytes`` of static LDS."""
    lines = [
        f'extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size({lo}, {hi})))',
        f"void {name}(volatile float *out, volatile const float *in) {{",
        "  unsigned t = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workgroup_id_x() * 1024u;",
    ]
    if lds_bytes:
        n = lds_bytes // 4
        lines[0:0] = [f"__attribute__((shared)) float lds_{name}[{n}];"]
        lines.append(f"  lds_{name}[t % {n}u] = in[t];")
        lines.append("  __builtin_amdgcn_s_barrier();")
        lines.append(f"  out[t] = lds_{name}[(t + 1u) % {n}u];")
    for i in range(live):
        lines.append(f"  float v{i} = in[t + {i * 4096}u];")
    for i in reversed(range(live)):
        lines.append(f"  out[t + {i * 4096}u] = v{i};")
    if sgpr_clobber >= 0:
        lines.append(f'  __asm__ volatile("s_mov_b32 s{sgpr_clobber}, 0" ::: "s{sgpr_clobber}");')
    lines.append("}")
    return "\n".join(lines) + "\n"


def clang_plan(quick: bool) -> list[dict]:
    plan = []
    # register-limited: live values across workgroup sizes
    for threads in (64, 256, 512):
        for live in (8, 40, 60, 90, 120, 160, 250, 300):
            plan.append(dict(live=live, lds=0, lo=threads, hi=threads))
    for live in (24, 56, 100, 120):
        plan.append(dict(live=live, lds=0, lo=1024, hi=1024))
    # LDS-limited: sizes that are and are not multiples of 512 B, below and above 32 KB
    for lds in (1000, 2048, 3000, 4100, 6000, 8192, 10000, 16384, 20000, 24576, 33000, 40960, 50000, 65536):
        plan.append(dict(live=4, lds=lds, lo=256, hi=256))
    for threads, lds in ((64, 2100), (64, 3000), (128, 3000), (128, 7000), (512, 9000), (1024, 12000),
                         (192, 5000), (320, 6600), (1000, 4000), (96, 1600)):
        plan.append(dict(live=4, lds=lds, lo=threads, hi=threads))
    # wave- and block-limited: no LDS, few registers, every size from 64 to 1024
    for threads in (64, 128, 192, 256, 384, 448, 640, 768, 960, 1024):
        plan.append(dict(live=2, lds=0, lo=threads, hi=threads))
    # ranges (LLVM 19 uses the maximum only)
    for lo, hi, lds in ((1, 256, 0), (1, 128, 3000), (64, 1024, 8000), (1, 64, 1500)):
        plan.append(dict(live=4, lds=lds, lo=lo, hi=hi))
    # SGPR-limited: clobber a high SGPR
    for s in (79, 90, 95, 99, 101):
        plan.append(dict(live=2, lds=0, lo=256, hi=256, sgpr=s))
    if quick:
        plan = plan[::10]
    return plan


def gen_clang(quick: bool, log) -> tuple[list[dict], dict]:
    version = clang_version()
    if version == "unavailable":
        log(f"  {CLANG} not found: no clang cases")
        return [], {"tool": f"{CLANG} unavailable", "failures": []}
    cases, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for p in clang_plan(quick):
            name = f"k_r{p['live']}_l{p['lds']}_w{p['lo']}_{p['hi']}" + (f"_s{p['sgpr']}" if "sgpr" in p else "")
            src = Path(tmp) / f"{name}.hip"
            src.write_text(hip_source(name, p["live"], p["lds"], p["lo"], p["hi"], p.get("sgpr", -1)))
            cmd = [CLANG, "-x", "hip", "--cuda-device-only", "--offload-arch=gfx942", "-nogpulib",
                   "-nogpuinc", "-O3", "-S", "-Rpass-analysis=kernel-resource-usage", str(src),
                   "-o", str(Path(tmp) / f"{name}.s")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            rem = parse_remarks(r.stderr).get(name)
            need = {"vgprs", "agprs", "sgprs", "occupancy", "lds"}
            if r.returncode != 0 or not rem or not need <= set(rem):
                err = (r.stderr.strip().splitlines() or ["no remarks"])[-1][:200]
                failures.append({"id": f"clang-gfx942-{name}", "error": err})
                log(f"  skip {name}: {err}")
                continue
            asm = (Path(tmp) / f"{name}.s").read_text()
            info = parse_amdgcn(asm)
            if info["occupancy"] != rem["occupancy"]:
                failures.append({"id": name, "error": "asm and remark disagree on occupancy"})
                continue
            cases.append({
                "id": f"clang-gfx942-{name}", "target": "gfx942", "kernel": name, "generator": "clang",
                "tool": version, "llvm_major": _llvm_major(version),
                "params": {"live_values": p["live"], "static_lds_request": p["lds"],
                           **({"sgpr_clobber": p["sgpr"]} if "sgpr" in p else {})},
                "threads": p["hi"], "flat_wg_range": [p["lo"], p["hi"]],
                "max_flat_workgroup_size": info["max_flat_workgroup_size"],
                "vgprs": rem["vgprs"], "agprs": rem["agprs"], "total_vgprs": info["total_vgprs"],
                # the remark's SGPRs exclude VCC/flat-scratch/XNACK; occupancy uses the total
                "sgprs": info["sgprs"], "lds": rem["lds"], "scratch": rem.get("scratch", 0),
                "occupancy": rem["occupancy"],
                "command": " ".join(["clang-19"] + cmd[1:-3] + [f"{name}.hip", "-o", f"{name}.s"]),
            })
            log(f"  {name}: occ {rem['occupancy']} vgpr {rem['vgprs']}+{rem['agprs']} "
                f"sgpr {info['sgprs']} lds {rem['lds']}")
    return cases, {"tool": version, "failures": failures}


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--only", choices=["triton", "llvm-ir", "clang"])
    ap.add_argument("--quick", action="store_true", help="a handful of cases (smoke test)")
    args = ap.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731

    cases, gens = [], {}
    generators = [  # (name, banner, function, needs Triton)
        ("triton", "triton (cross-compiling for gfx942, gfx950):", gen_triton, True),
        ("llvm-ir", "LLVM IR through Triton's AMD code generator (gfx942, gfx950):", gen_ir, True),
        ("clang", f"{CLANG} (HIP device code for gfx942):", gen_clang, False),
    ]
    for name, banner, gen, needs_triton in generators:
        if args.only not in (None, name):
            continue
        log(banner)
        try:
            c, g = gen(args.quick, log)
        except ImportError as e:
            if not needs_triton:
                raise
            c, g = [], {"tool": f"triton unavailable: {e}", "failures": []}
        cases += c
        gens[name] = g
    doc = {
        "description": "LLVM AMDGPU's own occupancy (waves per SIMD) for compiled kernels, with the "
                       "resources it used; regenerate with the command below.",
        "provenance": {
            "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": "python tools/gen_amd_occupancy_cases.py" + (" --quick" if args.quick else "")
                       + (f" --only {args.only}" if args.only else ""),
            "python": sys.version.split()[0],
            "generators": gens,
        },
        "fields": {
            "threads": "workgroup size the kernel is launched with (the range's maximum)",
            "flat_wg_range": "amdgpu-flat-work-group-size the compiler assumed (min, max)",
            "vgprs": "arch VGPRs (; NumVgprs)", "agprs": "AGPRs (; NumAgprs)",
            "total_vgprs": "; TotalNumVgprs (unified register file)",
            "sgprs": "; NumSGPRsForWavesPerEU (includes VCC, flat scratch, XNACK)",
            "lds": ".group_segment_fixed_size (static LDS bytes: all the LDS LLVM sees)",
            "dynamic_lds": "Triton only: LDS allocated at launch, invisible to LLVM's occupancy",
            "occupancy": "; Occupancy (waves per SIMD) as LLVM reports it",
            "llvm_major": "major version of the LLVM that compiled the case",
        },
        "cases": cases,
    }
    atomic_write_yaml(args.out, doc)
    log(f"wrote {len(cases)} cases to {args.out} "
        f"({sum(len(g['failures']) for g in gens.values())} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
