"""Resources of a kernel compiled for a named target without a GPU: the compiler's own numbers.

Three probes, each returning :class:`occtune.engine.family.Resources` whose ``source`` says what
compiled it:

- :func:`hip_resources`: HIP/CUDA C++ device code through clang's AMDGPU backend
  (``-x hip --cuda-device-only --offload-arch=gfxNNN -nogpulib -nogpuinc -O3``) with the
  ``-Rpass-analysis=kernel-resource-usage`` remarks: VGPRs, AGPRs, SGPRs, spills, scratch,
  static LDS and LLVM's own occupancy, per kernel. Compilers, newest first: the ``ziglang``
  wheel's clang (22.1 in ziglang 0.17: gfx942, gfx950, gfx1250; ``pip install 'occtune[amd]'``),
  then ``clang-NN``/``clang`` on PATH (Debian's clang-19 builds gfx90a/gfx942, not gfx950).
  A compiler that does not know the target is skipped for the next one.
- :func:`cuda_resources`: CUDA C++ through NVRTC (the ``nvidia-cuda-nvrtc-cu12`` wheel, the
  same route as the runtime build in :mod:`occtune.build.rtc`) or else ``nvcc``; ``ptxas -v`` gives
  registers, static shared memory, stack and spill stores per kernel for ``sm_NN``.
- :func:`triton_resources`: a Triton kernel cross-compiled by Triton for the target through
  :mod:`occtune.build.tritonxc` (AMD numbers from the ``.amdgcn`` text, NVIDIA from ``cuobjdump``).

Results are cached on disk (:mod:`occtune.build.diskcache`, namespace ``compiled``) by (source hash,
macros, target, compiler version); ``shipped=`` names the family's table of precomputed results
(read where the whole key matches: a fresh machine compiles nothing for the default configs). Errors (:mod:`occtune.errors`): :class:`NoCompilerError` when
nothing here can build for the target (callers may fall back to an assumption, and must say so);
:class:`CompileError` when a compiler ran and failed (one line: compiler, target, first error).
``$OCCTUNE_NO_COMPILERS=1`` hides every compiler, to see what changes without them.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from occtune.build.diskcache import memo, source_hash
from occtune.model.occupancy import Resources
from occtune.errors import CompileError, CompileTimeout, NoCompilerError, UserError  # noqa: F401 - re-exported
from occtune.build.rtc import build_options

NO_COMPILERS_ENV = "OCCTUNE_NO_COMPILERS"
COMPILE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Compiler:
    kind: str                       # "clang", "nvrtc", "nvcc", "triton"
    version: str                    # "22.1.8", "12.9", "3.9.0"
    argv: tuple[str, ...] = ()      # command prefix (clang, nvcc)
    ident: str = ""                 # the full version line: part of the cache key
    llvm: int | None = None         # Triton: major version of its bundled LLVM

    def label(self, target: str) -> str:
        llvm = f" (LLVM {self.llvm})" if self.llvm else ""
        return f"compiled: {self.kind} {self.version}{llvm} {target}"


def disabled() -> bool:
    return os.environ.get(NO_COMPILERS_ENV, "") not in ("", "0")


def llvm_major_of(source: str) -> int | None:
    """The LLVM major version behind a ``Resources.source`` label (clang's own, or Triton's
    bundled one), for :func:`occtune.model.occupancy.llvm_amd_occupancy`; None if not an LLVM build."""
    m = re.search(r"\(LLVM (\d+)\)", source) or re.match(r"compiled: clang (\d+)\.", source)
    return int(m.group(1)) if m else None


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.search(r"\berror\b", ln, re.I)]
    return ((errs or lines or ["no output"])[0])[:240]


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CompileTimeout(f"{Path(argv[0]).name} took over {COMPILE_TIMEOUT_S} s: {' '.join(argv[1:6])} ...") from None


def _version_line(argv: list[str]) -> str:
    try:
        p = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [ln.strip() for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    return lines[0] if p.returncode == 0 and lines else ""


# ---------------------------------------------------------------------------------- clang (AMD)

_UNSUPPORTED_ARCH = re.compile(r"invalid target ID|unsupported (HIP|CUDA)? ?gpu architecture|"
                               r"unknown target CPU|invalid offload arch", re.I)
_REMARK = re.compile(r"remark:\s+([A-Za-z][\w /\[\]]*?):\s+(\S+)\s+\[-Rpass-analysis=kernel-resource-usage\]")
# remark name -> our key. clang <= 21 prints "SGPRs", clang 22 "TotalSGPRs": both are the count
# LLVM's occupancy uses (VCC, flat scratch and XNACK included).
_REMARK_KEYS = {"SGPRs": "sgprs", "TotalSGPRs": "sgprs", "VGPRs": "vgprs", "AGPRs": "agprs",
                "ScratchSize [bytes/lane]": "scratch", "Occupancy [waves/SIMD]": "occupancy",
                "SGPRs Spill": "sgpr_spill", "VGPRs Spill": "vgpr_spill", "LDS Size [bytes/block]": "lds"}


def parse_remarks(text: str) -> dict[str, dict]:
    """clang's ``-Rpass-analysis=kernel-resource-usage`` remarks: kernel name -> {key: int}."""
    kernels: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _REMARK.search(line)
        if not m:
            continue
        key, val = m.group(1).strip(), m.group(2)
        if key == "Function Name":
            current = kernels.setdefault(val, {})
        elif current is not None and key in _REMARK_KEYS and val.lstrip("-").isdigit():
            current[_REMARK_KEYS[key]] = int(val)
    return kernels


