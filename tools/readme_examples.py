#!/usr/bin/env python3
"""Regenerate README.md's example blocks and the committed analytic results from the commands that make them.

    python3 tools/readme_examples.py            # rewrite what changed
    python3 tools/readme_examples.py --check    # say what differs; exit 1 if anything does

An example block is a fenced block right after the line ``<!-- example: tools/readme_examples.py -->``;
its lines starting with ``$ `` are commands, run by bash from a scratch copy of the repository's
results/ (so ``tune export results/...`` reads the committed files and nothing in the checkout is
written), with ``tune`` and ``python3`` this interpreter's occtune and Python; what follows each
command is its output (standard output, then standard error), with trailing spaces trimmed. The
committed analytic results (:data:`COMMITTED`) are made first, by their commands, in the same
scratch folder, so the examples show them. A file or block whose text differs only in what
:func:`mask` hides (dates, git revisions, version numbers, absolute paths, the host) is left as
it is. tests/repo/test_readme_examples.py runs the same commands in CI and fails on a difference.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = "<!-- example: tools/readme_examples.py -->"
COMMAND = "python3 tools/readme_examples.py"

# the committed results of analytic runs (no GPU): file -> the command that makes it
COMMITTED = {
    "results/gfx950/topk.yaml": "tune topk --target gfx950 --out results",
    "results/gfx942/topk.yaml": "tune topk --target gfx942 --out results",
}

_MASKS = [
    (re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:[+-]\d{2}:?\d{2}|Z)?)?"), "<date>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?:-dirty)?\b"), "<revision>"),
    (re.compile(r"\b\d+\.\d+\.\d+[\w.+-]*"), "<version>"),
    (re.compile(r"(?<![\w.~])/[\w.+-]+(?:/[\w.,=+-]*)+"), "<path>"),
    (re.compile(r"^(\s*host: ).*$", re.M), r"\1<host>"),
]


def mask(text: str) -> str:
    """``text`` with dates, revisions, versions, absolute paths and the host replaced by placeholders."""
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


# ------------------------------------------------------------------------------ running

def scratch(where: Path) -> dict:
    """A scratch folder holding a copy of results/ and a bin/ whose ``tune`` and ``python3`` are
    this interpreter's; the environment to run commands in."""
    shutil.copytree(ROOT / "results", where / "results")
    bin_dir = where / ".bin"
    bin_dir.mkdir()
    for name, run in (("tune", f'exec "{sys.executable}" -m occtune "$@"'), ("python3", f'exec "{sys.executable}" "$@"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{run}\n", encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "COLUMNS", "LINES")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", OCCTUNE_NO_REPLAY="1")
    return env


def require_this_checkout() -> None:
    """The examples must run this checkout's occtune (an editable install of it), not another's."""
    import occtune

    if not Path(occtune.__file__).resolve().is_relative_to(ROOT):
        raise SystemExit(f"error: this Python's occtune is {Path(occtune.__file__).parent}, not this checkout's: "
                         f"run `pip install --no-deps -e {ROOT}` first")


def run(command: str, cwd: Path, env: dict) -> str:
    """What ``command`` prints (stdout, then stderr), trailing spaces trimmed; a failure is an error."""
    r = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"error: `{command}` exited {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    lines = (r.stdout + r.stderr).splitlines()
    return "".join(ln.rstrip() + "\n" for ln in lines)


# ------------------------------------------------------------------------------ README blocks

def blocks(text: str) -> list[tuple[int, int, list[str]]]:
    """Each example block: (first line index inside the fence, fence end index, its commands)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            raise SystemExit(f"error: README.md line {i + 1}: {MARK} must be followed by a ``` fence")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise SystemExit(f"error: README.md line {i + 2}: the example block has no closing fence")
        cmds = [ln[2:] for ln in lines[i + 2:end] if ln.startswith("$ ")]
        out.append((i + 2, end, cmds))
    return out


def render(commands: list[str], cwd: Path, env: dict) -> list[str]:
    """The block's new lines: each command after ``$ `` and its output; a blank line between commands."""
    out: list[str] = []
    for n, cmd in enumerate(commands):
        if n:
            out.append("")
        out.append(f"$ {cmd}")
        out.extend(run(cmd, cwd, env).splitlines())
    return out


def new_readme(text: str, cwd: Path, env: dict) -> str:
    lines = text.splitlines()
    for start, end, cmds in reversed(blocks(text)):
        fresh = render(cmds, cwd, env)
        if mask("\n".join(fresh)) != mask("\n".join(lines[start:end])):
            lines[start:end] = fresh
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


# ------------------------------------------------------------------------------ committed results

def comparable(doc_text: str) -> str:
    """A results file as compared: YAML as loaded and dumped again (key order, line breaks),
    masked."""
    import yaml

    return mask(yaml.safe_dump(yaml.safe_load(doc_text), sort_keys=True, width=10_000))


def make_committed(cwd: Path, env: dict) -> dict[str, str]:
    """Run every :data:`COMMITTED` command in ``cwd``: {file: its new text}."""
    unknown = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").glob("*/*.yaml")
                     if re.search(r"^timed: false$", p.read_text(encoding="utf-8"), re.M)
                     and str(p.relative_to(ROOT)) not in COMMITTED)
    if unknown:
        raise SystemExit(f"error: analytic results with no command in tools/readme_examples.py COMMITTED: "
                         f"{', '.join(unknown)}")
    out = {}
    for rel, cmd in COMMITTED.items():
        run(cmd, cwd, env)
        out[rel] = (cwd / rel).read_text(encoding="utf-8")
    return out


def regenerate(cwd: Path) -> tuple[dict[str, str], str]:
    """({results file: new text}, new README text), made in the scratch folder ``cwd``."""
    require_this_checkout()
    env = scratch(cwd)
    committed = make_committed(cwd, env)
    return committed, new_readme(README.read_text(encoding="utf-8"), cwd, env)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything differs")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="occtune-readme-") as d:
        committed, readme = regenerate(Path(d))
    changed = [rel for rel, text in committed.items()
               if comparable(text) != comparable((ROOT / rel).read_text(encoding="utf-8"))]
    if readme != README.read_text(encoding="utf-8"):
        changed.append("README.md")
    for rel in changed:
        print(f"{'differs' if a.check else 'wrote'}: {rel}")
        if not a.check:
            (ROOT / rel).write_text(readme if rel == "README.md" else committed[rel], encoding="utf-8")
    if not a.check and set(changed) & set(COMMITTED):
        print("the export golden files read the committed results: OCCTUNE_UPDATE_GOLDEN=1 python3 -m pytest "
              "tests/outputs/test_export.py -k golden, then review their diff")
    if not changed:
        print("README.md examples and committed analytic results are current")
    return 1 if a.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
