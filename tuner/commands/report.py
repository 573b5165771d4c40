"""``tune report RESULTS... [--out DIR] [--json]``: tables and PNG plots of tuning results."""

from __future__ import annotations

import click


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path())
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Folder for the PNG plots (default: next to each results file).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
def command(results, out, as_json):
    """Tables and plots (time vs parameter, speed-up heatmap, occupancy vs budget) of RESULTS
    files or folders, timed or analytic."""
    from occtune.engine.display import rows_table
    from occtune.engine.report import make_report
    from occtune.output import console, emit_json

    summaries = make_report(results, out)
    if as_json:
        emit_json({"reports": [{k: v for k, v in s.items() if k != "doc"} for s in summaries]})
        return
    for s in summaries:
        kind = "timed" if s["timed"] else "analytic"
        console.print(rows_table(s["doc"], title=f"{s['family']} on {s['target']} ({kind}): {s['results']}"))
        if s["explanation"]:
            console.print(s["explanation"])
        elif s["winner"] is not None:
            console.print(f"winner: {s['winner']}")
        for p in s["plots"]:
            console.print(f"  wrote {p}")
