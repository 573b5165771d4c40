"""Cross-compile a Triton kernel for a named target without a GPU, and read what the compiler allotted.

Triton compiles from the AST for any target it has a backend for (``GPUTarget("cuda", 90, 32)``,
``GPUTarget("hip", "gfx950", 64)``). A caller hands over the specialisation its launcher would
make (pointer and integer types, constexprs, 16-divisibility attributes), because that decides
vectorisation and hence the register count. NVIDIA: registers and static shared memory from
``cuobjdump --dump-resource-usage`` of the cubin (Triton's launch adds ``metadata.shared`` bytes of
dynamic shared memory); AMD: VGPRs, AGPRs, SGPRs, LDS and LLVM's own occupancy remark from the
``.amdgcn`` text.

Kernels defined while ``TRITON_INTERPRET=1`` is set are interpreter objects that cannot be
compiled; :func:`compilable_module` imports a second copy of their module with the interpreter
switched off, so tests under the interpreter can still cross-compile.

:func:`occtune.build.compiled.triton_resources` turns :func:`compile_info` into a cached ``Resources``
with the compiler named (``compiled: triton 3.9.0 (LLVM 24) gfx950``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

from occtune.errors import UserError


def gpu_target(name: str):
    """``"sm_90"`` -> GPUTarget("cuda", 90, 32); ``"gfx942"`` -> GPUTarget("hip", "gfx942", 64)."""
    from triton.backends.compiler import GPUTarget

    m = re.fullmatch(r"sm_(\d+)a?", name)
    if m:
        return GPUTarget("cuda", int(m.group(1)), 32)
    if re.fullmatch(r"gfx[0-9a-f]+", name):
        return GPUTarget("hip", name, 32 if name.startswith(("gfx10", "gfx11", "gfx12")) else 64)
    raise UserError(f"unknown target {name!r}; write e.g. sm_80, sm_90, sm_100, gfx942, gfx950")


def cuobjdump() -> str | None:
    try:
        from triton import knobs

        return knobs.nvidia.cuobjdump.path
    except (ImportError, AttributeError):     # Triton before knobs (3.4)
        pass
    import triton

    cand = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return cand if os.path.exists(cand) else shutil.which("cuobjdump")


def nvidia_numbers(cubin: bytes) -> dict:
    """{"regs", "static_shared", "scratch" (stack bytes per thread)} of a cubin, or {} without cuobjdump.
    A cuobjdump that fails or prints no such line is a UserError (not "no numbers")."""
    tool = cuobjdump()
    if tool is None:
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        run = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True)
    m = re.search(r"REG:(\d+).*?STACK:(\d+).*?SHARED:(\d+)", run.stdout)
    if run.returncode != 0 or m is None:
        why = (run.stderr.strip().splitlines() or [f"exit code {run.returncode}, no REG/STACK/SHARED line"])[0]
        raise UserError(f"{tool} --dump-resource-usage failed on a compiled kernel: {why[:160]}")
    return {"regs": int(m.group(1)), "scratch": int(m.group(2)), "static_shared": int(m.group(3))}


def amd_numbers(asm: str) -> dict:
    """VGPRs, SGPRs, AGPRs, LDS, spills and LLVM's occupancy remark from ``.amdgcn`` text."""
    out = {}
    for key, pat in (("vgprs", r"\.vgpr_count:\s+(\d+)"), ("sgprs", r"\.sgpr_count:\s+(\d+)"),
                     ("agprs", r"\.agpr_count:\s+(\d+)"), ("lds", r"\.group_segment_fixed_size:\s+(\d+)"),
                     ("vgpr_spills", r"\.vgpr_spill_count:\s+(\d+)"),
                     ("scratch", r"\.private_segment_fixed_size:\s+(\d+)"),
                     ("compiler_occupancy", r";\s*Occupancy:\s+(\d+)")):
        m = re.search(pat, asm)
        if m:
            out[key] = int(m.group(1))
    return out


def compilable_module(module, kernel_name: str):
    """``module`` itself if its ``@triton.jit`` function ``kernel_name`` can be compiled, else a
    second copy of the module imported with ``TRITON_INTERPRET=0`` (see the module docstring)."""
    if hasattr(getattr(module, kernel_name), "cache_key"):
        return module
    try:    # Triton >= 3.4 reads TRITON_INTERPRET through knobs, unless a script set the knob
        from triton import knobs

        overrides = knobs.runtime.__dict__
    except ImportError:
        overrides = {}
    saved_env, saved_knob = os.environ.get("TRITON_INTERPRET"), overrides.pop("interpret", None)
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        spec = importlib.util.spec_from_file_location(module.__name__ + "_compiled", module.__file__)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved_knob is not None:
            overrides["interpret"] = saved_knob
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
    return mod


def compile_info(fn, signature: dict, constexprs: dict, attrs: dict, target_name: str, options: dict) -> dict:
    """Compile ``fn`` for ``target_name`` with launch ``options`` (num_warps, num_stages, AMD's
    matrix_instr_nonkdim/waves_per_eu/kpack, ...); returns threads, dynamic ``shared`` bytes and the
    numbers of :func:`nvidia_numbers` or :func:`amd_numbers`."""
    import triton

    target = gpu_target(target_name)
    source = triton.compiler.ASTSource
    if getattr(fn, "is_gluon", lambda: False)():    # a @gluon.jit kernel (Triton's Gluon dialect)
        from triton.experimental.gluon._runtime import GluonASTSource as source
    src = source(fn, signature, constexprs, attrs)
    k = triton.compile(src, target=target, options=dict(options))
    # metadata.num_warps counts the warps warp specialisation adds (tl.range(warp_specialize=True))
    warps = getattr(k.metadata, "num_warps", None) or options.get("num_warps", 4)
    info = {"target": target_name, "threads": int(warps) * target.warp_size, "shared": int(k.metadata.shared)}
    info.update(nvidia_numbers(k.asm["cubin"]) if target.backend == "cuda" else amd_numbers(k.asm["amdgcn"]))
    return info


def launcher_signature(pointers: dict, ints: dict, constexprs: dict, not_specialised=()) -> tuple:
    """(signature, constexprs, attrs) as Triton's launcher specialises a call whose parameters are
    ``pointers`` (name -> pointer type; 16-byte aligned), then ``ints`` (name -> value), then
    ``constexprs`` (name -> value), in that order: an int equal to 1 becomes a constexpr and one
    divisible by 16 gets the divisibility attribute, except those named in ``not_specialised``
    (``do_not_specialize``); the others are i32 or i64 by value."""
    sig, cx = dict(pointers), {}
    for k, v in ints.items():
        if v == 1 and k not in not_specialised:
            sig[k], cx[k] = "constexpr", 1
        else:
            sig[k] = "i32" if v < 2**31 else "i64"
    for k, v in constexprs.items():
        sig[k], cx[k] = "constexpr", v
    names = list(sig)
    aligned = list(pointers) + [k for k, v in ints.items() if v != 1 and v % 16 == 0 and k not in not_specialised]
    return sig, cx, {(names.index(k),): [["tt.divisibility", 16]] for k in aligned}
