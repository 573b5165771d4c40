"""Build layer: cache ``family.build(config, device)`` by (source hash, config, device arch), in parallel.

Whatever a family's ``build`` does (NVRTC/hiprtc through ``occtune.build.rtc`` with ``-D`` macros, or
binding Triton constexpr meta-parameters) is called at most once per key per process. A build
that raises is remembered as a :class:`BuildFailure` (its one-line reason), not retried.

:meth:`BuildCache.prebuild` compiles every config ahead of timing on a thread pool, asks each for
its resources (``family.built_resources``) and calls ``family.warm(built, workload, device)`` for
every (config, workload) pair on the same pool, each pair as soon as its own config is built:
what a run would otherwise compile on first use (Triton's shape specialisations, top-k's derived
split and cluster kernels). NVRTC and hiprtc are called through ctypes, which releases the GIL,
and Triton hands the last stage to ``ptxas`` in a subprocess, so the builds overlap. A ``warm``
that raises is ignored here: the run that needs the kernel reports the error on its point.

Triton's compiler holds the GIL for most of its work, so threads do not overlap it. A family
that says so (``compile_processes = True``) is first built and warmed by
:func:`prebuild_in_processes`: helper processes, one config per task, whose only lasting effect is
the compiler's on-disk cache; the sweep's own build loads each config from it as soon as its task
is done, while the helpers compile the rest.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any

from occtune.engine.family import Family, key_of
from occtune.build.rtc import log_compile


@dataclass
class BuildFailure:
    reason: str


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:limit]


def device_arch(device: Any) -> str:
    """A short arch tag for the build key: gfx942, sm_90, or cpu."""
    try:
        import torch

        from occtune.model.targets import device_target

        dev = torch.device(device) if device is not None else torch.device("cpu")
        if dev.type == "cuda" and torch.cuda.is_available():
            return device_target(torch, dev)
        return dev.type
    except (ImportError, RuntimeError, AssertionError):   # no torch, or a device torch cannot query
        return str(device)


class BuildCache:
    def __init__(self, family: Family, device: Any):
        self.family = family
        self.device = device
        self.arch = device_arch(device)
        self._source = family.source_hash()
        self._built: dict[tuple, Any] = {}
        self._resources: dict[tuple, dict | None] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()
        self.n_builds = 0

    def key(self, config: dict) -> tuple:
        return (self._source, key_of(config), self.arch)

    def get(self, config: dict) -> Any:
        """The built handle, or a :class:`BuildFailure`; builds on first use."""
        k = self.key(config)
        with self._guard:
            if k in self._built:
                return self._built[k]
            lock = self._locks.setdefault(k, threading.Lock())
        with lock:
            if k not in self._built:
                self._built[k] = self._build(config)
        return self._built[k]

    def _build(self, config: dict) -> Any:
        with self._guard:
            self.n_builds += 1
        try:
            return self.family.build(config, self.device)
        except Exception as e:      # compile errors, resource limits: recorded, sweep goes on
            return BuildFailure(one_line(e))

    def prebuild(self, plan: list[tuple[dict, tuple]], workers: int | None = None) -> None:
        """Build every config of ``plan`` (``[(config, workloads), ...]``) and warm it for its
        workloads (see the module docstring)."""
        configs = [c for c, _ in plan]
        tasks = [*(partial(self.resources, c) for c in configs),
                 *(partial(self._warm, c, w) for c, ws in plan for w in ws)]
        workers = workers or self._threads(len(tasks))
        if workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                task()
            return
        # one pool, builds queued first: a warm waits for its own config's build, not for all of them
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="occtune-build") as pool:
            for done in [pool.submit(task) for task in tasks]:
                done.result()

    def _threads(self, n_tasks: int) -> int:
        """Build threads: with a compiler that holds the GIL (``compile_processes``), about one per
        core; else (NVRTC/hiprtc through ctypes) one per task up to 64, because most warms only
        wait for a kernel another thread compiles, and a warm stuck in the queue behind them would
        start its own compile only when the others finish (a second wave of compiles)."""
        cores = min(32, os.cpu_count() or 1)
        return cores if getattr(self.family, "compile_processes", False) else max(cores, min(64, n_tasks))

    def resources(self, config: dict) -> dict | None:
        """``family.built_resources`` of the built config as a dict (None if unknown), asked once; a
        lookup that fails says so (``{"error": ...}`` in every point's row), it is not dropped."""
        k = self.key(config)
        if k not in self._resources:
            built = self.get(config)
            try:
                r = None if isinstance(built, BuildFailure) else self.family.built_resources(built, config)
            except Exception as e:  # noqa: BLE001 - any failure of the family's lookup is reported
                self._resources[k] = {"error": f"built_resources failed: {one_line(e)}"}
                return self._resources[k]
            self._resources[k] = None if r is None else dict(vars(r))
        return self._resources[k]

    def _warm(self, config: dict, workload: dict) -> None:
        built = self.get(config)
        if isinstance(built, BuildFailure):
            return
        try:
            self.family.warm(built, workload, self.device)
        except Exception:       # the run that needs it reports the error on its point
            pass


def prebuild_in_processes(family: Family, plan: list[tuple[dict, tuple]], device, processes: int | None = None,
                          timeout_s: float = 600.0, on_ready=None) -> int:
    """Build and warm ``plan`` in helper processes, one config per task (see the module docstring);
    returns how many helpers ran. ``on_ready(item)`` runs in this thread for each item of ``plan``
    as soon as its task is done: the sweep loads that config from the compiler's disk cache while
    the rest still compile. A helper that fails or runs past ``timeout_s`` costs nothing but time:
    the sweep's own build does the work then."""
    from occtune.engine.workunit import family_ref

    n = min(len(plan), processes or max(1, min(16, (os.cpu_count() or 2) - 1)))
    if n < 2:
        return 0
    ref, kwargs = family_ref(family), dict(getattr(family, "init_kwargs", {}) or {})
    log_compile(f"prebuild: {n} helpers for {len(plan)} configs")
    pool = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"))
    try:
        tasks = {pool.submit(_prebuild_share, (ref, kwargs, [item], str(device))): item for item in plan}
        for done in as_completed(tasks, timeout=timeout_s):
            if on_ready is not None:
                on_ready(tasks[done])
    except Exception:          # a helper died (BrokenProcessPool), could not start, or took too long
        pass
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return n


def _prebuild_share(args) -> None:
    from occtune.engine.workunit import load_family

    ref, kwargs, share, device = args
    log_compile("prebuild: helper started")
    if device.startswith("cuda"):
        import torch

        torch.cuda.set_device(torch.device(device) if torch.device(device).index is not None else 0)
        log_compile("prebuild: helper has torch and the device")
    BuildCache(load_family(ref, kwargs), device).prebuild(share, workers=2)
    log_compile(f"prebuild: helper built {[key_of(c) for c, _ in share]}")
