"""Process isolation: run work units in one 'spawn' worker process per device, with a timeout.

The parent hands one :class:`WorkUnit` at a time to each idle worker over a pipe; the worker
sends back each point as soon as it is measured. A worker that hangs past ``timeout_s`` (counted
from the unit's start or its last point) is killed and its unfinished points recorded as
``timeout``; a worker that dies (segfault, ``os._exit``, device fault) or reports a device error
is restarted and its unfinished points recorded as ``crashed``. The sweep goes on either way.

Each worker is pinned to its GPU: it is spawned with ``CUDA_VISIBLE_DEVICES`` naming that GPU
alone (:func:`pinned`), so every library in it (torch, Triton, NVRTC launches) sees one device.
Only the parent writes the cache, so any number of workers can run; the results are one file.
:mod:`occtune.engine.ray_backend` runs the same units as Ray tasks across a cluster.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections import deque
from multiprocessing.connection import wait
from typing import Callable

from occtune.engine.prebuild import one_line
from occtune.engine.family import key_of
from occtune.engine.phases import PhaseClock
from occtune.errors import UserError
from occtune.engine.workunit import Runner, WorkUnit, load_family, point

_STARTUP_S = 300.0     # spawning + importing torch/triton + compiling its share can be slow on a cold node


def pinned(device: str, environ=os.environ) -> tuple[str | None, str]:
    """A worker for ``device`` sees only that GPU: (its ``CUDA_VISIBLE_DEVICES``, its device name
    there). ``cuda:1`` -> ("1", "cuda:0"); under ``CUDA_VISIBLE_DEVICES=4,6`` -> ("6", "cuda:0")
    (indices count the GPUs the parent sees); ``cpu`` and ``cuda`` are left alone."""
    if not device.startswith("cuda:"):
        return None, device
    idx = int(device[5:])
    parent = [x.strip() for x in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    if parent:
        return (parent[idx], "cuda:0") if idx < len(parent) else (None, device)
    return str(idx), "cuda:0"


def _runner(runners: dict, unit: WorkUnit, device: str, timer) -> Runner:
    key = (unit.family, key_of(unit.family_kwargs))
    if key not in runners:
        runners[key] = Runner(load_family(unit.family, dict(unit.family_kwargs)), device, timer)
    return runners[key]


def _worker_main(conn, device: str, timer, share: list) -> None:
    """A worker: load, compile its ``share`` of the units ahead (on the build threads), report
    ready with the seconds both took, then run the units it is handed one at a time."""
    t0 = time.perf_counter()
    import torch      # import before "ready": the per-config timeout must not pay for it

    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    runners: dict = {}
    runner = _runner(runners, share[0], device, timer) if share else None
    t1 = time.perf_counter()
    if runner is not None:
        runner.builds.prebuild([(u.config, u.workloads) for u in share])
    conn.send(("ready", {"load": t1 - t0, "compile": time.perf_counter() - t1}))
    while True:
        unit = conn.recv()
        if unit is None:
            return
        runner = _runner(runners, unit, device, timer)
        try:
            for rec in runner.execute(unit):
                conn.send(("point", rec))
                if rec.get("fatal"):
                    return          # the device context may be poisoned: let the parent restart us
        except Exception as e:
            conn.send(("error", one_line(e)))
        conn.send(("done", None))


class _Worker:
    def __init__(self, ctx, device: str, timer, share: list):
        self.device = device
        self.conn, child = ctx.Pipe()
        visible, local = pinned(device)
        self.proc = ctx.Process(target=_worker_main, args=(child, local, timer, share), daemon=True,
                                name=f"occtune-worker-{device}")
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:          # a spawned child starts with the parent's environment
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
        try:
            self.proc.start()
        finally:
            if visible is not None:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
        child.close()
        self.ready = False
        self.unit: WorkUnit | None = None
        self.remaining: list = []
        self.deadline = time.monotonic() + _STARTUP_S

    def assign(self, unit: WorkUnit, timeout_s: float) -> None:
        self.unit, self.remaining = unit, list(unit.workloads)
        self.deadline = time.monotonic() + timeout_s
        self.conn.send(unit)

    def stop(self, grace: float = 2.0) -> None:
        try:
            if self.proc.is_alive() and self.ready and self.unit is None:
                self.conn.send(None)
                self.proc.join(grace)
        except (OSError, ValueError):
            pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


class WorkerPool:
    def __init__(self, devices: list[str], timer, timeout_s: float, clock: PhaseClock | None = None):
        self.ctx = mp.get_context("spawn")
        self.devices, self.timer, self.timeout_s = devices, timer, timeout_s
        self.clock = clock if clock is not None else PhaseClock()
        self.restarts = 0
        self.start_failures = 0

    def run(self, units: list[WorkUnit], on_point: Callable[[dict], None]) -> None:
        """Run ``units`` on one worker per device. Worker i compiles ``units[i::n]`` ahead (the
        share it is likely to run; any other unit it gets is built on first use)."""
        pending = deque(units)
        n = len(self.devices)
        workers = [_Worker(self.ctx, d, self.timer, units[i::n]) for i, d in enumerate(self.devices)]
        try:
            while pending or any(w.unit is not None for w in workers):
                for w in workers:
                    if w.ready and w.unit is None and pending:
                        w.assign(pending.popleft(), self.timeout_s)
                now = time.monotonic()
                wait([w.conn for w in workers] + [w.proc.sentinel for w in workers],
                     timeout=max(0.01, min(w.deadline for w in workers) - now))
                for i, w in enumerate(workers):
                    if not self._service(w, on_point):
                        workers[i] = self._restart(w)
        finally:
            for w in workers:
                w.stop()

    def _service(self, w: _Worker, on_point) -> bool:
        """Drain one worker's messages; False when it must be restarted."""
        try:
            while w.conn.poll():
                kind, payload = w.conn.recv()
                if kind == "ready":
                    w.ready = True
                    self.clock.add(payload)
                elif kind == "point":
                    self._on_point(w, payload, on_point)
                    if payload.get("fatal"):
                        self._fail_rest(w, "crashed", "skipped after a device error in this config", on_point)
                        return False
                elif kind == "error":
                    self._fail_rest(w, "crashed", payload, on_point)
                elif kind == "done":
                    w.unit, w.remaining = None, []
        except (EOFError, OSError):
            pass
        if not w.proc.is_alive():
            self._fail_rest(w, "crashed", f"worker process died (exit code {w.proc.exitcode})", on_point)
            return False
        if time.monotonic() > w.deadline and (w.unit is not None or not w.ready):
            what = f"no result within the {self.timeout_s:g} s per-config timeout" if w.ready else "worker did not start"
            self._fail_rest(w, "timeout", what, on_point)
            return False
        return True

    def _on_point(self, w: _Worker, rec: dict, on_point) -> None:
        k = key_of(rec["workload"])
        w.remaining = [x for x in w.remaining if key_of(x) != k]
        w.deadline = time.monotonic() + self.timeout_s
        on_point(rec)

    def _fail_rest(self, w: _Worker, status: str, reason: str, on_point) -> None:
        if w.unit is None:
            return
        for wl in w.remaining:
            on_point(point(w.unit.config, wl, status, reason))
        w.unit, w.remaining = None, []

    def _restart(self, w: _Worker) -> _Worker:
        if not w.ready:
            self.start_failures += 1
            if self.start_failures > 2 * len(self.devices):
                raise UserError(f"the worker process for {w.device} keeps dying before it starts "
                                f"(exit code {w.proc.exitcode}); run without --devices/isolation to see why")
        w.unit = None
        w.stop(grace=0)
        self.restarts += 1
        return _Worker(self.ctx, w.device, self.timer, [])