def _zig_clang() -> list[str] | None:
    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.origin:
        return None
    zig = Path(spec.origin).parent / "zig"
    return [str(zig), "clang"] if zig.is_file() else None


@functools.lru_cache(maxsize=1)
def clang_compilers() -> tuple[Compiler, ...]:
    """clang builds that can target AMDGPU, newest first (the ziglang wheel's, then PATH's)."""
    found = []
    cands = [_zig_clang()] + [[n] for n in [f"clang-{v}" for v in range(30, 16, -1)] + ["clang"] if shutil.which(n)]
    for argv in filter(None, cands):
        line = _version_line(argv)
        m = re.search(r"clang version (\d+\.\d+\.\d+)", line)
        if m:
            found.append(Compiler("clang", m.group(1), tuple(argv), line))
    found.sort(key=lambda c: tuple(int(x) for x in c.version.split(".")), reverse=True)
    return tuple(dict.fromkeys(found))


def hip_command(compiler: Compiler, target: str, src: str, out: str, macros: dict) -> list[str]:
    return [*compiler.argv, "-x", "hip", "--cuda-device-only", f"--offload-arch={target}", "-nogpulib",
            "-nogpuinc", "-O3", "-S", src, "-o", out, "-Rpass-analysis=kernel-resource-usage",
            *build_options(macros)]


class _Unsupported(Exception):
    """This compiler does not know the target (try the next one)."""


def _clang_build(compiler: Compiler, source: str, name: str, target: str, macros: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="occtune-hip-") as d:
        src = Path(d) / name
        src.write_text(source, encoding="utf-8")
        p = _run(hip_command(compiler, target, str(src), str(Path(d) / "out.s"), macros))
    if p.returncode != 0:
        if _UNSUPPORTED_ARCH.search(p.stderr):
            raise _Unsupported(_first_error(p.stderr))
        raise CompileError(f"clang {compiler.version} could not compile {name} for {target}: "
                            f"{_first_error(p.stderr)}")
    kernels = parse_remarks(p.stderr)
    if not kernels:
        raise CompileError(f"clang {compiler.version} compiled {name} for {target} but printed no "
                            "kernel-resource-usage remarks")
    return kernels


def compile_hip(source: str, target: str, macros: dict, name: str = "kernel.hip",
                shipped: Path | None = None) -> tuple[Compiler, dict]:
    """Every kernel's remarks for ``source`` compiled device-only for ``target`` by the newest clang
    that knows it: (compiler, {kernel: {sgprs, vgprs, agprs, scratch, occupancy, sgpr_spill,
    vgpr_spill, lds}})."""
    if not re.fullmatch(r"gfx[0-9a-f]+", target):
        raise UserError(f"{target!r} is not an AMD target name (gfx942, gfx950, ...)")
    tried = []
    for comp in () if disabled() else clang_compilers():
        key = {"probe": "hip", "source": source_hash(source), "name": name, "macros": dict(macros),
               "target": target, "compiler": comp.ident}
        try:
            return comp, memo("compiled", key, lambda: _clang_build(comp, source, name, target, macros), shipped)
        except _Unsupported:
            tried.append(f"clang {comp.version}")
    why = f"{', '.join(tried)} cannot target {target}" if tried else "no clang with the AMDGPU backend found"
    raise NoCompilerError(f"no compiler here builds HIP for {target} ({why}); "
                          "pip install 'occtune[amd]' brings clang 22 (the ziglang wheel)")


