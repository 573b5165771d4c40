"""``tune report`` on timed results from the engine and on the lead's analytic results."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from occtune.engine.family import key_of
from occtune.engine.results import build_document, plain
from occtune.results import write_results
from occtune.engine.select import select
from occtune.engine.sweep import run_sweep
from doubles import FakeTimer, FaultFamily

ANALYTIC = {
    "schema": "occtune-results/1", "family": "topk", "target": "gfx950", "timed": False,
    "winner": {"config": {"lds_budget_bytes": 40960}},
    "rows": [{"config": {"lds_budget_bytes": b}, "lds_budget_bytes": b, "blocks_per_cu": n}
             for b, n in ((32768, 4), (40960, 3), (49152, 3), (131072, 1))],
    "assumptions": [], "provenance": {},
}


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "occtune", "report", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def timed(tmp_path):
    fam = FaultFamily(n=3)
    res = run_sweep(fam, timer=FakeTimer({key_of({"v": 1}): 50}), progress=False, cache=False)
    return write_results(tmp_path / "res" / "fault.yaml", plain(build_document(res, select(res, fam), "cpu")))


def test_report_timed_results_tables_and_plots(timed, tmp_path):
    p = run_cli(str(timed))
    assert p.returncode == 0, p.stderr
    assert "wins" in p.stdout and "speed-up" in p.stdout
    names = {f.name for f in timed.parent.iterdir()}
    assert {"fault.time_vs_v.png", "fault.speedup.png"} <= names
    assert (timed.parent / "fault.speedup.png").read_bytes()[:4] == b"\x89PNG"


def test_report_analytic_results_json_and_out_dir(tmp_path):
    f = tmp_path / "results" / "gfx950" / "topk.yaml"
    f.parent.mkdir(parents=True)
    f.write_text(yaml.safe_dump(ANALYTIC))
    (tmp_path / "results" / "notes.yaml").write_text("just: a note\n")     # skipped in folders
    p = run_cli(str(tmp_path / "results"), "--out", str(tmp_path / "plots"), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert len(doc["reports"]) == 1 and doc["reports"][0]["timed"] is False
    assert doc["reports"][0]["plots"] == [str(tmp_path / "plots" / "topk.occupancy.png")]


def test_report_errors_are_one_line(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text("a: 1\n")
    for args in ([str(bad)], [str(tmp_path / "missing.yaml")]):
        p = run_cli(*args)
        assert p.returncode == 2 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr
