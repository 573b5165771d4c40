"""occtune installs like a library: a plain wheel, one `occtune` import namespace (no top-level
`kernels` or `tuner`), profiles and kernel sources as package data, and the README's main job
runs from a fresh virtual environment."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from clihelp import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"pip wheel could not build here: {r.stderr.strip().splitlines()[-1:]}")
    return next(out.glob("occtune-*.whl"))


def test_wheel_has_one_namespace_and_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"occtune"}
    for need in ("occtune/kernels/topk/topk.cuh", "occtune/kernels/topk/profile.yaml", "occtune/build/native_launch.c",
                 "occtune/profiles/targets/gfx950.yaml"):
        assert need in names
    families = [p.name for p in (REPO / "kernels").iterdir() if (p / "family.py").is_file()]
    assert len(families) >= 3
    for name in families:                  # every family folder ships, with no list to edit
        assert f"occtune/kernels/{name}/family.py" in names
        assert f"occtune/kernels/{name}/precomputed.json" in names     # its default runs' compiled resources


def site_dirs() -> list[str]:
    """The running interpreter's package folders, in its order: a virtual environment's own
    (where pip put rich, click, torch, ...) and, where it sees them, the base interpreter's."""
    return [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]


def venv_seeing_these_packages(venv: Path) -> Path:
    """A fresh virtual environment whose own folder comes first (what is installed there wins) and
    that sees the running interpreter's packages after it. ``venv --system-site-packages`` would
    show the *base* interpreter's instead, which inside a virtual environment lacks what was
    installed into it."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    own = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # plain folders: their own .pth files (this checkout's editable occtune) are not run
    (Path(own) / "running_interpreter.pth").write_text("".join(d + "\n" for d in site_dirs()), encoding="utf-8")
    return py


def test_installed_wheel_runs_the_main_job(wheel, tmp_path):
    venv = tmp_path / "venv"
    py = venv_seeing_these_packages(venv)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    where = subprocess.run([str(py), "-c", "import occtune; print(occtune.__file__)"], capture_output=True,
                           text=True, check=True, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv))
    r = subprocess.run([str(venv / "bin" / "tune"), "topk", "--target", "gfx950", "--json", "--no-write"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"winner"' in r.stdout and "gfx950" in r.stdout
    prov = subprocess.run([str(py), "-c", "from occtune.outputs.provenance import git_revision_why as g; print(g())"],
                          capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert "None" in prov and "installed package" in prov       # never the enclosing repository's
