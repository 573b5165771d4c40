"""The engine's speed work on the CPU: where the time goes (phases, in-process and from worker
processes, in the results and on --profile-sweep), configs compiled ahead of timing on the build
threads, inputs made once per workload (and outputs re-poisoned between configs), adaptive
timing, GPU pinning of workers, the new options."""

from __future__ import annotations

import os
import threading

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from occtune.engine import bench  # noqa: E402
from occtune.engine.options import RunOptions, TimingOptions  # noqa: E402
from occtune.engine.phases import PHASES, PhaseClock, phase, render  # noqa: E402
from occtune.engine.select import select  # noqa: E402
from occtune.engine.sweep import run_sweep  # noqa: E402
from occtune.errors import UserError  # noqa: E402
from doubles import AxpyFamily, FakeTimer, FaultFamily  # noqa: E402


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))


# ---- phases ------------------------------------------------------------------------------------
def test_phase_clock_nests_and_is_silent_without_a_clock():
    clock = PhaseClock()
    with phase("verify"):            # no clock running: nothing recorded anywhere
        pass
    with clock.running():
        with phase("verify"):
            with phase("reference"):
                sum(range(20000))
    s = clock.take()
    assert set(s) == {"verify", "reference"} and s["reference"] > 0 and s["verify"] >= 0
    assert clock.take() == {}


