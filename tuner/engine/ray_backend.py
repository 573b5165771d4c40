"""Run a sweep's work units as Ray tasks across a cluster (``--ray auto|ADDRESS``).

Each :class:`occtune.engine.workunit.WorkUnit` (one config, its workloads) becomes one task
that asks for one GPU (one CPU on a CPU sweep). Ray sets the task's ``CUDA_VISIBLE_DEVICES``, so
the task runs on ``cuda`` like a pinned local worker; every worker process keeps one
:class:`~occtune.engine.workunit.Runner` per family (builds and inputs are reused by the units
it runs). Points come back with the task and are appended to the point cache by this process as
each task finishes, so a sweep cut off anywhere resumes from what came back.

Faults: a node that dies takes its running tasks with it; Ray runs them again elsewhere
(``max_retries``), so no point is lost. A task that raises, or still fails after its retries,
records its points as ``crashed``; one that runs past ``timeout_s`` per workload is cancelled
and recorded as ``timeout``.

Every node needs occtune (and the family's package) installed::

    ray start --head --port=6379                 # on the head node
    ray start --address=HEAD_IP:6379             # on every other node
    tune topk --target sm_90 --ray auto          # on a node of the cluster
"""

from __future__ import annotations

import time
from typing import Callable

from occtune.engine.phases import PhaseClock
from occtune.engine.workunit import WorkUnit, point
from occtune.errors import UserError

MAX_RETRIES = 3
_RUNNERS: dict = {}        # in a Ray worker process: (family, kwargs, device) -> Runner


def run_unit(unit: WorkUnit, timer) -> list[dict]:
    """The body of one Ray task: every point of ``unit`` (``rec["node"]`` says where it ran)."""
    import os
    import socket

    from occtune.engine.family import key_of
    from occtune.engine.workunit import Runner, load_family

    device = "cuda" if unit.device.startswith("cuda") else unit.device
    key = (unit.family, key_of(unit.family_kwargs), device)
    t0 = time.perf_counter()
    if key not in _RUNNERS:
        _RUNNERS[key] = Runner(load_family(unit.family, dict(unit.family_kwargs)), device, timer)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    _RUNNERS[key].builds.prebuild([(unit.config, unit.workloads)])    # warm its workloads on build threads
    compile_s = time.perf_counter() - t1
    node = f"{socket.gethostname()}:{os.getpid()}"
    out = []
    for rec in _RUNNERS[key].execute(unit):
        rec = dict(rec, node=node)
        if load_s or compile_s:
            ph = dict(rec.get("phases") or {})
            ph["load"] = ph.get("load", 0.0) + load_s
            ph["compile"] = ph.get("compile", 0.0) + compile_s
            rec["phases"] = ph
            load_s = compile_s = 0.0
        out.append(rec)
    return out


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray: pip install 'occtune[ray]' (or 'ray[default]>=2.9') on every "
                        "node") from None
    return ray


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A HOST:PORT that does not answer is a one-line error now, not Ray's minutes of retries."""
    import socket

    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UserError(f"--ray {address}: nothing answers there ({e.strerror or e}); start the head with "
                        "'ray start --head --port=PORT' or give its HOST:PORT") from None


class RayPool:
    """Same interface as :class:`occtune.engine.workers.WorkerPool`: ``run(units, on_point)``."""

    def __init__(self, address: str, timer, timeout_s: float, clock: PhaseClock | None = None):
        self.address, self.timer, self.timeout_s = address, timer, float(timeout_s)
        self.clock = clock if clock is not None else PhaseClock()

    def run(self, units: list[WorkUnit], on_point: Callable[[dict], None]) -> None:
        if not units:
            return
        ray = _ray()
        t0 = time.perf_counter()
        started = not ray.is_initialized()
        if started:
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, logging_level="WARNING", log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise UserError(f"--ray {self.address}: cannot join the Ray cluster ({str(e).splitlines()[0]}); "
                                "start one with 'ray start --head' or give the head's HOST:PORT") from None
        self.clock.add({"load": time.perf_counter() - t0})
        try:
            self._run(ray, units, on_point)
        finally:
            if started:
                ray.shutdown()

    def _run(self, ray, units, on_point) -> None:
        gpu = units[0].device.startswith("cuda")
        task = ray.remote(run_unit).options(num_gpus=1 if gpu else 0, num_cpus=0 if gpu else 1,
                                            max_retries=MAX_RETRIES, retry_exceptions=False)
        timer_ref = ray.put(self.timer)
        pending = {}
        for u in units:
            pending[task.remote(u, timer_ref)] = (u, time.monotonic())
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in done:
                unit, _ = pending.pop(ref)
                for rec in self._result(ray, ref, unit):
                    on_point(rec)
            self._expire(ray, pending, on_point)

    def _result(self, ray, ref, unit) -> list[dict]:
        try:
            return ray.get(ref)
        except Exception as e:     # the task raised, or its worker or node died past the retries
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            return [point(unit.config, w, "crashed", f"Ray task failed: {type(e).__name__}: {why}")
                    for w in unit.workloads]

    def _expire(self, ray, pending: dict, on_point) -> None:
        """Cancel tasks past ``timeout_s`` per workload (counted from submission, queueing included,
        times the retries a lost node may cost) and record their points as ``timeout``."""
        now = time.monotonic()
        for ref, (unit, t_sub) in list(pending.items()):
            if now - t_sub > self.timeout_s * len(unit.workloads) * (1 + MAX_RETRIES):
                ray.cancel(ref, force=True)
                pending.pop(ref)
                for w in unit.workloads:
                    on_point(point(unit.config, w, "timeout",
                                   f"no result within {self.timeout_s:g} s per workload on the cluster"))
