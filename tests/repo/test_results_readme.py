"""results/ holds what results/README.md describes, and nothing else.

Every file under results/ (but the README itself and __pycache__) must be listed in the README's
tables: its path under results/ in backticks in a row's first cell, and a non-empty cell for what
it is, the command, the revision, the hardware and the date. A listed file that is missing fails
too. Experiment records belong in benchmarks/records/, not here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from clihelp import REPO

COLUMNS = ("file", "what", "command", "revision", "hardware", "date")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def described(readme: str) -> dict[str, list[str]]:
    """Path under results/ -> the cells of the table row that lists it."""
    rows = {}
    for line in readme.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = _cells(line)
        for path in re.findall(r"`([^`]+)`", cells[0]):
            rows[path] = cells
    return rows


def present(root: Path) -> list[str]:
    """Files under ``root`` (paths relative to it), the top README and __pycache__ left out."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and "__pycache__" not in p.relative_to(root).parts
                  and p.relative_to(root).as_posix() != "README.md")


def problems(root: Path) -> list[str]:
    """One line per file the README does not describe, per listed file that is missing, and per
    row with an empty column."""
    readme = root / "README.md"
    if not readme.is_file():
        return ["results/README.md is missing: it must describe every file under results/"]
    rows = described(readme.read_text(encoding="utf-8"))
    files = present(root)
    out = [f"results/{f}: not described in results/README.md (add a row: {', '.join(COLUMNS)})"
           for f in files if f not in rows]
    out += [f"results/README.md lists {f}, which is not under results/" for f in rows if f not in files]
    for f, cells in rows.items():
        if len(cells) < len(COLUMNS) or not all(cells[: len(COLUMNS)]):
            out.append(f"results/README.md: the row of {f} needs all of {', '.join(COLUMNS)}")
    return out


def test_every_file_under_results_is_described_and_every_row_is_there():
    found = problems(REPO / "results")
    assert not found, "\n".join(found)


def test_the_check_names_an_undescribed_file_a_missing_one_and_an_empty_column(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    assert problems(root) == ["results/README.md is missing: it must describe every file under results/"]
    shutil.copy(REPO / "results" / "README.md", root / "README.md")
    for f in described((root / "README.md").read_text()):          # the tree the README describes
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("x")
    assert problems(root) == []
    (root / "sm_90" / "topk_v15").mkdir()
    (root / "sm_90" / "topk_v15" / "run.log").write_text("x")
    (root / "sm_90" / "__pycache__").mkdir()
    (root / "sm_90" / "__pycache__" / "m.pyc").write_bytes(b"")   # ignored: Python's byte-code
    (root / "sm_90" / "topk.h").unlink()
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("| 93bca7e | H200 | 2026-12-01 05:24 |", "| 93bca7e | H200 |  |", 1))
    found = problems(root)
    assert any(p.startswith("results/sm_90/topk_v15/run.log: not described") for p in found)
    assert "results/README.md lists sm_90/topk.h, which is not under results/" in found
    assert any("the row of sm_90/rope.yaml needs all of" in p for p in found)
    assert len(found) == 3
