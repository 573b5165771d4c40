"""occtune's native launcher: ``native_launch.c``, built once per machine with the system C
compiler and loaded as an extension module, calls the driver's launch function directly
(cuLaunchKernel on CUDA, hipModuleLaunchKernel on ROCm: the same arguments) for every launch of
a plan in one C call. It needs only a C compiler and Python's headers, no CUDA or ROCm headers:
Python hands it the driver function's address from the library torch loaded.

``module()`` is the loaded module, or None where it cannot be built (no compiler, no headers,
``OCCTUNE_NATIVE_LAUNCH=0``); ``error()`` then says why. The built file is cached under
``$OCCTUNE_CACHE_DIR/native`` (or ``~/.cache/occtune/native``), keyed by the source and the
Python build, and written atomically: concurrent first calls each build, one file wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("native_launch.c")
PLAN_LAUNCH = Path(__file__).with_name("plan_launch.h")       # the C++ launch plans of the ops' native kernels
MODULE = "_occtune_launch"
BUILD_TIMEOUT_S = 120

_LOCK = threading.Lock()
_STATE: dict = {}            # "module": the module or None, "error": why None


def module():
    """The native launcher module, built on first use; None where it cannot be (see ``error``)."""
    if "module" not in _STATE:
        with _LOCK:
            if "module" not in _STATE:
                _STATE["module"], _STATE["error"] = _load()
    return _STATE["module"]


def error() -> str | None:
    """Why ``module()`` is None (None when it loaded or has not been asked for)."""
    return _STATE.get("error")


def _load():
    if os.environ.get("OCCTUNE_NATIVE_LAUNCH", "1") == "0":
        return None, "OCCTUNE_NATIVE_LAUNCH=0"
    path = built_path()
    if not path.exists():
        err = build(path)
        if err:
            return None, err
    try:
        return _import(path), None
    except (ImportError, OSError):   # a damaged file: build it afresh once
        err = build(path)
        if err:
            return None, err
        try:
            return _import(path), None
        except (ImportError, OSError) as e:
            return None, f"cannot load {path}: {e}"


def _import(path: Path):
    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    spec = importlib.util.spec_from_file_location(MODULE, str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def built_path() -> Path:
    """Where the module built from this source for this Python lives."""
    from occtune.fsutil import cache_dir

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256(SOURCE.read_bytes() + suffix.encode() + sysconfig.get_paths()["include"].encode()
                         ).hexdigest()[:16]
    return cache_dir() / "native" / key / f"{MODULE}{suffix}"


def compiler() -> list[str]:
    """The C compiler command: ``$CC``, else the one Python was built with, else ``cc``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def build(path: Path) -> str | None:
    """Compile the module to ``path`` (atomically); None on success, else one line saying why not."""
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        return f"no Python.h in {include} (install the Python development headers)"
    return compile_shared([*compiler(), "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE)], path)


def compile_shared(cmd: list[str], path: Path) -> str | None:
    """Run ``cmd + ["-o", <a temporary name>]`` and move its output to ``path`` (atomically: a
    concurrent build of the same file leaves one whole file); None on success, else one line
    saying why not."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [*cmd, "-o", str(tmp)]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            first = next((ln for ln in r.stderr.splitlines() if "error" in ln.lower()), r.stderr.strip()[:200])
            return f"{cmd[0]} failed: {first}"
        os.replace(tmp, path)
    except (OSError, subprocess.TimeoutExpired) as e:    # no compiler, a read-only cache folder
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return f"{cmd[0]}: {e}"
    return None


def cxx_compiler() -> list[str]:
    """The C++ compiler command: ``$CXX``, else the one Python was built with, else ``c++``."""
    cxx = os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++"
    return shlex.split(cxx)


def torch_library(source: Path) -> tuple[Path | None, str | None]:
    """(path, None) of ``source``, a C++ file of torch operators (TORCH_LIBRARY...; it may include
    ``plan_launch.h``), built into a shared library for the torch in use (its headers, its C++ ABI;
    cached like the module above, keyed by the sources, torch's version and the command); (None,
    why) where it cannot be built.
    Load it with ``torch.ops.load_library(path)``. Needs a C++17 compiler, no CUDA or ROCm headers."""
    import torch
    from torch.utils import cpp_extension

    from occtune.fsutil import cache_dir

    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    libs = cpp_extension.library_paths()
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-w",
             f"-I{PLAN_LAUNCH.parent}", *(f"-I{d}" for d in cpp_extension.include_paths()), str(source),
             *(f"-L{d}" for d in libs), *(f"-Wl,-rpath,{d}" for d in libs), "-lc10", "-ltorch_cpu"]
    cmd = [*cxx_compiler(), *flags]
    key = hashlib.sha256(source.read_bytes() + PLAN_LAUNCH.read_bytes() + torch.__version__.encode()
                         + " ".join(cmd).encode()).hexdigest()[:16]
    path = cache_dir() / "native" / key / f"{source.stem}.so"
    if path.exists():
        return path, None
    print(f"occtune: building {source.name} for torch {torch.__version__} (once; cached in {path.parent})",
          file=sys.stderr, flush=True)
    err = compile_shared(cmd, path)
    return (None, err) if err else (path, None)


def load_op_library(source: Path, init: str) -> str | None:
    """Build (once) and load ``source``, a family's C++ op kernels, and hand it the driver's launch
    and stream-capture functions through its op ``torch.ops.occtune.<init>(launch, capturing)``.
    None when it is loaded, else why not (``OCCTUNE_NATIVE_OP=0``, no GPU, no compiler, ...): the
    family's Python kernels stay in use then."""
    if os.environ.get("OCCTUNE_NATIVE_OP", "1") == "0":
        return "OCCTUNE_NATIVE_OP=0"
    import torch

    from occtune.build import rtc

    if not torch.cuda.is_available():
        return "no GPU"
    hip = bool(getattr(torch.version, "hip", None))
    launch = rtc.driver_launch_function(hip)
    capturing = rtc.driver_function_address("hipStreamIsCapturing" if hip else "cuStreamIsCapturing")
    if launch is None or capturing is None:
        return "the driver's launch or stream-capture function was not found"
    rtc.log_compile(f"building or loading {source.name}")
    path, why = torch_library(source)
    if path is None:
        return why
    try:
        torch.ops.load_library(str(path))
    except (OSError, RuntimeError) as e:
        return f"cannot load {path}: {e}"
    getattr(torch.ops.occtune, init)(launch, capturing)
    return None
