"""Provenance recorded with every result: what produced it, where, and when."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from importlib import metadata

from tuner import __version__
from tuner.targets import REPO_ROOT


def _pkg_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_revision() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def collect(device: str | None = None, **extra) -> dict:
    """Versions, git revision, host and date; ``device`` names the GPU that measured (or none)."""
    out = {
        "occtune": __version__,
        "git_revision": git_revision(),
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": _pkg_version("torch"),
        "triton": _pkg_version("triton"),
        "device": device or "none (analytic: no GPU was used)",
    }
    out.update(extra)
    return out
