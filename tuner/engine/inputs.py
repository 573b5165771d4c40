"""Input sets per workload, made once per process and shared by every config that runs there.

For a family with ``inputs_reusable = True`` an :class:`InputCache` keeps, per workload, the
random input sets (``make_inputs(workload, seed, device)``: the seed depends on the workload only,
so every config is verified and timed on the same data) and the adversarial sets, on the device.
Entries are dropped least recently used first once they hold more than ``budget_bytes`` (a
quarter of the GPU's memory, 2 GiB on the CPU), so a sweep of huge workloads degrades to making
them again rather than running out of memory. Other families get fresh inputs every time.

:meth:`InputCache.prefetching` makes the adversarial sets (drawn on the CPU by most families) on
a background thread while the configs build: a sweep's inputs then cost no wall time of their own.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any

from occtune.engine.family import Family, key_of

_CPU_BUDGET = 2 << 30


def default_budget(device: Any) -> int:
    if str(device).startswith("cuda"):
        try:
            import torch

            dev = torch.device(device)
            idx = dev.index if dev.index is not None else torch.cuda.current_device()
            return int(torch.cuda.get_device_properties(idx).total_memory) // 4
        except Exception:
            pass
    return _CPU_BUDGET


def nbytes(obj: Any, seen: set | None = None) -> int:
    """Bytes of the tensors and arrays inside ``obj`` (dicts, lists, tuples, plain objects)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if hasattr(obj, "untyped_storage"):               # torch tensor: its storage, counted once
        st = obj.untyped_storage()
        key = ("storage", st.data_ptr())
        if key in seen:
            return 0
        seen.add(key)
        return int(st.nbytes())
    if hasattr(obj, "nbytes") and hasattr(obj, "dtype"):   # numpy array
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(nbytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return sum(nbytes(v, seen) for v in vars(obj).values())
    return 0


class InputCache:
    def __init__(self, family: Family, device: Any, budget_bytes: int | None = None):
        self.family, self.device = family, device
        self.reusable = bool(getattr(family, "inputs_reusable", False))
        self.budget = default_budget(device) if budget_bytes is None else int(budget_bytes)
        self._sets: OrderedDict = OrderedDict()      # key -> (value, bytes)
        self.hits = self.misses = 0

    def random(self, workload: dict, seed: int) -> Any:
        return self._get(("random", key_of(workload), int(seed)),
                         lambda: self.family.make_inputs(workload, int(seed), self.device))

    def adversarial(self, workload: dict) -> list:
        return self._get(("adversarial", key_of(workload)),
                         lambda: list(self.family.adversarial_inputs(workload, self.device)))

    @contextmanager
    def prefetching(self, workloads: list[dict]):
        """Make the adversarial sets of ``workloads`` on a background thread while the body runs
        (nothing else may use this cache meanwhile); stop short of half the memory budget. Yields
        a dict whose ``seconds`` is the background thread's time once the body is done."""
        report = {"seconds": 0.0}
        if not self.reusable or not workloads:
            yield report
            return

        def work():
            t0 = time.perf_counter()
            for w in workloads:
                if self.held_bytes() > self.budget // 2:
                    break
                try:
                    self.adversarial(w)
                except Exception:       # the sweep makes it again and reports the failure at its point
                    break
            report["seconds"] = time.perf_counter() - t0
        thread = threading.Thread(target=work, name="occtune-inputs", daemon=True)
        thread.start()
        try:
            yield report
        finally:
            thread.join()

    def held_bytes(self) -> int:
        return sum(b for _, b in self._sets.values())

    def _get(self, key, make):
        if not self.reusable:
            return make()
        if key in self._sets:
            self._sets.move_to_end(key)
            self.hits += 1
            return self._sets[key][0]
        self.misses += 1
        value = make()
        self._sets[key] = (value, nbytes(value))
        self._evict(keep=key)
        return value

    def _evict(self, keep) -> None:
        total = self.held_bytes()
        while total > self.budget and len(self._sets) > 1:
            k = next(iter(self._sets))
            if k == keep:
                break
            total -= self._sets.pop(k)[1]
