"""occtune.build.native: building a family's C++ op library says so once, on stderr."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from occtune.build import native  # noqa: E402


def test_an_op_library_build_prints_one_progress_line_and_a_cached_one_none(tmp_path, monkeypatch, capsys):
    source = tmp_path / "ops.cpp"
    source.write_text("// stands in for op_native.cpp\n")
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))
    built = []

    def fake_compile(cmd, path):        # the compiler is not run: the output appears as it would
        built.append(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return None

    monkeypatch.setattr(native, "compile_shared", fake_compile)
    path, why = native.torch_library(source)
    err = capsys.readouterr().err
    assert why is None and path == built[0] and err.count("\n") == 1
    assert err.startswith("occtune: building ops.cpp for torch ") and str(path.parent) in err
    assert native.torch_library(source) == (path, None) and len(built) == 1    # cached: no build, no line
    assert capsys.readouterr().err == ""
