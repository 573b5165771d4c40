"""One pipeline for every family: target -> resources -> occupancy -> space -> build -> verify ->
time -> select -> one results writer.

A :class:`SweepRequest` (a frozen bundle of everything a sweep needs) goes in; :func:`run_request`
picks the analytic sweep (no GPU of the target here, or ``analytic=True``: resources and occupancy
only, :mod:`occtune.engine.analytic`) or the timed one (the local GPU: :func:`occtune.pipeline.timed.run_timed`),
writes ``<out>/<target>/<family>.yaml`` and prints a table or one JSON document. ``tune sweep``
is this function behind click; family verbs (``tune topk``, ``tune rope``, ``tune fp8-gemm``) build a
request from their own options and call it too.

What differs per family lives in its :class:`occtune.engine.family.Family` hooks, never here: the
analytic columns, whether the analytic verdict ranks configs (``analytic_ranks``: where it does
not, the run shows resources, occupancy and limiters, writes its rows with no winner, and ``tune
export`` refuses them), the checks of what the verdict covers, the results document's assumptions,
a table of its own (``show_analytic``), and the timed sweep's plan (``timed_plan``: pruning,
columns, files written beside the results, lines after the table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from occtune.engine.family import View, short as _short
from occtune.engine.options import RunOptions, TimingOptions, check_untimed
from occtune.engine.sweep import default_configs
from occtune.errors import UserError
from occtune.model.targets import resolve_target


@dataclass(frozen=True)
class SweepRequest:
    family: str
    target: str | None = None                 # None: the local GPU's target
    configs: tuple | None = None              # None: the family's own list, else its axes' product
    workloads: tuple | None = None            # None: the family's default workloads
    analytic: bool = False                    # resources and occupancy only, even on the GPU
    device: str | None = None                 # "cpu": a timed sweep on this CPU (Triton's interpreter)
    out_dir: str | None = None                # None: results/ (timed) or occtune-results/ (analytic)
    write: bool = True                        # False: write nothing
    force: bool = False                       # an analytic sweep may replace timed results
    as_json: bool = False
    show_all: bool = False                    # tables: every row, not the winner and the top 10
    timed_flags: tuple = ()                   # options of the timed sweep given on the command line
    run: RunOptions = field(default_factory=RunOptions)
    timing: TimingOptions = field(default_factory=TimingOptions)

    @property
    def view(self) -> View:
        return View(as_json=self.as_json, show_all=self.show_all)


def run_request(req: SweepRequest, family: Any = None):
    """Run one sweep request end to end; returns the AnalyticResult or the TimedRun."""
    from occtune.engine.registry import get_family

    family = family if family is not None else get_family(req.family)
    if req.workloads is not None:                # resources of the asked shapes, not the defaults'
        family = family.with_workloads(list(req.workloads))
    if req.device == "cpu":
        return timed_run(family, None, *_space(family, req), req)
    target, local = resolve_target(req.target)
    family = family.for_target(target)
    configs, workloads = _space(family, req)
    if req.analytic or not local:
        given = req.timed_flags or tuple(f for f, on in (("--devices", req.run.devices), ("--ray", req.run.ray)) if on)
        check_untimed(given, "--analytic asks for the analytic sweep" if req.analytic
                      else f"no {target.name} GPU is here, so this sweep is analytic")
        return _analytic(family, target, configs, workloads, req)
    return timed_run(family, target, configs, workloads, req)


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
    valid = family.analytic_space(valid, target)
    result = analytic_sweep(family, target, valid)       # a progress bar on a terminal past a second
    family.check_analytic_result(result, target)
    result.skipped = skipped + result.skipped
    if not result.rows:
        reasons = "; ".join(f"{_short(s['config'])}: {s['reason']}" for s in result.skipped[:4])
        raise UserError(f"no config of {family.name} can be analysed for {target.name} ({reasons})")
    refused = result.ranked and result.winner is None       # a ranking that found nothing to recommend
    doc = family.analytic_document(analytic_document(result, target), result, target)
    path = None
    if req.write and not refused:
        path = write_results(results_path(out_folder(req.out_dir, timed=False), target.name, family.name), doc,
                             force=req.force)
    if req.as_json:
        from occtune.output import emit_json

        emit_json({**doc, **family.analytic_json(result, target), "results_file": str(path) if path else None})
    elif not family.show_analytic(result, target, req.view, path):
        _print_analytic(result, target, path, req.show_all)
    if refused:
        raise UserError(f"no winner for {family.name} on {target.name}: {result.why}; nothing written")
    return result


def timed_run(family, target, configs, workloads, req: SweepRequest, device: str | None = None):
    """The timed sweep on the local GPU (``target``), or on the CPU when ``target`` is None.
    ``device`` ("cpu" or "cuda"; default: "cuda" with a target) lets a test time a target's plan
    on this CPU."""
    from occtune.engine.family import TimedPlan
    from occtune.engine.sweep import SweepHooks
    from occtune.outputs.results import out_folder
    from occtune.pipeline.timed import Output, run_timed

    device = device or ("cuda" if target else "cpu")
    plan = family.timed_plan(target, req.view, device) if target is not None else TimedPlan()
    hooks = SweepHooks() if target is None else SweepHooks(
        fits=plan.fits or (lambda c: _fits(family, target, c)), annotate=plan.annotate,
        peak_gbps=float(target.peak_hbm_bytes_per_s) / 1e9)
    run = run_timed(family, target=target.name if target else "cpu", configs=configs, workloads=workloads,
                    device=device,
                    timer=req.timing.timer(), options=req.run, hooks=hooks,
                    output=Output(out_dir=out_folder(req.out_dir, timed=True) if req.write else None,
                                  as_json=req.as_json, columns=tuple(plan.columns), assumptions=plan.assumptions,
                                  after_write=plan.after_write, show_all=req.show_all))
    if plan.after_show is not None and not req.as_json:
        plan.after_show(run, req.view)
    return run


def _fits(family, target, config) -> tuple[bool, str]:
    from occtune.engine.analytic import occupancy_row

    res = family.resources(config, target)
    if res is None:
        return True, ""
    row = occupancy_row(target, config, res)
    return row["fits"], row["reason"]


def _print_analytic(result, target, path, show_all: bool = False) -> None:
    """The generic analytic table: the winner (where the verdict ranks) and the top 10 rows, the
    rest in one line; axes every config shares and a common resources source said once."""
    from rich.table import Table

    from occtune.outputs.display import analytic_rest, common_axes, config_text, skipped_lines, top
    from occtune.output import console

    unit = "CU" if target.is_amd else "SM"
    sources = list(dict.fromkeys(r["resources_source"] for r in result.rows))
    fixed = common_axes([r["config"] for r in result.rows])
    console.print(f"[bold]tune sweep {result.family} --target {target.name}[/]: analytic (no GPU timing); "
                  f"{len(result.rows)} configs" + (f"; resources {sources[0]}" if len(sources) == 1 else ""))
    if fixed:
        console.print(f"every config: {_short(fixed)}")
    t = Table()
    regs = ("VGPRs", "SGPRs") if target.is_amd else ("regs",)
    heads = ("config", "threads", *regs, "LDS/block", f"blocks/{unit}", "limiter",
             *(("resources from",) if len(sources) > 1 else ()))
    for c in heads:
        t.add_column(c, justify="left" if c in ("config", "limiter", "resources from") else "right", overflow="fold")
    win = result.winner
    shown, rest = top(result.rows, is_winner=lambda r: r is win, show_all=show_all,
                      key=(lambda r: (r["fits"], r["blocks_per_cu"])) if result.ranked else None)
    for r in shown:
        nums = [str(r["vgprs"]), str(r["sgprs"])] if target.is_amd else [str(r["regs"])]
        t.add_row(("* " if r is win else "") + config_text(r["config"], fixed), str(r["threads"]), *nums,
                  f"{r['lds_per_block_bytes']:,}", str(r["blocks_per_cu"]) if r["fits"] else "no fit",
                  r["limiter"] if r["fits"] else r["reason"], *((r["resources_source"],) if len(sources) > 1 else ()),
                  style="bold green" if r is win else None)
    console.print(t)
    if rest:
        console.print(analytic_rest(rest))
    for line in skipped_lines(result.skipped, show_all=show_all):
        console.print(line)
    console.print(f"[bold]winner (analytic)[/]: {_short(win['config'])}. {result.why}" if win else
                  f"[bold]{result.why}[/]" if not result.ranked else f"[bold red]no winner[/]: {result.why}")
    if path:
        console.print(f"wrote {path}")
