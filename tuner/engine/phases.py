"""Where a sweep's time goes: seconds per phase, accumulated across points and processes.

Phases (:data:`PHASES`): ``load`` (worker start-up, importing the family, the device context),
``compile`` (building configs ahead of timing, and anything a family's ``warm`` compiles),
``inputs`` (random and adversarial input sets), ``reference`` (a check's reference answer),
``verify`` (verification runs and checks, less their reference), ``warmup`` and ``timing`` (the
timer), ``cache`` (reading and appending the point cache). What no phase covers (planning,
queueing, selection bookkeeping) is ``other`` in :func:`summary`. ``inputs_overlapped`` is input
work done on a background thread while the configs compiled: it took no wall time of its own and
is not part of the sum.

A :class:`PhaseClock` is made current with :meth:`PhaseClock.running`; inside it, code anywhere
(the engine, the timer, a family's ``check``) wraps work in ``with phase("reference"): ...``.
Phases nest: time inside an inner phase counts for the inner one only. With no clock running
(another thread, a plain call outside a sweep) ``phase`` costs nothing and records nothing.
Worker processes send each point's phases back with the point (``rec["phases"]``).
"""

from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager

OVERLAPPED = "inputs_overlapped"
PHASES = ("load", "compile", "inputs", "reference", "verify", "warmup", "timing", "cache")

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("occtune_phase_clock", default=None)


class PhaseClock:
    """Seconds per phase (see the module docstring)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._stack: list[list] = []      # [name, start, time spent in inner phases]

    @contextmanager
    def running(self):
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    def enter(self, name: str) -> None:
        self._stack.append([name, time.perf_counter(), 0.0])

    def leave(self) -> None:
        name, t0, inner = self._stack.pop()
        spent = time.perf_counter() - t0
        self.seconds[name] = self.seconds.get(name, 0.0) + spent - inner
        if self._stack:
            self._stack[-1][2] += spent

    def add(self, seconds: dict | None) -> None:
        """Add another clock's ``seconds`` (a point's phases from a worker)."""
        for k, v in (seconds or {}).items():
            self.seconds[k] = self.seconds.get(k, 0.0) + float(v)

    def take(self) -> dict:
        """The seconds so far (rounded), and start again from zero."""
        out = {k: round(v, 6) for k, v in self.seconds.items() if v > 0}
        self.seconds = {}
        return out


@contextmanager
def phase(name: str):
    """Count the enclosed time to phase ``name`` of the running clock (no-op without one)."""
    clock = _CURRENT.get()
    if clock is None:
        yield
        return
    clock.enter(name)
    try:
        yield
    finally:
        clock.leave()


def wall_covered(seconds: dict) -> float:
    """The wall time the phases account for: their sum, less the overlapped input work."""
    return sum(v for k, v in seconds.items() if k != OVERLAPPED)


def summary(seconds: dict, wall_s: float, n_points: int) -> dict:
    """{phase: seconds} in :data:`PHASES` order plus ``other`` (wall time no phase covers) and
    ``per_point_ms`` (all measured time over the points measured)."""
    out = {p: round(seconds.get(p, 0.0), 3) for p in PHASES}
    for k in sorted(set(seconds) - set(PHASES)):
        out[k] = round(seconds[k], 3)
    covered = wall_covered(seconds)
    out["other"] = round(max(0.0, wall_s - covered), 3)
    return {"phases_s": out, "wall_s": round(wall_s, 3), "points": n_points,
            "per_point_ms": round(1e3 * wall_s / n_points, 2) if n_points else None,
            "note": "worker processes run side by side: with several, phases add up to more than the wall time"
            if covered > wall_s * 1.05 else ""}


def render(profile: dict) -> list[str]:
    """Plain lines of a :func:`summary` for ``--profile-sweep``."""
    wall = profile.get("wall_s") or 0.0
    lines = [f"sweep profile: {wall:.2f} s wall, {profile.get('points', 0)} points measured"
             + (f", {profile['per_point_ms']:.1f} ms a point" if profile.get("per_point_ms") else "")]
    for name, s in profile.get("phases_s", {}).items():
        pct = f"{100 * s / wall:5.1f}%" if wall > 0 else "     "
        lines.append(f"  {name:10s} {s:9.3f} s  {pct}")
    if profile.get("note"):
        lines.append(f"  ({profile['note']})")
    return lines
