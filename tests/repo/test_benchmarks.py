"""The benchmark scripts on the CPU: every one (benchmarks/<family>/*.py and the shared ones at the
top; records/ keeps what ran then and is left out) imports and answers --help; the shared harness
(benchmarks/harness.py): its error lines, its shapes, and its CSV rows de-duplicated on a key."""

from __future__ import annotations

import csv
import subprocess
import sys
import types
from pathlib import Path

import pytest

from clihelp import REPO, load_benchmark
from occtune.errors import UserError

BENCH = REPO / "benchmarks"
SHARED = {"harness.py", "read_probe.py"}        # at the top of benchmarks/: what the family folders share


def scripts(root: Path = BENCH) -> list[str]:
    """Every benchmark module under ``root`` (paths relative to it, without .py), records/ left out."""
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.py")
                  if p.relative_to(root).parts[0] != "records" and "__pycache__" not in p.parts)


def misplaced(root: Path = BENCH) -> list[str]:
    """Scripts at the top of benchmarks/ that are not shared, or deeper than one folder."""
    return [s for s in scripts(root) if (s.count("/") == 0 and f"{s}.py" not in SHARED) or s.count("/") > 1]


def test_every_benchmark_lives_in_its_family_folder():
    found = scripts()
    assert {"harness", "read_probe", "topk/bench_topk", "fp8_gemm/bench_fp8_gemm", "rope/bench_rope",
            "engine/sweep_speed"} <= set(found), found
    assert misplaced() == []


def test_the_layout_check_names_a_flat_script_and_a_deep_one(tmp_path):
    for rel in ("harness.py", "bench_new.py", "topk/a.py", "topk/old/b.py", "records/topk/c.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert scripts(tmp_path) == ["bench_new", "harness", "topk/a", "topk/old/b"]
    assert misplaced(tmp_path) == ["bench_new", "topk/old/b"]


@pytest.mark.parametrize("name", scripts())
def test_every_benchmark_imports_and_answers_help(name, tmp_path):
    """Imported as a module (no GPU, nothing run at import), then run as the script it is, from
    another folder: --help exits 0 with its usage (harness.py is a module, not a script)."""
    mod = load_benchmark(name)
    path = BENCH / f"{name}.py"
    if "__main__" not in path.read_text(encoding="utf-8"):
        assert name == "harness" and not hasattr(mod, "main")
        return
    assert callable(mod.main)
    r = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("usage: ") and path.name in r.stdout.splitlines()[0], r.stdout[:500]


@pytest.fixture(scope="module")
def harness():
    return load_benchmark("harness")


def rows_of(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_refuse_and_gpu_missing_are_one_error_line(harness, capsys):
    assert harness.refuse("--shapes: 'x' is not BxL") == 2
    no_gpu = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    assert harness.gpu_missing(no_gpu) is True
    err = capsys.readouterr().err.splitlines()
    assert err == ["error: --shapes: 'x' is not BxL", "error: no GPU visible to torch; run this on the GPU machine"]
    assert harness.gpu_missing(types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True))) is False


@pytest.mark.parametrize("text, says", [("64x", "'64x' is not BxL"), ("0x8", "'0x8' is not BxL"),
                                        ("8*8", "'8*8' is not BxL"), (" , ", "names no shape")])
def test_parse_shapes(harness, text, says):
    assert harness.parse_shapes(" 64x131072,1x8 ,") == [(64, 131072), (1, 8)]
    with pytest.raises(UserError) as e:
        harness.parse_shapes(text, "--shapes")
    assert str(e.value).startswith("--shapes: ") and says in str(e.value)


def test_write_csv_replaces_its_own_key_and_keeps_the_others(harness, tmp_path):
    out, key = tmp_path / "bench.csv", ("device", "B", "config")
    first = [{"device": "H200", "B": 1, "config": "a", "median_us": 10.0, "git": "r1"},
             {"device": "H200", "B": 8, "config": "a", "median_us": 20.0, "git": "r1"}]
    assert harness.write_csv(out, first, key) == f"wrote {out}: 2 rows of this run"
    again = [{"device": "H200", "B": 8, "config": "a", "median_us": 18.0, "git": "r2", "p90_us": 19.0},
             {"device": "B200", "B": 8, "config": "a", "median_us": 9.0, "git": "r2", "p90_us": 9.5}]
    line = harness.write_csv(out, again, key)
    assert line == f"wrote {out}: 2 rows of this run, 1 kept from the file before (other device, B, config)"
    got = rows_of(out)
    assert [(r["device"], r["B"], r["median_us"], r["git"], r["p90_us"]) for r in got] == [
        ("H200", "1", "10.0", "r1", ""), ("H200", "8", "18.0", "r2", "19.0"), ("B200", "8", "9.0", "r2", "9.5")]
    assert list(got[0]) == ["device", "B", "config", "median_us", "git", "p90_us"]


def test_a_file_that_is_not_the_benchmarks_csv_is_refused_before_anything_is_written(harness, tmp_path):
    out = tmp_path / "other.csv"
    out.write_text("n,k,median_us\n1,2,3.0\n")
    for call in (lambda: harness.check_csv(out, ("device", "B")),
                 lambda: harness.write_csv(out, [{"device": "H200", "B": 1}], ("device", "B"))):
        with pytest.raises(UserError, match=r"other.csv is not this benchmark's CSV \(no column device, B\)"):
            call()
    assert out.read_text() == "n,k,median_us\n1,2,3.0\n"
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="cannot read .*bin.csv to add rows to it"):
        harness.check_csv(tmp_path / "bin.csv", ("device",))
    harness.check_csv(tmp_path / "new.csv", ("device",))          # a file to come: fine
    assert not (tmp_path / "new.csv").exists()
