"""Atomic writes: the file modes an ordinary open() gives, no temporary file left behind."""

import os
import tempfile
import stat

import pytest

from occtune.errors import UserError
from occtune.fsutil import atomic_write_text, atomic_write_yaml


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    saved = os.umask(0o022)
    os.umask(saved)

    def set_mask(mask):
        os.umask(mask)

    yield set_mask
    os.umask(saved)


@pytest.mark.parametrize("mask, want", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_respect_the_umask(tmp_path, umask, mask, want):
    umask(mask)
    path = atomic_write_yaml(tmp_path / "r" / "topk.yaml", {"a": 1})
    assert _mode(path) == want
    path = atomic_write_text(path, "replaced\n")        # a replacement gets the same mode
    assert _mode(path) == want and path.read_text() == "replaced\n"


def test_no_temporary_file_left_on_failure(tmp_path, monkeypatch):
    def interrupted(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(tmp_path / "x.yaml", "new\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["mkstemp", "replace"])
def test_interrupted_write_leaves_no_folder_it_made(tmp_path, monkeypatch, where):
    """Ctrl-C between making the results folder and the rename left an empty folder behind (CI
    caught it in test_ctrl_c_early_in_a_real_run); folders that were there stay."""
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile if where == "mkstemp" else os, where, interrupted)
    (tmp_path / "kept").mkdir()
    for target in (tmp_path / "out" / "gfx950" / "topk.yaml", tmp_path / "kept" / "topk.yaml"):
        with pytest.raises(KeyboardInterrupt):
            atomic_write_text(target, "new\n")
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_a_user_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(UserError, match="cannot write"):
            atomic_write_text(ro / "x.yaml", "x")
    finally:
        ro.chmod(0o755)


def test_results_exports_and_plots_are_readable_by_others(capsys, tmp_path, umask):
    from clihelp import run_main

    umask(0o022)
    assert run_main(capsys, "topk", "--target", "gfx950", "--out", tmp_path / "res")[0] == 0
    results = tmp_path / "res" / "gfx950" / "topk.yaml"
    assert run_main(capsys, "export", results, "--out", tmp_path / "tuned.h")[0] == 0
    assert run_main(capsys, "report", results, "--out", tmp_path / "plots")[0] == 0
    files = [results, tmp_path / "tuned.h", *(tmp_path / "plots").iterdir()]
    assert len(files) == 4 and {_mode(f) for f in files} == {0o644}      # results, header, PNG, HTML page
