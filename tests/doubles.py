"""Test doubles for the engine, importable by spawned workers: a fake timer, a tiny Triton family,
and a fault-injecting family (build error, wrong answer, hang, crash, interrupt); and a fake
132-SM device for the top-k launcher's host side (``fake_sms``).

``AxpyFamily`` is also a real (if trivial) kernel: ``python3 examples/engine_demo.py --family axpy``
sweeps it on a GPU to show the engine end to end.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import time

from occtune.engine.bench import Timing
from occtune.engine.family import CheckResult, Family, key_of


class FakeTimer:
    """Calls ``fn`` once (so faults fire) and returns a made-up timing: ``table[key_of(config)]`` us
    (``default_us`` otherwise) with five samples spread by +-``spread`` (relative)."""

    kind = "fake"

    def __init__(self, table: dict | None = None, default_us: float = 100.0, spread: float = 0.01):
        self.table, self.default_us, self.spread = dict(table or {}), default_us, spread

    def __call__(self, fn, *, rotate=None, context=None) -> Timing:
        fn(rotate[0]) if rotate else fn()
        cfg = (context or {}).get("config", {})
        med = float(self.table.get(key_of(cfg), self.default_us))
        samples = [med * (1 + self.spread * f) for f in (-1.0, -0.5, 0.0, 0.5, 1.0)]
        return Timing.from_samples(samples, "fake")


class FaultFamily(Family):
    """Configs ``{"v": i}``; ``run`` scales a small tensor by 2. Faults by config value:
    ``build_error``, ``wrong``, ``hang``, ``crash`` (``os._exit`` in the process), ``device_error``
    (raises a CUDA-like error); ``interrupt_after=N`` raises KeyboardInterrupt on run number N+1.
    ``slow_s`` makes every run sleep that long; ``mark_dir`` gets an empty file per run named
    ``<$OCCTUNE_TEST_NODE>-<pid>-v<config>`` (which node and process ran what) and one per build,
    ``build-<pid>-v<config>``."""

    name = "fault"
    inputs_reusable = True        # run returns a new tensor and never writes its inputs

    def __init__(self, n: int = 4, build_error=(), wrong=(), hang=(), crash=(), device_error=(),
                 interrupt_after: int | None = None, safety: dict | None = None, version: str = "1",
                 slow_s: float = 0.0, mark_dir: str | None = None):
        self.init_kwargs = dict(n=n, build_error=tuple(build_error), wrong=tuple(wrong), hang=tuple(hang),
                                crash=tuple(crash), device_error=tuple(device_error),
                                interrupt_after=interrupt_after, safety=safety, version=version,
                                slow_s=slow_s, mark_dir=mark_dir)
        self.n, self.build_error, self.wrong = n, set(build_error), set(wrong)
        self.hang, self.crash, self.device_error = set(hang), set(crash), set(device_error)
        self.interrupt_after, self.safety, self.version = interrupt_after, dict(safety or {}), version
        self.slow_s, self.mark_dir = float(slow_s), mark_dir
        self.builds = self.runs = self.inputs_made = 0

    def axes(self):
        return {"v": list(range(self.n))}

    def baseline_config(self):
        return {"v": 0}

    def workloads(self):
        return [{"N": 8}, {"N": 16}]

    def safety_key(self, config):
        return float(self.safety.get(config["v"], 0))

    def source_hash(self):
        return "fault-v" + self.version

    def build(self, config, device):
        self.builds += 1
        if self.mark_dir:
            open(os.path.join(self.mark_dir, f"build-{os.getpid()}-v{config['v']}"), "a").close()
        if config["v"] in self.build_error:
            raise RuntimeError(f"ptxas error: too many resources requested for v={config['v']}")
        return config["v"]

    def make_inputs(self, workload, seed, device):
        import torch

        self.inputs_made += 1
        g = torch.Generator().manual_seed(seed)
        return torch.randn(workload["N"], generator=g)

    def adversarial_inputs(self, workload, device):
        import torch

        yield "zeros", torch.zeros(workload["N"])

    def run(self, built, inputs):
        self.runs += 1
        if self.interrupt_after is not None and self.runs > self.interrupt_after:
            raise KeyboardInterrupt
        if self.mark_dir:
            node = os.environ.get("OCCTUNE_TEST_NODE", "local")
            open(os.path.join(self.mark_dir, f"{node}-{os.getpid()}-v{built}"), "a").close()
        if self.slow_s:
            time.sleep(self.slow_s)
        if built in self.hang:
            time.sleep(3600)
        if built in self.crash:
            os._exit(3)
        if built in self.device_error:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return inputs * (3 if built in self.wrong else 2)

    def check(self, outputs, inputs, workload):
        ok = bool((outputs == inputs * 2).all())
        return CheckResult(ok, "" if ok else "output differs from 2*x", {"mismatches": int((outputs != inputs * 2).sum())})

    def bytes_moved(self, workload):
        return 8 * workload["N"]


def _axpy_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)

    return axpy


_KERNEL = None


class AxpyFamily(Family):
    """``out = alpha * x + y`` in Triton, axes BLOCK x num_warps. Tiny, for tests and demos."""

    name = "axpy"
    inputs_reusable = True

    def __init__(self, sizes=(1000, 4096)):
        self.init_kwargs = {"sizes": tuple(sizes)}
        self.sizes = tuple(sizes)

    def axes(self):
        return {"BLOCK": [128, 256, 1024], "num_warps": [1, 4]}

    def baseline_config(self):
        return {"BLOCK": 256, "num_warps": 4}

    def workloads(self):
        return [{"n": n} for n in self.sizes]

    def is_valid(self, config, workload):
        if config["BLOCK"] < 32 * config["num_warps"]:
            return False, "BLOCK smaller than the threads of num_warps"
        return True, ""

    def safety_key(self, config):
        return -config["BLOCK"]          # smaller blocks: fewer registers, more headroom

    def source_hash(self):
        return hashlib.sha256(inspect.getsource(_axpy_kernel).encode()).hexdigest()[:16]

    def build(self, config, device):
        global _KERNEL
        if _KERNEL is None:
            _KERNEL = _axpy_kernel()
        return dict(config, kernel=_KERNEL)

    def make_inputs(self, workload, seed, device):
        import torch

        g = torch.Generator().manual_seed(seed)
        n = workload["n"]
        x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
        return {"x": x.to(device), "y": y.to(device), "out": torch.empty(n, device=device), "alpha": 1.5}

    def adversarial_inputs(self, workload, device):
        import torch

        n = workload["n"]
        big = torch.full((n,), 2.0 ** 100, device=device)     # 1.5 * 2^100 is exact: FMA or not
        yield "huge", {"x": big, "y": -1.5 * big, "out": torch.empty(n, device=device), "alpha": 1.5}

    def reset_outputs(self, inputs):
        inputs["out"].fill_(float("nan"))

    def run(self, built, inputs):
        n, block = inputs["x"].numel(), built["BLOCK"]
        built["kernel"][((n + block - 1) // block,)](inputs["x"], inputs["y"], inputs["out"], inputs["alpha"],
                                                     n, BLOCK=block, num_warps=built["num_warps"])
        return inputs["out"]

    def check(self, outputs, inputs, workload):
        import torch

        ref = inputs["alpha"] * inputs["x"] + inputs["y"]
        ok = torch.allclose(outputs, ref, rtol=1e-6, atol=1e-6)
        return CheckResult(bool(ok), "" if ok else f"max error {float((outputs - ref).abs().max()):.3g}")

    def bytes_moved(self, workload):
        return 12 * workload["n"]


def fake_sms(monkeypatch, sms: int = 132) -> None:
    """The top-k launcher's host side without a GPU: CPU tensors pass its argument check, the SM
    count is asked afresh (of torch's device properties, faked to ``sms`` SMs)."""
    import types

    import torch

    from occtune.kernels.topk import runtime

    monkeypatch.setattr(runtime, "_check_args", lambda *a: None)
    monkeypatch.setattr(runtime, "_NUM_SMS", {})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: types.SimpleNamespace(multi_processor_count=sms))
