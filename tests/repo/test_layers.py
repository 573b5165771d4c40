"""The occtune package reads as its pipeline, and its imports point one way (down this list):

    cli, commands/     the verbs
    pipeline/          request -> analytic or timed sweep -> one results writer
    outputs/           results, provenance, export, tuned, report, plots
    engine/            family contract, registry, sweep, timing, selection, caches, replay
    build/             runtime compilers, compiled resources, the native launcher
    model/             targets and occupancy: pure
    (top-level)        errors, units, validate, fsutil, output: the foundation

A module may import its own layer and the layers below it, never one above (also not inside a
function). Families (occtune.kernels.*) sit above all of it and are not checked here.
"""

import ast
from pathlib import Path

import pytest

from clihelp import REPO

PACKAGE = REPO / "tuner"
LAYERS = ["foundation", "model", "build", "engine", "outputs", "pipeline", "commands"]
FOUNDATION = {"errors", "units", "validate", "fsutil", "output", "__init__"}
TOP = {"cli", "__main__"}          # the entry point: may import anything


def layer_of(module: str) -> str | None:
    """The layer of ``occtune.<...>`` (None: not part of the layered package, e.g. occtune.kernels)."""
    parts = module.split(".")[1:]
    if not parts or parts[0] in FOUNDATION:
        return "foundation"
    if parts[0] in TOP:
        return "top"
    return parts[0] if parts[0] in LAYERS else None


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["occtune", *parts])


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``occtune.*`` module ``path`` imports, anywhere in the file (line, module)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "occtune":
                out += [(node.lineno, f"occtune.{a.name}") for a in node.names]
            elif node.module.startswith("occtune."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("occtune.")]
    return out


def upward_imports(root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        mine = layer_of(module_name(path, root))
        if mine in (None, "top"):
            continue
        for line, target in imported_modules(path):
            theirs = layer_of(target)
            if theirs is None or theirs == "top" and mine != "top":
                if theirs == "top":
                    bad.append(f"{path.relative_to(root)}:{line} imports {target} (the CLI entry point)")
                continue
            if LAYERS.index(theirs) > LAYERS.index(mine):
                bad.append(f"{path.relative_to(root)}:{line} ({mine}) imports {target} ({theirs})")
    return bad


def test_imports_point_down_the_pipeline():
    assert upward_imports() == []


def test_every_module_has_a_layer():
    unplaced = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if layer_of(module_name(p)) is None]
    assert unplaced == []


@pytest.mark.parametrize("source, expected", [
    ("from occtune.outputs.results import SCHEMA\n", "(model) imports occtune.outputs.results (outputs)"),
    ("def f():\n    from occtune import pipeline\n", "(model) imports occtune.pipeline (pipeline)"),
    ("import occtune.engine.sweep\n", "(model) imports occtune.engine.sweep (engine)"),
])
def test_an_upward_import_is_reported(tmp_path, source, expected):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "bad.py").write_text(source)
    (tmp_path / "model" / "fine.py").write_text("from occtune.errors import UserError\nfrom occtune.model import x\n")
    found = upward_imports(tmp_path)
    assert len(found) == 1 and found[0].endswith(expected), found
