"""The adversarial sets are made on a background thread while the configs build
(InputCache.prefetching), and the sweep then finds them made."""

from __future__ import annotations

import threading

from doubles import AxpyFamily

from occtune.engine.inputs import InputCache


class _Recording(AxpyFamily):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.threads = []

    def adversarial_inputs(self, workload, device):
        self.threads.append(threading.current_thread().name)
        yield from super().adversarial_inputs(workload, device)


def test_prefetch_makes_the_sets_on_a_background_thread_while_the_body_runs():
    fam = _Recording(sizes=(1000, 4096))
    cache = InputCache(fam, "cpu")
    with cache.prefetching(fam.workloads()) as made:
        body = threading.current_thread().name
    assert fam.threads == ["occtune-inputs", "occtune-inputs"] and body != "occtune-inputs"
    assert made["seconds"] > 0
    for w in fam.workloads():
        cache.adversarial(w)
    assert cache.hits == 2 and len(fam.threads) == 2          # the sweep found them made


def test_prefetch_stops_short_of_half_the_memory_budget():
    fam = _Recording(sizes=(1000, 4096, 8192))
    cache = InputCache(fam, "cpu", budget_bytes=3 * 4 * 1000 + 1)   # one set of 1000 floats x 3 tensors
    with cache.prefetching(fam.workloads()):
        pass
    assert len(fam.threads) == 1        # the first set already holds more than half the budget


def test_families_without_reusable_inputs_prefetch_nothing():
    fam = _Recording()
    fam.inputs_reusable = False
    with InputCache(fam, "cpu").prefetching(fam.workloads()) as made:
        pass
    assert fam.threads == [] and made["seconds"] == 0.0
