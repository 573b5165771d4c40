"""A Python child process for a test that must not touch this process's state: building and
loading a torch operator library (its CUDA kernels would replace the Python ones here), or a
Triton cross-compile after interpreter runs. The child prints one JSON line last."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys


def child_json(script: str, env: dict | None = None, drop: tuple = (), timeout: int = 300) -> dict:
    """Run ``script`` with this Python (``env`` added to, ``drop`` removed from the environment) and
    return the JSON object of its last line of output; a failed child fails the test with its stderr."""
    full = {k: v for k, v in os.environ.items() if k not in drop}
    full.update(env or {})
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=full, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def built_ops(script: str, cache_dir) -> dict:
    """``child_json`` of a script that builds and loads an op library into an empty cache: skips the
    test where there is no C++ compiler, fails it where the build says why it could not."""
    import pytest

    from occtune.build import native

    if not shutil.which(native.cxx_compiler()[0]):
        pytest.skip(f"no C++ compiler ({native.cxx_compiler()[0]})")
    got = child_json(script, {"OCCTUNE_CACHE_DIR": str(cache_dir)})
    assert "error" not in got, got.get("error")
    return got
