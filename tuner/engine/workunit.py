"""One work unit: build one config, then verify and time it on each of its workloads.

A :class:`WorkUnit` is a small picklable record (family reference + kwargs, config, workloads,
device) so it can be run in-process, in a local worker process per GPU, or as a Ray task.
:meth:`Runner.execute` yields one point record (a plain dict) per workload as soon as it is done.

Point statuses: ``ok``, ``built_failed``, ``wrong`` (verification failed), ``crashed`` (an
exception or device error), ``timeout`` (set by the worker pool), ``skipped`` (pruned).
"""

from __future__ import annotations

import importlib
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from occtune.engine.prebuild import BuildCache, BuildFailure, one_line
from occtune.engine.family import Family, key_of
from occtune.engine.inputs import InputCache
from occtune.engine.phases import PhaseClock, phase
from occtune.engine.registry import get_family

STATUSES = ("ok", "built_failed", "wrong", "crashed", "timeout", "skipped")
_DEVICE_ERROR_MARKERS = ("cuda error", "hip error", "hiperror", "illegal memory access",
                         "device-side assert", "unspecified launch failure", "an illegal instruction",
                         "misaligned address", "cudaerror", "out of memory")


@dataclass(frozen=True)
class WorkUnit:
    family: str                     # registry name ("rope") or "module:Class"
    config: dict
    workloads: tuple                # of workload dicts
    device: str = "cpu"             # "cpu", "cuda", "cuda:1"
    family_kwargs: dict = field(default_factory=dict)
    seed: int = 0


def family_ref(family: Family) -> str:
    cls = type(family)
    return f"{cls.__module__}:{cls.__qualname__}"


def load_family(ref: str, kwargs: dict) -> Family:
    if ":" not in ref:
        return get_family(ref, **kwargs)
    module, attr = ref.split(":")
    return getattr(importlib.import_module(module), attr)(**kwargs)


def workload_seed(base: int, workload: dict) -> int:
    """The seed of a workload's random inputs: the same for every config (fair comparisons, and
    the inputs can be made once per workload)."""
    return (zlib.crc32(key_of(workload).encode()) ^ base) & 0x7FFFFFFF


def is_device_error(reason: str) -> bool:
    low = reason.lower()
    return any(m in low for m in _DEVICE_ERROR_MARKERS)


def point(config: dict, workload: dict, status: str, reason: str = "", **extra) -> dict:
    return {"config": config, "workload": workload, "status": status, "reason": reason, **extra}


class Runner:
    """What one process needs to run a family's units on one device: the build cache, the input
    cache (:mod:`occtune.engine.inputs`) and the timer. In-process sweeps, worker processes and
    Ray tasks each hold one per (family, device)."""

    def __init__(self, family: Family, device: Any, timer):
        self.family, self.device, self.timer = family, device, timer
        self.builds = BuildCache(family, device)
        self.inputs = InputCache(family, device)

    def execute(self, unit: WorkUnit) -> Iterator[dict]:
        """Yield one point per workload of ``unit`` (build once, then verify and time each); each
        point carries the seconds of its phases (``rec["phases"]``, :mod:`occtune.engine.phases`)."""
        clock = PhaseClock()
        t0 = time.perf_counter()
        with clock.running(), phase("compile"):
            built = self.builds.get(unit.config)
        if isinstance(built, BuildFailure):
            for w in unit.workloads:
                yield point(unit.config, w, "built_failed", built.reason, phases=clock.take())
            return
        with clock.running(), phase("compile"):
            resources = self.builds.resources(unit.config)
        for w in unit.workloads:
            with clock.running():
                rec = self._one_point(unit, built, w)
            rec["wall_s"] = round(time.perf_counter() - t0, 4)
            rec["phases"] = clock.take()
            if resources:
                rec["resources"] = resources
            t0 = time.perf_counter()
            yield rec

    def _one_point(self, unit, built, workload) -> dict:
        cfg = unit.config
        seed = workload_seed(unit.seed, workload)
        try:
            ok, reason, diag = verify(self, built, workload, seed)
            if not ok:
                return point(cfg, workload, "wrong", reason, diagnostics=diag)
            timing = self._time(built, cfg, workload, seed)
        except Exception as e:
            reason = one_line(e)
            return point(cfg, workload, "crashed", reason, fatal=is_device_error(reason))
        return point(cfg, workload, "ok", "", timing=timing.to_dict(), diagnostics=diag)

    def _time(self, built, config, workload, seed):
        family = self.family
        n_sets = int(getattr(family, "timing_input_sets", 1) or 1)
        ctx = {"config": config, "workload": workload, "device": str(self.device)}
        with phase("inputs"):
            sets = [self.inputs.random(workload, seed + i) for i in range(n_sets)]
        with phase("timing"):
            if n_sets > 1:
                return self.timer(lambda inp: family.run(built, inp), rotate=sets, context=ctx)
            inputs = sets[0]
            return self.timer(lambda: family.run(built, inputs), context=ctx)


def verify(runner: Runner, built: Any, workload: dict, seed: int) -> tuple[bool, str, dict]:
    """The random input set, then every adversarial set: (ok, reason, diagnostics)."""
    with phase("inputs"):
        inputs = runner.inputs.random(workload, seed)
    res = _check(runner, built, inputs, workload)
    diag = dict(res.diagnostics or {})
    if not res.ok:
        return False, f"random inputs (seed {seed}): {res.reason}", diag
    with phase("inputs"):
        adversarial = runner.inputs.adversarial(workload)
    for name, adv in adversarial:
        res = _check(runner, built, adv, workload)
        if not res.ok:
            return False, f"adversarial inputs {name!r}: {res.reason}", dict(res.diagnostics or {})
    return True, "", diag


def _check(runner: Runner, built, inputs, workload):
    family = runner.family
    with phase("verify"):
        if runner.inputs.reusable:
            family.reset_outputs(inputs)
        out = family.run(built, inputs)
        sync(runner.device)
        return family.check(out, inputs, workload)


def sync(device) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()
