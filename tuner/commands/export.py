"""`tune export`: winning configs as a C header, -D flags or JSON, for builds."""

from __future__ import annotations

import sys

import click

from occtune.export import collect_defines, render_flags, render_header, render_json
from occtune.fsutil import atomic_write_text
from occtune.results import load_results


@click.command("export")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["header", "flags", "json"]), default="header",
              show_default=True, help="Output format.")
@click.option("--out", "out_path", type=click.Path(), help="Write here (atomically) instead of stdout.")
@click.option("--target", help="flags: which target's values (needed when the files cover several).")
@click.option("--default-target", help="header: the target whose values the #else branch uses.")
def command(files, fmt, out_path, target, default_target):
    """Export the winners of results FILES (results/<target>/<family>.yaml) for a build."""
    docs = [(f, load_results(f)) for f in files]
    defines = collect_defines(docs)
    if fmt == "header":
        text = render_header(defines, list(files), default_target)
    elif fmt == "flags":
        text = render_flags(defines, target)
    else:
        text = render_json(defines, list(files))
    if out_path:
        atomic_write_text(out_path, text)
        click.echo(f"wrote {out_path}", err=True)
    else:
        sys.stdout.write(text)
