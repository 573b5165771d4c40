"""One pipeline for every family: target -> resources -> occupancy -> space -> build -> verify ->
time -> select -> one results writer.

A :class:`SweepRequest` (a frozen bundle of everything a sweep needs) goes in; :func:`run_request`
picks the analytic sweep (no GPU of the target here, or ``analytic=True``: resources and occupancy
only, :mod:`occtune.engine.analytic`) or the timed one (the local GPU: :func:`occtune.pipeline.timed.run_timed`),
writes ``<out>/<target>/<family>.yaml`` and prints a table or one JSON document. ``tune sweep``
is this function behind click; family verbs (``tune topk``, ``tune rope``) build a request from their
own options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from occtune.engine.family import short as _short
from occtune.engine.options import RunOptions, TimingOptions, check_untimed
from occtune.engine.sweep import default_configs
from occtune.errors import UserError
from occtune.model.targets import resolve_target


@dataclass(frozen=True)
class SweepRequest:
    family: str
    target: str | None = None                 # None: the local GPU's target
    configs: tuple | None = None              # None: the product of the family's axes
    workloads: tuple | None = None            # None: the family's default workloads
    analytic: bool = False                    # resources and occupancy only, even on the GPU
    device: str | None = None                 # "cpu": a timed sweep on this CPU (Triton's interpreter)
    out_dir: str | None = None                # None: results/ (timed) or occtune-results/ (analytic)
    write: bool = True                        # False: write nothing
    force: bool = False                       # an analytic sweep may replace timed results
    as_json: bool = False
    timed_flags: tuple = ()                   # options of the timed sweep given on the command line
    run: RunOptions = field(default_factory=RunOptions)
    timing: TimingOptions = field(default_factory=TimingOptions)


def run_request(req: SweepRequest, family: Any = None):
    """Run one sweep request end to end; returns the AnalyticResult or the TimedRun."""
    from occtune.engine.registry import get_family

    family = family if family is not None else get_family(req.family)
    if req.device == "cpu":
        return _timed(family, None, *_space(family, req), req)
    target, local = resolve_target(req.target)
    family = family.for_target(target)
    configs, workloads = _space(family, req)
    if req.analytic or not local:
        given = req.timed_flags or tuple(f for f, on in (("--devices", req.run.devices), ("--ray", req.run.ray)) if on)
        check_untimed(given, "--analytic asks for the analytic sweep" if req.analytic
                      else f"no {target.name} GPU is here, so this sweep is analytic")
        return _analytic(family, target, configs, workloads, req)
    return _timed(family, target, configs, workloads, req)


def _space(family, req: SweepRequest) -> tuple[list[dict], list[dict]]:
    """The request's configs and workloads, else the family's defaults."""
    configs = list(req.configs) if req.configs is not None else default_configs(family)
    return configs, list(req.workloads) if req.workloads is not None else family.workloads()


def valid_configs(family, configs: list[dict], workloads: list[dict]) -> tuple[list[dict], list[dict]]:
    """Configs valid for at least one workload, and the others with the first reason."""
    keep, skipped = [], []
    for c in configs:
        verdicts = [family.is_valid(c, w) for w in workloads]
        if any(ok for ok, _ in verdicts):
            keep.append(c)
        else:
            skipped.append({"config": c, "reason": next(r for ok, r in verdicts if not ok) or "invalid"})
    return keep, skipped


def _analytic(family, target, configs, workloads, req: SweepRequest):
    from occtune.engine.analytic import analytic_sweep
    from occtune.outputs.results import analytic_document, out_folder, results_path, write_results

    valid, skipped = valid_configs(family, configs, workloads)
    result = analytic_sweep(family, target, valid)
    result.skipped = skipped + result.skipped
    if not result.rows:
        reasons = "; ".join(f"{_short(s['config'])}: {s['reason']}" for s in result.skipped[:4])
        raise UserError(f"no config of {family.name} can be analysed for {target.name} ({reasons})")
    if result.winner is None:
        raise UserError(f"no winner for {family.name} on {target.name}: {result.why}; nothing written")
    doc = analytic_document(result, target)
    path = write_results(results_path(out_folder(req.out_dir, timed=False), target.name, family.name), doc,
                         force=req.force) if req.write else None
    if req.as_json:
        from occtune.output import emit_json

        emit_json({**doc, "results_file": str(path) if path else None})
    else:
        _print_analytic(result, target, path)
    return result


def _timed(family, target, configs, workloads, req: SweepRequest):
    """The timed sweep on the local GPU (``target``), or on the CPU when ``target`` is None."""
    from occtune.engine.sweep import SweepHooks
    from occtune.outputs.results import out_folder
    from occtune.pipeline.timed import Output, run_timed

    hooks = SweepHooks() if target is None else SweepHooks(
        fits=lambda c: _fits(family, target, c), peak_gbps=float(target.peak_hbm_bytes_per_s) / 1e9)
    return run_timed(family, target=target.name if target else "cpu", configs=configs, workloads=workloads,
                     device="cuda" if target else "cpu",
                     timer=req.timing.timer(), options=req.run, hooks=hooks,
                     output=Output(out_dir=out_folder(req.out_dir, timed=True) if req.write else None,
                                   as_json=req.as_json))


def _fits(family, target, config) -> tuple[bool, str]:
    from occtune.engine.analytic import occupancy_row

    res = family.resources(config, target)
    if res is None:
        return True, ""
    row = occupancy_row(target, config, res)
    return row["fits"], row["reason"]


def _print_analytic(result, target, path) -> None:
    from rich.table import Table

    from occtune.output import console

    unit = "CU" if target.is_amd else "SM"
    t = Table(title=f"tune sweep {result.family} --target {target.name}: analytic (no GPU timing)",
              title_justify="left")
    regs = ("VGPRs", "SGPRs") if target.is_amd else ("regs",)
    for c in ("config", "threads", *regs, "LDS/block", f"blocks/{unit}", "limiter", "resources from"):
        t.add_column(c, justify="left" if c in ("config", "limiter", "resources from") else "right")
    for r in result.rows:
        win = r is result.winner
        nums = [str(r["vgprs"]), str(r["sgprs"])] if target.is_amd else [str(r["regs"])]
        t.add_row(("* " if win else "") + _short(r["config"]), str(r["threads"]), *nums,
                  f"{r['lds_per_block_bytes']:,}", str(r["blocks_per_cu"]) if r["fits"] else "no fit",
                  r["limiter"] if r["fits"] else r["reason"][:30], r["resources_source"],
                  style="bold green" if win else None)
    console.print(t)
    for s in result.skipped:
        console.print(f"skipped {_short(s['config'])}: {s['reason']}")
    console.print(f"[bold]winner (analytic)[/]: {_short(result.winner['config'])}. {result.why}")
    if path:
        console.print(f"wrote {path}")
