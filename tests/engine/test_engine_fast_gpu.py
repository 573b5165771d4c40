"""The engine's speed work on a real GPU (skipped elsewhere): the top-k check on the device
against the CPU check, warm() compiling what the launches then use (top-k derived kernels,
RoPE's Triton specialisations), NVRTC binaries loaded from disk, adaptive event timing, and a
small sweep of each family with its phases. On the GPU machine, before benchmarks/engine/sweep_speed.py:

    python3 -m pytest -q tests/engine/test_engine_fast_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")]

from occtune.engine.options import RunOptions, TimingOptions  # noqa: E402
from occtune.engine.sweep import run_sweep  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref  # noqa: E402


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("name", ref.CASES)
def test_device_check_agrees_with_the_cpu_check_on_kernel_output(name):
    s, lens = ref.make_case(name, 8, 70000, 2048, seed=5)
    st, lt = torch.from_numpy(s).cuda(), torch.from_numpy(lens).cuda()
    out = tk.topk(st, 2048, lt, lds_budget=40960)
    torch.cuda.synchronize()
    assert ref.check_topk_torch(st, lt, 2048, out) == ref.check_topk(s, lens, 2048, out.cpu().numpy())
    bad = out.clone()
    bad[0, 0] = bad[0, 1]
    dev_ok, _ = ref.check_topk_torch(st, lt, 2048, bad, want=ref.reference_keys(st, lt, 2048))
    assert dev_ok == ref.check_topk(s, lens, 2048, bad.cpu().numpy())[0]


def test_topk_warm_compiles_everything_the_default_workloads_launch():
    from occtune.build import rtc
    from occtune.kernels.topk.family import TopkFamily

    fam = TopkFamily()
    built = fam.build({"lds_budget": 40960, "threads": 512, "bits": 8}, "cuda")
    for w in fam.workloads():
        fam.warm(built, w, "cuda")
    before = set(rtc._CACHE)
    for w in fam.workloads():
        if w["L"] >= 131072 and w["B"] <= 64:
            for B in {w["B"], min(w["B"], 8)}:
                tk.topk(torch.randn(B, w["L"], device="cuda"), 2048, kernel=built)
    torch.cuda.synchronize()
    assert set(rtc._CACHE) == before


def test_rtc_binary_is_loaded_from_disk_in_a_fresh_cache(monkeypatch):
    from occtune.build import rtc

    k1 = tk.build(49152, 512, 8)
    rtc._CACHE.clear()
    calls = []
    from torch.cuda import _utils

    real = _utils._nvrtc_compile
    monkeypatch.setattr(_utils, "_nvrtc_compile", lambda *a, **k: calls.append(1) or real(*a, **k))
    k2 = tk.build(49152, 512, 8)
    assert calls == [] and k2.info.get("num_regs") == k1.info.get("num_regs")
    s = torch.randn(4, 8192, device="cuda")
    assert ref.check_topk_torch(s, None, 2048, tk.topk(s, 2048, kernel=k2))[0]


def test_rope_warm_compiles_the_specialisations_the_runs_use():
    from occtune.kernels.rope.family import RopeFamily, deepseek_workload
    from occtune.kernels.rope.kernels import VARIANTS

    wl = [deepseek_workload(T) for T in (1, 64, 1000)]
    fam = RopeFamily(wl)
    cfg = {"variant": "tile", "BLOCK_M": 16, "num_warps": 2}
    built = fam.build(cfg, "cuda")
    kernel = VARIANTS["tile"][0]
    for w in wl:
        fam.warm(built, w, "cuda")
    n_warm = sum(len(c[0]) for c in kernel.device_caches.values())
    for w in wl:
        inp = fam.make_inputs(w, 1, "cuda")
        assert fam.check(fam.run(built, inp), inp, w).ok
        for _, adv in fam.adversarial_inputs(w, "cuda"):
            assert fam.check(fam.run(built, adv), adv, w).ok
    torch.cuda.synchronize()
    assert sum(len(c[0]) for c in kernel.device_caches.values()) == n_warm     # nothing new compiled


def test_adaptive_event_timing_stops_early_on_a_steady_kernel():
    a, b = torch.randn(1 << 24, device="cuda"), torch.empty(1 << 24, device="cuda")
    t = TimingOptions(rep_ms=200).timer()(lambda: b.copy_(a), context={"device": "cuda"})
    fixed = TimingOptions(rep_ms=200, adaptive=False).timer()(lambda: b.copy_(a), context={"device": "cuda"})
    assert "adaptive" in t.method and len(t.samples_us) < len(fixed.samples_us)
    assert abs(t.median_us - fixed.median_us) < 0.05 * fixed.median_us


@pytest.mark.parametrize("family", ["topk", "rope"])
def test_small_sweep_of_each_family_reports_its_phases(family):
    from occtune.engine.registry import get_family
    from occtune.kernels.rope.family import deepseek_workload

    fam = get_family(family)
    if family == "topk":
        configs = [{"lds_budget": b, "threads": 512, "bits": 8} for b in (32768, 131072)]
        workloads = [{"B": B, "L": L, "K": 2048} for B in (8, 64) for L in (65536, 1048576)]
    else:
        configs = [{"variant": v, "BLOCK_M": 16, "num_warps": w} for v in ("flat", "tile") for w in (1, 4)]
        workloads = [deepseek_workload(T) for T in (64, 8192)]
    res = run_sweep(fam, configs, workloads, device="cuda", timer=TimingOptions().timer(), progress=False)
    swept = configs + ([fam.baseline_config()] if fam.baseline_config() not in configs else [])  # baseline added
    assert res.counts() == {"ok": len(swept) * len(workloads)}, [r["reason"] for r in res.rows if r["reason"]]
    for p in ("compile", "inputs", "reference", "verify", "warmup", "timing"):
        assert res.phases.get(p, 0) > 0, p
    again = run_sweep(fam, configs, workloads, device="cuda", timer=TimingOptions().timer(), progress=False)
    assert again.n_measured == 0


def test_two_gpus_pin_one_worker_each():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from doubles import AxpyFamily, FakeTimer

    res = run_sweep(AxpyFamily(sizes=(1 << 20,)), device="cuda", timer=FakeTimer(), progress=False,
                    options=RunOptions(devices=("cuda:0", "cuda:1"), timeout_s=120))
    assert res.counts() == {"ok": 6}
