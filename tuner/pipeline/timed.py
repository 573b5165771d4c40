"""One timed sweep for a CLI command, end to end: sweep -> select -> results YAML -> table or JSON.

``run_timed(family, target=..., ...)`` runs :func:`occtune.engine.sweep.run_sweep` (progress bar with
ETA on stderr, the point cache, ``--fresh``, ``--devices``, ``--timeout``, ``--isolate``), selects
with the engine's rules, writes ``<out>/<target>/<family>.yaml`` atomically (the same schema as the
analytic results, so ``tune export`` and ``tune report`` read it), and prints a per-config summary
table (the winner and the top 10 by speed-up, one line for the rest unless ``show_all``), the
per-workload winners and the winner's explanation; with ``as_json`` it prints exactly one JSON
document instead. Commands add their own columns through ``columns``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from occtune.engine.family import short as _short
from occtune.errors import UserError
from occtune.outputs.display import summarize  # noqa: F401 - part of this module's interface

# A summary column: (header, function of the rows of one config -> text).
Column = tuple[str, Callable[[list], str]]


@dataclass
class TimedRun:
    doc: dict
    path: Path | None
    result: Any = None
    selection: Any = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Output:
    """What a timed sweep writes and shows. ``after_write(path, doc) -> dict`` runs once the YAML
    is written (e.g. to write a header next to it); what it returns is added to the JSON output
    and printed as ``wrote ...`` lines. ``assumptions`` may be a callable, filled in after the sweep."""

    out_dir: str | Path | None = "results"
    as_json: bool = False
    columns: tuple = ()
    title: str | None = None
    assumptions: Any = None
    after_write: Callable | None = None
    progress: bool = True
    show_all: bool = False


def run_timed(family, *, target: str, configs: list | None = None, workloads: list | None = None,
              device: Any = "cuda", timer=None, options=None, hooks=None, output: Output = Output(),
              cache: Any = None) -> TimedRun:
    """Run, select, write and show one family's timed sweep (see the module docstring)."""
    from occtune.engine.options import RunOptions, check_devices
    from occtune.outputs.results import build_document, plain
    from occtune.engine.select import select
    from occtune.engine.sweep import SweepHooks, run_sweep
    from occtune.outputs.results import results_path, write_results

    options = options or RunOptions()
    check_devices(options.devices)
    if cache is not False:
        from occtune.engine import replay

        replay.allow()          # an unchanged rerun of this command may replay it (occtune.engine.replay)
    res = run_sweep(family, configs, workloads, device=device, timer=timer, options=options,
                    hooks=hooks or SweepHooks(), cache=cache, progress=output.progress)
    if not res.rows:
        raise UserError("the sweep has no points: every config was pruned or no workload was given")
    sel = select(res, family)
    if sel.winner is None:      # nothing to recommend: say why per config, keep any older results
        reasons = "; ".join(f"{_short(json.loads(cfg))}: {why}" for cfg, why in sel.excluded.items())
        raise UserError(f"{sel.explanation}; nothing written. {reasons}")
    assumptions = output.assumptions() if callable(output.assumptions) else output.assumptions
    assumptions = dict(assumptions or {}, timed=True, selection=_SELECTION_RULE)
    doc = plain(build_document(res, sel, target, assumptions))
    path = None
    if output.out_dir is not None:
        path = write_results(results_path(output.out_dir, target, res.family), doc)
    extra = (output.after_write(path, doc) or {}) if (output.after_write is not None and path is not None) else {}
    run = TimedRun(doc, path, res, sel, extra)
    if output.as_json:
        from occtune.output import emit_json

        emit_json({**doc, "results_file": str(path) if path else None, **extra,
                   "summary": summarize(doc, output.columns)})
    else:
        show(run, output.columns, output.title, output.show_all)
        if options.profile:
            from occtune.engine.phases import render
            from occtune.output import console

            for line in render(doc["sweep"]["profile"]):
                console.print(line, highlight=False)
    return run


_SELECTION_RULE = ("hard constraints first (built, verified on random and adversarial inputs, timed, "
                   "admissible); then geometric-mean speed-up over the baseline; differences inside the "
                   "measured noise are ties, broken toward the safer config")


def show(run: TimedRun, columns: list[Column] = (), title: str | None = None, show_all: bool = False) -> None:
    from occtune.outputs.display import common_axes, speed_key, summary_table, timed_rest, top
    from occtune.output import console

    doc, res = run.doc, run.result
    summary = summarize(doc, columns)
    console.print(title or f"[bold]{doc['family']} on {doc['target']}[/]: {len(doc['rows'])} points "
                           f"({res.n_measured} measured, {res.n_cached} from cache), "
                           f"{len(summary)} configs x {len(res.workloads)} workloads; timed")
    fixed = common_axes([e["config"] for e in summary])
    if fixed:
        console.print(f"every config: {_short(fixed)}")
    shown, rest = top(summary, is_winner=lambda e: e["winner"], key=speed_key, show_all=show_all)
    console.print(summary_table(shown, columns, fixed))
    if rest:
        console.print(timed_rest(rest))
    if run.selection.per_workload:
        _per_workload(run.selection.per_workload, fixed, show_all)
    win = doc.get("winner")
    console.print(("[bold]winner[/]: " + win["explanation"]) if win else
                  f"[bold red]no winner[/]: {run.selection.explanation}")
    if run.path:
        console.print(f"wrote {run.path}")
    for k, v in run.extra.items():
        console.print(f"wrote {v}" if k.endswith("_file") else f"{k}: {v}")


def _per_workload(per: list[dict], fixed: dict, show_all: bool) -> None:
    """The per-workload winners: every workload with ``show_all``, else the first ten and a line."""
    from rich.table import Table

    from occtune.outputs.display import config_text, more, top
    from occtune.output import console

    console.print("per-workload winners (ties inside the noise go to the safer config):")
    shown, rest = top(per, show_all=show_all)
    w = Table()
    for head in ("workload", "winner", "median us", "fastest"):
        w.add_column(head, justify="right" if head == "median us" else "left", overflow="fold")
    for p in shown:
        w.add_row(_short(p["workload"]), config_text(p["winner"], fixed), f"{p['median_us']:.2f}",
                  "same" if p["fastest"] == p["winner"] else config_text(p["fastest"], fixed))
    console.print(w)
    if rest:
        wins = len({json.dumps(p["winner"], sort_keys=True) for p in rest})
        console.print(more(len(rest), "workloads", f"{wins} distinct winner(s) among them"))


def first_value(rows: list, key: str) -> str:
    """A summary column's text: the first row's ``key`` that is set ("" if none)."""
    for r in rows:
        if r.get(key) is not None:
            return str(r[key])
    return ""
