"""tests/ follows the package: a folder per kernel family (topk/, fp8_gemm/, rope/), per layer of
occtune (model/, build/, engine/, outputs/, pipeline/, cli/) and repo/ for the repository's own
checks; at the top only the shared helpers (clihelp.py, doubles.py, childproc.py) and data/.

A GPU test module is named ``test_*_gpu.py`` and carries the ``gpu`` marker, and only those do:
tools/gpu_run.sh runs every GPU test as ``tests/*/test_*_gpu.py``. Test file names are unique
(pytest imports them by name, without packages).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from clihelp import TESTS

HELPERS = {"clihelp.py", "doubles.py", "childproc.py"}


def gpu_marked(source: str) -> bool:
    """Whether a module's ``pytestmark`` or a test's decorator holds ``pytest.mark.gpu``."""
    marks = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            marks.append(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            marks += node.decorator_list
    return any(isinstance(n, ast.Attribute) and n.attr == "gpu" and ast.unparse(n.value).endswith("mark")
               for m in marks for n in ast.walk(m))


def problems(root: Path = TESTS) -> list[str]:
    out = [f"{p.name}: a test at the top of tests/; move it into the folder of its family or layer"
           for p in sorted(root.glob("*.py")) if p.name not in HELPERS]
    files = sorted(root.glob("*/**/test_*.py"))
    for name, n in Counter(p.name for p in files).items():
        if n > 1:
            out.append(f"{name}: {n} test files of this name (pytest imports them by name)")
    for p in files:
        marked, named = gpu_marked(p.read_text(encoding="utf-8")), p.name.endswith("_gpu.py")
        rel = p.relative_to(root).as_posix()
        if marked and not named:
            out.append(f"{rel}: marked gpu but not named test_*_gpu.py (gpu_run.sh would not run it)")
        if named and not marked:
            out.append(f"{rel}: named *_gpu.py without the gpu marker (pytestmark = pytest.mark.gpu)")
        if len(p.relative_to(root).parts) != 2:
            out.append(f"{rel}: one folder deep, please (tests/<family or layer>/test_*.py)")
    return out


def test_the_test_tree_follows_the_package():
    found = problems()
    assert not found, "\n".join(found)


def test_the_gpu_runner_takes_every_gpu_test_by_its_name():
    script = (TESTS.parent / "tools" / "gpu_run.sh").read_text(encoding="utf-8")
    stage = next(line for line in script.splitlines() if line.strip().startswith("gpu_tests)"))
    assert "tests/*/test_*_gpu.py" in stage and "-m gpu" in stage, stage
    assert sorted(TESTS.glob("*/test_*_gpu.py")), "no GPU test found"


def test_the_check_names_each_misplaced_or_misnamed_file(tmp_path):
    for rel, text in (("clihelp.py", ""), ("test_flat.py", ""), ("topk/test_a.py", ""), ("rope/test_a.py", ""),
                      ("topk/test_b.py", "pytestmark = pytest.mark.gpu\n"), ("topk/test_c_gpu.py", ""),
                      ("topk/deep/test_d.py", ""), ("topk/test_e_gpu.py", "pytestmark = [pytest.mark.gpu]\n"),
                      ("topk/test_f.py", "@pytest.mark.gpu\ndef test_f():\n    pass\n"),
                      ("topk/test_g.py", "X = 'pytest.mark.gpu'\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert problems(tmp_path) == [
        "test_flat.py: a test at the top of tests/; move it into the folder of its family or layer",
        "test_a.py: 2 test files of this name (pytest imports them by name)",
        "topk/deep/test_d.py: one folder deep, please (tests/<family or layer>/test_*.py)",
        "topk/test_b.py: marked gpu but not named test_*_gpu.py (gpu_run.sh would not run it)",
        "topk/test_c_gpu.py: named *_gpu.py without the gpu marker (pytestmark = pytest.mark.gpu)",
        "topk/test_f.py: marked gpu but not named test_*_gpu.py (gpu_run.sh would not run it)"]
