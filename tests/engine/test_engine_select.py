"""Selection (noise-aware ties, hard constraints, baseline) and the results YAML."""

from __future__ import annotations

import pytest
import yaml

from occtune.engine.family import key_of
from occtune.outputs.results import build_document, plain
from occtune.outputs.results import write_results
from occtune.engine.select import select, tied
from occtune.engine.sweep import run_sweep
from doubles import FakeTimer, FaultFamily
from occtune.errors import UserError


def sweep(table, spread=0.01, **fam_kw):
    fam = FaultFamily(**fam_kw)
    t = FakeTimer({key_of({"v": v}): us for v, us in table.items()}, spread=spread)
    return fam, run_sweep(fam, timer=t, progress=False, cache=False)


def test_tie_inside_noise_goes_to_the_safer_config():
    # v=2 is 0.5% slower than v=1: inside a +-2% spread, so tied; v=2 is safer
    fam, res = sweep({0: 100, 1: 50.0, 2: 50.25, 3: 80}, spread=0.02, n=4, safety={1: 4096, 2: 5120})
    sel = select(res, fam)
    assert sel.winner == {"v": 2}
    assert sel.details["winner_broke_tie"] is True
    assert "tie broken toward the safer config" in sel.explanation
    assert all(p["winner"] == {"v": 2} and p["fastest"] == {"v": 1} for p in sel.per_workload)


def test_difference_outside_noise_is_not_a_tie():
    fam, res = sweep({0: 100, 1: 50.0, 2: 60.0}, spread=0.01, n=3, safety={2: 9999})
    sel = select(res, fam)
    assert sel.winner == {"v": 1}
    assert sel.details["runner_up"] == {"v": 2}
    assert sel.details["margin_over_runner_up"] == pytest.approx(0.2, abs=1e-3)
    assert "2.00x" in sel.explanation and "runner-up" in sel.explanation


def test_iqr_overlap_rule():
    def row(q1, med, q3):
        return {"timing": {"median_us": med, "q1_us": q1, "q3_us": q3}}

    assert tied(row(9, 10, 11), row(10.5, 11.5, 12.5), min_rel_noise=0.0)
    assert not tied(row(9, 10, 11), row(11.5, 12, 12.5), min_rel_noise=0.0)
    assert tied(row(10, 10, 10), row(10.05, 10.05, 10.05), min_rel_noise=0.01)


def test_failed_and_inadmissible_configs_are_never_selected(monkeypatch):
    fam, res = sweep({0: 100, 1: 10, 2: 20, 3: 30}, n=4, wrong=[1])
    monkeypatch.setattr(fam, "admissible", lambda c, w: (c["v"] != 2, "capacity below 1M tokens"))
    sel = select(res, fam)
    assert sel.winner == {"v": 3}
    assert "wrong" in sel.excluded[key_of({"v": 1})]
    assert "capacity below 1M tokens" in sel.excluded[key_of({"v": 2})]


def test_baseline_failing_falls_back_to_fastest_reference():
    fam, res = sweep({0: 10, 1: 20, 2: 40}, n=3, build_error=[0])
    sel = select(res, fam)
    assert sel.winner == {"v": 1} and sel.reference == "fastest per workload"


def test_results_yaml_layout_and_atomicity(tmp_path, monkeypatch):
    fam, res = sweep({0: 100, 1: 50}, n=3, wrong=[2])
    sel = select(res, fam)
    out = write_results(tmp_path / "r" / "fault.yaml", plain(build_document(res, sel, "cpu", ["fake timer"])))
    doc = yaml.safe_load(out.read_text())
    assert list(doc)[:8] == ["schema", "family", "target", "timed", "winner", "per_workload", "excluded", "grid"]
    assert doc["timed"] is True and doc["winner"]["config"] == {"v": 1}
    assert {r["status"] for r in doc["rows"]} == {"ok", "wrong"}
    ok = next(r for r in doc["rows"] if r["config"] == {"v": 1})
    assert ok["speedup"] == pytest.approx(2.0) and ok["n_samples"] == 5 and ok["gbps"] > 0
    for k in ("device", "arch", "driver", "torch", "triton", "python", "occtune", "git_revision", "date", "host"):
        assert k in doc["provenance"]
    # a failure while serialising leaves the old file untouched and no temp file behind
    before = out.read_text()
    import occtune.fsutil as fsutil

    def boom(f, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "fsync", lambda fd: boom(None, None))
    with pytest.raises(UserError, match="No space left"):
        write_results(out, plain(build_document(res, sel, "cpu")))
    assert out.read_text() == before
    assert [p.name for p in out.parent.iterdir()] == ["fault.yaml"]


def test_launch_spin_covers_the_host_enqueue_time():
    """The GPU spin before a timed launch outlasts twice the call's host time (at 2 GHz), never
    less than the fixed minimum: a slow host path must not leak into the event timing."""
    from occtune.engine import bench

    assert bench._spin_cycles(0.0) == bench._SLEEP_CYCLES
    assert bench._spin_cycles(10.0) == bench._SLEEP_CYCLES            # 40K cycles < minimum
    assert bench._spin_cycles(400.0) == 1_600_000                      # 2 x 400 us x 2 GHz
    assert bench._spin_cycles(400.0) / (bench._SPIN_GHZ * 1e3) >= 2 * 400.0