def hip_resources(source: str, kernel: str, macros: dict, target: str, *, threads: int,
                  name: str = "kernel.hip", shipped: Path | None = None) -> Resources:
    """Per-block resources of ``kernel`` compiled for ``target`` (AMD); dynamic LDS is the
    caller's (the compiler does not see it)."""
    comp, kernels = compile_hip(source, target, macros, name, shipped)
    if kernel not in kernels:
        raise CompileError(f"clang {comp.version} built {name} for {target} without a kernel {kernel!r} "
                            f"(found: {', '.join(kernels)})")
    k = kernels[kernel]
    return Resources(threads=threads, static_lds=k.get("lds", 0), vgprs=k.get("vgprs"), agprs=k.get("agprs"),
                     sgprs=k.get("sgprs"), scratch_bytes=k.get("scratch"), source=comp.label(target),
                     compiler_occupancy=k.get("occupancy"))


# ------------------------------------------------------------------------------ NVRTC / nvcc

_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, dict]:
    """``ptxas -v`` output: kernel name -> {regs, smem, stack, spill_stores}."""
    kernels: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = kernels.setdefault(m.group(1), {"smem": 0})
            continue
        if current is None:
            continue
        m = _PTXAS_FRAME.search(line)
        if m:
            current["stack"], current["spill_stores"] = int(m.group(1)), int(m.group(2))
        m = _PTXAS_REGS.search(line)
        if m:
            current["regs"] = int(m.group(1))
            s = _PTXAS_SMEM.search(line)
            current["smem"] = int(s.group(1)) if s else 0
    return kernels


@functools.lru_cache(maxsize=1)
def _nvrtc() -> ctypes.CDLL | None:
    """NVRTC from the nvidia-cuda-nvrtc wheel, or a system libnvrtc; None if neither loads."""
    paths = []
    spec = importlib.util.find_spec("nvidia.cuda_nvrtc") if importlib.util.find_spec("nvidia") else None
    for root in (spec.submodule_search_locations or []) if spec else []:
        paths += sorted(Path(root, "lib").glob("libnvrtc.so*"))
    for path in [*map(str, paths), "libnvrtc.so"]:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        return lib
    return None


@functools.lru_cache(maxsize=1)
def nvidia_compilers() -> tuple[Compiler, ...]:
    """NVRTC first (what the runtime build uses), then nvcc."""
    found = []
    lib = _nvrtc()
    if lib is not None:
        major, minor = ctypes.c_int(), ctypes.c_int()
        if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
            v = f"{major.value}.{minor.value}"
            found.append(Compiler("nvrtc", v, (), f"nvrtc {v}"))
    if shutil.which("nvcc"):
        p = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60)
        m = re.search(r"release (\d+\.\d+)", p.stdout)
        if m:
            found.append(Compiler("nvcc", m.group(1), ("nvcc",), p.stdout.strip().splitlines()[-1]))
    return tuple(found)


def _nvrtc_build(source: str, name: str, target: str, macros: dict) -> dict:
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None) != 0:
        raise CompileError(f"NVRTC could not create a program for {name}")
    opts = [o.encode() for o in [f"--gpu-architecture={target}", "--ptxas-options=-v", *build_options(macros)]]
    try:
        rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    log = buf.value.decode(errors="replace")
    if rc != 0:
        raise CompileError(f"NVRTC could not compile {name} for {target}: {_first_error(log)}")
    return parse_ptxas(log)


def _nvcc_build(compiler: Compiler, source: str, name: str, target: str, macros: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="occtune-cu-") as d:
        src = Path(d) / name
        src.write_text(source, encoding="utf-8")
        p = _run([*compiler.argv, f"-arch={target}", "-cubin", "-x", "cu", str(src), "-o", str(Path(d) / "out.cubin"),
                  "-Xptxas", "-v", *build_options(macros)])
    if p.returncode != 0:
        raise CompileError(f"nvcc {compiler.version} could not compile {name} for {target}: "
                            f"{_first_error(p.stderr)}")
    return parse_ptxas(p.stdout + p.stderr)


def compile_cuda(source: str, target: str, macros: dict, name: str = "kernel.cu",
                 shipped: Path | None = None) -> tuple[Compiler, dict]:
    """Every kernel's ptxas figures for ``source`` compiled for ``target`` (``sm_90``):
    (compiler, {kernel: {regs, smem, stack, spill_stores}})."""
    if not re.fullmatch(r"sm_\d+a?", target):
        raise UserError(f"{target!r} is not an NVIDIA target name (sm_80, sm_90, ...)")
    comps = () if disabled() else nvidia_compilers()
    if not comps:
        raise NoCompilerError(f"no CUDA compiler here for {target} (neither NVRTC nor nvcc); "
                              "pip install nvidia-cuda-nvrtc-cu12 brings NVRTC")
    comp = comps[0]
    key = {"probe": "cuda", "source": source_hash(source), "name": name, "macros": dict(macros),
           "target": target, "compiler": comp.ident}
    build = (lambda: _nvrtc_build(source, name, target, macros)) if comp.kind == "nvrtc" else \
        (lambda: _nvcc_build(comp, source, name, target, macros))
    return comp, memo("compiled", key, build, shipped)