class EventFamily(FaultFamily):
    """FaultFamily that logs builds, warms and runs (thread names too) and opts out of nothing."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.events: list[tuple] = []

    def build(self, config, device):
        self.events.append(("build", config["v"], threading.current_thread().name))
        return super().build(config, device)

    def warm(self, built, workload, device):
        self.events.append(("warm", built, workload["N"]))

    def run(self, built, inputs):
        self.events.append(("run", built))
        return super().run(built, inputs)

    def check(self, outputs, inputs, workload):
        with phase("reference"):      # a family marks its reference like this
            sum(range(1000))
        return super().check(outputs, inputs, workload)


def test_every_config_is_built_and_warmed_on_build_threads_before_anything_runs():
    fam = EventFamily(n=5, build_error=[3])
    res = run_sweep(fam, timer=FakeTimer(), progress=False, cache=False)
    first_run = next(i for i, e in enumerate(fam.events) if e[0] == "run")
    before = fam.events[:first_run]
    assert {e[1] for e in before if e[0] == "build"} == {0, 1, 2, 3, 4}
    assert {(e[1], e[2]) for e in before if e[0] == "warm"} == {(v, n) for v in (0, 1, 2, 4) for n in (8, 16)}
    assert all(e[2].startswith("occtune-build") for e in before if e[0] == "build")
    assert sum(e[0] == "build" for e in fam.events) == 5          # built once, ahead
    assert res.counts() == {"ok": 8, "built_failed": 2}


class WaitingFamily(EventFamily):
    """Config 0's build finishes only once config 1 is warming; every warm then waits until all
    of them are running at once (as warms waiting on one another's NVRTC compiles do)."""

    def __init__(self, n_warms, **kw):
        super().__init__(**kw)
        self.one_warming, self.all_warming = threading.Event(), threading.Barrier(n_warms, timeout=20)

    def build(self, config, device):
        if config["v"] == 0:
            assert self.one_warming.wait(20), "config 1's warms waited for config 0's build"
        return super().build(config, device)

    def warm(self, built, workload, device):
        self.one_warming.set()
        self.all_warming.wait()      # BrokenBarrierError: a warm was left in the queue behind the others
        super().warm(built, workload, device)


def test_warms_start_with_their_own_build_and_none_waits_in_a_queue():
    from occtune.engine.prebuild import BuildCache

    n_warm = 40                   # more than the cores of any runner
    fam = WaitingFamily(n_warm + 1, n=2)
    plan = [({"v": 0}, [{"N": 0}]), ({"v": 1}, [{"N": n} for n in range(1, n_warm + 1)])]
    BuildCache(fam, "cpu").prebuild(plan)
    assert sorted(e[2] for e in fam.events if e[0] == "warm") == list(range(n_warm + 1))


def test_helper_processes_build_every_config_ahead(tmp_path):
    from occtune.engine.prebuild import prebuild_in_processes

    fam = FaultFamily(n=5, build_error=[2], mark_dir=str(tmp_path))
    plan = [({"v": v}, ({"N": 8},)) for v in range(5)]
    ready = []

    def on_ready(item):      # in this thread, once the item's helper task is done (its mark exists)
        marks = {p.name.split("-")[2] for p in tmp_path.iterdir()}
        ready.append((item[0]["v"], f"v{item[0]['v']}" in marks, threading.current_thread() is threading.main_thread()))
    assert prebuild_in_processes(fam, plan, "cpu", processes=2, on_ready=on_ready) == 2
    builds = [p.name.split("-") for p in tmp_path.iterdir()]
    assert sorted(v for _, _, v in builds) == [f"v{v}" for v in range(5)]          # each once
    pids = {pid for _, pid, _ in builds}
    assert 1 <= len(pids) <= 2 and str(os.getpid()) not in pids
    assert sorted(ready) == [(v, True, True) for v in range(5)]
    assert prebuild_in_processes(fam, plan[:1], "cpu", processes=4) == 0          # one config: no helpers


def test_phases_in_process_add_up_and_reach_the_results_and_the_profile_lines():
    from occtune.engine.phases import wall_covered
    from occtune.outputs.results import build_document

    fam = EventFamily(n=3)
    res = run_sweep(fam, timer=FakeTimer(), progress=False)
    for p in ("load", "compile", "inputs", "reference", "verify", "timing", "cache"):
        assert res.phases.get(p, 0) > 0, p
    assert wall_covered(res.phases) <= res.wall_s * 1.01     # inputs_overlapped ran beside the compile
    doc = build_document(res, select(res, fam), "cpu", {})
    prof = doc["sweep"]["profile"]
    assert list(prof["phases_s"])[:len(PHASES)] == list(PHASES) and "other" in prof["phases_s"]
    assert prof["points"] == 6 and prof["per_point_ms"] > 0
    assert all("phases" not in r for r in doc["rows"])
    lines = render(prof)
    assert lines[0].startswith("sweep profile:") and any(ln.split()[0] == "verify" for ln in lines[1:])


def test_phases_come_back_from_worker_processes():
    res = run_sweep(FaultFamily(n=3), timer=FakeTimer(), progress=False,
                    options=RunOptions(devices=("cpu", "cpu"), timeout_s=60))
    assert res.counts() == {"ok": 6}
    for p in ("load", "compile", "inputs", "verify", "timing", "cache"):
        assert res.phases.get(p, 0) > 0, p


def test_profile_sweep_prints_the_breakdown(capsys, tmp_path):
    from occtune.pipeline.timed import Output, run_timed

    run_timed(FaultFamily(n=2), target="cpu", device="cpu", timer=FakeTimer(),
              options=RunOptions(profile=True), output=Output(out_dir=str(tmp_path / "out"), progress=False))
    out = capsys.readouterr().out
    assert "sweep profile:" in out and "timing" in out and "compile" in out


# ---- inputs once per workload -----------------------------------------------------------------
def test_inputs_are_made_once_per_workload_and_reused_across_configs():
    fam = FaultFamily(n=4)
    res = run_sweep(fam, timer=FakeTimer(), progress=False, cache=False)
    assert res.counts() == {"ok": 8}
    assert fam.inputs_made == 2                       # one random set per workload, not per point

    class Fresh(FaultFamily):
        inputs_reusable = False

    fresh = Fresh(n=4)
    run_sweep(fresh, timer=FakeTimer(), progress=False, cache=False)
    assert fresh.inputs_made == 16                    # verify + time, every point


def test_a_config_that_writes_nothing_fails_although_its_predecessor_filled_the_reused_output(monkeypatch):
    fam = AxpyFamily(sizes=(1000,))
    real_run = fam.run

    def lazy(built, inputs):          # BLOCK=1024 launches nothing: the output is whatever was there
        return inputs["out"] if built["BLOCK"] == 1024 else real_run(built, inputs)

    monkeypatch.setattr(fam, "run", lazy)
    res = run_sweep(fam, timer=FakeTimer(), progress=False, cache=False)
    wrong = {r["config"]["BLOCK"] for r in res.rows if r["status"] == "wrong"}
    assert wrong == {1024} and res.counts()["ok"] == 4


# ---- adaptive timing --------------------------------------------------------------------------
def test_median_ci_from_order_statistics():
    lo, med, hi = bench.median_ci(list(range(1, 101)))
    assert lo < med < hi and med == 50.5 and (lo, hi) == (40, 61)
    lo, med, hi = bench.median_ci([5.0] * 10)
    assert lo == med == hi == 5.0


def test_adaptive_collection_stops_when_steady_and_spends_the_budget_when_noisy():
    stop = bench.Stop(ci_rel=0.01, min_reps=10)
    steady = bench._collect(lambda n: [100.0 + 0.01 * i for i in range(n)], 500, stop)
    assert len(steady) == 10
    noisy_values = iter([100.0, 150.0, 70.0, 130.0] * 200)
    noisy = bench._collect(lambda n: [next(noisy_values) for _ in range(n)], 120, stop)
    assert len(noisy) == 120
    assert len(bench._collect(lambda n: [1.0] * n, 37, None)) == 37          # fixed count


def test_timing_options_build_an_adaptive_timer_by_default():
    t = TimingOptions().timer()
    assert t.adaptive and t.ci_rel == 0.01 and t.min_reps == 10
    assert not TimingOptions(adaptive=False).timer().adaptive
    timing = t(lambda: sum(range(100)), context={"device": "cpu"})
    assert "adaptive" in timing.method and len(timing.samples_us) >= 10


# ---- devices, options -------------------------------------------------------------------------
def test_workers_are_pinned_to_their_gpu():
    from occtune.engine.workers import pinned

    assert pinned("cuda:1", {}) == ("1", "cuda:0")
    assert pinned("cuda:1", {"CUDA_VISIBLE_DEVICES": "4,6"}) == ("6", "cuda:0")
    assert pinned("cpu", {}) == (None, "cpu") and pinned("cuda", {}) == (None, "cuda")


def test_sweep_options_reach_every_verb():
    from click.testing import CliRunner

    from occtune.cli import cli

    for verb in ("sweep", "topk", "rope"):
        text = CliRunner().invoke(cli, [verb, "--help"]).output
        assert "--profile-sweep" in text and "--ray" in text and "--no-adaptive" in text, verb


# ---- compiled kernels kept on disk: a cached rerun compiles nothing ---------------------------
def test_rtc_binaries_are_kept_on_disk_and_a_damaged_one_is_rebuilt(monkeypatch, tmp_path):
    import torch
    from torch.cuda import _utils

    from occtune.build import rtc

    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "occ"))
    calls = {"compile": 0, "load": 0}

    def fake_compile(source, name, arch, include_dirs, options):
        calls["compile"] += 1
        return f"CUBIN[{name}|{arch}|{' '.join(options)}]".encode(), name + "_mangled"

    def fake_load(binary, names):
        calls["load"] += 1
        if not binary.startswith(b"CUBIN["):
            raise RuntimeError("CUDA error: device kernel image is invalid")
        return {n: ("kernel", binary) for n in names}

    monkeypatch.setattr(_utils, "_nvrtc_compile", fake_compile, raising=False)
    monkeypatch.setattr(_utils, "_cuda_load_module", fake_load, raising=False)
    args = (torch, None, "__global__ void k(){}", "k", "90", ["-DA=1"])
    first = rtc._compile_or_load(*args)
    assert first == ("kernel", b"CUBIN[k|90|-DA=1]") and calls == {"compile": 1, "load": 1}
    assert rtc._compile_or_load(*args) == first and calls["compile"] == 1         # loaded from disk
    rtc._compile_or_load(torch, None, "__global__ void k(){}", "k", "90", ["-DA=2"])
    assert calls["compile"] == 2                                                  # other options: compiled
    (binary,) = [p for p in (tmp_path / "occ" / "rtc").glob("*.bin") if b"-DA=1" in p.read_bytes()]
    binary.write_bytes(b"garbage")
    assert rtc._compile_or_load(*args) == first and calls["compile"] == 3          # damaged: rebuilt


