"""The sweep engine end to end on the CPU: a Triton family under TRITON_INTERPRET=1, fault
injection in-process and in worker processes, cache resume, fingerprint refusal, bench stats."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from occtune.engine.bench import Timing, measure  # noqa: E402
from occtune.engine.cache import PointCache  # noqa: E402
from occtune.engine.family import key_of  # noqa: E402
from occtune.engine.select import select  # noqa: E402
from occtune.engine.sweep import run_sweep  # noqa: E402
from occtune.engine.options import RunOptions  # noqa: E402
from doubles import AxpyFamily, FakeTimer, FaultFamily  # noqa: E402
from occtune.errors import UserError  # noqa: E402


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))


def by_cfg(result):
    return {(r["config"]["v"], r["workload"]["N"]): r for r in result.rows}


def test_triton_family_end_to_end_and_rerun_from_cache():
    fam = AxpyFamily(sizes=(1000, 300))
    fast = {key_of({"BLOCK": 1024, "num_warps": 1}): 40.0}
    res = run_sweep(fam, timer=FakeTimer(fast), progress=False)
    assert res.counts() == {"ok": 12} and res.n_measured == 12
    sel = select(res, fam)
    assert sel.winner == {"BLOCK": 1024, "num_warps": 1}
    assert "2.50x" in sel.explanation          # 100 us baseline / 40 us
    again = run_sweep(AxpyFamily(sizes=(1000, 300)), timer=FakeTimer(fast), progress=False)
    assert again.n_measured == 0 and again.n_cached == 12
    assert all(r["cached"] for r in again.rows)


def test_triton_kernel_with_a_bad_mask_is_caught_by_verification(monkeypatch):
    fam = AxpyFamily(sizes=(1000,))
    real_run = fam.run

    def sloppy(built, inputs):          # forgets the tail: a wrong answer on n % BLOCK != 0
        out = real_run(built, inputs)
        if built["BLOCK"] == 128:
            out[-1] = 0.0
        return out

    monkeypatch.setattr(fam, "run", sloppy)
    res = run_sweep(fam, timer=FakeTimer(), progress=False, cache=False)
    wrong = [r for r in res.rows if r["status"] == "wrong"]
    assert {r["config"]["BLOCK"] for r in wrong} == {128}
    assert "max error" in wrong[0]["reason"]
    assert select(res, fam).winner["BLOCK"] != 128


def test_inprocess_faults_are_recorded_and_the_sweep_goes_on():
    fam = FaultFamily(n=4, build_error=[1], wrong=[2], device_error=[3])
    res = run_sweep(fam, timer=FakeTimer(), progress=False)
    rows = by_cfg(res)
    assert rows[(0, 8)]["status"] == "ok"
    assert rows[(1, 8)]["status"] == "built_failed" and "ptxas" in rows[(1, 8)]["reason"]
    assert rows[(2, 16)]["status"] == "wrong" and rows[(2, 16)]["diagnostics"]["mismatches"] > 0
    assert rows[(3, 8)]["status"] == "crashed" and "illegal memory access" in rows[(3, 8)]["reason"]
    sel = select(res, fam)
    assert sel.winner == {"v": 0} and set(sel.excluded) == {key_of({"v": i}) for i in (1, 2, 3)}


def test_adversarial_inputs_fail_a_config_that_passes_random_inputs(monkeypatch):
    fam = FaultFamily(n=2)
    real_run = fam.run
    monkeypatch.setattr(fam, "run", lambda b, x: real_run(b, x) + (1 if b == 1 and not x.any() else 0))
    res = run_sweep(fam, timer=FakeTimer(), progress=False, cache=False)
    assert by_cfg(res)[(1, 8)]["status"] == "wrong"
    assert "adversarial inputs 'zeros'" in by_cfg(res)[(1, 8)]["reason"]


def test_interrupted_sweep_resumes_without_remeasuring():
    with pytest.raises(KeyboardInterrupt):
        run_sweep(FaultFamily(n=4, interrupt_after=5), timer=FakeTimer(), progress=False)
    fam = FaultFamily(n=4)
    res = run_sweep(fam, timer=FakeTimer(), progress=False)
    assert res.n_cached >= 1 and res.n_cached + res.n_measured == 8
    # each measured point runs the kernel 3 times (random, adversarial, timing)
    assert fam.runs == 3 * res.n_measured
    assert fam.builds == len({key_of(r["config"]) for r in res.rows if not r["cached"]})
    assert res.counts() == {"ok": 8}


def test_torn_last_line_is_ignored_and_cut(tmp_path):
    run_sweep(FaultFamily(n=2), timer=FakeTimer(), progress=False)
    path = next((tmp_path / "cache").glob("fault-*.jsonl"))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])   # crash mid-write
    fam = FaultFamily(n=2)
    res = run_sweep(fam, timer=FakeTimer(), progress=False)
    assert res.n_measured == 1 and res.n_cached == 3
    assert all(json.loads(x) for x in path.read_text().splitlines())


def test_cache_of_another_fingerprint_is_refused_and_fresh_remeasures(tmp_path):
    run_sweep(FaultFamily(n=2, version="1"), timer=FakeTimer(), progress=False)
    with pytest.raises(UserError, match=r"another environment.*source_hash.*--fresh"):
        run_sweep(FaultFamily(n=2, version="2"), timer=FakeTimer(), progress=False)
    res = run_sweep(FaultFamily(n=2, version="2"), timer=FakeTimer(), progress=False, options=RunOptions(fresh=True))
    assert res.n_measured == 4 and res.n_cached == 0
    assert list((tmp_path / "cache").glob("*.old.jsonl"))


def test_cache_refuses_another_driver_and_never_reuses_another_device(tmp_path):
    fp = {"device_name": "NVIDIA H200", "family": "fault", "source_hash": "x", "driver": "1"}
    PointCache.open(fp, tmp_path).append({"config": {"v": 0}, "workload": {"N": 8}, "status": "ok"})
    assert PointCache.open(fp, tmp_path).get({"v": 0}, {"N": 8})["status"] == "ok"
    with pytest.raises(UserError, match="driver: '1' -> '2'"):
        PointCache.open(dict(fp, driver="2"), tmp_path)
    assert PointCache.open(dict(fp, device_name="NVIDIA H100"), tmp_path).points == {}


def test_measure_on_cpu_gives_ordered_quartiles_and_guards_zero():
    t = measure(lambda: None, warmup_ms=0.1, rep_ms=0.5)
    assert 0 <= t.q1_us <= t.median_us <= t.q3_us and t.iqr_us == pytest.approx(t.q3_us - t.q1_us)
    assert 1 <= len(t.samples_us) <= 2000 and t.method == "perf_counter"
    t = measure(lambda x: x, reps=6, warmup_ms=0, rotate=[1, 2, 3])
    assert len(t.samples_us) == 6


def test_timing_quartiles_from_samples():
    t = Timing.from_samples([4.0, 1.0, 3.0, 2.0, 5.0], "x")
    assert (t.q1_us, t.median_us, t.q3_us, t.iqr_us) == (2.0, 3.0, 4.0, 2.0)
    assert t.samples_us == [4.0, 1.0, 3.0, 2.0, 5.0]   # raw order kept


def test_worker_isolation_hang_crash_device_error_then_continue():
    fam = FaultFamily(n=5, hang=[1], crash=[2], device_error=[3])
    res = run_sweep(fam, timer=FakeTimer(), progress=False, options=RunOptions(isolate=True, timeout_s=3))
    rows = by_cfg(res)
    assert rows[(1, 8)]["status"] == "timeout" and rows[(1, 16)]["status"] == "timeout"
    assert rows[(2, 8)]["status"] == "crashed" and "exit code 3" in rows[(2, 8)]["reason"]
    assert rows[(3, 8)]["status"] == "crashed" and "illegal memory access" in rows[(3, 8)]["reason"]
    assert rows[(0, 8)]["status"] == rows[(4, 16)]["status"] == "ok"
    again = run_sweep(FaultFamily(n=5, hang=[1], crash=[2], device_error=[3]), timer=FakeTimer(),
                      progress=False, options=RunOptions(isolate=True, timeout_s=3))
    assert again.n_measured == 0 and again.n_cached == 10


def test_two_workers_share_the_queue_and_options_parse():
    from occtune.engine.options import parse_devices

    assert parse_devices("0, 1") == ("cuda:0", "cuda:1") and parse_devices("") is None
    with pytest.raises(UserError, match="--devices"):
        parse_devices("gpu0")
    res = run_sweep(FaultFamily(n=4), timer=FakeTimer(), progress=False, options=RunOptions(devices=("cpu", "cpu"), timeout_s=30))
    assert res.counts() == {"ok": 8} and res.n_measured == 8


def test_progress_off_a_terminal_prints_plain_lines(capsys):
    # pytest's stderr is not a terminal: the sweep reports progress as plain lines (a log file or
    # a remote run shows how far a long sweep got), ending with every point done
    run_sweep(FaultFamily(n=3), timer=FakeTimer(), progress=True, cache=False)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("sweep fault")]
    assert lines[0] == "sweep fault: 6 points to measure"
    assert lines[-1].startswith("sweep fault: 6/6 points (100%)")


def test_progress_lines_are_throttled():
    import io

    from occtune.output import Progress

    out = io.StringIO()
    with Progress(True, 5, "sweep x", stream=out, every_s=3600) as bar:
        for _ in range(5):
            bar.advance()
    lines = out.getvalue().splitlines()
    # the header, the first point (starts the clock for the estimate), the last: nothing between
    assert lines[0] == "sweep x: 5 points to measure"
    assert lines[1].startswith("sweep x: 1/5 points (20%)") and "left" in lines[1]
    assert lines[2].startswith("sweep x: 5/5 points (100%)") and len(lines) == 3
    out = io.StringIO()
    with Progress(True, 3, "sweep y", stream=out, every_s=0) as bar:
        for _ in range(3):
            bar.advance()
    assert len(out.getvalue().splitlines()) == 4       # header + every point
    out = io.StringIO()
    with Progress(False, 3, "sweep z", stream=out, every_s=0) as bar:   # disabled: silent
        bar.advance()
    with Progress(True, 0, "sweep z", stream=out, every_s=0) as bar:    # nothing to do: silent
        bar.advance()
    with Progress(True, 1, "sweep z", stream=out, every_s=0) as bar:    # extra advances: no 200%
        bar.advance()
        bar.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0] == "sweep z: 1 points to measure"
    assert lines[1].startswith("sweep z: 1/1 points (100%)")


def test_progress_waits_for_its_delay():
    """A quick run says nothing; a slow one speaks once its delay has passed, with the steps done
    by then, and ends on the last step."""
    import io
    import time

    from occtune.output import Progress

    out = io.StringIO()
    kw = dict(stream=out, unit="configs", todo="to compile")
    with Progress(True, 3, "compiling k for gfx950", delay_s=3600, **kw) as bar:
        for _ in range(3):
            bar.advance()
    assert out.getvalue() == ""
    with Progress(True, 3, "compiling k for gfx950", delay_s=0.05, **kw) as bar:
        bar.advance()
        for _ in range(500):          # wait for the delay to pass (a slow step)
            if out.getvalue():
                break
            time.sleep(0.01)
        bar.advance()
        bar.advance()
    lines = out.getvalue().splitlines()
    assert lines[0] == "compiling k for gfx950: 3 configs to compile"
    assert lines[1].startswith("compiling k for gfx950: 1/3 configs (33%)")
    assert lines[-1].startswith("compiling k for gfx950: 3/3 configs (100%)") and len(lines) == 3


def test_compile_progress_is_a_terminal_bar_only(monkeypatch, capsys):
    """A compile's progress draws a bar on a terminal's stderr once its second has passed; where
    stderr is not a terminal (a log, a test capturing it) it prints nothing, so an error after it
    stays one line."""
    import io
    import time

    from rich.console import Console

    from occtune import output
    from occtune.engine.analytic import compile_progress

    def slow_run():
        with compile_progress("topk.cuh for gfx950", 2) as bar:
            bar._delay = 0.0          # its second has passed
            bar._show()
            bar.advance()
            time.sleep(0.05)
            bar.advance()

    slow_run()
    assert capsys.readouterr() == ("", "")       # neither stream: not even stdout
    screen = io.StringIO()
    monkeypatch.setattr(output, "err_console", Console(file=screen, force_terminal=True, width=100))
    slow_run()
    assert "compiling topk.cuh for gfx950" in screen.getvalue()