def cuda_resources(source: str, kernel: str, macros: dict, target: str, *, threads: int,
                   name: str = "kernel.cu", shipped: Path | None = None) -> Resources:
    """Per-block resources of ``kernel`` compiled for ``target`` (NVIDIA); dynamic shared memory
    is the caller's."""
    comp, kernels = compile_cuda(source, target, macros, name, shipped)
    if kernel not in kernels:
        raise CompileError(f"{comp.kind} {comp.version} built {name} for {target} without a kernel "
                            f"{kernel!r} (found: {', '.join(kernels)})")
    k = kernels[kernel]
    return Resources(threads=threads, static_lds=k.get("smem", 0), regs=k.get("regs"),
                     scratch_bytes=k.get("stack"), source=comp.label(target))


# ------------------------------------------------------------------------------------ Triton


def triton_llvm_major() -> int | None:
    """Major version of the LLVM that generates Triton's AMD code (read from its library once per
    installed file; the library names its ``LLVM version``)."""
    import triton

    base = Path(triton.__file__).parent
    for lib in (base / "backends" / "amd" / "lib" / "libtriton_amd_codegen.so", base / "_C" / "libtriton.so"):
        try:
            st = lib.stat()
        except OSError:
            continue
        key = {"probe": "triton-llvm", "path": str(lib), "size": st.st_size, "mtime": st.st_mtime}
        found = memo("compiled", key, lambda: {"major": _llvm_major_in(lib)})["major"]
        if found:
            return found
    return None


def _llvm_major_in(lib: Path) -> int | None:
    m = re.search(rb"LLVM version (\d+)\.\d+\.\d+", lib.read_bytes())
    return int(m.group(1)) if m else None


@functools.lru_cache(maxsize=2)
def _triton(backend: str) -> Compiler:
    import triton
    from triton.backends import backends

    name = {"hip": "amd", "cuda": "nvidia"}[backend]
    if name not in backends:
        raise NoCompilerError(f"this Triton ({triton.__version__}) has no {name.upper()} backend")
    llvm = triton_llvm_major() if backend == "hip" else None
    return Compiler("triton", triton.__version__, (), f"triton {triton.__version__} llvm {llvm}", llvm)


def _triton_build(fn, signature: dict, constexprs: dict, attrs: dict, target: str, options: dict) -> dict:
    import triton
    from triton.compiler.errors import CompilationError

    from occtune.build.tritonxc import compile_info

    try:
        info = compile_info(fn, signature, constexprs, attrs, target, options)
    except (CompilationError, RuntimeError) as e:   # front end / LLVM back end refuse the config
        raise CompileError(f"triton {triton.__version__} could not compile {fn.__name__} for {target}: "
                           f"{_first_error(str(e))}") from None
    if target.startswith("sm_") and "regs" not in info:
        raise NoCompilerError("cuobjdump not found (Triton's NVIDIA backend ships one): no register count")
    return info


def triton_resources(fn, signature: dict, constexprs: dict, attrs: dict, *, target: str,
                     options: dict, shipped: Path | None = None) -> Resources:
    """Per-block resources of a Triton kernel (a ``JITFunction``: see
    :func:`occtune.build.tritonxc.compilable_module`) compiled for ``target`` with the specialisation its
    launcher would make and launch ``options`` (num_warps, num_stages, ...), through
    :func:`occtune.build.tritonxc.compile_info`; cached on disk. Triton launches with ``metadata.shared``
    bytes of dynamic shared memory/LDS on both vendors; the static part is the cubin's static
    shared memory or the AMD kernel's fixed group segment (all LLVM's occupancy sees)."""
    from occtune.build.tritonxc import gpu_target

    backend = gpu_target(target).backend
    if disabled():
        raise NoCompilerError(f"compilers hidden by ${NO_COMPILERS_ENV}")
    comp = _triton(backend)
    key = {"probe": "triton", "fn": fn.cache_key, "signature": signature, "constexprs": constexprs,
           "attrs": sorted((str(k), str(v)) for k, v in attrs.items()), "options": options,
           "target": target, "compiler": comp.ident}
    i = memo("compiled", key, lambda: _triton_build(fn, signature, constexprs, attrs, target, options), shipped)
    return Resources(threads=i["threads"], static_lds=i.get("lds", i.get("static_shared", 0)),
                     dynamic_lds=i["shared"], regs=i.get("regs"), vgprs=i.get("vgprs"), agprs=i.get("agprs"),
                     sgprs=i.get("sgprs"), scratch_bytes=i.get("scratch"), source=comp.label(target),
                     compiler_occupancy=i.get("compiler_occupancy"))
