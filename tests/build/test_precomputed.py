"""The families' shipped tables of precomputed results (kernels/<family>/precomputed.json, written by
tools/precompute.py): read only where the whole key matches, current with the kernel sources,
default configs and compilers here, and giving the answer a fresh compile gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from occtune.build import compiled, diskcache

from clihelp import load_tool

REPO = Path(__file__).resolve().parents[2]


precompute = load_tool("precompute")


def _project_compilers() -> str | None:
    """Why this machine lacks a compiler the tables are made with (None: it has them all)."""
    clangs = compiled.clang_compilers()
    if not clangs or not clangs[0].argv[0].endswith("zig"):
        return "the amd extra's clang (ziglang) is not installed"
    if not compiled.nvidia_compilers():
        return "no NVRTC or nvcc (the test extra brings NVRTC)"
    try:
        from triton.backends import backends
    except ImportError:
        return "no Triton"
    return None if {"amd", "nvidia"} <= set(backends) else "Triton lacks its AMD or NVIDIA backend"


# ------------------------------------------------------------------------------ the mechanism

def test_shipped_entry_is_used_only_where_the_whole_key_matches(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))
    table = tmp_path / "precomputed.json"
    key = {"probe": "hip", "source": "abc", "macros": {"X": 1}, "target": "gfx950", "compiler": "clang 22"}
    diskcache.write_table(table, [{"namespace": "compiled", "key": key, "value": {"vgprs": 61}}], "test")
    calls = []

    def compute():
        calls.append(1)
        return {"vgprs": 7}

    assert diskcache.memo("compiled", key, compute, table) == {"vgprs": 61} and not calls
    for field, other in (("source", "abd"), ("macros", {"X": 2}), ("compiler", "clang 23"), ("target", "gfx942")):
        assert diskcache.memo("compiled", {**key, field: other}, compute, table) == {"vgprs": 7}
    assert len(calls) == 4
    assert diskcache.memo("tie-bounds", key, compute, table) == {"vgprs": 7}      # another namespace
    with diskcache.recording(compute=False) as rec:
        assert diskcache.memo("compiled", key, compute, table) == {"vgprs": 61}
        with pytest.raises(diskcache.NotShipped, match="precomputed.json has no compiled entry"):
            diskcache.memo("compiled", {**key, "source": "new"}, compute, table)
    assert [e["value"] for e in rec.tables[table].values()] == [{"vgprs": 61}]
    with diskcache.recording(read_shipped=False):       # --fresh: the table is not read
        assert diskcache.memo("compiled", {**key, "target": "gfx1250"}, compute, table) == {"vgprs": 7}


def test_a_compile_that_fails_ships_its_error(tmp_path, monkeypatch):
    """A config the compiler refuses is recorded with its error, which the table raises again
    (a fresh machine is told at once what a compile would say); it is never cached on disk."""
    from occtune.errors import CompileError

    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))
    table, key = tmp_path / "precomputed.json", {"probe": "triton", "target": "sm_80"}

    def refuse():
        raise CompileError("triton 3.9.0 could not compile fp8_gemm_kernel for sm_80: at 1:0:")

    with diskcache.recording() as rec, pytest.raises(CompileError):
        diskcache.memo("compiled", key, refuse, table)
    diskcache.write_table(table, list(rec.tables[table].values()), "test")
    assert not (tmp_path / "cache").exists()
    with pytest.raises(CompileError, match="could not compile fp8_gemm_kernel for sm_80"):
        diskcache.memo("compiled", key, lambda: pytest.fail("compiled again"), table)


def test_a_compile_that_timed_out_is_not_recorded(tmp_path, monkeypatch):
    from occtune.errors import CompileTimeout

    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))

    def slow():
        raise CompileTimeout("clang took over 600 s: -x hip ...")

    with diskcache.recording() as rec, pytest.raises(CompileTimeout):
        diskcache.memo("compiled", {"k": 1}, slow, tmp_path / "precomputed.json")
    assert rec.tables == {}


def test_a_missing_or_torn_table_computes(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))
    torn = tmp_path / "torn.json"
    torn.write_text('{"entries": [', encoding="utf-8")
    for table in (torn, tmp_path / "absent.json"):
        assert diskcache.memo("compiled", {"k": str(table)}, lambda: {"v": 1}, table) == {"v": 1}


# ------------------------------------------------------------------------------ the tables

@pytest.mark.parametrize("family", precompute.families())
def test_table_holds_exactly_what_the_default_runs_use(family, tmp_path, monkeypatch):
    """Every key the family's default analytic runs use on every target is in its table (a kernel
    source, default config or compiler changed without the table regenerated fails here, naming
    the command), and the table holds nothing else."""
    why = _project_compilers()
    if why:
        pytest.skip(f"{why}: the tables are made with the amd and test extras' compilers (scripts/test.sh)")
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))       # nothing on disk: every key from the table
    monkeypatch.setenv("OCCTUNE_NO_REPLAY", "1")
    path = precompute.table_path(family)
    fix = f"regenerate it: {precompute.command_for(family)}"
    with diskcache.recording(compute=False) as rec:
        for argv in precompute.runs(family):
            try:
                precompute.run(argv)
            except diskcache.NotShipped as e:
                pytest.fail(f"{path.relative_to(REPO)} is stale (a kernel source, a default config or a compiler "
                            f"changed): tune {' '.join(argv)}: {str(e)[:600]}; {fix}", pytrace=False)
    used = set(rec.tables.get(path, {}))
    held = set(diskcache._table(str(path)))
    assert held == used, f"{path.relative_to(REPO)} holds {len(held - used)} entries no default run uses; {fix}"


def test_main_job_gives_a_fresh_compiles_answer(tmp_path, monkeypatch, capsys):
    """README's main job from the shipped table (nothing compiled) equals the same job compiled
    fresh, table unread."""
    why = _project_compilers()
    if why:
        pytest.skip(why)
    from occtune.cli import main

    monkeypatch.setenv("OCCTUNE_NO_REPLAY", "1")
    monkeypatch.chdir(tmp_path)
    docs = []
    for name, kw in (("shipped", {"compute": False}), ("fresh", {"read_shipped": False})):
        monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / name))
        with diskcache.recording(**kw), pytest.raises(SystemExit) as ex:
            main(["topk", "--target", "gfx950", "--json", "--no-write"])
        assert ex.value.code == 0
        doc = json.loads(capsys.readouterr().out)
        doc.pop("provenance")
        docs.append(doc)
    assert docs[0]["rows"][0]["resources_source"].startswith("compiled: clang")
    assert docs[0] == docs[1]
