"""One work unit: build one config, then verify and time it on each of its workloads.

A :class:`WorkUnit` is a small picklable record (family reference + kwargs, config, workloads,
device) so it can be run in-process, in a local worker process per GPU, or later sent to Ray.
:func:`execute` yields one point record (a plain dict) per workload as soon as it is done.

Point statuses: ``ok``, ``built_failed``, ``wrong`` (verification failed), ``crashed`` (an
exception or device error), ``timeout`` (set by the worker pool), ``skipped`` (pruned).
"""

from __future__ import annotations

import importlib
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from occtune.engine.build import BuildCache, BuildFailure, one_line
from occtune.engine.family import Family, key_of
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


def point_seed(base: int, config: dict, workload: dict) -> int:
    return (zlib.crc32((key_of(config) + key_of(workload)).encode()) ^ base) & 0x7FFFFFFF


def is_device_error(reason: str) -> bool:
    low = reason.lower()
    return any(m in low for m in _DEVICE_ERROR_MARKERS)


def point(config: dict, workload: dict, status: str, reason: str = "", **extra) -> dict:
    return {"config": config, "workload": workload, "status": status, "reason": reason, **extra}


def execute(unit: WorkUnit, family: Family, builds: BuildCache, timer, device) -> Iterator[dict]:
    """Yield one point per workload of ``unit`` (build once, then verify and time each)."""
    t0 = time.perf_counter()
    built = builds.get(unit.config)
    if isinstance(built, BuildFailure):
        for w in unit.workloads:
            yield point(unit.config, w, "built_failed", built.reason)
        return
    resources = _resources(family, built, unit.config)
    for w in unit.workloads:
        rec = _one_point(unit, family, built, timer, device, w)
        rec["wall_s"] = round(time.perf_counter() - t0, 4)
        if resources:
            rec["resources"] = resources
        t0 = time.perf_counter()
        yield rec


def _resources(family, built, config) -> dict | None:
    try:
        r = family.built_resources(built, config)
    except Exception:
        return None
    return None if r is None else dict(vars(r))


def _one_point(unit, family, built, timer, device, workload) -> dict:
    cfg = unit.config
    seed = point_seed(unit.seed, cfg, workload)
    try:
        ok, reason, diag = verify(family, built, workload, device, seed)
        if not ok:
            return point(cfg, workload, "wrong", reason, diagnostics=diag)
        timing = _time(family, built, timer, device, cfg, workload, seed + 1)
    except Exception as e:
        reason = one_line(e)
        return point(cfg, workload, "crashed", reason, fatal=is_device_error(reason))
    return point(cfg, workload, "ok", "", timing=timing.to_dict(), diagnostics=diag)


def verify(family: Family, built: Any, workload: dict, device, seed: int) -> tuple[bool, str, dict]:
    """Fresh random inputs, then every adversarial input set: (ok, reason, diagnostics)."""
    inputs = family.make_inputs(workload, seed, device)
    res = family.check(_run_sync(family, built, inputs, device), inputs, workload)
    diag = dict(res.diagnostics or {})
    if not res.ok:
        return False, f"random inputs (seed {seed}): {res.reason}", diag
    for name, adv in family.adversarial_inputs(workload, device):
        res = family.check(_run_sync(family, built, adv, device), adv, workload)
        if not res.ok:
            return False, f"adversarial inputs {name!r}: {res.reason}", dict(res.diagnostics or {})
    return True, "", diag


def _run_sync(family, built, inputs, device):
    out = family.run(built, inputs)
    sync(device)
    return out


def sync(device) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _time(family, built, timer, device, config, workload, seed):
    n_sets = int(getattr(family, "timing_input_sets", 1) or 1)
    ctx = {"config": config, "workload": workload, "device": str(device)}
    if n_sets > 1:
        sets = [family.make_inputs(workload, seed + i, device) for i in range(n_sets)]
        return timer(lambda inp: family.run(built, inp), rotate=sets, context=ctx)
    inputs = family.make_inputs(workload, seed, device)
    return timer(lambda: family.run(built, inputs), context=ctx)
