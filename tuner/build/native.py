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
import sysconfig
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("native_launch.c")
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
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [*compiler(), "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(tmp)]
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
