"""README's example blocks and the committed analytic results are what their commands print and
write today (tools/readme_examples.py made them): each CPU example runs again here and is compared,
with dates, git revisions, version numbers, absolute paths and the host masked."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from clihelp import load_tool

REPO = Path(__file__).resolve().parents[2]
FIX = "run `python3 tools/readme_examples.py` and commit what it writes"


tool = load_tool("readme_examples")


def _diff(old: str, new: str, name: str) -> str:
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{name} (committed)",
                                          f"{name} (now)", lineterm="", n=1))


def test_mask_hides_what_changes_between_runs_only():
    line = ("note: topk on gfx950 from /work/x/results/gfx950/topk.yaml: analytic; 2026-12-02T06:45:10+00:00; "
            "git 78ea4b354f91-dirty; occtune 0.1.0, torch 2.13.0+cpu; clang 22.1.8")
    assert tool.mask(line) == ("note: topk on gfx950 from <path>: analytic; <date>; git <revision>; occtune "
                               "<version>, torch <version>; clang <version>")
    kept = "61 VGPRs, 1,048,576 tokens, x1.25 headroom, 0.75, blocks/CU, waves/SIMD, 4096 entries, deadbeef"
    assert tool.mask(kept) == kept


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The committed analytic results made again in a scratch copy of results/ (the examples read them)."""
    tool.require_this_checkout()
    where = tmp_path_factory.mktemp("readme")
    env = tool.scratch(where)
    return where, env, tool.make_committed(where, env)


@pytest.mark.parametrize("rel", sorted(tool.COMMITTED))
def test_committed_analytic_results_are_current(scratch, rel):
    _, _, made = scratch
    old, new = tool.comparable((REPO / rel).read_text(encoding="utf-8")), tool.comparable(made[rel])
    assert old == new, f"{rel} is stale ({tool.COMMITTED[rel]}); {FIX}\n{_diff(old, new, rel)}"


def test_readme_example_blocks_are_current(scratch):
    where, env, _ = scratch
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    found = tool.blocks(text)
    assert len(found) >= 2, f"README.md lost its example blocks (marked {tool.MARK})"
    for start, end, cmds in found:
        old, new = tool.mask("\n".join(lines[start:end])), tool.mask("\n".join(tool.render(cmds, where, env)))
        assert old == new, f"README.md's example at line {start} is stale; {FIX}\n{_diff(old, new, 'README.md')}"