def test_ray_address_that_does_not_answer_is_a_one_line_error():
    pytest.importorskip("ray", reason="the ray extra is not installed")
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                       # a port nothing listens on
    with pytest.raises(UserError, match="nothing answers"):
        run_sweep(FaultFamily(n=2), timer=FakeTimer(), progress=False, cache=False,
                  options=RunOptions(ray=f"127.0.0.1:{port}"))


def test_rtc_compiles_a_kernel_once_however_many_build_threads_ask(monkeypatch):
    import time
    from concurrent.futures import ThreadPoolExecutor

    from occtune.build import rtc

    calls = []

    def slow_compile(torch, fn, source, name, defines, device, arch, options, dynamic_smem):
        calls.append(name)
        time.sleep(0.2)
        return rtc.RtcKernel(None, name, arch, dict(defines or {}), options, 0.2, dynamic_smem)

    monkeypatch.setattr(rtc, "_CACHE", {})
    monkeypatch.setattr(rtc, "_torch_api", lambda: (None, None))
    monkeypatch.setattr(rtc, "device_arch", lambda device=None: "90")
    monkeypatch.setattr(rtc, "_compile", slow_compile)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: rtc.compile_kernel("src", "k", {"A": i % 2}), range(8)))
    assert sorted(calls) == ["k", "k"]                      # two distinct kernels, each compiled once
    assert len({id(h) for h in got}) == 2


def test_the_compile_log_is_one_stamped_line_on_stderr_and_silent_by_default(monkeypatch, capsys):
    from occtune.build.rtc import log_compile

    monkeypatch.delenv("OCCTUNE_LOG_COMPILES", raising=False)
    log_compile("rtc: k -DA=1 1.00 s")
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("OCCTUNE_LOG_COMPILES", "1")
    log_compile("prebuild: helper started")
    err = capsys.readouterr().err
    assert err.startswith("prebuild: helper started (pid ") and ", t=" in err and err.count("\n") == 1
