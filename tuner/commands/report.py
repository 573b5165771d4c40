"""``tune report RESULTS... [--out DIR] [--json]``: plots, tables and one HTML page per results
file or benchmark CSV."""

from __future__ import annotations

import click


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path())
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Folder for the plots and pages (default: next to each input; in --out they are named "
                   "<folder>.<stem>.*).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
def command(results, out, as_json):
    """Plots (occupancy cliff, time per workload with IQR, speed-up heatmap) and one self-contained
    HTML page for each of RESULTS: results files (timed or analytic), benchmark CSVs, or folders."""
    from occtune.outputs.display import rows_table
    from occtune.outputs.report import make_report
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
            console.print(rows_table(s["doc"], title=title))
        if s["explanation"]:
            console.print(s["explanation"])
        for p in [*s["plots"], s["html"]]:
            console.print(f"  wrote {p}")
