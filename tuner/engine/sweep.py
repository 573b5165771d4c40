"""The timed sweep: prune -> build ahead -> verify -> time -> cache, with failures isolated.

Order of work: every config still to measure is built and warmed before any point is timed
(:meth:`occtune.engine.prebuild.BuildCache.prebuild` on build threads; first in helper processes
for families with ``compile_processes``); each workload's inputs are made once per process and
reused by every config (``inputs_reusable``); timing stops when the median is known well enough
(:mod:`occtune.engine.bench`, adaptive). Where the time went is counted per phase
(:mod:`occtune.engine.phases`), in worker processes too, and kept in ``SweepResult.phases``.
Runs in-process, in one worker process per GPU (``devices``/``isolate``) or as Ray tasks
(``ray``: :mod:`occtune.engine.ray_backend`).

Use
---
::

    from occtune.engine.registry import get_family
    from occtune.engine.options import RunOptions
    from occtune.engine.sweep import SweepHooks, run_sweep
    from occtune.engine.select import select

    fam = get_family("rope")
    res = run_sweep(fam, configs=None, workloads=None,     # None: product of fam.axes(), fam.workloads()
                    device="cuda", timer=None,               # None: BenchTimer(); a fake timer in tests
                    options=RunOptions(isolate=True),        # cache, devices, isolation, timeout
                    hooks=SweepHooks(fits=..., annotate=...))
    sel = select(res, fam)                                   # winner, ties, explanation

Commands do not call this directly: ``occtune.pipeline.timed.run_timed`` runs it, selects, writes the one
results file (``occtune.outputs.results``) and prints; ``tune sweep`` (``occtune.pipeline``) sits on top.
``python3 examples/engine_demo.py`` shows the engine alone.

Cached statuses: every measured point is cached, failures too (``built_failed``, ``wrong``,
``timeout``, ``crashed``); ``retry_failed=True`` re-runs timeouts and crashes; ``skipped`` points
are recomputed each run (cheap). Rows come back in ``configs x workloads`` order.

What the engine asks of a family (``occtune.engine.family.Family``):

- configs and workloads are plain dicts of JSON scalars; ``baseline_config()`` is swept too (added
  when the configs leave it out: speed-ups are against it); ``safety_key`` breaks ties (larger is safer);
  ``admissible(config, workload)`` is a hard constraint at selection (measured, never chosen).
- ``build(config, device)`` may raise: the point becomes ``built_failed`` with the message.
- ``make_inputs(workload, seed, device)`` must be deterministic in ``seed`` (one seed per
  workload); ``run`` may work in place, so keep in the inputs object whatever ``check`` needs
  (e.g. a clone of the original). With ``inputs_reusable = True`` one input set per workload
  serves every config: ``reset_outputs(inputs)`` re-poisons outputs before each verification run,
  and ``check`` may keep its reference in the inputs (inside ``phase("reference")``).
- ``warm(built, workload, device)`` (optional) compiles ahead what ``run`` would compile on first
  use for that workload (Triton specialisations, derived kernels).
- ``check`` returns ``CheckResult(ok, reason, diagnostics)``; ``adversarial_inputs`` yields
  ``(name, inputs)``; every config is verified on both before it is timed.
- ``bytes_moved(workload)`` gives GB/s and, with ``peak_gbps``, the % of the memory floor.
- ``timing_input_sets = N`` (class attribute, optional): time over N rotating input sets.
- For worker processes the family is rebuilt there from ``module:Class`` and
  ``getattr(family, "init_kwargs", {})``, so a family must be importable and constructible so.

:class:`SweepHooks`: ``fits(config) -> (ok, reason)`` prunes configs that cannot run (occupancy:
LDS over the limit); ``annotate(config) -> dict`` adds analytic columns to every row.
Every measured point is appended to the cache at once; a rerun re-measures nothing cached.
"""

from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from occtune.engine import cache as cache_mod
from occtune.engine import env
from occtune.engine import phases as phases_mod
from occtune.engine.prebuild import prebuild_in_processes
from occtune.engine.family import Family, key_of
from occtune.engine.options import RunOptions
from occtune.engine.phases import PhaseClock, phase
from occtune.engine.workunit import Runner, WorkUnit, family_ref, point
from occtune.output import Progress

_RETRYABLE = ("timeout", "crashed")


