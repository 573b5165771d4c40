"""The documents' references resolve: every relative link (and its #anchor) in README.md,
results/README.md, docs/*.md and the benchmarks/records/ indexes, and every repository path those
documents name in backticks (`results/...`, `benchmarks/...`, `kernels/...`, ...); and every path
the runner scripts name (tools/gpu_run.sh's stages, scripts/test.sh, .ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

from clihelp import REPO

TOP = ("benchmarks/", "docs/", "examples/", "kernels/", "profiles/", "results/", "scripts/", "tests/",
       "tools/", "tuner/")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE = re.compile(r"`([^`\n]+)`")


def documents(repo: Path = REPO) -> list[Path]:
    docs = [repo / "README.md", repo / "results" / "README.md", *sorted((repo / "docs").glob("*.md")),
            repo / "benchmarks" / "records" / "README.md",
            *sorted((repo / "benchmarks" / "records").glob("*/README.md"))]
    return [d for d in docs if d.is_file()]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    seen, out = {}, set()
    for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", md.read_text(encoding="utf-8")), re.M):
        s = slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def links(text: str) -> list[str]:
    prose = CODE.sub("", FENCE.sub("", text))
    return LINK.findall(prose) + REF_LINK.findall(prose)


def broken_links(doc: Path, repo: Path = REPO) -> list[str]:
    out = []
    for target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):          # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            out.append(f"{doc.relative_to(repo)}: link {target} -> {path} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{doc.relative_to(repo)}: link {target}: no heading #{anchor} in {dest.name}")
    return out


def missing_paths(doc: Path, repo: Path = REPO) -> list[str]:
    """Repository paths the document names in backticks (the first word of the code span; globs,
    placeholders and variables left out) that do not exist."""
    out = []
    for span in CODE.findall(FENCE.sub("", doc.read_text(encoding="utf-8"))):
        word = span.split()[0] if span.split() else ""
        if not word.startswith(TOP) or re.search(r"[<>*{}$]|\.\.\.", word):
            continue
        path = word.split("::")[0].rstrip(".,:;)")
        if not (repo / path).exists():
            out.append(f"{doc.relative_to(repo)}: `{span}` names {path}, which does not exist")
    return out


SCRIPTS = ("tools/gpu_run.sh", "scripts/test.sh", ".ci/run")
SCRIPT_PATH = re.compile(r"(?<![\w/$.-])((?:benchmarks|tests|tools|examples|scripts)/[\w/*.-]+)")


def script_paths_missing(script: Path, repo: Path = REPO) -> list[str]:
    """Repository paths a shell script names (a glob must match a file) that do not exist."""
    out = []
    for path in SCRIPT_PATH.findall(script.read_text(encoding="utf-8")):
        if not (sorted(repo.glob(path)) if "*" in path else (repo / path).exists()):
            out.append(f"{script.relative_to(repo)} names {path}, which does not exist")
    return out


def test_the_runner_scripts_name_paths_that_exist():
    found = [p for s in SCRIPTS if (REPO / s).is_file() for p in script_paths_missing(REPO / s)]
    assert not found, "\n".join(found)


def test_the_script_check_names_a_moved_benchmark_and_an_empty_glob(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "benchmarks" / "topk").mkdir(parents=True)
    (tmp_path / "benchmarks" / "topk" / "bench_topk.py").write_text("")
    sh = tmp_path / "tools" / "run.sh"
    sh.write_text("python3 benchmarks/topk/bench_topk.py --out $OUT/x.csv; python3 benchmarks/bench_topk.py\n"
                  "pytest -m gpu tests/*/test_*_gpu.py; cat $OUT/benchmarks/x.txt\n")
    assert script_paths_missing(sh, tmp_path) == [
        "tools/run.sh names benchmarks/bench_topk.py, which does not exist",
        "tools/run.sh names tests/*/test_*_gpu.py, which does not exist"]


def test_the_documents_are_found():
    names = {d.relative_to(REPO).as_posix() for d in documents()}
    assert {"README.md", "results/README.md", "docs/topk.md", "docs/fp8_gemm.md",
            "benchmarks/records/README.md"} <= names


def test_every_relative_link_resolves():
    found = [p for d in documents() for p in broken_links(d)]
    assert not found, "\n".join(found)


def test_every_repository_path_named_in_backticks_exists():
    found = [p for d in documents() for p in missing_paths(d)]
    assert not found, "\n".join(found)


def test_the_checks_name_a_broken_link_a_missing_anchor_and_a_missing_path(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## What is left\n")
    doc = tmp_path / "docs" / "a.md"
    doc.write_text("# A: the note\n\n[ok](b.md#what-is-left) [self](#a-the-note) [web](https://x.org/y)\n"
                   "[gone](../results/old/README.md) [anchor](b.md#what-was-left)\n"
                   "`[not a link](nowhere.md)` `docs/b.md` `results/sm_90/topk_v9/` `results/<target>/x.yaml`\n"
                   "```\n[in a fence](nowhere.md) `docs/none.md`\n```\n")
    assert broken_links(doc, tmp_path) == [
        "docs/a.md: link ../results/old/README.md -> ../results/old/README.md does not exist",
        "docs/a.md: link b.md#what-was-left: no heading #what-was-left in b.md"]
    assert missing_paths(doc, tmp_path) == [
        "docs/a.md: `results/sm_90/topk_v9/` names results/sm_90/topk_v9/, which does not exist"]
