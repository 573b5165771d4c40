"""`tune` and `occtune` are occtune's console scripts where this environment installed occtune,
also after scripts/test.sh installed the extras (Ray ships a `tune` of its own, which pip may write
over ours); `--help` names `occtune` and `python3 -m occtune`, and says so where `tune` on PATH is
another program."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from occtune import __version__


def installed_scripts() -> dict[str, Path]:
    """occtune's console scripts as its installation recorded them: {name: path}."""
    try:
        dist = importlib.metadata.distribution("occtune")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("occtune is not installed in this environment (run from a checkout)")
    names = {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}
    found = {f.name: Path(dist.locate_file(f)).resolve() for f in dist.files or () if f.name in names}
    return {n: found.get(n) or Path(sys.executable).parent / n for n in names}


def test_tune_and_occtune_are_occtunes_after_the_installs():
    scripts = installed_scripts()
    assert {"tune", "occtune"} <= set(scripts), f"console scripts: {sorted(scripts)} (pip install -e . again)"
    for name in ("tune", "occtune"):
        r = subprocess.run([str(scripts[name]), "--version"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == f"occtune, version {__version__}", (
            f"{scripts[name]} --version printed {(r.stdout + r.stderr).strip()[-300:]!r}: another package wrote "
            "its own script over ours (scripts/test.sh installs our entry points again, last)")


def test_help_says_what_to_run_where_tune_is_another_program(tmp_path, capsys, monkeypatch):
    from clihelp import run_main

    def help_with_tune(script: str) -> str:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "tune").write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
        (folder / "tune").chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/bin:/bin")
        code, out, _ = run_main(capsys, "--help")
        assert code == 0
        return " ".join(out.split())

    ours = help_with_tune("from occtune.cli import main")
    assert "Also installed as 'occtune'" in ours and "python3 -m occtune" in ours and "note:" not in ours
    ray = help_with_tune("from ray.tune.cli.scripts import cli")
    assert "note: 'tune' on this PATH runs" in ray and f"{tmp_path}/1/tune,another" in ray.replace(" ", "")
    assert "run these commands as 'occtune ...' or 'python3 -m occtune ...'" in ray
