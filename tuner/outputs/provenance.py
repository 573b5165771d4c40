"""Provenance recorded with every result: what produced it, where, and when."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from importlib import metadata

from occtune import __version__
from pathlib import Path

# The checkout root when occtune runs from its own source tree (tuner/ is the occtune package).
_CHECKOUT = Path(__file__).resolve().parents[2]


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


def collect(*, target: str | None = None, fingerprint: dict | None = None, **extra) -> dict:
    """The one provenance record of every results file and export.

    ``fingerprint`` is the timed sweep's environment (occtune.engine.env): the device that measured,
    its arch (sm_90, gfx950), the driver's own version, the runtime. Without it the record says no
    GPU was used (analytic). ``git_revision`` is occtune's own checkout, or None with the reason."""
    fp = fingerprint or {}
    rev, why = git_revision_why()
    out = {
        "target": target,
        "device": fp.get("device_name") or "none (analytic: no GPU was used)",
        "arch": fp.get("arch"),
        "driver": fp.get("driver"),
        "runtime": fp.get("runtime"),
        "torch": fp.get("torch") or _pkg_version("torch"),
        "triton": fp.get("triton") or _pkg_version("triton"),
        "python": platform.python_version(),
        "occtune": __version__,
        "git_revision": rev,
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "host": platform.node(),
    }
    if rev is None and os.environ.get("OCCTUNE_GIT_REVISION"):
        rev, why = os.environ["OCCTUNE_GIT_REVISION"], f"{why}; revision stated by $OCCTUNE_GIT_REVISION"
        out["git_revision"] = rev
    if why:
        out["git_revision_why"] = why
    for k in ("source_hash", "timer"):
        if fp.get(k) is not None:
            out[k] = fp[k]
    out.update(extra)
    return out


def for_device(device="cuda", **extra) -> dict:
    """:func:`collect` for a benchmark on ``device`` (the GPU it measures on): the same record a
    timed sweep writes, with the device, its arch and the driver's own version."""
    from occtune.engine.env import _torch_device_info

    fp = _torch_device_info(device)
    return collect(target=fp.get("arch"), fingerprint=fp, **extra)
