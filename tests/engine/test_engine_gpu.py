"""The engine's timer and sweep on a real GPU (skipped elsewhere). On the GPU machine:

    python3 -m pytest -q tests/engine/test_engine_gpu.py
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")]

from occtune.engine.bench import BenchTimer, measure  # noqa: E402
from occtune.engine.select import select  # noqa: E402
from occtune.engine.sweep import run_sweep  # noqa: E402
from occtune.engine.options import RunOptions  # noqa: E402
from doubles import AxpyFamily  # noqa: E402


def test_events_with_l2_flush_time_a_copy_plausibly():
    n = 64 * 1024 * 1024                      # 256 MiB float32: well above any L2
    a, b = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    t = measure(lambda: b.copy_(a), warmup_ms=5, rep_ms=50, device="cuda")
    assert t.method.startswith("cuda-events") and "L2 flush" in t.method
    gbps = 2 * 4 * n / t.median_us / 1e3
    assert 100 < gbps < 20000                 # between a slow PCIe card and beyond any HBM
    assert t.q1_us <= t.median_us <= t.q3_us and len(t.samples_us) >= 5


def test_graph_replay_amortises_launch_overhead_for_tiny_kernels():
    x = torch.zeros(16, device="cuda")
    ev = measure(lambda: x.add_(1), warmup_ms=2, rep_ms=20, flush_l2=False, device="cuda")
    gr = measure(lambda: x.add_(1), warmup_ms=2, rep_ms=20, use_graph=50, device="cuda")
    assert gr.method.startswith("cuda-graph x50")
    assert 0 < gr.median_us < ev.median_us


def test_axpy_sweep_on_gpu_then_rerun_from_cache(tmp_path):
    fam = AxpyFamily(sizes=(1 << 20, (1 << 22) + 3))
    kw = dict(device="cuda", timer=BenchTimer(warmup_ms=5, rep_ms=20), cache=tmp_path, progress=False)
    first = run_sweep(fam, **kw)
    assert first.counts().get("ok") == 12, first.rows
    again = run_sweep(AxpyFamily(sizes=(1 << 20, (1 << 22) + 3)), **kw)
    assert again.n_measured == 0 and again.n_cached == 12
    assert select(again, fam).winner is not None


def test_worker_per_gpu_isolation(tmp_path):
    fam = AxpyFamily(sizes=(1 << 20,))
    res = run_sweep(fam, device="cuda", timer=BenchTimer(warmup_ms=2, rep_ms=10), cache=tmp_path,
                    progress=False, options=RunOptions(devices=tuple(f"cuda:{i}" for i in range(min(2, torch.cuda.device_count()))), timeout_s=120))
    assert res.counts().get("ok") == 6, res.rows
