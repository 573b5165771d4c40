"""The benchmark scripts' shared harness (benchmarks/harness.py) on the CPU: its error lines, its
shapes, and its CSV rows de-duplicated on a key."""

from __future__ import annotations

import csv
import types

import pytest

from clihelp import load_benchmark
from occtune.errors import UserError


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
