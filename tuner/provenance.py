"""Provenance recorded with every result: what produced it, where, and when."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from importlib import metadata

from occtune import __version__
from pathlib import Path

# The checkout root when occtune runs from its own source tree (tuner/ is the occtune package).
_CHECKOUT = Path(__file__).resolve().parent.parent


def _pkg_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(_CHECKOUT), *args], capture_output=True, text=True, timeout=5)


def git_revision_why() -> tuple[str | None, str]:
    """(revision, why): the revision of occtune's own checkout (``-dirty`` if changed), or
    (None, reason) for an installed package or a tree git cannot read. Never the revision of a
    repository that merely encloses the installed package (a virtualenv inside some project)."""
    if not (_CHECKOUT / "pyproject.toml").is_file() or not (_CHECKOUT / "tuner" / "cli.py").is_file():
        return None, "installed package, not a source checkout"
    try:
        top = _git("rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != _CHECKOUT:
            return None, "the source tree is not a git checkout of its own"
        rev = _git("rev-parse", "--short=12", "HEAD")
        if rev.returncode != 0:
            return None, "git has no HEAD commit here"
        dirty = _git("status", "--porcelain", "--untracked-files=no")
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""), ""
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"git unavailable ({type(e).__name__})"


def git_revision() -> str | None:
    return git_revision_why()[0]


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
