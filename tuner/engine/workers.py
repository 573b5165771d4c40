"""Process isolation: run work units in one 'spawn' worker process per device, with a timeout.

The parent hands one :class:`WorkUnit` at a time to each idle worker over a pipe; the worker
sends back each point as soon as it is measured. A worker that hangs past ``timeout_s`` (counted
from the unit's start or its last point) is killed and its unfinished points recorded as
``timeout``; a worker that dies (segfault, ``os._exit``, device fault) or reports a device error
is restarted and its unfinished points recorded as ``crashed``. The sweep goes on either way.

Only the parent writes the cache, so any number of workers can run. A Ray backend would replace
:class:`WorkerPool` with remote tasks running :func:`occtune.engine.workunit.execute`.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from multiprocessing.connection import wait
from typing import Callable

from occtune.engine.build import BuildCache, one_line
from occtune.engine.family import key_of
from occtune.errors import UserError
from occtune.engine.workunit import WorkUnit, execute, load_family, point

_STARTUP_S = 300.0     # spawning + importing torch/triton can be slow on a cold node


def _worker_main(conn, device: str, timer) -> None:
    import torch      # import before "ready": the per-config timeout must not pay for it

    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    families: dict = {}
    conn.send(("ready", None))
    while True:
        unit = conn.recv()
        if unit is None:
            return
        key = (unit.family, key_of(unit.family_kwargs))
        if key not in families:
            fam = load_family(unit.family, dict(unit.family_kwargs))
            families[key] = (fam, BuildCache(fam, device))
        fam, builds = families[key]
        try:
            for rec in execute(unit, fam, builds, timer, device):
                conn.send(("point", rec))
                if rec.get("fatal"):
                    return          # the device context may be poisoned: let the parent restart us
        except Exception as e:
            conn.send(("error", one_line(e)))
        conn.send(("done", None))


class _Worker:
    def __init__(self, ctx, device: str, timer):
        self.device = device
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, device, timer), daemon=True,
                                name=f"occtune-worker-{device}")
        self.proc.start()
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
    def __init__(self, devices: list[str], timer, timeout_s: float):
        self.ctx = mp.get_context("spawn")
        self.devices, self.timer, self.timeout_s = devices, timer, timeout_s
        self.restarts = 0
        self.start_failures = 0

    def run(self, units: list[WorkUnit], on_point: Callable[[dict], None]) -> None:
        pending = deque(units)
        workers = [_Worker(self.ctx, d, self.timer) for d in self.devices]
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
        return _Worker(self.ctx, w.device, self.timer)