@dataclass
class SweepResult:
    family: str
    device: str
    fingerprint: dict
    configs: list[dict]
    workloads: list[dict]
    baseline: dict
    rows: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    n_measured: int = 0
    n_cached: int = 0
    cache_path: str | None = None
    axes: dict = field(default_factory=dict)
    phases: dict = field(default_factory=dict)     # seconds per phase (occtune.engine.phases)

    def profile(self) -> dict:
        """Where the wall time went (``--profile-sweep``; the results' ``sweep`` record)."""
        return phases_mod.summary(self.phases, self.wall_s, self.n_measured)

    def counts(self) -> dict:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out


def product(axes: dict[str, list]) -> list[dict]:
    """Every combination of the axes' values, as config dicts."""
    names = list(axes)
    return [dict(zip(names, vals)) for vals in itertools.product(*(axes[n] for n in names))]


def default_configs(family: Family) -> list[dict]:
    """The family's own list (``family.configs()``) where it has one, e.g. a space that is no
    product (fp8_gemm's Triton tiles per M bucket, one config per library); else its axes' product."""
    own = getattr(family, "configs", None)
    return list(own()) if callable(own) else product(family.axes())


@dataclass(frozen=True)
class SweepHooks:
    """What a command adds to a sweep: ``fits(config) -> (ok, reason)`` prunes configs that cannot
    run (occupancy); ``annotate(config) -> dict`` adds analytic columns to every row;
    ``peak_gbps`` turns bytes moved into % of the memory floor."""

    fits: Callable | None = None
    annotate: Callable | None = None
    peak_gbps: float | None = None


def run_sweep(family: Family, configs: list[dict] | None = None, workloads: list[dict] | None = None, *,
              device: Any = "cpu", timer=None, options: RunOptions = RunOptions(),
              hooks: SweepHooks = SweepHooks(), cache: Any = None, progress: bool = True,
              seed: int = 0) -> SweepResult:
    """Sweep ``configs x workloads``; see the module docstring. ``cache``: None opens the point
    cache of ``options.cache_dir``, False runs without one, a PointCache is used as given."""
    from occtune.engine.bench import BenchTimer

    t0 = time.perf_counter()
    clock = PhaseClock()
    timer = timer if timer is not None else BenchTimer()
    configs = configs if configs is not None else default_configs(family)
    if family.baseline_config() not in configs:     # speed-ups are against the config users would run
        configs = [*configs, family.baseline_config()]
    workloads = workloads if workloads is not None else family.workloads()
    name = family.name or type(family).__name__
    with clock.running(), phase("load"):         # versions of torch, Triton, the driver: imports them
        fp = env.fingerprint(device, name, family.source_hash(), getattr(timer, "kind", type(timer).__name__))
    with clock.running(), phase("cache"):
        store = _open_cache(cache, fp, options)
    res = SweepResult(name, str(device), fp, configs, workloads, family.baseline_config(),
                      cache_path=str(store.path) if store else None, axes=_axes_of(family))
    rows: dict[str, dict] = {}
    units = _plan(family, configs, workloads, store, options, hooks.fits, rows, res, device, seed)

    def on_point(rec: dict) -> None:
        rec = dict(rec, cached=False)
        rec.pop("fatal", None)
        clock.add(rec.pop("phases", None))
        if store is not None and rec["status"] != "skipped":
            with clock.running(), phase("cache"):
                store.append(rec)
        rows[cache_mod.point_key(rec["config"], rec["workload"])] = rec
        res.n_measured += 1
        bar.advance()

    n_todo = sum(len(u.workloads) for u in units)
    ahead = bool(units) and not options.ray and getattr(family, "compile_processes", False) \
        and str(device).startswith("cuda")          # helper processes compile (Triton holds the GIL)
    if ahead and options.in_workers:
        with clock.running(), phase("compile"):
            prebuild_in_processes(family, [(u.config, u.workloads) for u in units],
                                  (options.devices or [device])[0])
    with Progress(progress, n_todo, f"sweep {name}") as bar:
        if options.ray:
            from occtune.engine.ray_backend import RayPool

            RayPool(options.ray, timer, options.timeout_s, clock).run(units, on_point)
        elif options.in_workers:
            _run_isolated(units, family, list(options.devices or [str(device)]), timer, options.timeout_s,
                          on_point, clock)
        elif units:
            _run_inprocess(units, family, device, timer, on_point, clock, ahead)
    with clock.running(), phase("compile"):      # the analytic columns may compile (resources)
        notes = _annotations(hooks.annotate, [r["config"] for r in rows.values()], device)
    res.rows = [_finish(rows[cache_mod.point_key(c, w)], family, hooks, notes)
                for c in configs for w in workloads if cache_mod.point_key(c, w) in rows]
    res.wall_s = time.perf_counter() - t0
    res.phases = clock.seconds
    return res


