"""``tune report RESULTS... [--out DIR] [--all] [--json]``: plots, tables and one HTML page per
results file or benchmark CSV."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path())
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Folder for the plots and pages (default: occtune-reports/<input's name>/ in the current "
                   "folder, never beside the results); files are named <folder>.<stem>.*.")
@click.option("--all", "show_all", is_flag=True, help="Show every row (default: the winner, the top 10 configs "
                                                     "and one line for the rest).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
def command(results, out, show_all, as_json):
    """Plots (occupancy cliff, time per workload with IQR, speed-up heatmap) and one self-contained
    HTML page for each of RESULTS: results files (timed or analytic), benchmark CSVs, or folders."""
    from occtune.outputs.report import make_report
    from occtune.outputs.results import unranked
    from occtune.output import console, emit_json

    summaries = make_report(results, out)
    if as_json:
        emit_json({"reports": [{k: v for k, v in s.items() if k != "doc"} for s in summaries]})
        return
    for s in summaries:
        title = f"{s['family']} on {s['target']} ({s['kind']}): {s['results']}"
        if s["kind"] == "benchmark":
            console.print(f"[bold]{title}[/]: {s['rows']} rows")
        else:
            console.print(f"[bold]{title}[/]")
            show_rows(s["doc"], show_all)
        verdict = s["explanation"] or (s["doc"]["assumptions"].get("verdict") if unranked(s["doc"]) else None)
        if verdict:
            console.print(verdict)
        files = [Path(p) for p in [*s["plots"], s["html"]]]
        console.print(f"  wrote {', '.join(p.name for p in files)} in {files[0].parent}")


def show_rows(doc: dict, show_all: bool) -> None:
    """A results document for people: every row with ``show_all``; else, timed, one line per
    config (the winner and the 10 fastest) and, analytic, the winner and 10 rows; one line for the rest."""
    from occtune.outputs.display import (analytic_rest, common_axes, rows_table, speed_key, summarize,
                                         summary_table, timed_rest, top)
    from occtune.output import console

    fixed = common_axes([r.get("config") or {} for r in doc.get("rows") or []])
    if fixed:
        console.print("every config: " + " ".join(f"{k}={v}" for k, v in fixed.items()))
    if show_all:
        console.print(rows_table(doc))
        return
    win = (doc.get("winner") or {}).get("config")
    if doc.get("timed"):
        entries = summarize(doc)
        shown, rest = top(entries, is_winner=lambda e: e["winner"], key=speed_key)
        console.print(summary_table(shown, (), fixed))
        if rest:
            console.print(timed_rest(rest))
        return
    rows = doc.get("rows") or []
    shown, rest = top(rows, is_winner=lambda r: win is not None and r.get("config") == win,
                      key=(lambda r: (bool(r.get("fits")), r.get("blocks_per_cu") or 0)) if win else None)
    console.print(rows_table({**doc, "rows": shown}))
    if rest:
        console.print(analytic_rest(rest))