def _open_cache(cache, fp, options: RunOptions):
    if cache is False:
        return None
    if isinstance(cache, cache_mod.PointCache):
        return cache
    return cache_mod.PointCache.open(fp, cache if cache is not None else options.cache_dir, fresh=options.fresh)


def _axes_of(family) -> dict:
    try:
        return dict(family.axes())
    except NotImplementedError:
        return {}


def _plan(family, configs, workloads, store, options, fits, rows, res, device, seed):
    """Fill ``rows`` with skipped and cached points; return the work units still to run."""
    units = []
    for c in configs:
        ok_fit, why = _fits(fits, c)
        todo = []
        for w in workloads:
            k = cache_mod.point_key(c, w)
            valid, reason = (ok_fit, why) if not ok_fit else family.is_valid(c, w)
            if not valid:
                rows[k] = point(c, w, "skipped", reason or "pruned", cached=False)
                continue
            hit = None if (options.fresh or store is None) else store.get(c, w)
            if hit is not None and not (options.retry_failed and hit["status"] in _RETRYABLE):
                rows[k] = dict(hit, cached=True)
                res.n_cached += 1
            else:
                todo.append(w)
        if todo:
            units.append(WorkUnit(family_ref(family), c, tuple(todo), str(device),
                                  dict(getattr(family, "init_kwargs", {}) or {}), seed))
    return units


def _fits(fits, config) -> tuple[bool, str]:
    if fits is None:
        return True, ""
    r = fits(config)
    return (r, "" if r else "does not fit") if isinstance(r, bool) else (bool(r[0]), r[1])


def _run_inprocess(units, family, device, timer, on_point, clock, ahead: bool = False) -> None:
    with clock.running():
        with phase("load"):
            runner = Runner(family, device, timer)
        workloads = list({key_of(w): w for u in units for w in u.workloads}.values())
        plan = [(u.config, u.workloads) for u in units]
        with phase("compile"):       # every config ahead of timing, on the build threads
            with runner.inputs.prefetching(workloads) as made:      # meanwhile the inputs
                if ahead:            # helper processes compile; each config loads here once done
                    prebuild_in_processes(family, plan, device, on_ready=lambda item: runner.builds.prebuild([item]))
                runner.builds.prebuild(plan)
        clock.add({phases_mod.OVERLAPPED: made["seconds"]})
    for u in units:
        for rec in runner.execute(u):
            on_point(rec)


def _run_isolated(units, family, devices, timer, timeout_s, on_point, clock) -> None:
    from occtune.engine.workers import WorkerPool

    devs = [str(d) if not isinstance(d, int) else f"cuda:{d}" for d in devices]
    WorkerPool(devs, timer, timeout_s, clock).run(units, on_point)


def _annotations(annotate, configs: list[dict], device) -> dict:
    """``annotate(config)`` of each distinct config, on the build threads (a command's analytic
    columns may compile or ask the driver: a cached rerun must not pay for them one by one)."""
    if annotate is None:
        return {}
    todo = list({key_of(c): c for c in configs}.values())
    with ThreadPoolExecutor(max_workers=max(1, min(32, os.cpu_count() or 1, len(todo))),
                            thread_name_prefix="occtune-build", initializer=_use_device, initargs=(device,)) as pool:
        return dict(zip((key_of(c) for c in todo), pool.map(annotate, todo)))


def _use_device(device) -> None:
    """A helper thread talks to the driver about ``device``: make its context current there."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.set_device(torch.device(device) if torch.device(device).index is not None
                              else torch.cuda.current_device())


def _finish(rec: dict, family, hooks: SweepHooks, notes: dict) -> dict:
    peak_gbps = hooks.peak_gbps
    rec = dict(rec)
    t = rec.get("timing")
    if rec["status"] == "ok" and t:
        try:
            nbytes = int(family.bytes_moved(rec["workload"]))
        except NotImplementedError:
            nbytes = 0
        if nbytes and t["median_us"] > 0:
            rec["gbps"] = float(f"{nbytes / t['median_us'] / 1e3:.4g}")
            if peak_gbps:
                floor_us = nbytes / (peak_gbps * 1e3)
                rec["pct_of_floor"] = float(f"{100.0 * floor_us / t['median_us']:.4g}")
    rec.update(notes.get(key_of(rec["config"])) or {})
    return rec
